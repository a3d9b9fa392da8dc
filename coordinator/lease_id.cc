#include "coordinator/lease_id.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tunefarm {
namespace {

constexpr absl::string_view kHealthLeasePrefix = "health:";

}  // namespace

std::optional<LeaseId> LeaseId::Parse(absl::string_view text) {
  std::vector<absl::string_view> parts = absl::StrSplit(text, '/');
  if (parts.size() != 3) return std::nullopt;
  LeaseId id;
  id.sweep_id = std::string(parts[0]);
  if (!absl::SimpleAtoi(parts[1], &id.round_id) ||
      !absl::SimpleAtoi(parts[2], &id.epoch)) {
    return std::nullopt;
  }
  return id;
}

std::string LeaseId::ToString() const {
  return absl::StrCat(sweep_id, "/", round_id, "/", epoch);
}

bool HealthLeaseId::IsHealthLease(absl::string_view text) {
  return absl::StartsWith(text, kHealthLeasePrefix);
}

std::optional<HealthLeaseId> HealthLeaseId::Parse(absl::string_view text) {
  if (!IsHealthLease(text)) return std::nullopt;
  text.remove_prefix(kHealthLeasePrefix.size());
  // Board ids may hold ':' themselves; the check number follows the last.
  const size_t colon = text.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) return std::nullopt;
  HealthLeaseId id;
  id.board_id = std::string(text.substr(0, colon));
  if (!absl::SimpleAtoi(text.substr(colon + 1), &id.check)) {
    return std::nullopt;
  }
  return id;
}

std::string HealthLeaseId::ToString() const {
  return absl::StrCat(kHealthLeasePrefix, board_id, ":", check);
}

}  // namespace tunefarm
