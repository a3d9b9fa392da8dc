#include "coordinator/saturation.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tunefarm {

v1::SaturationPolicy EffectiveSaturationPolicy(v1::SaturationPolicy policy) {
  if (policy.min_core_utilization_pct() == 0) {
    policy.set_min_core_utilization_pct(kDefaultMinCoreUtilizationPct);
  }
  if (policy.max_bubble_rate_pct() == 0) {
    policy.set_max_bubble_rate_pct(kDefaultMaxBubbleRatePct);
  }
  if (policy.roofline_margin() == 0) {
    policy.set_roofline_margin(kDefaultRooflineMargin);
  }
  return policy;
}

absl::Status CheckSaturationPolicy(const v1::SaturationPolicy& policy) {
  auto pct = [](const char* field, double v) -> absl::Status {
    if (std::isfinite(v) && v >= 0 && v <= 100) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        "saturation.", field, ": must be a percentage in [0, 100], got ", v));
  };
  if (absl::Status s =
          pct("core_utilization_pct", policy.min_core_utilization_pct());
      !s.ok()) {
    return s;
  }
  if (absl::Status s = pct("bubble_rate_pct", policy.max_bubble_rate_pct());
      !s.ok()) {
    return s;
  }
  const double m = policy.roofline_margin();
  if (!std::isfinite(m) || m < 0 || m >= 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "saturation.roofline_margin: must be a fraction in [0, 1), got ", m));
  }
  return absl::OkStatus();
}

std::optional<std::string> SaturationOf(const v1::Diagnosis& diagnosis,
                                        const v1::SaturationPolicy& given) {
  if (given.disabled()) return std::nullopt;
  const v1::SaturationPolicy p = EffectiveSaturationPolicy(given);
  const std::string sim = diagnosis.simulated() ? " [simulated]" : "";
  // Core utilisation 0 means "not measured" (no swim lanes): the pair is
  // only read together, as the analyzer writes it.
  const v1::TimelineSignals& t = diagnosis.timeline();
  if (t.core_utilization_pct() > 0 &&
      t.core_utilization_pct() > p.min_core_utilization_pct() &&
      t.bubble_rate_pct() < p.max_bubble_rate_pct()) {
    return absl::StrFormat(
        "core utilisation %.0f%% > %.0f%% and bubble rate %.0f%% < %.0f%%%s",
        t.core_utilization_pct(), p.min_core_utilization_pct(),
        t.bubble_rate_pct(), p.max_bubble_rate_pct(), sim);
  }
  const v1::RooflineSignals& r = diagnosis.roofline();
  if (r.achieved_tflops() > 0 && r.attainable_tflops() > 0 &&
      r.achieved_tflops() >=
          r.attainable_tflops() * (1 - p.roofline_margin())) {
    const std::string hotspot = diagnosis.hotspots().empty()
                                    ? std::string("the hotspot")
                                    : diagnosis.hotspots(0).op_name();
    return absl::StrFormat(
        "%s at %.3g TFLOP/s is %.0f%% of its roofline bound %.3g TFLOP/s "
        "(%s-bound at %.3g FLOP/byte; within the %.0f%% margin)%s",
        hotspot, r.achieved_tflops(),
        100 * r.achieved_tflops() / r.attainable_tflops(),
        r.attainable_tflops(),
        r.arithmetic_intensity() >= r.ridge_flop_per_byte() ? "compute"
                                                            : "memory",
        r.arithmetic_intensity(), 100 * p.roofline_margin(), sim);
  }
  return std::nullopt;
}

}  // namespace tunefarm
