// Timing samples → a Measurement (median and spread); the statistics of an
// A/B comparison (a candidate and its parent timed interleaved in the same
// lease) and the block schedule that drives it; the reader for the
// timing_us.txt file a kernel's run step writes. Why A/B and what the
// numbers mean: docs/measurement.md.
//
// Pure functions over their arguments, except MeasureBlocks, which calls the
// given BlockRunner; all thread-safe.
#ifndef TUNEFARM_AGENT_MEASUREMENT_H_
#define TUNEFARM_AGENT_MEASUREMENT_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

// Drops the first `warmup` samples and summarises the rest: median, p20, p80
// (linear interpolation between order statistics), min, max. With no samples
// left, every statistic is 0 and samples = 0.
v1::Measurement Summarize(std::vector<double> samples_us, int warmup,
                          bool simulated, std::string policy);

// Reads one sample (µs) per line; blank lines are skipped. INVALID_ARGUMENT
// naming the file and line for anything that is not a finite, non-negative
// number; NOT_FOUND when the file is missing; INVALID_ARGUMENT when it holds
// no samples.
absl::StatusOr<std::vector<double>> ReadTimingSamples(const std::string& path);

// A MeasurementPolicy with its defaults filled in and clamped: warm-up 3 and
// 20 samples when both are 0; max_samples = samples when 0 (no adaptive
// extension unless the policy asks: the sweep spec sets it); target spread
// 1%; confidence 0.95; mode A/B unless INDEPENDENT.
struct ResolvedPolicy {
  int warmup = 3;
  int samples = 20;
  int max_samples = 20;
  double target_rel_spread = 0.01;
  double confidence = 0.95;
  bool ab = true;
};
ResolvedPolicy ResolveMeasurementPolicy(const v1::MeasurementPolicy& policy);

// Order statistics of the median (the sign-test interval): for n i.i.d.
// draws sorted x(1) ≤ … ≤ x(n), the smallest k with
// P(Binomial(n, ½) ≤ k − 1) ≥ confidence, so that x(k) is an upper and
// x(n+1−k) a lower one-sided bound on the true median at that confidence.
// 0 when n is too small for any bound.
int MedianBoundRank(int n, double confidence);

// The fewest pairs for which MedianBoundRank gives a bound (at least 6).
int MinPairs(double confidence);

// The paired gain from per-pair block medians: ratio_j = candidate_j /
// reference_j; gain = 1 − median(ratio); gain_lower = 1 − ratio(k) and
// gain_upper = 1 − ratio(n+1−k) with k = MedianBoundRank(n, confidence);
// rel_spread = (ratio(k) − ratio(n+1−k)) / 2 / median(ratio). Without a
// bound (too few pairs) gain_lower = −1, gain_upper = 1, rel_spread = 1.
struct PairedGain {
  double gain = 0, gain_lower = -1, gain_upper = 1, rel_spread = 1;
  int pairs = 0;
};
PairedGain EstimatePairedGain(const std::vector<double>& candidate_medians,
                              const std::vector<double>& reference_medians,
                              double confidence);

// Half-width of the order-statistic interval of the samples' median,
// relative to the median (1 when there are too few samples for a bound).
double MedianRelSpread(std::vector<double> samples, double confidence);

// One timed block: runs `variant` (false = the candidate, true = the
// reference) with `warmup` untimed and `samples` timed launches and returns
// the timed samples (warm-up already dropped). `index` counts that
// variant's blocks from 0. A non-OK status stops the measurement and is
// returned as is.
using BlockRunner = std::function<absl::StatusOr<std::vector<double>>(
    bool reference, int index, int warmup, int samples)>;

// Times the candidate alone (with_reference false, or policy.ab false) or
// interleaved with its reference, adaptively:
//  - alone: one block of policy.samples, then further blocks of the same
//    size while MedianRelSpread > target and the cap allows;
//  - A/B: pairs of blocks of b = ceil(samples / MinPairs) samples in ABBA
//    order (pair j runs the candidate first when j is even, the reference
//    first when odd, so a linear drift cancels), MinPairs pairs at least (and
//    enough for `samples`), then two more pairs at a time while the paired
//    rel_spread > target and (pairs + 2) × b ≤ max_samples.
// Returns the candidate's Measurement (all its timed samples; warmup =
// per-block warm-up); with A/B also reference (same statistics),
// paired, gain, gain_lower/upper, pairs, confidence and rel_spread. The
// policy string describes what was done; `note` is appended.
absl::StatusOr<v1::Measurement> MeasureBlocks(const ResolvedPolicy& policy,
                                              bool with_reference,
                                              const BlockRunner& run_block,
                                              bool simulated,
                                              const std::string& note);

}  // namespace tunefarm

#endif  // TUNEFARM_AGENT_MEASUREMENT_H_
