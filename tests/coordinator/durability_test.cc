// One rule for every mutation of the coordinator core: stage, commit, then
// apply and reply. For each mutating call, a FaultInjectingStore fails the
// commit; then nothing in memory has changed (Coordinator::DescribeState is
// identical), the call returns an error, and the same call retried after the
// store recovers is recorded exactly once (read back from the store).
//
// The core runs over a MemoryStore behind the fault store, with a FakeClock.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "coordinator/coordinator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/catalog.h"
#include "storage/fault_injecting_store.h"
#include "storage/memory_store.h"

namespace tunefarm {
namespace {

using ::testing::HasSubstr;

constexpr char kToyOperator[] = R"(
name: toy
parameters:
  - {name: a, values: [1, 2, 3], default: 1}
  - {name: b, values: [1, 2, 3, 4], default: 1}
workloads:
  - {name: small, dtype: fp16, dims: {m: 64, n: 64, k: 64}}
tolerances: {rtol: 0.01, atol: 0.001}
backends:
  sim: {command: ["{bin}/toy"]}
)";

constexpr char kSpec[] = R"(
name: durable
team: qa
operator: toy
goal: {speedup: 100}
strategy: grid
budget: {max_rounds: 10, max_rounds_without_gain: 10}
min_gain: 0.02
boards: {kind: sim}
measurement: {warmup: 1, samples: 5}
)";

class DurabilityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<v1::OperatorManifest> op =
        ParseOperatorManifest(kToyOperator, "test/toy.yaml");
    ASSERT_TRUE(op.ok()) << op.status();
    catalog_.Add(*op);
    options_.lease_duration = absl::Seconds(10);
    options_.agent_timeout = absl::Seconds(30);
    Open();
  }

  // A new core recovered from the same store, as a restart would.
  void Open() {
    coord_ = std::make_unique<Coordinator>(&faults_, &catalog_, &clock_,
                                           options_, nullptr);
    absl::Status st = coord_->Recover();
    ASSERT_TRUE(st.ok()) << st;
  }

  // Runs `call` with the next commit failing: it must fail and leave memory
  // as it was. Then runs it again with the store healed: it must succeed.
  void FailOnceThenRetry(const std::function<absl::Status()>& call) {
    const std::string before = coord_->DescribeState();
    faults_.FailNthCommit(1);
    const int64_t failed = faults_.failed_commits();
    absl::Status st = call();
    EXPECT_FALSE(st.ok()) << "a call whose commit failed answered OK";
    EXPECT_EQ(faults_.failed_commits(), failed + 1)
        << "the call made no commit, so the check proves nothing";
    EXPECT_EQ(coord_->DescribeState(), before)
        << "memory changed although the commit failed";
    faults_.Heal();
    absl::Status retry = call();
    EXPECT_TRUE(retry.ok()) << retry;
  }

  std::string Submit(const std::string& key = "") {
    v1::SubmitSweepRequest request;
    request.set_spec_yaml(kSpec);
    request.set_idempotency_key(key);
    auto r = coord_->SubmitSweep(request, AnonymousAdmin());
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->sweep().sweep_id() : "";
  }

  v1::RegisterAgentRequest Registration(const std::string& agent, int boards) {
    v1::RegisterAgentRequest request;
    request.set_agent_id(agent);
    request.set_node("node");
    for (int i = 0; i < boards; ++i) {
      v1::BoardInfo* b = request.add_boards();
      b->set_board_id(absl::StrCat(agent, "/b", i));
      b->set_kind("sim");
      b->set_simulated(true);
    }
    return request;
  }

  void Register(const std::string& agent, int boards = 1) {
    auto r = coord_->RegisterAgent(Registration(agent, boards));
    ASSERT_TRUE(r.ok()) << r.status();
  }

  v1::LeaseWorkRequest LeaseRequest(const std::string& board) {
    v1::LeaseWorkRequest request;
    request.set_agent_id(board.substr(0, board.find('/')));
    request.set_board_id(board);
    return request;
  }

  v1::WorkItem Lease(const std::string& board) {
    auto r = coord_->LeaseWork(LeaseRequest(board));
    EXPECT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r.ok() && r->granted());
    return r.ok() ? r->work() : v1::WorkItem();
  }

  v1::ReportResultRequest Result(const std::string& board,
                                 const v1::WorkItem& work, double median_us,
                                 v1::Outcome outcome = v1::OUTCOME_OK) {
    v1::ReportResultRequest request;
    request.set_agent_id(board.substr(0, board.find('/')));
    request.set_board_id(board);
    request.set_lease_id(work.lease_id());
    request.set_epoch(work.epoch());
    request.set_sweep_id(work.sweep_id());
    request.set_round_id(work.round_id());
    request.mutable_result()->set_outcome(outcome);
    request.mutable_result()->mutable_precision()->set_passed(true);
    v1::Measurement* m = request.mutable_result()->mutable_measurement();
    m->set_median_us(median_us);
    m->set_p20_us(median_us * 0.99);
    m->set_p80_us(median_us * 1.01);
    m->set_samples(5);
    m->set_simulated(true);
    return request;
  }

  int CountEvents(const std::string& sweep, v1::EventKind kind,
                  int64_t round_id = -1) {
    auto events = base_->ReadEvents(sweep, 1, 0);
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
    auto s = base_->GetSweep(sweep);
    ASSERT_TRUE(s.ok()) << s.status();
    auto events = base_->ReadEvents(sweep, 1, 0);
    ASSERT_TRUE(events.ok()) << events.status();
    for (size_t i = 0; i < events->size(); ++i) {
      EXPECT_EQ((*events)[i].seq(), static_cast<int64_t>(i + 1));
    }
    EXPECT_EQ(s->last_event_seq(), static_cast<int64_t>(events->size()));
  }

  OperatorCatalog catalog_;
  FakeClock clock_;
  CoordinatorOptions options_;
  std::unique_ptr<Store> base_ = NewMemoryStore();
  FaultInjectingStore faults_{base_.get()};
  std::unique_ptr<Coordinator> coord_;
};

TEST_F(DurabilityTest, SubmitSweep) {
  std::string id;
  FailOnceThenRetry([&]() -> absl::Status {
    v1::SubmitSweepRequest request;
    request.set_spec_yaml(kSpec);
    request.set_idempotency_key("k1");
    auto r = coord_->SubmitSweep(request, AnonymousAdmin());
    if (r.ok()) id = r->sweep().sweep_id();
    return r.status();
  });
  EXPECT_EQ(id, "sw-000001") << "the failed submission used up a sweep id";
  auto sweeps = base_->ListSweeps();
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
    return coord_->CancelSweep(request, AnonymousAdmin()).status();
  });
  EXPECT_EQ(coord_->active_sweeps(), 0);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_FINISHED), 1);
  ExpectEventLogWhole(id);
}

TEST_F(DurabilityTest, RegisterAgent) {
  FailOnceThenRetry(
      [&] { return coord_->RegisterAgent(Registration("a1", 2)).status(); });
  auto boards = base_->ListBoards();
  ASSERT_TRUE(boards.ok());
  EXPECT_EQ(boards->size(), 2u);
  EXPECT_EQ(coord_->ListBoards({}).size(), 2u);
}

TEST_F(DurabilityTest, LeaseWork) {
  const std::string id = Submit();
  Register("a1");
  v1::WorkItem work;
  FailOnceThenRetry([&]() -> absl::Status {
    auto r = coord_->LeaseWork(LeaseRequest("a1/b0"));
    if (r.ok()) work = r->work();
    return r.status();
  });
  EXPECT_EQ(work.round_id(), 0);
  EXPECT_EQ(work.epoch(), 1) << "the failed lease used up an epoch";
  auto round = base_->GetRound(id, 0);
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
  const v1::ReportResultRequest result = Result("a1/b0", work, 100);
  bool duplicate = true;
  FailOnceThenRetry([&]() -> absl::Status {
    auto r = coord_->ReportResult(result);
    if (!r.ok()) return r.status();
    EXPECT_TRUE(r->accepted()) << r->reason();
    duplicate = r->duplicate();
    return absl::OkStatus();
  });
  // The retry after the failure is the first record, not a "duplicate":
  // the agent sends its profile bundle only for a first record.
  EXPECT_FALSE(duplicate);
  auto round = base_->GetRound(id, 0);
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(round->state(), v1::ROUND_STATE_DONE);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_ROUND_FINISHED, 0), 1);
  auto again = coord_->ReportResult(result);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->duplicate());
  ExpectEventLogWhole(id);
}

TEST_F(DurabilityTest, ReportResultDecidesACandidate) {
  const std::string id = Submit();
  Register("a1");
  auto base = coord_->ReportResult(Result("a1/b0", Lease("a1/b0"), 100));
  ASSERT_TRUE(base.ok() && base->accepted());
  const v1::WorkItem work = Lease("a1/b0");
  ASSERT_EQ(work.round_id(), 1);
  FailOnceThenRetry(
      [&] { return coord_->ReportResult(Result("a1/b0", work, 50)).status(); });
  auto sweep = base_->GetSweep(id);
  ASSERT_TRUE(sweep.ok());
  EXPECT_EQ(sweep->best_round(), 1);
  EXPECT_EQ(sweep->rounds_finished(), 1);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_BEST_IMPROVED), 1);
  ExpectEventLogWhole(id);
}

TEST_F(DurabilityTest, ReportBoardLost) {
  const std::string id = Submit();
  Register("a1");
  const v1::WorkItem work = Lease("a1/b0");
  FailOnceThenRetry([&] {
    return coord_
        ->ReportResult(Result("a1/b0", work, 0, v1::OUTCOME_BOARD_LOST))
        .status();
  });
  auto round = base_->GetRound(id, 0);
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(round->state(), v1::ROUND_STATE_QUEUED);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_ROUND_REQUEUED), 1);
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
    return coord_->Heartbeat(request).status();
  });
  auto boards = base_->ListBoards();
  ASSERT_TRUE(boards.ok());
  ASSERT_EQ(boards->size(), 1u);
  EXPECT_EQ((*boards)[0].state(), v1::BOARD_STATE_QUARANTINED);
}

TEST_F(DurabilityTest, RecordDiagnosis) {
  const std::string id = Submit();
  Register("a1");
  const v1::WorkItem work = Lease("a1/b0");
  // A diagnosis lands only for the bundle its round's result names.
  v1::ReportResultRequest result = Result("a1/b0", work, 100);
  result.mutable_result()->set_bundle_id("bundle-1");
  ASSERT_TRUE(coord_->ReportResult(result).ok());
  v1::Diagnosis d;
  d.set_bundle_id("bundle-1");
  d.set_sweep_id(id);
  d.set_round_id(0);
  d.set_epoch(work.epoch());
  d.add_hotspots()->set_op_name("MatMul");
  FailOnceThenRetry([&] { return coord_->RecordDiagnosis(d); });
  EXPECT_TRUE(absl::IsAlreadyExists(coord_->RecordDiagnosis(d)));
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_DIAGNOSIS), 1);
  auto round = base_->GetRound(id, 0);
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(round->diagnosis().bundle_id(), "bundle-1");
}

TEST_F(DurabilityTest, TickExpiresALease) {
  const std::string id = Submit();
  Register("a1");
  Lease("a1/b0");
  clock_.Advance(absl::Seconds(11));
  FailOnceThenRetry([&] { return coord_->Tick(); });
  auto round = base_->GetRound(id, 0);
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(round->state(), v1::ROUND_STATE_QUEUED);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_ROUND_REQUEUED), 1);
}

TEST_F(DurabilityTest, TickLosesASilentAgent) {
  const std::string id = Submit();
  Register("a1");
  Lease("a1/b0");
  clock_.Advance(absl::Seconds(31));
  FailOnceThenRetry([&] { return coord_->Tick(); });
  auto boards = base_->ListBoards();
  ASSERT_TRUE(boards.ok());
  EXPECT_EQ((*boards)[0].state(), v1::BOARD_STATE_LOST);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_ROUND_REQUEUED), 1);
}

TEST_F(DurabilityTest, DrainAndAdmitBoard) {
  Register("a1");
  v1::BoardAdminRequest request;
  request.set_board_id("a1/b0");
  FailOnceThenRetry([&] { return coord_->DrainBoard(request).status(); });
  auto boards = base_->ListBoards();
  ASSERT_TRUE(boards.ok());
  EXPECT_EQ((*boards)[0].state(), v1::BOARD_STATE_DRAINING);
  FailOnceThenRetry([&] { return coord_->AdmitBoard(request).status(); });
  boards = base_->ListBoards();
  ASSERT_TRUE(boards.ok());
  EXPECT_EQ((*boards)[0].state(), v1::BOARD_STATE_IDLE);
}

TEST_F(DurabilityTest, SetTeamQuota) {
  v1::TeamQuota quota;
  quota.set_team("qa");
  quota.set_weight(2);
  quota.set_max_boards(3);
  FailOnceThenRetry([&] { return coord_->SetTeamQuota(quota).status(); });
  Open();  // the stored quota survives a restart
  EXPECT_THAT(coord_->DescribeState(), HasSubstr("max_boards: 3"));
}

TEST_F(DurabilityTest, ReserveAndUnreserveBoards) {
  Register("a1");
  v1::BoardReservation r;
  r.set_board_id("a1/b0");
  r.set_team("qa");
  FailOnceThenRetry([&] { return coord_->ReserveBoards(r).status(); });
  auto boards = base_->ListBoards();
  ASSERT_TRUE(boards.ok());
  EXPECT_EQ((*boards)[0].reserved_for(), "qa");
  FailOnceThenRetry([&] { return coord_->UnreserveBoards(r).status(); });
  boards = base_->ListBoards();
  ASSERT_TRUE(boards.ok());
  EXPECT_EQ((*boards)[0].reserved_for(), "");
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
      if (++calls % 3 == 0) faults_.FailNthCommit(1);
      absl::Status st = call();
      if (st.ok()) return;
      ++failures;
    }
    ADD_FAILURE() << "a call failed 10 times";
  };
  int results = 0;
  while (coord_->active_sweeps() > 0 && results < 40) {
    for (const std::string board : {"a1/b0", "a1/b1"}) {
      v1::LeaseWorkResponse lease;
      retry([&]() -> absl::Status {
        auto r = coord_->LeaseWork(LeaseRequest(board));
        if (r.ok()) lease = *r;
        return r.status();
      });
      if (!lease.granted()) continue;
      const double median = 100 - lease.work().round_id();
      retry([&] {
        return coord_->ReportResult(Result(board, lease.work(), median))
            .status();
      });
      ++results;
    }
  }
  faults_.Heal();
  EXPECT_GT(failures, 0);
  EXPECT_EQ(coord_->active_sweeps(), 0);
  auto rounds = base_->ListRounds(id);
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

}  // namespace
}  // namespace tunefarm
