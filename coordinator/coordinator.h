// Coordinator: the farm's domain core. It owns all sweep state: validates
// submissions, runs each sweep's strategy, places candidates on boards,
// grants leases (expiry + epoch), records results exactly once, decides keep
// or roll back, applies the termination rules and writes every change to the
// Store in one synced batch before answering.
//
// One rule for every mutation: the change is staged (memory edits saved for
// undo, records in a WriteSet), committed, and only then kept and answered.
// When the commit fails, memory is put back as it was and the call returns
// the error (RESOURCE_EXHAUSTED "data disk full (…)" or UNAVAILABLE), so
// nothing is acknowledged that is not on disk and a retry is recorded once.
// While the store says it cannot write (Store::Writable), new leases and
// submissions are refused with its status; reads and results go on.
//
// It is the front of its parts (docs/architecture.md, "The coordinator's
// parts"): it owns the transaction and the calls, and stages through
// Staging; the sweep book, board registry, placement, health checker, lease
// table and decider each own one job.
//
// Thread-safety: none. Every method must be called from one thread (the
// control loop, coordinator/control_loop.h); gRPC and ZeroMQ threads hand
// work to it. The Store, catalog, clock and metrics must outlive it.
//
// Reads that only need acknowledged state (GetSweep, ListRounds, reports,
// watch replay) go straight to the Store from any thread: see
// coordinator/queries.h.
#ifndef TUNEFARM_COORDINATOR_COORDINATOR_H_
#define TUNEFARM_COORDINATOR_COORDINATOR_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/auth.h"
#include "coordinator/board_registry.h"
#include "coordinator/control_loop.h"
#include "coordinator/core_state.h"
#include "coordinator/decider.h"
#include "coordinator/farm_metrics.h"
#include "coordinator/health.h"
#include "coordinator/health_checker.h"
#include "coordinator/lease_table.h"
#include "coordinator/liveness.h"
#include "coordinator/placement.h"
#include "coordinator/staging.h"
#include "coordinator/strategy.h"
#include "coordinator/sweep_book.h"
#include "ops/catalog.h"
#include "storage/store.h"
#include "tunefarm/v1/agent.pb.h"
#include "tunefarm/v1/farm.pb.h"

namespace tunefarm {

struct CoordinatorOptions {
  absl::Duration lease_duration = absl::Seconds(30);
  absl::Duration heartbeat_interval = absl::Seconds(1);
  // An agent silent for this long is lost, and so are its boards' leases.
  absl::Duration agent_timeout = absl::Seconds(5);
  // Where finished sweeps' reports are written ("" = not written).
  std::string report_dir;
  // Quota of a team that has none of its own (admins change quotas at run
  // time with SetTeamQuota; those are stored and survive restarts).
  v1::TeamQuota default_quota;
  // Quotas from the operator's policy file, by team.
  std::map<std::string, v1::TeamQuota> team_quotas;
  // Board reservations from the policy file (from_policy set); admins add
  // and lift others at run time with ReserveBoards / UnreserveBoards.
  std::vector<v1::BoardReservation> reservations;
  // Health-check goldens by board kind (coordinator/health.h): a board of
  // such a kind runs its golden when it joins, every health_check_interval
  // (zero: never periodically) and after a BOARD_LOST result, before any
  // sweep work. A failed check quarantines it; it is re-checked every
  // health_retry_interval. Kinds without a golden are never checked.
  std::map<std::string, HealthCheck> health_checks;
  absl::Duration health_check_interval = absl::Hours(1);
  absl::Duration health_retry_interval = absl::Minutes(5);
};

class Coordinator {
 public:
  // `metrics` may be null. Call Recover() before anything else.
  Coordinator(Store* store, const OperatorCatalog* catalog, Clock* clock,
              CoordinatorOptions options, FarmMetrics* metrics);
  ~Coordinator();

  // Loads every queued or running sweep from the store and resumes it.
  // Leases granted before the restart stay valid for one more lease
  // duration, so agents that kept running can still report.
  absl::Status Recover();

  // --- user side ---------------------------------------------------------
  // `caller` must belong to the spec's team (or be an admin):
  // PERMISSION_DENIED otherwise; RESOURCE_EXHAUSTED past the team's quota
  // of active sweeps.
  absl::StatusOr<v1::SubmitSweepResponse> SubmitSweep(
      const v1::SubmitSweepRequest& request, const Principal& caller);
  absl::StatusOr<v1::Sweep> CancelSweep(const v1::CancelSweepRequest& request,
                                        const Principal& caller);
  std::vector<v1::BoardInfo> ListBoards(const v1::BoardSelector& selector);

  // --- admin -----------------------------------------------------------
  absl::StatusOr<v1::BoardInfo> DrainBoard(const v1::BoardAdminRequest& r);
  absl::StatusOr<v1::BoardInfo> AdmitBoard(const v1::BoardAdminRequest& r);
  absl::StatusOr<v1::TeamQuota> SetTeamQuota(const v1::TeamQuota& quota);
  // Teams with a quota or activity; `team` "" = all.
  v1::ListTeamsResponse ListTeams(const std::string& team);
  // A board reserved for a team serves only that team's sweeps. Reserving
  // the same board (or the same label set) again changes its team; a
  // reservation from the policy file cannot be changed here
  // (FAILED_PRECONDITION). Both answer every reservation now in force.
  absl::StatusOr<v1::ListReservationsResponse> ReserveBoards(
      const v1::BoardReservation& reservation);
  absl::StatusOr<v1::ListReservationsResponse> UnreserveBoards(
      const v1::BoardReservation& reservation);

  // --- agent side --------------------------------------------------------
  absl::StatusOr<v1::RegisterAgentResponse> RegisterAgent(
      const v1::RegisterAgentRequest& request);
  // NOT_FOUND for an agent this coordinator does not know: register again.
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(
      const v1::HeartbeatRequest& request);
  absl::StatusOr<v1::LeaseWorkResponse> LeaseWork(
      const v1::LeaseWorkRequest& request);
  absl::StatusOr<v1::RenewLeaseResponse> RenewLease(
      const v1::RenewLeaseRequest& request);
  // With request.next_lease, leases the board's next round too (agent.proto
  // says how): under group commit both land in the same batch.
  absl::StatusOr<v1::ReportResultResponse> ReportResult(
      const v1::ReportResultRequest& request);

  // --- analyzers ---------------------------------------------------------
  // Attaches a diagnosis to its round (running or finished sweep) and
  // commits it. Only for the round's leased epoch once its result is
  // recorded, and only for the bundle id that result names
  // (FAILED_PRECONDITION otherwise: never recordable).
  // Idempotent per (sweep, round, epoch): ALREADY_EXISTS, with nothing
  // written, when the round already has a diagnosis for that epoch.
  absl::Status RecordDiagnosis(const v1::Diagnosis& diagnosis);

  // Expires leases, notices lost agents and time limits. Call periodically.
  absl::Status Tick();

  // Group commit (ControlLoop::BatchHooks): between BeginBatch and
  // CommitBatch, every call stages its mutations into one batch instead of
  // committing, and answers as if the batch will commit; CommitBatch writes
  // the batch with one sync. When that fails, memory is put back as it was
  // before BeginBatch and the caller must answer every call of the batch
  // with the returned error. Reads of the Store inside a batch see only
  // what earlier batches committed, so calls that read it to decide
  // (submissions, diagnoses) belong in batches of their own.
  void BeginBatch();
  absl::Status CommitBatch();
  // Pipelined group commit (ControlLoop::BatchHooks::seal): ends the open
  // batch like CommitBatch but leaves the write to the returned SealedBatch
  // (Write: the store commit, from any one thread; Settle: back on this
  // core's thread, applying what waited for durability or undoing the
  // batch). Calls of the next batch may run before this one is settled;
  // a batch settled with an error is settled after the ones built on it.
  std::unique_ptr<SealedBatch> SealBatch();

  // Where the gRPC threads note every agent call as it arrives (null: only
  // the calls this core has processed count). An agent is lost when
  // neither has heard from it for agent_timeout.
  void SetLiveness(const AgentLiveness* liveness) { liveness_ = liveness; }

  // Called after each commit that appended events to a sweep (watchers).
  void SetEventListener(std::function<void(const std::string&)> listener) {
    event_listener_ = std::move(listener);
  }

  // Number of sweeps still queued or running (for tests and shutdown).
  int active_sweeps() const { return book_.size(); }

  // Everything the core holds in memory as text (sweeps, rounds, boards,
  // agents, leases, usage, reservations, quotas), for tests that check a
  // failed call changed nothing, and for debugging.
  std::string DescribeState() const;

  // WorkloadViews::Check of each multi-workload sweep's views, brought up
  // to date; INTERNAL naming the sweep and the first difference. Walks every
  // round: for tests and debugging, never on a call's path.
  absl::Status CheckViews();

 private:
  SweepRuntime* FindSweep(const std::string& sweep_id);
  // Commits `txn`, or stages it into the open batch.
  absl::Status Commit(Txn& txn);
  absl::Status CommitNow(Txn& txn);
  // CommitNow in three steps, so a batch's write can run on another thread:
  // Seal (loop thread) writes the reports of the sweeps the txn ends and adds
  // each touched sweep's record; WriteTxn commits (the error as callers see
  // it); Settle applies, or removes those reports and undoes.
  struct Sealed {
    std::vector<std::string> touched;  // sweep ids
    std::vector<std::string> reports;  // report paths written by Seal
  };
  Sealed Seal(Txn& txn);
  absl::Status WriteTxn(const Txn& txn);
  void Settle(Txn& txn, const Sealed& sealed, const absl::Status& written);
  class SealedTxn;
  // Keeps a settled batch's memory for a later BeginBatch.
  void Recycle(std::unique_ptr<Txn> txn);

  // ReportResult without its next lease.
  absl::StatusOr<v1::ReportResultResponse> RecordResult(
      const v1::ReportResultRequest& request);
  // The next round of `s` to run on a board: a queued one, else a new
  // candidate from the strategy. Null when the sweep has nothing now.
  v1::Round* NextRound(Txn& txn, SweepRuntime& s);
  // True when a board other than `self` is idle and free and may run `s`'s
  // rounds (selector and reservations): a lease ahead then waits.
  bool IdleBoardCouldTake(const BoardRuntime& self,
                          const SweepRuntime& s) const;
  // Grants `board` the next round of the first sweep in fair-share order
  // that has one for it; false when none has. `held_manifests`: the
  // operator manifests the board's agent holds (LeaseTable::Grant).
  bool GrantNextRound(
      Txn& txn, BoardRuntime& board, bool prefetch,
      const google::protobuf::RepeatedPtrField<std::string>& held_manifests,
      v1::LeaseWorkResponse* response);
  // Writes the sweep's report to its report_path; false (logged) when it
  // names none or the write failed.
  bool WriteReport(const v1::Sweep& sweep,
                   const std::vector<v1::Round>& rounds);
  // Board states reach the metrics from the tick, at most once per tick:
  // publishing is O(boards), too much for each lease and result of a farm
  // of a thousand boards, and the tick runs with nothing staged, so what it
  // publishes is durable. Only the boards whose state, node or chip moved
  // since the last publish are handed over, so a tick copies what changed,
  // not every board's record.
  void PublishBoardMetrics();
  void BoardsChanged() { board_metrics_stale_ = true; }

  // Multi-workload sweeps (coordinator/workloads.h).
  // NextRound of such a sweep: a queued round, else new candidates.
  v1::Round* NextMultiWorkloadRound(Txn& txn, SweepRuntime& s);
  // PER_WORKLOAD: the next round of the open workload with the fewest.
  v1::Round* NextPerWorkloadRound(Txn& txn, SweepRuntime& s);
  // ONE_CONFIG: a new configuration's rounds (one per workload); the first.
  v1::Round* NextOneConfigRounds(Txn& txn, SweepRuntime& s);
  // Whether `board` must run its kind's golden before any sweep work.
  bool HealthCheckDue(const BoardRuntime& board) const;
  // Leases the golden to `board`: false when its operator is gone.
  bool GrantHealthCheck(BoardRuntime& board, v1::WorkItem* work);
  // Judges a health check: `result` null when none came (`detail` says
  // why). Passing puts the board back in service; failing quarantines it.
  void RecordHealthCheck(Txn& txn, BoardRuntime& board,
                         const v1::RoundResult* result,
                         const std::string& detail);
  // Stores the admins' reservations and refreshes every board's
  // reserved_for.
  absl::StatusOr<v1::ListReservationsResponse> SaveReservations(
      std::vector<v1::BoardReservation> reservations);

  Store* store_;
  const OperatorCatalog* catalog_;
  Clock* clock_;
  CoordinatorOptions options_;
  FarmMetrics* metrics_;
  bool board_metrics_stale_ = false;
  // What PublishBoardMetrics last handed the metrics, per board.
  struct PublishedBoard {
    v1::BoardState state = v1::BOARD_STATE_UNSPECIFIED;
    std::string node;
    std::string chip;
  };
  absl::flat_hash_map<std::string, PublishedBoard> published_boards_;
  std::function<void(const std::string&)> event_listener_;
  const AgentLiveness* liveness_ = nullptr;

  // Queued and running sweeps (coordinator/sweep_book.h).
  SweepBook book_;
  // Boards and agents (coordinator/board_registry.h).
  BoardRegistry registry_;
  // Reservations, quotas and usage (coordinator/placement.h).
  Placement placement_;
  // Health-check rules (coordinator/health_checker.h).
  HealthChecker health_;
  // Saves records for undo and stages events (coordinator/staging.h).
  Staging staging_;
  // Leases: grants, leases ahead, renewal, expiry (coordinator/lease_table.h).
  LeaseTable leases_;
  // Keep or roll back, termination, the end of a sweep
  // (coordinator/decider.h).
  Decider decider_;
  absl::Time last_commit_error_log_ = absl::InfinitePast();
  std::unique_ptr<Txn> batch_;  // open group commit, or null
  std::vector<std::unique_ptr<Txn>> spare_batches_;  // see Recycle
};

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_COORDINATOR_H_
