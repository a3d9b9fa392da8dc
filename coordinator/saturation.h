// Board saturation: whether a round's diagnosis shows that the board has no
// headroom left for this operator, so that further tuning cannot pay off
// (issue 4's TERMINATION_BOARD_SATURATED). Two tests, by what the
// diagnosis carries:
//   Ascend-like boards  core utilisation above min_core_utilization_pct
//                       (default 80) and bubble rate below
//                       max_bubble_rate_pct (default 10), both from the
//                       timeline signals (PyPTO swim lanes);
//   GPUs                the hotspot's achieved TFLOP/s within
//                       roofline_margin (default 0.05) of its roofline bound
//                       (attainable TFLOP/s; needs the arithmetic intensity,
//                       which Nsight Compute gives).
// A diagnosis without these numbers is never saturated.
//
// Thread-safety: pure functions.
#ifndef TUNEFARM_COORDINATOR_SATURATION_H_
#define TUNEFARM_COORDINATOR_SATURATION_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

inline constexpr double kDefaultMinCoreUtilizationPct = 80;
inline constexpr double kDefaultMaxBubbleRatePct = 10;
inline constexpr double kDefaultRooflineMargin = 0.05;

// The policy with its defaults filled in (zero fields take the default).
v1::SaturationPolicy EffectiveSaturationPolicy(v1::SaturationPolicy policy);

// INVALID_ARGUMENT naming saturation.<field> for a value out of range
// (percentages in [0, 100], margin in [0, 1)).
absl::Status CheckSaturationPolicy(const v1::SaturationPolicy& policy);

// The reason in words ("core utilisation 86% > 80% and bubble rate 6% <
// 10%") when `diagnosis` shows a saturated board under `policy`; nullopt
// otherwise or when the policy is disabled.
std::optional<std::string> SaturationOf(const v1::Diagnosis& diagnosis,
                                        const v1::SaturationPolicy& policy);

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_SATURATION_H_
