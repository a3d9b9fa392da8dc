// LeaseTable: which board holds which round. A lease is a round LEASED to a
// board at an epoch, named by its LeaseId; it lives in the round's record
// (round.lease), and the board's record names its current lease and the
// leases it holds ahead (LeaseWorkRequest.prefetch), in the order it runs
// them. The table grants leases (and builds the work item a lease carries),
// answers whether a lease is still live, renews and expires them, promotes
// a lease ahead when its board frees the current one, and puts leased
// rounds back in the queue (expiry, a lost board, an agent that let go).
// Health-check leases (HealthLeaseId) are the health checker's, not here.
//
// Every change is staged into the caller's Txn through Staging (records
// saved for undo, rounds and events written by the commit).
//
// Owned by the Coordinator. It points into the Coordinator's sweep book,
// board registry and staging, which must outlive it, as must the clock and
// the metrics (may be null); used only on the control loop thread (not
// thread-safe).
#ifndef TUNEFARM_COORDINATOR_LEASE_TABLE_H_
#define TUNEFARM_COORDINATOR_LEASE_TABLE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/board_registry.h"
#include "coordinator/core_state.h"
#include "coordinator/farm_metrics.h"
#include "coordinator/lease_id.h"
#include "coordinator/staging.h"
#include "coordinator/sweep_book.h"
#include "tunefarm/v1/agent.pb.h"
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

class LeaseTable {
 public:
  // Leases one board may hold ahead of its current one, whatever its agent
  // asks (LeaseWorkRequest.max_ahead): each is a round no other board can
  // run.
  static constexpr int32_t kMaxLeasesAhead = 32;

  LeaseTable(SweepBook* book, BoardRegistry* registry, Staging* staging,
             Clock* clock, absl::Duration lease_duration, FarmMetrics* metrics)
      : book_(book),
        registry_(registry),
        staging_(staging),
        clock_(clock),
        lease_duration_(lease_duration),
        metrics_(metrics) {}

  // The LEASED round `lease_id` names, or null when that lease is over (or
  // the id is not a sweep lease).
  v1::Round* Live(const std::string& lease_id);

  // The most LeaseWorkRequest.held_operator_digests read per request.
  static constexpr int kMaxHeldManifests = 64;

  // Leases `round` of `s` to `board` for one lease duration, at the next
  // epoch, and fills `work` with what the board runs: the operator's
  // manifest only when its digest is not among the first kMaxHeldManifests
  // of `held` (the manifests the agent holds). `ahead`: the lease waits
  // behind the board's current one.
  void Grant(Txn& txn, SweepRuntime& s, v1::Round& round, BoardRuntime& board,
             bool ahead,
             const google::protobuf::RepeatedPtrField<std::string>& held,
             v1::WorkItem* work);

  // Extends the live lease `id` (its text `lease_id`, at `epoch`) by one
  // lease duration from now: the new expiry, or nullopt when that lease is
  // over. Renewals stay in memory: a restarted coordinator gives every
  // lease a fresh grace period anyway (SweepBook::Resume).
  std::optional<int64_t> Renew(const LeaseId& id, const std::string& lease_id,
                               int64_t epoch);

  // `board_id` no longer holds `lease_id`: a lease ahead is dropped; the
  // current one makes way for the first live lease ahead (its board time
  // and expiry start now), else the board is idle.
  void FreeBoard(Txn& txn, const std::string& board_id,
                 const std::string& lease_id);
  // Makes `lease_id`, one `board` holds ahead, its current lease (the board
  // freed its current one, or the agent says it runs this one), a live
  // current one waiting ahead; its board time starts now. False when the
  // board holds no such live lease ahead. `lease_id` must not refer into
  // board.prefetch_lease_ids.
  bool PromoteAhead(Txn& txn, BoardRuntime& board, const std::string& lease_id);
  // Re-queues the rounds `board` holds ahead (drain, board lost).
  void RequeueAhead(Txn& txn, BoardRuntime& board, const std::string& why);
  // Drops the leases ahead that are no longer live (revoked, requeued).
  void PruneAhead(BoardRuntime& board);
  // Puts a leased round back in the queue and frees its board.
  void Requeue(Txn& txn, SweepRuntime& s, v1::Round& round,
               const std::string& why);
  // Re-queues the leases of `s` past their expiry at `now`; true when any
  // was.
  bool RequeueExpired(Txn& txn, SweepRuntime& s, absl::Time now);

 private:
  SweepBook* const book_;
  BoardRegistry* const registry_;
  Staging* const staging_;
  Clock* const clock_;
  const absl::Duration lease_duration_;
  FarmMetrics* const metrics_;
};

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_LEASE_TABLE_H_
