// Decider: what a sweep's results mean. Given a round whose result was just
// recorded, it decides: the baseline, keep or roll back against the parent
// (coordinator/keep_rule.h), measure an inconclusive one again, or reject a
// failure; multi-workload sweeps per workload or per configuration
// (coordinator/workloads.h). It checks the termination rules (goal, board
// saturated, round budget, rounds without gain, time limit, nothing left to
// try) and ends a workload or the whole sweep: rounds not run are
// cancelled, their boards freed, and the FINISHED event says why. An A/B
// sweep of one workload whose search is over first runs its closing check
// (Sweep.closing_check): one more round times the best against the baseline
// side by side, and the sweep ends with that result.
//
// Every change is staged into the caller's Txn through Staging; ending a
// sweep frees its boards through the LeaseTable. The report of an ended
// sweep is written when its transaction is sealed (Coordinator), to the
// report_path set here.
//
// Owned by the Coordinator. The staging, lease table and clock must
// outlive it; used only on the control loop thread (not thread-safe).
#ifndef TUNEFARM_COORDINATOR_DECIDER_H_
#define TUNEFARM_COORDINATOR_DECIDER_H_

#include <string>
#include <utility>

#include "common/clock.h"
#include "coordinator/core_state.h"
#include "coordinator/lease_table.h"
#include "coordinator/staging.h"
#include "tunefarm/v1/farm.pb.h"
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

class Decider {
 public:
  // `report_dir`: where ended sweeps' reports go ("" = none).
  Decider(Staging* staging, LeaseTable* leases, Clock* clock,
          std::string report_dir)
      : staging_(staging),
        leases_(leases),
        clock_(clock),
        report_dir_(std::move(report_dir)) {}

  // Decides `round` of a single-workload sweep `s`: its result is set and
  // it is DONE. A candidate whose parent (the baseline, when it was proposed
  // while the baseline ran) has no result yet waits, undecided; the
  // parent's decision judges it.
  void Decide(Txn& txn, SweepRuntime& s, v1::Round& round);
  // The same for a multi-workload sweep.
  void DecideMultiWorkload(Txn& txn, SweepRuntime& s, v1::Round& round);
  // Ends the sweep (or, multi-workload, its workloads) when a termination
  // rule holds.
  void CheckTermination(Txn& txn, SweepRuntime& s);
  // Ends `s` (one workload) because its search is over: a goal reached,
  // the budget spent, no gain, nothing left to try. Starts the closing
  // check when it applies (MeasurementPolicy.skip_closing_check), which
  // ends the sweep as SUCCEEDED for `reason` once its result is in;
  // otherwise Finish. Nothing when already ended or checking.
  void EndSearch(Txn& txn, SweepRuntime& s, v1::TerminationReason reason,
                 std::string detail);
  // Ends `s` in `state` for `reason`: queued and leased rounds cancelled,
  // open workloads done, the FINISHED event. Nothing when already ended.
  void Finish(Txn& txn, SweepRuntime& s, v1::SweepState state,
              v1::TerminationReason reason, std::string detail);
  // PER_WORKLOAD: workload `index` is done (its rounds not run are
  // cancelled); the sweep ends with its last workload.
  void FinishWorkload(Txn& txn, SweepRuntime& s, int index,
                      v1::TerminationReason reason, std::string detail);

 private:
  // Takes every queued or leased round out of play (boards freed) and marks
  // results still waiting for their parent as never judged; `ended` says
  // why ("the sweep ended (…)").
  void EndRoundsInPlay(Txn& txn, SweepRuntime& s, const std::string& ended);
  // The closing check's round is `round`, whose result is in: records it in
  // Sweep.closing_check and ends the sweep as the check's start said.
  void DecideClosingCheck(Txn& txn, SweepRuntime& s, v1::Round& round);
  // While the closing check runs only the time limit can end the sweep
  // earlier, without the check's result.
  void CheckClosingTimeLimit(Txn& txn, SweepRuntime& s);
  // Whether the sweep's time limit, if any, has passed since it started,
  // or is less than `reserve_ms` away.
  bool PastTimeLimit(const v1::Sweep& sweep, int64_t reserve_ms = 0) const;
  // Whether `s`'s round budget, rounds without gain and time limit (less
  // the closing check's reserve) leave its search room to go on.
  bool SearchBudgetLeft(const SweepRuntime& s) const;
  // Whether the end of `s`'s search would start a closing check.
  static bool WantsClosingCheck(const SweepRuntime& s);
  // What a time-limited sweep keeps of its limit for the closing check:
  // 1.5x the longest of its last 16 passing rounds (lease to result), at
  // most a quarter of the limit; 0 before any such round.
  static int64_t ClosingCheckReserveMs(const SweepRuntime& s);
  // Takes a queued or leased round out of play (its board freed).
  void CancelRound(Txn& txn, SweepRuntime& s, v1::Round& round,
                   const std::string& why);
  // The sweep's best_round, baseline_us and best_us from its workloads'.
  void SummarizeWorkloads(SweepRuntime& s);
  // A candidate's result (not a baseline's): rejected, kept, measured
  // again or rolled back, moving the counters of its lineage: the sweep's,
  // or workload `w`'s (and the sweep's rounds finished) when not null.
  // `what` names the round in the events.
  void DecideCandidate(Txn& txn, SweepRuntime& s, v1::Round& round,
                       v1::WorkloadProgress* w, const std::string& what);
  // Judges, in round order, the results that waited for `parent`'s (rounds
  // proposed while it ran).
  void DecideWaiting(Txn& txn, SweepRuntime& s, const v1::Round& parent);
  void DecideWorkloadRound(Txn& txn, SweepRuntime& s, v1::Round& round);
  void DecideConfigRound(Txn& txn, SweepRuntime& s, v1::Round& round);
  void CheckMultiWorkloadTermination(Txn& txn, SweepRuntime& s);
  void CheckOneConfigTermination(Txn& txn, SweepRuntime& s);

  Staging* const staging_;
  LeaseTable* const leases_;
  Clock* const clock_;
  const std::string report_dir_;
};

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_DECIDER_H_
