// The coordinator's in-memory records and its transaction: plain data shared
// by Coordinator and the parts it is split into (docs/architecture.md, "The
// coordinator's parts"). The records are owned by the Coordinator (its maps
// of sweeps, boards and agents); a Txn is owned by the call, or the batch,
// that stages it. Touched only on the control loop thread (not
// thread-safe).
#ifndef TUNEFARM_COORDINATOR_CORE_STATE_H_
#define TUNEFARM_COORDINATOR_CORE_STATE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "coordinator/strategy.h"
#include "coordinator/workloads.h"
#include "storage/store.h"
#include "tunefarm/v1/agent.pb.h"
#include "tunefarm/v1/farm.pb.h"
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

// A queued or running sweep: its record, its rounds and its strategy.
struct SweepRuntime {
  v1::Sweep sweep;
  // The operator as the sweep's board kind sees it (ProjectManifest).
  v1::OperatorManifest projected;
  const v1::OperatorManifest* op = nullptr;
  // MessageDigest(*op): WorkItem.operator_digest.
  std::string op_digest;
  std::unique_ptr<Strategy> strategy;
  // PER_WORKLOAD sweeps: one strategy per workload (its own lineage).
  std::vector<std::unique_ptr<Strategy>> workload_strategies;
  std::vector<v1::Round> rounds;  // index == round_id
  // Multi-workload sweeps: what their strategies see. Staging reports every
  // change to `rounds` to it; read it through SyncedViews.
  WorkloadViews views;
  // Undos that put rounds back (SearchHistory.rewinds): a strategy's
  // derived state is stale after one.
  int64_t rewinds = 0;
  bool finished = false;
  // No round below this index is QUEUED: the queue is searched from here,
  // so finding work costs no walk over the whole sweep. Requeue lowers it.
  size_t queued_from = 0;
  // The ids of rounds that may be LEASED: every LEASED round's id is here
  // (a grant adds it, recovery adds the recovered ones), so the walks over
  // leased rounds (expiry, a re-registering agent's boards, board time and
  // quotas) cost the leases held, not the sweep's length. Ids of rounds
  // that moved on are dropped only by Coordinator::Tick, when nothing is
  // staged: an undo then never brings back a LEASED round whose id is gone.
  std::set<int64_t> leased;
};

// The sweep's WorkloadViews, brought up to its rounds.
inline WorkloadViews& SyncedViews(SweepRuntime& s) {
  s.views.Sync(s.sweep.spec(), s.rounds);
  return s.views;
}

// A registered (or recovered) board.
struct BoardRuntime {
  v1::BoardInfo info;
  std::string lease_id;  // current lease, "" when free
  // Leases granted ahead (LeaseWorkRequest.prefetch) that the board runs
  // after lease_id, in that order. At most the agent's max_ahead (capped
  // at kMaxLeasesAhead in coordinator.cc), and only behind a live current
  // lease: FreeBoard makes the first live one the current one.
  std::vector<std::string> prefetch_lease_ids;
  // An admin re-admitted the board while its agent still reported it
  // quarantined: heartbeats tell the agent to lift its own flag.
  bool readmit_pending = false;
  // Health check: due now (joined, faulted) or at next_check; a running
  // one (lease_id "health:…") expires at check_expires.
  bool check_due = false;
  absl::Time next_check = absl::InfiniteFuture();
  absl::Time check_expires = absl::InfiniteFuture();
  int64_t checks_run = 0;
};

// A registered agent.
struct AgentRuntime {
  absl::Time last_seen;
  std::vector<std::string> board_ids;
};

// One mutation of the core: its writes, and how to put memory back. Every
// change to memory is first saved here (Save*, Touch), so that when the
// commit fails the core is exactly as it was before and nothing is
// acknowledged; effects outside memory (metrics) wait in after_commit.
struct Txn {
  WriteSet writes;
  std::set<SweepRuntime*> touched;
  // Run newest first when the commit fails. They find their objects by id:
  // rounds may move when a sweep's vector grows.
  std::vector<std::function<void()>> undo;
  // Saved sweeps, with their round count then: a round created by this
  // transaction needs no saving (undo drops it with the sweep's size).
  std::map<std::string, size_t> saved_sweeps;
  std::set<std::string> saved_boards;
  std::set<std::pair<std::string, int64_t>> saved_rounds;
  std::set<std::string> saved_teams;
  bool saved_reservations = false;
  std::vector<std::function<void()>> after_commit;
};

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_CORE_STATE_H_
