// The keep / roll back rule: does a candidate's measured gain over its
// parent clear the noise? docs/measurement.md explains the statistics.
//
//  - A/B data (the board timed the parent in the same lease, interleaved):
//    keep when the paired gain's lower bound exceeds min_gain.
//  - No A/B data (replay boards, independent mode): keep when the median is
//    at least min_gain faster AND either the spreads do not overlap
//    (candidate p80 below the parent's p20) or the gain's lower bound at 95%
//    clears min_gain, the bound taken from the two medians' standard errors
//    (estimated from each one's p20..p80 spread and sample count).
//  - Either way, when the parent is no longer the best round (a sibling was
//    kept meanwhile), the candidate must also beat the best by min_gain,
//    pessimistically: parent median × (1 − lower bound) for A/B, its own
//    median otherwise.
//
// A pure function; thread-safe.
#ifndef TUNEFARM_COORDINATOR_KEEP_RULE_H_
#define TUNEFARM_COORDINATOR_KEEP_RULE_H_

#include <cstdint>
#include <string>

#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

struct GainVerdict {
  bool keep = false;
  double gain = 0;  // the estimate (fraction; 0.05 = 5% faster)
  // Not kept, but the estimate beats min_gain: only the noise stands in the
  // way (more samples may decide it).
  bool inconclusive = false;
  // Not kept though it beat its parent by min_gain: a sibling was kept
  // meanwhile and this one does not beat that best round by min_gain.
  bool short_of_best = false;
  std::string reason;  // in words, with the numbers that decided
};

// An inconclusive result (the estimate beats min_gain, its interval does
// not) is measured again this many times before it is judged inconclusive;
// the extra looks use this confidence at least.
constexpr int kMaxRemeasures = 2;
constexpr double kRemeasureConfidence = 0.99;

// `parent` is the parent round's recorded measurement; `best_round` and
// `best_us` the sweep's current best.
GainVerdict JudgeGain(const v1::Measurement& candidate,
                      const v1::Measurement& parent, double min_gain,
                      int64_t parent_round, int64_t best_round, double best_us);

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_KEEP_RULE_H_
