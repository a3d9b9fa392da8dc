// The lineage queries every Store shares: they read through the virtual
// GetSweep/ListRounds, so one implementation (and one test suite) serves
// every store.
#include "storage/store.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "storage/lineage.h"

namespace tunefarm {
namespace {

// The sweep's rounds, or NOT_FOUND when round_id is not among them.
absl::StatusOr<std::vector<v1::Round>> RoundsContaining(
    Store& store, const std::string& sweep_id, int64_t round_id) {
  TF_ASSIGN_OR_RETURN(std::vector<v1::Round> rounds,
                      store.ListRounds(sweep_id));
  for (const v1::Round& r : rounds) {
    if (r.round_id() == round_id) return rounds;
  }
  return absl::NotFoundError(
      absl::StrCat("round ", round_id, " of sweep '", sweep_id, "' not found"));
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> Store::Ancestors(
    const std::string& sweep_id, int64_t round_id) {
  TF_ASSIGN_OR_RETURN(std::vector<v1::Round> rounds,
                      RoundsContaining(*this, sweep_id, round_id));
  return AncestorsOf(rounds, round_id);
}

absl::StatusOr<std::vector<int64_t>> Store::Children(
    const std::string& sweep_id, int64_t round_id) {
  TF_ASSIGN_OR_RETURN(std::vector<v1::Round> rounds,
                      RoundsContaining(*this, sweep_id, round_id));
  return ChildrenOf(rounds, round_id);
}

absl::StatusOr<std::vector<int64_t>> Store::KeptPath(
    const std::string& sweep_id) {
  TF_ASSIGN_OR_RETURN(v1::Sweep sweep, GetSweep(sweep_id));
  if (sweep.best_round() < 0) return std::vector<int64_t>{};
  TF_ASSIGN_OR_RETURN(std::vector<v1::Round> rounds, ListRounds(sweep_id));
  absl::StatusOr<std::vector<int64_t>> path =
      KeptPathTo(rounds, sweep.best_round());
  if (!path.ok()) {
    return absl::Status(path.status().code(),
                        absl::StrCat("kept path of sweep '", sweep_id,
                                     "': ", path.status().message()));
  }
  return path;
}

}  // namespace tunefarm
