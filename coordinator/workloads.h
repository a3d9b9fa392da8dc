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
// The functions are pure functions over protos (thread-safe); WorkloadViews
// is state, kept per sweep (not thread-safe).
#ifndef TUNEFARM_COORDINATOR_WORKLOADS_H_
#define TUNEFARM_COORDINATOR_WORKLOADS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
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

// What a multi-workload sweep's strategies see (SearchHistory.rounds): each
// PER_WORKLOAD workload's lineage (as WorkloadHistory) or ONE_CONFIG's
// configurations (as ConfigHistory), kept in step with the sweep's rounds.
// A Sync costs the rounds added or changed since the one before, not the
// sweep's length, and the vectors stay the same objects, so what a strategy
// keeps between proposals (its visited set) stays valid.
//
// Whoever changes an existing round says so (Changed) and whoever removes
// rounds says how many are left (Truncated), before the next Sync.
// Owned by the sweep's SweepRuntime; not thread-safe.
class WorkloadViews {
 public:
  void Changed(int64_t round_id) { changed_.push_back(round_id); }
  void Truncated(size_t size) { synced_ = std::min(synced_, size); }
  void Sync(const v1::SweepSpec& spec, const std::vector<v1::Round>& rounds);

  // As of the last Sync. PER_WORKLOAD: workload `index`'s rounds, how many
  // of them are candidates (have a parent) and how many are QUEUED or
  // LEASED. `index` must be below the spec's workload count.
  const std::vector<v1::Round>& Workload(int index) const {
    return workloads_[index].rounds;
  }
  int64_t Candidates(int index) const { return workloads_[index].candidates; }
  int64_t InFlight(int index) const { return workloads_[index].in_flight; }
  // ONE_CONFIG: one round per configuration whose rounds all exist.
  const std::vector<v1::Round>& Configs() const { return configs_; }

  // Whether the views, as of the last Sync, equal what they stand for
  // (WorkloadHistory or ConfigHistory over `rounds`, and the counts a walk
  // over them gives); INTERNAL naming the first difference. Walks every
  // round: for tests and debugging, never on a call's path.
  absl::Status Check(const v1::SweepSpec& spec,
                     const std::vector<v1::Round>& rounds) const;

 private:
  struct Lineage {
    std::vector<v1::Round> rounds;
    int64_t candidates = 0;
    int64_t in_flight = 0;
    void Count(const v1::Round& r, int64_t sign);
  };
  std::vector<Lineage> workloads_;
  std::vector<v1::Round> configs_;
  std::vector<double> weights_;
  std::vector<int64_t> changed_;  // may repeat; ids below synced_ matter
  size_t synced_ = 0;             // rounds.size() at the last Sync
};

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
