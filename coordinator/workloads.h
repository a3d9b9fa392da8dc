// Multi-workload sweeps (SweepSpec.workloads): the pure parts the
// coordinator builds on. Two objectives:
//
//  * PER_WORKLOAD: every workload is a lineage of its own (its baseline
//    round, its best round, its own strategy instance, budget and goal);
//    boards go to the workloads that are not done, fewest rounds first.
//  * ONE_CONFIG: one lineage of configurations. Each configuration is
//    measured on every workload: its rounds are created together, one per
//    workload in spec order (round_id - workload_index = its first round).
//    It is judged once all of them have a result, by the weighted
//    geometric mean of its per-workload time ratios against its parent
//    configuration (ScoreConfig); the strategy sees one round per
//    configuration whose time is that mean (ConfigHistory).
//
// Rounds 0..N-1 are the workloads' baselines (parent -1), in spec order.
//
// Pure functions over protos; thread-safe.
#ifndef TUNEFARM_COORDINATOR_WORKLOADS_H_
#define TUNEFARM_COORDINATOR_WORKLOADS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

// Bounds of a spec's `workloads:` and one_config weights.
inline constexpr size_t kMaxWorkloads = 32;
inline constexpr double kMaxWorkloadWeight = 1e6;

// Whether the sweep tunes several workloads (SweepSpec.workloads set).
bool IsMultiWorkload(const v1::SweepSpec& spec);
int WorkloadCount(const v1::SweepSpec& spec);  // 1 for a plain sweep
std::vector<std::string> WorkloadNames(const v1::SweepSpec& spec);

// The workload a round measures.
const v1::Workload& RoundWorkload(const v1::SweepSpec& spec,
                                  const v1::Round& round);

// The weight of workload `index` (ONE_CONFIG's weights; 1 otherwise).
double WorkloadWeight(const v1::SweepSpec& spec, int index);

// exp(Σ w_i ln x_i / Σ w_i); 0 when any x_i <= 0 or the weights sum to 0.
double WeightedGeomean(const std::vector<double>& values,
                       const std::vector<double>& weights);

// PER_WORKLOAD: the rounds of workload `index`, ascending round_id: its
// lineage, as a strategy sees it.
std::vector<v1::Round> WorkloadHistory(const std::vector<v1::Round>& rounds,
                                       int index);

// ONE_CONFIG: one round per configuration (round_id and parent_round are
// its first round's), its time the weighted geometric mean of its
// workloads' medians once every one passed (and then DONE, with the
// decision of its rounds); its diagnosis the first workload's.
std::vector<v1::Round> ConfigHistory(const v1::SweepSpec& spec,
                                     const std::vector<v1::Round>& rounds);

// Each workload's best in words, e.g. "w64: round 7, 2.10x; w128: no
// passing baseline; geometric mean 1.85x over the baselines".
std::string WorkloadsSummary(const v1::Sweep& sweep);

// ONE_CONFIG's verdict on a configuration whose rounds all passed.
struct ConfigVerdict {
  bool keep = false;
  double score = 0;        // weighted geomean of candidate / parent times
  double score_upper = 0;  // the same over each ratio's pessimistic end
  double mean_us = 0;      // weighted geomean of the candidate's medians
  std::string reason;      // in words, with the numbers
};

// `group`: the configuration's rounds (one per workload, in order), each
// DONE and OK. `parent`, `best`: the parent's and the current best
// configuration's rounds in the same order (equal when the parent is the
// best). Per workload, the ratio is the A/B paired estimate 1 - gain (its
// pessimistic end 1 - gain_lower) or, without A/B data, median / parent
// median (pessimistic end: the candidate's p80 over the parent's p20).
// Kept when 1 - score_upper exceeds min_gain and, when the parent is no
// longer the best, the medians' weighted geomean also beats the best's by
// min_gain.
ConfigVerdict ScoreConfig(const v1::SweepSpec& spec,
                          const std::vector<const v1::Round*>& group,
                          const std::vector<const v1::Round*>& parent,
                          const std::vector<const v1::Round*>& best);

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_WORKLOADS_H_
