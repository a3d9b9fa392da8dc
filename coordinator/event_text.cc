#include "coordinator/event_text.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/params.h"

namespace tunefarm {

std::string FormatUs(double us) { return absl::StrFormat("%.1f µs", us); }

std::string WorkloadTag(const v1::Round& round) {
  return round.workload().empty() ? std::string()
                                  : absl::StrCat(" [", round.workload(), "]");
}

std::string MeasuredTag(const v1::Measurement& m) {
  return m.simulated() ? " [simulated]" : m.replayed() ? " [replayed]" : "";
}

std::string RoundAndChange(const v1::Round& round) {
  return absl::StrCat("round ", round.round_id(), WorkloadTag(round), " (",
                      round.parent_round() < 0
                          ? std::string("baseline")
                          : DescribeChanges(round.changes()),
                      ")");
}

std::string VsParent(double gain) {
  if (gain >= 0)
    return absl::StrFormat("%.1f%% faster than its parent", gain * 100);
  return absl::StrFormat("%.1f%% slower than its parent", -gain * 100);
}

}  // namespace tunefarm
