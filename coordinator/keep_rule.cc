#include "coordinator/keep_rule.h"

#include "absl/strings/str_format.h"

namespace tunefarm {

GainVerdict JudgeGain(const v1::Measurement& candidate,
                      const v1::Measurement& parent, double min_gain,
                      int64_t parent_round, int64_t best_round,
                      double best_us) {
  GainVerdict v;
  const double median = candidate.median_us();
  const double parent_us = parent.median_us();
  const bool parent_is_best = parent_round == best_round;
  if (candidate.paired()) {
    v.gain = candidate.gain();
    const std::string stats = absl::StrFormat(
        "gain %.1f%% [lower bound %.1f%% at %.0f%%, A/B with the parent over "
        "%d pairs]",
        candidate.gain() * 100, candidate.gain_lower() * 100,
        candidate.confidence() * 100, candidate.pairs());
    if (candidate.gain_lower() <= min_gain) {
      v.reason = absl::StrFormat(
          "%s inside noise: the lower bound must exceed the %.1f%% "
          "minimum gain",
          stats, min_gain * 100);
      return v;
    }
    // On the parent's recorded scale, pessimistically.
    const double scaled = parent_us * (1.0 - candidate.gain_lower());
    if (!parent_is_best && scaled > best_us * (1.0 - min_gain)) {
      v.reason = absl::StrFormat(
          "%s beats its parent, but at %.1f µs (parent's scale, lower bound) "
          "not the "
          "current best round %d at %.1f µs by the %.1f%% minimum gain",
          stats, scaled, best_round, best_us, min_gain * 100);
      return v;
    }
    v.keep = true;
    v.reason = absl::StrFormat("%s clears the %.1f%% minimum gain", stats,
                               min_gain * 100);
    return v;
  }

  v.gain = parent_us > 0 ? 1.0 - median / parent_us : 0.0;
  const double needed = parent_us * (1.0 - min_gain);
  if (median > needed) {
    v.reason = absl::StrFormat(
        "%.1f µs vs parent %.1f µs (gain %+.1f%%), needs at most %.1f µs for "
        "the "
        "%.1f%% minimum "
        "gain (no A/B data)",
        median, parent_us, v.gain * 100, needed, min_gain * 100);
    return v;
  }
  if (candidate.p80_us() >= parent.p20_us()) {
    v.reason = absl::StrFormat(
        "gain %.1f%% inside noise: candidate p80 %.1f µs is not below the "
        "parent's p20 "
        "%.1f µs (no A/B data)",
        v.gain * 100, candidate.p80_us(), parent.p20_us());
    return v;
  }
  if (!parent_is_best && median > best_us * (1.0 - min_gain)) {
    v.reason = absl::StrFormat(
        "%.1f µs beats its parent but not the current best round %d at %.1f µs "
        "by the "
        "%.1f%% minimum gain",
        median, best_round, best_us, min_gain * 100);
    return v;
  }
  v.keep = true;
  v.reason = absl::StrFormat(
      "%.1f µs is %.1f%% faster than its parent (%.1f µs), p80 %.1f µs below "
      "the parent's "
      "p20 %.1f µs; minimum gain %.1f%% (no A/B data)",
      median, v.gain * 100, parent_us, candidate.p80_us(), parent.p20_us(),
      min_gain * 100);
  return v;
}

}  // namespace tunefarm
