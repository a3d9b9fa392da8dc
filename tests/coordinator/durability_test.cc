// One rule for every mutation of the coordinator core: stage, commit, then
// apply and reply. For each mutating call, a FaultInjectingStore fails the
// commit; then nothing in memory has changed (Coordinator::DescribeState is
// identical), the call returns an error, and the same call retried after the
// store recovers is recorded exactly once (read back from the store).
//
// The core runs over a MemoryStore behind the fault store, with a FakeClock
// (CoordinatorOverFaults, tests/coordinator/coordinator_harness.h).
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/files.h"
#include "common/params.h"
#include "common/status_macros.h"
#include "coordinator/coordinator.h"
#include "coordinator/farm_metrics.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/catalog.h"
#include "storage/fault_injecting_store.h"
#include "storage/memory_store.h"
#include "tests/coordinator/coordinator_harness.h"

namespace tunefarm {
namespace {

using ::testing::HasSubstr;

class DurabilityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(AddOperator(&catalog_, ToyOperatorYaml(3, 4)).ok());
    options_.lease_duration = absl::Seconds(10);
    options_.agent_timeout = absl::Seconds(30);
    Open();
  }

  // A new core recovered from the same store, as a restart would.
  void Open() {
    absl::Status st = core_.Open(&catalog_, &clock_, options_);
    ASSERT_TRUE(st.ok()) << st;
  }

  Coordinator* coord() { return core_.coordinator(); }
  Store* stored() { return core_.base(); }
  FaultInjectingStore& faults() { return *core_.faults(); }

  // Runs `call` with the next commit failing: it must fail and leave memory
  // as it was. Then runs it again with the store healed: it must succeed.
  void FailOnceThenRetry(const std::function<absl::Status()>& call) {
    const std::string before = coord()->DescribeState();
    faults().FailNthCommit(1);
    const int64_t failed = faults().failed_commits();
    absl::Status st = call();
    EXPECT_FALSE(st.ok()) << "a call whose commit failed answered OK";
    EXPECT_EQ(faults().failed_commits(), failed + 1)
        << "the call made no commit, so the check proves nothing";
    EXPECT_EQ(coord()->DescribeState(), before)
        << "memory changed although the commit failed";
    faults().Heal();
    absl::Status retry = call();
    EXPECT_TRUE(retry.ok()) << retry;
  }

  std::string Submit(const std::string& key = "") {
    v1::SubmitSweepRequest request;
    request.set_spec_yaml(spec_);
    request.set_idempotency_key(key);
    auto r = coord()->SubmitSweep(request, AnonymousAdmin());
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->sweep().sweep_id() : "";
  }

  void Register(const std::string& agent, int boards = 1) {
    auto r = coord()->RegisterAgent(SimAgent(agent, boards));
    ASSERT_TRUE(r.ok()) << r.status();
  }

  v1::WorkItem Lease(const std::string& board) {
    auto r = coord()->LeaseWork(LeaseFor(board));
    EXPECT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r.ok() && r->granted());
    return r.ok() ? r->work() : v1::WorkItem();
  }

  int CountEvents(const std::string& sweep, v1::EventKind kind,
                  int64_t round_id = -1) {
    auto events = stored()->ReadEvents(sweep, 1, 0);
    EXPECT_TRUE(events.ok()) << events.status();
    int n = 0;
    for (const v1::SweepEvent& e :
         events.ok() ? *events : std::vector<v1::SweepEvent>{}) {
      if (e.kind() == kind &&
          (round_id < 0 || e.round().round_id() == round_id)) {
        ++n;
      }
    }
    return n;
  }

  // Every stored event log is 1..N without a gap, and the sweep record
  // points at N: nothing was half-written or written twice.
  void ExpectEventLogWhole(const std::string& sweep) {
    auto s = stored()->GetSweep(sweep);
    ASSERT_TRUE(s.ok()) << s.status();
    auto events = stored()->ReadEvents(sweep, 1, 0);
    ASSERT_TRUE(events.ok()) << events.status();
    for (size_t i = 0; i < events->size(); ++i) {
      EXPECT_EQ((*events)[i].seq(), static_cast<int64_t>(i + 1));
    }
    EXPECT_EQ(s->last_event_seq(), static_cast<int64_t>(events->size()));
  }

  OperatorCatalog catalog_;
  FakeClock clock_;
  CoordinatorOptions options_;
  CoordinatorOverFaults core_;
  const std::string spec_ = ToySpecYaml("durable", "grid", 10);
};

TEST_F(DurabilityTest, SubmitSweep) {
  std::string id;
  FailOnceThenRetry([&]() -> absl::Status {
    v1::SubmitSweepRequest request;
    request.set_spec_yaml(spec_);
    request.set_idempotency_key("k1");
    auto r = coord()->SubmitSweep(request, AnonymousAdmin());
    if (r.ok()) id = r->sweep().sweep_id();
    return r.status();
  });
  EXPECT_EQ(id, "sw-000001") << "the failed submission used up a sweep id";
  auto sweeps = stored()->ListSweeps();
  ASSERT_TRUE(sweeps.ok());
  EXPECT_EQ(sweeps->size(), 1u);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_SUBMITTED), 1);
  ExpectEventLogWhole(id);
}

TEST_F(DurabilityTest, CancelSweep) {
  const std::string id = Submit();
  FailOnceThenRetry([&] {
    v1::CancelSweepRequest request;
    request.set_sweep_id(id);
    return coord()->CancelSweep(request, AnonymousAdmin()).status();
  });
  EXPECT_EQ(coord()->active_sweeps(), 0);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_FINISHED), 1);
  ExpectEventLogWhole(id);
}

TEST_F(DurabilityTest, RegisterAgent) {
  FailOnceThenRetry(
      [&] { return coord()->RegisterAgent(SimAgent("a1", 2)).status(); });
  auto boards = stored()->ListBoards();
  ASSERT_TRUE(boards.ok());
  EXPECT_EQ(boards->size(), 2u);
  EXPECT_EQ(coord()->ListBoards({}).size(), 2u);
}

TEST_F(DurabilityTest, LeaseWork) {
  const std::string id = Submit();
  Register("a1");
  v1::WorkItem work;
  FailOnceThenRetry([&]() -> absl::Status {
    auto r = coord()->LeaseWork(LeaseFor("a1/b0"));
    if (r.ok()) work = r->work();
    return r.status();
  });
  EXPECT_EQ(work.round_id(), 0);
  EXPECT_EQ(work.epoch(), 1) << "the failed lease used up an epoch";
  auto round = stored()->GetRound(id, 0);
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(round->state(), v1::ROUND_STATE_LEASED);
  EXPECT_EQ(round->attempts(), 1);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_ROUND_LEASED), 1);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_STARTED), 1);
  ExpectEventLogWhole(id);
}

TEST_F(DurabilityTest, ReportResultIsNeverAcknowledgedBeforeItIsStored) {
  const std::string id = Submit();
  Register("a1");
  const v1::WorkItem work = Lease("a1/b0");
  const v1::ReportResultRequest result = ResultFor("a1/b0", work, 100);
  bool duplicate = true;
  FailOnceThenRetry([&]() -> absl::Status {
    auto r = coord()->ReportResult(result);
    if (!r.ok()) return r.status();
    EXPECT_TRUE(r->accepted()) << r->reason();
    duplicate = r->duplicate();
    return absl::OkStatus();
  });
  // The retry after the failure is the first record, not a "duplicate":
  // the agent sends its profile bundle only for a first record.
  EXPECT_FALSE(duplicate);
  auto round = stored()->GetRound(id, 0);
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(round->state(), v1::ROUND_STATE_DONE);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_ROUND_FINISHED, 0), 1);
  auto again = coord()->ReportResult(result);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->duplicate());
  ExpectEventLogWhole(id);
}

TEST_F(DurabilityTest, ReportResultDecidesACandidate) {
  const std::string id = Submit();
  Register("a1");
  auto base = coord()->ReportResult(ResultFor("a1/b0", Lease("a1/b0"), 100));
  ASSERT_TRUE(base.ok() && base->accepted());
  const v1::WorkItem work = Lease("a1/b0");
  ASSERT_EQ(work.round_id(), 1);
  FailOnceThenRetry([&] {
    return coord()->ReportResult(ResultFor("a1/b0", work, 50)).status();
  });
  auto sweep = stored()->GetSweep(id);
  ASSERT_TRUE(sweep.ok());
  EXPECT_EQ(sweep->best_round(), 1);
  EXPECT_EQ(sweep->rounds_finished(), 1);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_BEST_IMPROVED), 1);
  ExpectEventLogWhole(id);
}

// The result that spends the budget starts the closing check (one more
// round, the sweep's check record, an event); the check's result ends the
// sweep. Each commits whole or changes nothing.
TEST_F(DurabilityTest, TheClosingCheckStartsAndEndsUnderTheRule) {
  v1::SubmitSweepRequest submit;
  submit.set_spec_yaml(ToySpecYaml("checked", "grid", 1));
  auto sub = coord()->SubmitSweep(submit, AnonymousAdmin());
  ASSERT_TRUE(sub.ok()) << sub.status();
  const std::string id = sub->sweep().sweep_id();
  Register("a1");
  auto base = coord()->ReportResult(ResultFor("a1/b0", Lease("a1/b0"), 100));
  ASSERT_TRUE(base.ok() && base->accepted());
  const v1::WorkItem one = Lease("a1/b0");
  FailOnceThenRetry([&] {
    return coord()->ReportResult(ResultFor("a1/b0", one, 50)).status();
  });
  auto sweep = stored()->GetSweep(id);
  ASSERT_TRUE(sweep.ok());
  ASSERT_EQ(sweep->closing_check().round_id(), 2);
  EXPECT_EQ(sweep->state(), v1::SWEEP_STATE_RUNNING);
  auto queued = stored()->GetRound(id, 2);
  ASSERT_TRUE(queued.ok());
  EXPECT_EQ(queued->state(), v1::ROUND_STATE_QUEUED);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_CLOSING_CHECK), 1);

  const v1::WorkItem check = Lease("a1/b0");
  ASSERT_EQ(check.round_id(), 2);
  FailOnceThenRetry([&] {
    return coord()->ReportResult(ResultFor("a1/b0", check, 50)).status();
  });
  sweep = stored()->GetSweep(id);
  ASSERT_TRUE(sweep.ok());
  EXPECT_EQ(sweep->state(), v1::SWEEP_STATE_SUCCEEDED);
  EXPECT_THAT(sweep->closing_check().outcome(), HasSubstr("no pairs"));
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_CLOSING_CHECK), 1);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_ROUND_FINISHED, 2), 1);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_FINISHED), 1);
  ExpectEventLogWhole(id);
}

// A report that asks for the board's next lease: a failed commit leaves
// both undone; the retry records the result once and leases the next round
// once.
TEST_F(DurabilityTest, ReportResultWithItsNextLease) {
  const std::string id = Submit();
  Register("a1");
  v1::ReportResultRequest result = ResultFor("a1/b0", Lease("a1/b0"), 100);
  result.mutable_next_lease();  // the report's agent and board
  v1::ReportResultResponse answer;
  FailOnceThenRetry([&]() -> absl::Status {
    auto r = coord()->ReportResult(result);
    if (r.ok()) answer = *r;
    return r.status();
  });
  EXPECT_TRUE(answer.accepted()) << answer.reason();
  EXPECT_FALSE(answer.duplicate());
  ASSERT_TRUE(answer.has_next_lease());
  ASSERT_TRUE(answer.next_lease().granted());
  const v1::WorkItem& next = answer.next_lease().work();
  EXPECT_EQ(next.round_id(), 1);
  EXPECT_EQ(next.epoch(), 1) << "the failed call used up an epoch";
  auto done = stored()->GetRound(id, 0);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->state(), v1::ROUND_STATE_DONE);
  auto leased = stored()->GetRound(id, 1);
  ASSERT_TRUE(leased.ok());
  EXPECT_EQ(leased->state(), v1::ROUND_STATE_LEASED);
  EXPECT_EQ(leased->lease().board_id(), "a1/b0");
  EXPECT_EQ(leased->attempts(), 1);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_ROUND_FINISHED, 0), 1);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_ROUND_LEASED, 1), 1);
  ExpectEventLogWhole(id);
}

// Without group commit the result and the lease commit one after the other:
// when the lease's commit fails, the call answers its error, the result
// stays recorded, and the retry is a duplicate that leases once.
TEST_F(DurabilityTest, ANextLeaseThatFailsLeavesTheResultRecorded) {
  const std::string id = Submit();
  Register("a1");
  v1::ReportResultRequest result = ResultFor("a1/b0", Lease("a1/b0"), 100);
  result.mutable_next_lease();
  const int64_t failed_before = faults().failed_commits();
  faults().FailNthCommit(2);
  auto failed = coord()->ReportResult(result);
  EXPECT_FALSE(failed.ok()) << "a call whose lease failed answered OK";
  EXPECT_EQ(faults().failed_commits(), failed_before + 1);
  auto recorded = stored()->GetRound(id, 0);
  ASSERT_TRUE(recorded.ok());
  EXPECT_EQ(recorded->state(), v1::ROUND_STATE_DONE);
  EXPECT_FALSE(stored()->GetRound(id, 1).ok())
      << "a round of the failed lease was stored";
  faults().Heal();
  auto retry = coord()->ReportResult(result);
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_TRUE(retry->accepted());
  EXPECT_TRUE(retry->duplicate());
  ASSERT_TRUE(retry->next_lease().granted());
  EXPECT_EQ(retry->next_lease().work().round_id(), 1);
  EXPECT_EQ(retry->next_lease().work().epoch(), 1);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_ROUND_FINISHED, 0), 1);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_ROUND_LEASED, 1), 1);
  ExpectEventLogWhole(id);
}

// A next lease for another agent's or board's name is refused before
// anything is done: one board's report cannot lease for another.
TEST_F(DurabilityTest, ANextLeaseNamingAnotherBoardIsRefused) {
  Submit();
  Register("a1", 2);
  Register("a2");
  v1::ReportResultRequest result = ResultFor("a1/b0", Lease("a1/b0"), 100);
  const std::string before = coord()->DescribeState();
  const int64_t commits = faults().commits();
  for (const auto& [agent, board, field] :
       {std::tuple{"", "a1/b1", "next_lease.board_id 'a1/b1'"},
        std::tuple{"a2", "", "next_lease.agent_id 'a2'"}}) {
    result.mutable_next_lease()->set_agent_id(agent);
    result.mutable_next_lease()->set_board_id(board);
    auto r = coord()->ReportResult(result);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr(field));
  }
  EXPECT_EQ(coord()->DescribeState(), before);
  EXPECT_EQ(faults().commits(), commits);
}

TEST_F(DurabilityTest, ReportBoardLost) {
  const std::string id = Submit();
  Register("a1");
  const v1::WorkItem work = Lease("a1/b0");
  FailOnceThenRetry([&] {
    return coord()
        ->ReportResult(ResultFor("a1/b0", work, 0, v1::OUTCOME_BOARD_LOST))
        .status();
  });
  auto round = stored()->GetRound(id, 0);
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(round->state(), v1::ROUND_STATE_QUEUED);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_ROUND_REQUEUED), 1);
}

// A board's health check: its result is recorded (the board's verdict
// stored) under the same rule as a round's.
TEST_F(DurabilityTest, ReportHealthCheck) {
  HealthCheck golden;
  golden.kind = "sim";
  golden.source = "durability_test";
  golden.spec.set_operator_name("toy");
  golden.min_us = 50;
  golden.max_us = 150;
  options_.health_checks["sim"] = golden;
  Open();
  Register("a1");
  auto check = coord()->LeaseWork(LeaseFor("a1/b0"));
  ASSERT_TRUE(check.ok() && check->granted()) << check.status();
  ASSERT_TRUE(check->work().health_check()) << check->work().lease_id();
  const v1::ReportResultRequest result = ResultFor("a1/b0", check->work(), 100);
  FailOnceThenRetry([&]() -> absl::Status {
    auto r = coord()->ReportResult(result);
    if (r.ok()) {
      EXPECT_TRUE(r->accepted()) << r->reason();
    }
    return r.status();
  });
  auto boards = stored()->ListBoards();
  ASSERT_TRUE(boards.ok());
  ASSERT_EQ(boards->size(), 1u);
  EXPECT_EQ((*boards)[0].state(), v1::BOARD_STATE_IDLE);
  EXPECT_THAT((*boards)[0].health_detail(), HasSubstr("health check passed"));
}

TEST_F(DurabilityTest, Heartbeat) {
  Register("a1");
  FailOnceThenRetry([&] {
    v1::HeartbeatRequest request;
    request.set_agent_id("a1");
    v1::BoardInfo* b = request.add_boards();
    b->set_board_id("a1/b0");
    b->set_state(v1::BOARD_STATE_QUARANTINED);
    b->set_health_detail("device error");
    return coord()->Heartbeat(request).status();
  });
  auto boards = stored()->ListBoards();
  ASSERT_TRUE(boards.ok());
  ASSERT_EQ(boards->size(), 1u);
  EXPECT_EQ((*boards)[0].state(), v1::BOARD_STATE_QUARANTINED);
}

TEST_F(DurabilityTest, RecordDiagnosis) {
  const std::string id = Submit();
  Register("a1");
  const v1::WorkItem work = Lease("a1/b0");
  // A diagnosis lands only for the bundle its round's result names.
  v1::ReportResultRequest result = ResultFor("a1/b0", work, 100);
  result.mutable_result()->set_bundle_id("bundle-1");
  ASSERT_TRUE(coord()->ReportResult(result).ok());
  v1::Diagnosis d;
  d.set_bundle_id("bundle-1");
  d.set_sweep_id(id);
  d.set_round_id(0);
  d.set_epoch(work.epoch());
  d.add_hotspots()->set_op_name("MatMul");
  FailOnceThenRetry([&] { return coord()->RecordDiagnosis(d); });
  EXPECT_TRUE(absl::IsAlreadyExists(coord()->RecordDiagnosis(d)));
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_DIAGNOSIS), 1);
  auto round = stored()->GetRound(id, 0);
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(round->diagnosis().bundle_id(), "bundle-1");
}

TEST_F(DurabilityTest, TickExpiresALease) {
  const std::string id = Submit();
  Register("a1");
  Lease("a1/b0");
  clock_.Advance(absl::Seconds(11));
  FailOnceThenRetry([&] { return coord()->Tick(); });
  auto round = stored()->GetRound(id, 0);
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(round->state(), v1::ROUND_STATE_QUEUED);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_ROUND_REQUEUED), 1);
}

// The walks over leased rounds (expiry, a re-registering agent) go through
// the sweep's index of leased rounds (SweepRuntime::leased), which Tick
// prunes. A result whose commit failed leaves its round leased, and a round
// leased again after a Tick pruned it is indexed again: expiry finds both.
TEST_F(DurabilityTest, TickFindsLeasesThatAFailedResultLeftAndNewOnes) {
  const std::string id = Submit();
  Register("a1", 2);
  auto base = coord()->ReportResult(ResultFor("a1/b0", Lease("a1/b0"), 100));
  ASSERT_TRUE(base.ok() && base->accepted());
  ASSERT_TRUE(coord()->Tick().ok());  // round 0 is done: its id goes
  const v1::WorkItem first = Lease("a1/b0");
  const v1::WorkItem second = Lease("a1/b1");
  faults().FailNthCommit(1);
  EXPECT_FALSE(coord()->ReportResult(ResultFor("a1/b0", first, 50)).ok());
  faults().Heal();
  ASSERT_TRUE(coord()->Tick().ok());
  clock_.Advance(absl::Seconds(11));
  ASSERT_TRUE(coord()->Tick().ok());
  for (const v1::WorkItem& w : {first, second}) {
    auto round = stored()->GetRound(id, w.round_id());
    ASSERT_TRUE(round.ok());
    EXPECT_EQ(round->state(), v1::ROUND_STATE_QUEUED) << w.lease_id();
  }
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_ROUND_REQUEUED), 2);
}

TEST_F(DurabilityTest, TickLosesASilentAgent) {
  const std::string id = Submit();
  Register("a1");
  Lease("a1/b0");
  clock_.Advance(absl::Seconds(31));
  FailOnceThenRetry([&] { return coord()->Tick(); });
  auto boards = stored()->ListBoards();
  ASSERT_TRUE(boards.ok());
  EXPECT_EQ((*boards)[0].state(), v1::BOARD_STATE_LOST);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_ROUND_REQUEUED), 1);
}

TEST_F(DurabilityTest, DrainAndAdmitBoard) {
  Register("a1");
  v1::BoardAdminRequest request;
  request.set_board_id("a1/b0");
  FailOnceThenRetry([&] { return coord()->DrainBoard(request).status(); });
  auto boards = stored()->ListBoards();
  ASSERT_TRUE(boards.ok());
  EXPECT_EQ((*boards)[0].state(), v1::BOARD_STATE_DRAINING);
  FailOnceThenRetry([&] { return coord()->AdmitBoard(request).status(); });
  boards = stored()->ListBoards();
  ASSERT_TRUE(boards.ok());
  EXPECT_EQ((*boards)[0].state(), v1::BOARD_STATE_IDLE);
}

TEST_F(DurabilityTest, SetTeamQuota) {
  v1::TeamQuota quota;
  quota.set_team("qa");
  quota.set_weight(2);
  quota.set_max_boards(3);
  FailOnceThenRetry([&] { return coord()->SetTeamQuota(quota).status(); });
  Open();  // the stored quota survives a restart
  EXPECT_THAT(coord()->DescribeState(), HasSubstr("max_boards: 3"));
}

TEST_F(DurabilityTest, ReserveAndUnreserveBoards) {
  Register("a1");
  v1::BoardReservation r;
  r.set_board_id("a1/b0");
  r.set_team("qa");
  FailOnceThenRetry([&] { return coord()->ReserveBoards(r).status(); });
  auto boards = stored()->ListBoards();
  ASSERT_TRUE(boards.ok());
  EXPECT_EQ((*boards)[0].reserved_for(), "qa");
  FailOnceThenRetry([&] { return coord()->UnreserveBoards(r).status(); });
  boards = stored()->ListBoards();
  ASSERT_TRUE(boards.ok());
  EXPECT_EQ((*boards)[0].reserved_for(), "");
}

// Commits through to a MemoryStore and, each time a commit is stored, looks
// at every ended sweep the store holds as a GetSweep right then would: its
// report must be where report_path says.
class ReportCheckingStore : public FaultInjectingStore {
 public:
  explicit ReportCheckingStore(Store* base) : FaultInjectingStore(base) {}

  absl::Status Commit(const WriteSet& writes) override {
    TF_RETURN_IF_ERROR(FaultInjectingStore::Commit(writes));
    absl::StatusOr<std::vector<v1::Sweep>> sweeps = ListSweeps();
    if (!sweeps.ok()) return sweeps.status();
    for (const v1::Sweep& sweep : *sweeps) {
      if (sweep.state() == v1::SWEEP_STATE_RUNNING ||
          sweep.state() == v1::SWEEP_STATE_QUEUED) {
        continue;
      }
      ++ended_seen;
      if (sweep.report_path().empty() || !ReadFile(sweep.report_path()).ok()) {
        ended_without_report.push_back(sweep.sweep_id());
      }
    }
    return absl::OkStatus();
  }

  int ended_seen = 0;
  std::vector<std::string> ended_without_report;
};

// GetSweep reads the store, so the report is written before the end is
// committed; when that commit fails, the sweep has not ended and has no
// report; the retry ends it with one.
TEST(ReportBeforeEndTest, AnEndedSweepIsStoredOnlyWithItsReportOnDisk) {
  absl::StatusOr<std::string> dir = MakeTempDir("report_before_end");
  ASSERT_TRUE(dir.ok()) << dir.status();
  OperatorCatalog catalog;
  ASSERT_TRUE(AddOperator(&catalog, ToyOperatorYaml(3, 4)).ok());
  FakeClock clock;
  CoordinatorOptions options;
  options.report_dir = *dir + "/reports";
  std::unique_ptr<Store> base = NewMemoryStore();
  ReportCheckingStore store(base.get());
  Coordinator coord(&store, &catalog, &clock, options, nullptr);
  ASSERT_TRUE(coord.Recover().ok());
  ASSERT_TRUE(coord.RegisterAgent(SimAgent("a1", 1)).ok());

  // One sweep ends by its budget, each result's commit failing once: the
  // failed attempt of the last one ended the sweep in memory only.
  v1::SubmitSweepRequest submit;
  submit.set_spec_yaml(ToySpecYaml("reported", "grid", 3));
  auto sweep = coord.SubmitSweep(submit, AnonymousAdmin());
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  const std::string id = sweep->sweep().sweep_id();
  const std::string report = options.report_dir + "/" + id + ".md";
  for (int round = 0; coord.active_sweeps() > 0 && round < 10; ++round) {
    auto lease = coord.LeaseWork(LeaseFor("a1/b0"));
    ASSERT_TRUE(lease.ok() && lease->granted()) << lease.status();
    const v1::ReportResultRequest result =
        ResultFor("a1/b0", lease->work(), 100 - round);
    store.FailNthCommit(1);
    EXPECT_FALSE(coord.ReportResult(result).ok());
    auto stored = base->GetSweep(id);
    ASSERT_TRUE(stored.ok()) << stored.status();
    EXPECT_EQ(stored->state(), v1::SWEEP_STATE_RUNNING);
    EXPECT_FALSE(ReadFile(report).ok())
        << "a report of an end that was not stored";
    auto ack = coord.ReportResult(result);
    ASSERT_TRUE(ack.ok()) << ack.status();
  }
  EXPECT_EQ(coord.active_sweeps(), 0);

  // Another ends by cancel.
  submit.set_spec_yaml(ToySpecYaml("cancelled", "grid", 3));
  auto second = coord.SubmitSweep(submit, AnonymousAdmin());
  ASSERT_TRUE(second.ok()) << second.status();
  v1::CancelSweepRequest cancel;
  cancel.set_sweep_id(second->sweep().sweep_id());
  ASSERT_TRUE(coord.CancelSweep(cancel, AnonymousAdmin()).ok());

  EXPECT_GT(store.ended_seen, 0) << "no commit stored an end: proves nothing";
  EXPECT_TRUE(store.ended_without_report.empty())
      << "stored as ended before its report was on disk: "
      << store.ended_without_report.front();
  auto stored = base->GetSweep(id);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->state(), v1::SWEEP_STATE_SUCCEEDED);
  EXPECT_EQ(stored->report_path(), report);
  absl::StatusOr<std::string> text = ReadFile(report);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr(id));
  EXPECT_TRUE(RemoveAll(*dir).ok());
}

// A whole sweep with every third call's commit failing: the agent side retries
// what failed, and what the store holds at the end is what a fault-free run
// would hold: every round done once, the event log whole, and a restarted
// core finds nothing leased or lost.
TEST_F(DurabilityTest, ASweepThroughFailingCommitsRecordsEachResultOnce) {
  const std::string id = Submit();
  Register("a1", 2);
  int failures = 0;
  int calls = 0;
  auto retry = [&](const std::function<absl::Status()>& call) {
    for (int attempt = 0; attempt < 10; ++attempt) {
      if (++calls % 3 == 0) faults().FailNthCommit(1);
      absl::Status st = call();
      if (st.ok()) return;
      ++failures;
    }
    ADD_FAILURE() << "a call failed 10 times";
  };
  int results = 0;
  while (coord()->active_sweeps() > 0 && results < 40) {
    for (const std::string board : {"a1/b0", "a1/b1"}) {
      v1::LeaseWorkResponse lease;
      retry([&]() -> absl::Status {
        auto r = coord()->LeaseWork(LeaseFor(board));
        if (r.ok()) lease = *r;
        return r.status();
      });
      if (!lease.granted()) continue;
      const double median = 100 - lease.work().round_id();
      retry([&] {
        return coord()
            ->ReportResult(ResultFor(board, lease.work(), median))
            .status();
      });
      ++results;
    }
  }
  faults().Heal();
  EXPECT_GT(failures, 0);
  EXPECT_EQ(coord()->active_sweeps(), 0);
  auto rounds = stored()->ListRounds(id);
  ASSERT_TRUE(rounds.ok());
  for (const v1::Round& r : *rounds) {
    EXPECT_TRUE(r.state() == v1::ROUND_STATE_DONE ||
                r.state() == v1::ROUND_STATE_CANCELLED)
        << "round " << r.round_id() << " is " << v1::RoundState_Name(r.state());
    if (r.state() == v1::ROUND_STATE_DONE) {
      EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_ROUND_FINISHED, r.round_id()),
                1);
      EXPECT_EQ(r.attempts(), 1) << "round " << r.round_id();
    }
  }
  ExpectEventLogWhole(id);
}

// A batch whose commit fails puts back a round that a model strategy saw
// finished in it: the last result in flight, after which the decider asks
// the strategy whether anything is left. The strategy learns from the
// history again (SearchHistory.rewinds), so the leases after the failure
// are those of a run in which the batch never happened.
TEST(StrategyAfterUndoTest, LeasesAsIfTheFailedBatchNeverHappened) {
  OperatorCatalog catalog;
  ASSERT_TRUE(AddOperator(&catalog, ToyOperatorYaml(8, 8)).ok());
  FakeClock clock;
  CoordinatorOptions options;
  auto run = [&](bool failed_batch) {
    std::vector<std::string> leased;
    CoordinatorOverFaults core;
    EXPECT_TRUE(core.Open(&catalog, &clock, options).ok());
    Coordinator* coord = core.coordinator();
    v1::SubmitSweepRequest submit;
    submit.set_spec_yaml(ToySpecYaml(
        "undone", "{name: tpe, seed: 3, options: {startup: 2}}", 40));
    EXPECT_TRUE(coord->SubmitSweep(submit, AnonymousAdmin()).ok());
    EXPECT_TRUE(coord->RegisterAgent(SimAgent("a1", 8)).ok());
    auto lease = [&](int board) {
      auto r = coord->LeaseWork(LeaseFor(absl::StrCat("a1/b", board)));
      EXPECT_TRUE(r.ok() && r->granted()) << board;
      return r.ok() ? r->work() : v1::WorkItem();
    };
    auto report = [&](int board, const v1::WorkItem& work, double us) {
      return coord
          ->ReportResult(ResultFor(absl::StrCat("a1/b", board), work, us))
          .status();
    };
    EXPECT_TRUE(report(0, lease(0), 100).ok());
    std::vector<v1::WorkItem> work;
    for (int b = 1; b <= 3; ++b) work.push_back(lease(b));
    EXPECT_TRUE(report(1, work[0], 90).ok());
    EXPECT_TRUE(report(3, work[2], 95).ok());
    if (failed_batch) {
      coord->BeginBatch();
      EXPECT_TRUE(report(2, work[1], 50).ok());
      core.faults()->FailNthCommit(1);
      EXPECT_FALSE(coord->CommitBatch().ok());
      core.faults()->Heal();
    }
    for (int b = 4; b <= 7; ++b) leased.push_back(ParamsKey(lease(b).params()));
    return leased;
  };
  EXPECT_EQ(run(true), run(false));
}

// Counts what the core reports of its commits; the other reports are not
// looked at. Thread-safe, as FarmMetrics implementations must be.
class CommitMetrics : public NoFarmMetrics {
 public:
  struct Commit {
    double seconds;
    size_t writes;
    bool ok;
  };
  void StoreCommitted(double seconds, size_t writes, bool ok) override {
    absl::MutexLock lock(&mu_);
    commits_.push_back({seconds, writes, ok});
  }
  std::vector<Commit> commits() const {
    absl::MutexLock lock(&mu_);
    return commits_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<Commit> commits_ ABSL_GUARDED_BY(mu_);
};

// A disk whose every commit takes `delay` of the fake clock's time.
class SlowStore : public FaultInjectingStore {
 public:
  SlowStore(Store* base, FakeClock* clock, absl::Duration delay)
      : FaultInjectingStore(base), clock_(clock), delay_(delay) {}
  absl::Status Commit(const WriteSet& writes) override {
    clock_->Advance(delay_);
    return FaultInjectingStore::Commit(writes);
  }

 private:
  FakeClock* clock_;
  absl::Duration delay_;
};

// Every commit is reported with the time it took and its records, refused
// ones too: what an operator reads as tunefarm_store_commit_seconds when
// the disk, not the coordinator, holds the agents' calls up.
TEST(StoreCommitMetricsTest, EveryCommitReportsItsDurationRecordsAndOutcome) {
  OperatorCatalog catalog;
  ASSERT_TRUE(AddOperator(&catalog, ToyOperatorYaml(3, 4)).ok());
  FakeClock clock;
  CommitMetrics metrics;
  std::unique_ptr<Store> base = NewMemoryStore();
  SlowStore store(base.get(), &clock, absl::Milliseconds(25));
  Coordinator coord(&store, &catalog, &clock, CoordinatorOptions(), &metrics);
  ASSERT_TRUE(coord.Recover().ok());
  ASSERT_TRUE(coord.RegisterAgent(SimAgent("a1", 1)).ok());
  v1::SubmitSweepRequest submit;
  submit.set_spec_yaml(ToySpecYaml("timed", "grid", 3));
  ASSERT_TRUE(coord.SubmitSweep(submit, AnonymousAdmin()).ok());
  auto lease = coord.LeaseWork(LeaseFor("a1/b0"));
  ASSERT_TRUE(lease.ok() && lease->granted()) << lease.status();
  const v1::ReportResultRequest result = ResultFor("a1/b0", lease->work(), 100);
  store.FailNthCommit(1);
  EXPECT_FALSE(coord.ReportResult(result).ok());
  ASSERT_TRUE(coord.ReportResult(result).ok());

  const std::vector<CommitMetrics::Commit> commits = metrics.commits();
  ASSERT_EQ(static_cast<int64_t>(commits.size()),
            store.commits() + store.failed_commits());
  ASSERT_GE(commits.size(), 5u);  // register, submit, lease, report twice
  for (const CommitMetrics::Commit& c : commits) {
    EXPECT_DOUBLE_EQ(c.seconds, 0.025);
    EXPECT_GT(c.writes, 0u);
  }
  int refused = 0;
  for (const CommitMetrics::Commit& c : commits) refused += !c.ok;
  EXPECT_EQ(refused, 1);
  EXPECT_FALSE(commits[commits.size() - 2].ok);
  EXPECT_TRUE(commits.back().ok);
}

}  // namespace
}  // namespace tunefarm
