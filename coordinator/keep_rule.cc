#include "coordinator/keep_rule.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace tunefarm {
namespace {

constexpr double kZ95 = 1.96;

double MedianStdError(const v1::Measurement& m) {
  if (m.samples() <= 1) return 0;
  const double sigma = std::max(0.0, m.p80_us() - m.p20_us()) / 1.6832;
  return 1.2533 * sigma / std::sqrt(static_cast<double>(m.samples()));
}

}  // namespace

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
      v.inconclusive = candidate.gain() > min_gain;
      v.reason = absl::StrFormat(
          "%s inside noise: the lower bound must exceed the %.1f%% "
          "minimum gain",
          stats, min_gain * 100);
      return v;
    }
    // On the parent's recorded scale, pessimistically.
    const double scaled = parent_us * (1.0 - candidate.gain_lower());
    if (!parent_is_best && scaled > best_us * (1.0 - min_gain)) {
      v.short_of_best = true;
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
  // Separate middle 60%s decide; else the medians' standard errors from
  // their spreads: the p20..p80 range of
  // a normal distribution is 1.683 sigma, a median's standard error 1.2533
  // sigma / sqrt(n). A single sample (or no spread) gives no noise estimate.
  const double se =
      std::hypot(MedianStdError(candidate), MedianStdError(parent));
  const bool apart = candidate.p80_us() < parent.p20_us();
  if (se > 0 && !apart) {
    const double lower = (parent_us - median - kZ95 * se) / parent_us;
    if (lower <= min_gain) {
      v.inconclusive = true;
      v.reason = absl::StrFormat(
          "gain %.1f%% [lower bound %.1f%% at 95%% from the medians' spreads "
          "over %d and %d samples] inside noise: the lower bound must exceed "
          "the %.1f%% minimum gain (no A/B data)",
          v.gain * 100, lower * 100, candidate.samples(), parent.samples(),
          min_gain * 100);
      return v;
    }
  }
  if (!parent_is_best && median > best_us * (1.0 - min_gain)) {
    v.short_of_best = true;
    v.reason = absl::StrFormat(
        "%.1f µs beats its parent but not the current best round %d at %.1f µs "
        "by the "
        "%.1f%% minimum gain",
        median, best_round, best_us, min_gain * 100);
    return v;
  }
  v.keep = true;
  v.reason = absl::StrFormat(
      "%.1f µs is %.1f%% faster than its parent (%.1f µs), %s; minimum gain "
      "%.1f%% (no A/B data)",
      median, v.gain * 100, parent_us,
      apart ? absl::StrFormat("p80 %.1f µs below the parent's p20 %.1f µs",
                              candidate.p80_us(), parent.p20_us())
            : absl::StrFormat("beyond the medians' noise (standard error "
                              "%.2f µs)",
                              se),
      min_gain * 100);
  return v;
}

}  // namespace tunefarm
