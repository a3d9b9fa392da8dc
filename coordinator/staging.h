// Staging: how a call of the coordinator changes memory and the store in one
// transaction. Before a call changes a sweep, a round, a board, an agent, a
// team's board time or the reservation list, it saves the record here into
// its Txn (undone, newest first, when the commit fails); the sweep's events
// and records go into the Txn's WriteSet. The Coordinator and its parts
// (the lease table, the decider) all stage into the caller's Txn through
// one Staging.
//
// Owned by the Coordinator. It points into the Coordinator's sweep book,
// board registry and placement, which must outlive it; used only on the
// control loop thread (not thread-safe).
#ifndef TUNEFARM_COORDINATOR_STAGING_H_
#define TUNEFARM_COORDINATOR_STAGING_H_

#include <string>

#include "common/clock.h"
#include "coordinator/board_registry.h"
#include "coordinator/core_state.h"
#include "coordinator/placement.h"
#include "coordinator/strategy.h"
#include "coordinator/sweep_book.h"
#include "tunefarm/v1/farm.pb.h"
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

class Staging {
 public:
  Staging(SweepBook* book, BoardRegistry* registry, Placement* placement,
          Clock* clock)
      : book_(book),
        registry_(registry),
        placement_(placement),
        clock_(clock) {}

  // Each saves the object as it was before the transaction's first change
  // to it; undo finds it again by id (rounds move when a sweep grows).
  void SaveSweep(Txn& txn, SweepRuntime& s);  // record, flag, round count
  // SaveSweep, and the sweep record is written by the commit.
  void Touch(Txn& txn, SweepRuntime& s);
  void SaveRound(Txn& txn, SweepRuntime& s, const v1::Round& round);
  void SaveBoard(Txn& txn, const std::string& board_id);
  void SaveAgent(Txn& txn, const std::string& agent_id);
  void SaveTeamSeconds(Txn& txn, const std::string& team);
  void SaveReservationList(Txn& txn);
  // Touches `s` and appends a queued round made from `c` (its parent,
  // params, changes, stage and rationale, moved in) with the sweep's next
  // id, written by the commit and dropped by undo; for workload
  // `workload_index` when it is not -1. Answers the round (in s.rounds).
  v1::Round* AddRound(Txn& txn, SweepRuntime& s, Candidate c,
                      int workload_index = -1);
  // Appends the sweep's next event (its copy of `round`, when given, comes
  // without the diagnosis; events other than a round's lease or finish carry
  // the sweep record).
  void AddEvent(Txn& txn, SweepRuntime& s, v1::EventKind kind,
                std::string message, const v1::Round* round);

  Clock* clock() const { return clock_; }

 private:
  SweepBook* const book_;
  BoardRegistry* const registry_;
  Placement* const placement_;
  Clock* const clock_;
};

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_STAGING_H_
