// Coordinator domain core: submission, leases (expiry, epochs, renewals),
// agent liveness, keep / roll back decisions, termination rules, cancel,
// recovery from the store, diagnoses and lineage.
//
// Each test drives a real Coordinator directly (no gRPC) over a real RocksDB
// store in a temp dir, with a FakeClock so lease and time-limit logic runs
// without sleeping. Results are hand-made RoundResults; assertions read the
// durable records back from the Store wherever the behaviour is "recorded".
#include "coordinator/coordinator.h"

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/params.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/catalog.h"
#include "storage/lineage.h"
#include "storage/store.h"
#include "tests/coordinator/coordinator_harness.h"

namespace tunefarm {
namespace {

using ::testing::AnyOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// 3 * 4 * 3 = 36 configurations.
constexpr char kToyOperator[] = R"(
name: toy
parameters:
  - {name: a, values: [1, 2, 3], default: 1, stage: tiling}
  - {name: b, values: [1, 2, 3, 4], default: 1, stage: pipeline}
  - {name: c, values: [1, 2, 3], default: 1, stage: in_core}
workloads:
  - {name: small, dtype: fp16, dims: {m: 64, n: 64, k: 64}}
tolerances: {rtol: 0.01, atol: 0.001}
backends:
  sim: {command: ["{bin}/toy"]}
)";

// Two configurations: the baseline and one candidate.
constexpr char kTinyOperator[] = R"(
name: tiny
parameters:
  - {name: x, values: [1, 2], default: 1}
workloads:
  - {name: one, dtype: fp32, dims: {n: 16}}
tolerances: {rtol: 0.01, atol: 0.001}
backends:
  sim: {command: ["{bin}/tiny"]}
)";

struct SpecOptions {
  std::string op = "toy";
  std::string goal = "{speedup: 100}";  // out of reach unless a test lowers it
  std::string budget = "{max_rounds: 30, max_rounds_without_gain: 30}";
  std::string boards = "{kind: sim}";
  std::string name = "toy-sweep";
  std::string strategy = "grid";
  int priority = 0;
};

std::string SpecYaml(const SpecOptions& o) {
  return absl::StrCat(
      "name: ", o.name, "\nteam: qa\noperator: ", o.op, "\ngoal: ", o.goal,
      "\nstrategy: ", o.strategy, "\nbudget: ", o.budget,
      "\nmin_gain: 0.02\nboards: ", o.boards,
      "\nmeasurement: {warmup: 1, samples: 5}\npriority: ", o.priority, "\n");
}

std::string AgentOf(const std::string& board_id) {
  return board_id.substr(0, board_id.find('/'));
}

v1::BoardInfo Board(const std::string& id, const std::string& kind = "sim",
                    const std::string& chip = "chip-x",
                    const std::map<std::string, std::string>& labels = {}) {
  v1::BoardInfo b;
  b.set_board_id(id);
  b.set_kind(kind);
  b.set_chip(chip);
  b.set_simulated(kind == "sim");
  for (const auto& [k, v] : labels) (*b.mutable_labels())[k] = v;
  return b;
}

// Counts calls, so tests can check what the core reported.
class FakeFarmMetrics : public FarmMetrics {
 public:
  void RoundRecorded(const std::string& outcome, double) override {
    ++rounds_recorded[outcome];
  }
  void LeaseGranted(double) override { ++leases_granted; }
  void LeaseExpired() override { ++leases_expired; }
  void SetBoardsByState(const std::map<std::string, int>& counts) override {
    boards_by_state = counts;
  }
  void SetQueueDepth(int queued) override { queue_depth = queued; }
  void DiagnosisRecorded() override { ++diagnoses; }
  void SetBoardStates(const std::vector<v1::BoardInfo>& boards) override {
    ++board_state_publishes;
    last_board_states = boards.size();
    for (const auto& b : boards) board_states[b.board_id()] = b.state();
  }
  void BoardQuarantined(const v1::BoardInfo& board) override {
    ++quarantines[board.board_id()];
  }
  std::map<std::string, int> quarantines;
  void BoardBusy(const v1::BoardInfo& board, double seconds) override {
    board_busy_seconds[board.board_id()] += seconds;
  }
  void TeamRound(const std::string& team, const std::string& outcome,
                 double board_seconds) override {
    ++team_rounds[team + "/" + outcome];
    team_board_seconds[team] += board_seconds;
  }

  std::map<std::string, v1::BoardState> board_states;
  size_t last_board_states = 0;  // boards in the last SetBoardStates
  int board_state_publishes = 0;
  std::map<std::string, double> board_busy_seconds;
  std::map<std::string, int> team_rounds;
  std::map<std::string, double> team_board_seconds;
  std::map<std::string, int> rounds_recorded;
  int leases_granted = 0;
  int leases_expired = 0;
  std::map<std::string, int> boards_by_state;
  int queue_depth = -1;
  int diagnoses = 0;
};

class CoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(disk_.MakeDir("coordinator_test").ok());
    for (const char* text : {kToyOperator, kTinyOperator}) {
      absl::StatusOr<v1::OperatorManifest> op =
          ParseOperatorManifest(text, "test/operator.yaml");
      ASSERT_TRUE(op.ok()) << op.status();
      catalog_.Add(*op);
    }
    options_.lease_duration = absl::Seconds(10);
    options_.heartbeat_interval = absl::Seconds(1);
    options_.agent_timeout = absl::Seconds(30);
    options_.report_dir = disk_.dir() + "/reports";
    ASSERT_NO_FATAL_FAILURE(Restart());
  }

  // Opens the core, or restarts it as a coordinator process restart would:
  // everything in memory is dropped, the database is closed and opened
  // again, and the new core recovers from it.
  void Restart() {
    lease_board_.clear();
    absl::Status st = disk_.Open(&catalog_, &clock_, options_, &metrics_);
    ASSERT_TRUE(st.ok()) << st;
  }
  Coordinator* coord() { return disk_.coordinator(); }
  Store* store() { return disk_.store(); }

  // --- user side -----------------------------------------------------------
  absl::StatusOr<v1::SubmitSweepResponse> SubmitRaw(
      const std::string& yaml, const std::string& idempotency_key = "") {
    v1::SubmitSweepRequest request;
    request.set_spec_yaml(yaml);
    request.set_idempotency_key(idempotency_key);
    return coord()->SubmitSweep(request, AnonymousAdmin());
  }

  // Submits and returns the new sweep's id ("" after a recorded failure).
  std::string Submit(const std::string& yaml) {
    absl::StatusOr<v1::SubmitSweepResponse> r = SubmitRaw(yaml);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->sweep().sweep_id() : "";
  }

  // --- agent side ----------------------------------------------------------
  void Register(const std::string& agent,
                const std::vector<v1::BoardInfo>& boards) {
    v1::RegisterAgentRequest request;
    request.set_agent_id(agent);
    request.set_node("node-" + agent);
    for (const v1::BoardInfo& b : boards) *request.add_boards() = b;
    absl::StatusOr<v1::RegisterAgentResponse> r =
        coord()->RegisterAgent(request);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->lease_duration_ms(), 10000);
  }

  absl::StatusOr<v1::LeaseWorkResponse> LeaseRaw(const std::string& board_id) {
    v1::LeaseWorkRequest request;
    request.set_agent_id(AgentOf(board_id));
    request.set_board_id(board_id);
    absl::StatusOr<v1::LeaseWorkResponse> r = coord()->LeaseWork(request);
    if (r.ok() && r->granted()) lease_board_[r->work().lease_id()] = board_id;
    return r;
  }

  // A lease that must be granted.
  v1::WorkItem Lease(const std::string& board_id) {
    absl::StatusOr<v1::LeaseWorkResponse> r = LeaseRaw(board_id);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return v1::WorkItem();
    EXPECT_TRUE(r->granted()) << "no work for " << board_id;
    return r->work();
  }

  // A lease request that must find nothing to do.
  void ExpectNoWork(const std::string& board_id) {
    absl::StatusOr<v1::LeaseWorkResponse> r = LeaseRaw(board_id);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_FALSE(r->granted())
        << board_id << " unexpectedly got round " << r->work().round_id();
    EXPECT_GT(r->retry_after_ms(), 0);
  }

  absl::StatusOr<v1::ReportResultResponse> Report(const v1::WorkItem& work,
                                                  v1::Outcome outcome,
                                                  double median_us = 0) {
    const std::string board = lease_board_.count(work.lease_id())
                                  ? lease_board_[work.lease_id()]
                                  : "";
    v1::ReportResultRequest request;
    request.set_agent_id(AgentOf(board));
    request.set_board_id(board);
    request.set_lease_id(work.lease_id());
    request.set_epoch(work.epoch());
    request.set_sweep_id(work.sweep_id());
    request.set_round_id(work.round_id());
    v1::RoundResult* result = request.mutable_result();
    result->set_outcome(outcome);
    result->mutable_precision()->set_passed(outcome !=
                                            v1::OUTCOME_PRECISION_FAILED);
    if (outcome == v1::OUTCOME_OK) {
      v1::Measurement* m = result->mutable_measurement();
      m->set_median_us(median_us);
      m->set_p20_us(median_us * 0.99);
      m->set_p80_us(median_us * 1.01);
      m->set_min_us(median_us * 0.98);
      m->set_max_us(median_us * 1.02);
      m->set_samples(5);
      m->set_warmup(1);
      m->set_simulated(true);
    } else {
      result->set_detail(absl::StrCat("test says ", v1::Outcome_Name(outcome)));
    }
    return coord()->ReportResult(request);
  }

  // A result that must be accepted as new (not a duplicate).
  void ReportOk(const v1::WorkItem& work, double median_us) {
    absl::StatusOr<v1::ReportResultResponse> r =
        Report(work, v1::OUTCOME_OK, median_us);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->accepted()) << r->reason();
    EXPECT_FALSE(r->duplicate());
  }

  // The search of sweep `id` is over and its closing check waits: leases
  // it on `board_id` (the best's params, timed against the baseline's) and
  // reports it OK but unpaired, so the lease speedup stands.
  void RunClosingCheck(const std::string& id, const std::string& board_id) {
    const v1::Sweep s = StoredSweep(id);
    ASSERT_TRUE(s.has_closing_check());
    EXPECT_EQ(s.state(), v1::SWEEP_STATE_RUNNING);
    const v1::WorkItem w = Lease(board_id);
    ASSERT_EQ(w.round_id(), s.closing_check().round_id());
    EXPECT_EQ(w.reference_round(), 0);
    EXPECT_EQ(ParamsKey(w.params()),
              ParamsKey(StoredRound(id, s.best_round()).params()));
    ReportOk(w, s.best_us());
  }

  // Leases round 0 on `board_id` and reports it OK at `median_us`.
  void RunBaseline(const std::string& board_id, double median_us = 100) {
    v1::WorkItem w = Lease(board_id);
    ASSERT_EQ(w.round_id(), 0);
    ReportOk(w, median_us);
  }

  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(
      const std::string& agent,
      const std::map<std::string, std::string>& board_leases = {}) {
    v1::HeartbeatRequest request;
    request.set_agent_id(agent);
    for (const auto& [board, lease] : board_leases) {
      v1::BoardInfo* b = request.add_boards();
      b->set_board_id(board);
      b->set_current_lease_id(lease);
    }
    return coord()->Heartbeat(request);
  }

  absl::StatusOr<v1::RenewLeaseResponse> Renew(const v1::WorkItem& work,
                                               int64_t epoch) {
    v1::RenewLeaseRequest request;
    request.set_agent_id(AgentOf(lease_board_[work.lease_id()]));
    request.set_lease_id(work.lease_id());
    request.set_epoch(epoch);
    return coord()->RenewLease(request);
  }

  void Tick() {
    absl::Status st = coord()->Tick();
    ASSERT_TRUE(st.ok()) << st;
  }

  // --- reading back the durable state --------------------------------------
  v1::Sweep StoredSweep(const std::string& id) {
    absl::StatusOr<v1::Sweep> s = store()->GetSweep(id);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : v1::Sweep();
  }
  v1::Round StoredRound(const std::string& id, int64_t round_id) {
    absl::StatusOr<v1::Round> r = store()->GetRound(id, round_id);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : v1::Round();
  }
  std::vector<v1::Round> StoredRounds(const std::string& id) {
    absl::StatusOr<std::vector<v1::Round>> r = store()->ListRounds(id);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : std::vector<v1::Round>();
  }
  std::vector<v1::SweepEvent> Events(const std::string& id) {
    absl::StatusOr<std::vector<v1::SweepEvent>> e =
        store()->ReadEvents(id, 1, 0);
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? *e : std::vector<v1::SweepEvent>();
  }
  // Events of `kind` (about round `round_id`, unless it is -1).
  int CountEvents(const std::string& id, v1::EventKind kind,
                  int64_t round_id = -1) {
    int n = 0;
    for (const v1::SweepEvent& e : Events(id)) {
      if (e.kind() != kind) continue;
      if (round_id >= 0 && (!e.has_round() || e.round().round_id() != round_id))
        continue;
      ++n;
    }
    return n;
  }
  // The message of each event of `kind` about a round, by round id (the
  // last one where a round has several).
  std::map<int64_t, std::string> MessagesByRound(const std::string& id,
                                                 v1::EventKind kind) {
    std::map<int64_t, std::string> out;
    for (const v1::SweepEvent& e : Events(id)) {
      if (e.kind() == kind && e.has_round()) {
        out[e.round().round_id()] = e.message();
      }
    }
    return out;
  }
  // The log has seq 1..N with no gap and the stored sweep points at N.
  void ExpectEventLogConsistent(const std::string& id) {
    std::vector<v1::SweepEvent> events = Events(id);
    for (size_t i = 0; i < events.size(); ++i) {
      EXPECT_EQ(events[i].seq(), static_cast<int64_t>(i + 1)) << id;
      EXPECT_EQ(events[i].sweep_id(), id);
    }
    EXPECT_EQ(StoredSweep(id).last_event_seq(),
              static_cast<int64_t>(events.size()));
  }
  v1::BoardInfo BoardNow(const std::string& board_id) {
    for (const v1::BoardInfo& b : coord()->ListBoards(v1::BoardSelector())) {
      if (b.board_id() == board_id) return b;
    }
    ADD_FAILURE() << "board " << board_id << " not listed";
    return v1::BoardInfo();
  }

  OperatorCatalog catalog_;
  FakeClock clock_;
  FakeFarmMetrics metrics_;
  CoordinatorOptions options_;
  CoordinatorOnDisk disk_;
  std::map<std::string, std::string> lease_board_;  // lease_id → board_id
};

// --- submission
// ---------------------------------------------------------------

TEST_F(CoordinatorTest, SubmitQueuesTheSweepWithItsBaselineRound) {
  std::vector<std::string> notified;
  coord()->SetEventListener(
      [&](const std::string& id) { notified.push_back(id); });

  absl::StatusOr<v1::SubmitSweepResponse> r = SubmitRaw(SpecYaml({}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->existing());
  const std::string id = r->sweep().sweep_id();
  EXPECT_EQ(id, "sw-000001");
  EXPECT_EQ(r->sweep().state(), v1::SWEEP_STATE_QUEUED);
  EXPECT_EQ(r->sweep().best_round(), -1);
  EXPECT_EQ(r->sweep().submitted_unix_ms(), clock_.NowUnixMs());
  EXPECT_THAT(notified, ElementsAre(id));
  EXPECT_EQ(coord()->active_sweeps(), 1);

  const v1::Sweep stored = StoredSweep(id);
  EXPECT_EQ(stored.state(), v1::SWEEP_STATE_QUEUED);
  EXPECT_EQ(stored.spec().operator_name(), "toy");
  EXPECT_EQ(stored.spec().budget().max_rounds(), 30);
  EXPECT_DOUBLE_EQ(stored.spec().min_gain(), 0.02);
  EXPECT_EQ(stored.spec().workload().name(), "small");  // operator's first

  const std::vector<v1::Round> rounds = StoredRounds(id);
  ASSERT_EQ(rounds.size(), 1u);
  EXPECT_EQ(rounds[0].round_id(), 0);
  EXPECT_EQ(rounds[0].state(), v1::ROUND_STATE_QUEUED);
  EXPECT_EQ(rounds[0].parent_round(), -1);
  EXPECT_EQ(rounds[0].stage(), "baseline");
  absl::StatusOr<const v1::OperatorManifest*> op = catalog_.Find("toy");
  ASSERT_TRUE(op.ok());
  EXPECT_EQ(ParamsKey(rounds[0].params()), ParamsKey(DefaultParams(**op)));

  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_SUBMITTED), 1);
  ExpectEventLogConsistent(id);
  EXPECT_EQ(metrics_.queue_depth, 1);
}

TEST_F(CoordinatorTest, SubmitRejectsBadSpecsNamingTheField) {
  absl::StatusOr<v1::SubmitSweepResponse> r = SubmitRaw("name: [unclosed\n");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);

  r = SubmitRaw(SpecYaml({.op = "no_such_op"}));
  EXPECT_THAT(r.status().code(), AnyOf(absl::StatusCode::kInvalidArgument,
                                       absl::StatusCode::kNotFound));
  EXPECT_THAT(r.status().message(), HasSubstr("operator"));
  EXPECT_THAT(r.status().message(), HasSubstr("no_such_op"));

  r = SubmitRaw(SpecYaml({.budget = "{max_rounds: ten}"}));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("budget.max_rounds"));

  r = SubmitRaw(SpecYaml({.boards = "{kind: cuda}"}));  // toy has no cuda
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("boards"));

  v1::SubmitSweepRequest long_key;
  long_key.set_spec_yaml(SpecYaml({}));
  long_key.set_idempotency_key(std::string(129, 'k'));
  r = coord()->SubmitSweep(long_key, AnonymousAdmin());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("idempotency_key"));

  // Nothing was stored and no sweep number was spent.
  absl::StatusOr<std::vector<v1::Sweep>> sweeps = store()->ListSweeps();
  ASSERT_TRUE(sweeps.ok());
  EXPECT_THAT(*sweeps, IsEmpty());
  EXPECT_EQ(coord()->active_sweeps(), 0);
  EXPECT_EQ(Submit(SpecYaml({})), "sw-000001");
}

TEST_F(CoordinatorTest, IdempotencyKeyReturnsTheExistingSweep) {
  absl::StatusOr<v1::SubmitSweepResponse> first =
      SubmitRaw(SpecYaml({}), "key-1");
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string id = first->sweep().sweep_id();
  const int64_t events_before = Events(id).size();

  absl::StatusOr<v1::SubmitSweepResponse> again =
      SubmitRaw(SpecYaml({}), "key-1");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->existing());
  EXPECT_EQ(again->sweep().sweep_id(), id);
  absl::StatusOr<std::vector<v1::Sweep>> sweeps = store()->ListSweeps();
  ASSERT_TRUE(sweeps.ok());
  EXPECT_EQ(sweeps->size(), 1u);
  EXPECT_EQ(static_cast<int64_t>(Events(id).size()), events_before);
  EXPECT_EQ(StoredRounds(id).size(), 1u);
  EXPECT_EQ(coord()->active_sweeps(), 1);

  absl::StatusOr<v1::SubmitSweepResponse> other =
      SubmitRaw(SpecYaml({.goal = "{speedup: 50}"}), "key-1");
  EXPECT_EQ(other.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(other.status().message(), HasSubstr("key-1"));
  EXPECT_THAT(other.status().message(), HasSubstr(id));

  // The key is durable: a restarted coordinator still honours it.
  Restart();
  again = SubmitRaw(SpecYaml({}), "key-1");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->existing());
  EXPECT_EQ(again->sweep().sweep_id(), id);

  // A different key is a different sweep.
  absl::StatusOr<v1::SubmitSweepResponse> fresh =
      SubmitRaw(SpecYaml({}), "key-2");
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_FALSE(fresh->existing());
  EXPECT_EQ(fresh->sweep().sweep_id(), "sw-000002");
}

// --- leases
// -------------------------------------------------------------------

TEST_F(CoordinatorTest, LeaseNeedsARegisteredAgentAndItsOwnBoard) {
  const std::string id = Submit(SpecYaml({}));
  absl::StatusOr<v1::LeaseWorkResponse> r = LeaseRaw("ghost/b0");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("ghost"));

  Register("a1", {Board("a1/b0")});
  Register("a2", {Board("a2/b0")});
  v1::LeaseWorkRequest foreign;
  foreign.set_agent_id("a1");
  foreign.set_board_id("a2/b0");
  r = coord()->LeaseWork(foreign);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("a2/b0"));

  foreign.set_board_id("a1/nope");
  r = coord()->LeaseWork(foreign);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);

  // Another agent cannot take over a board whose agent is alive.
  v1::RegisterAgentRequest steal;
  steal.set_agent_id("a3");
  *steal.add_boards() = Board("a1/b0");
  EXPECT_EQ(coord()->RegisterAgent(steal).status().code(),
            absl::StatusCode::kAlreadyExists);

  EXPECT_EQ(StoredRound(id, 0).state(), v1::ROUND_STATE_QUEUED);
}

TEST_F(CoordinatorTest, BaselineRunsFirstThenEveryBoardGetsADistinctCandidate) {
  const std::string id = Submit(SpecYaml({}));
  Register("a1",
           {Board("a1/b0"), Board("a1/b1"), Board("a1/b2"), Board("a1/b3")});

  const v1::WorkItem base = Lease("a1/b0");
  EXPECT_EQ(base.sweep_id(), id);
  EXPECT_EQ(base.round_id(), 0);
  EXPECT_EQ(base.epoch(), 1);
  EXPECT_EQ(base.lease_id(), absl::StrCat(id, "/0/1"));
  EXPECT_EQ(base.operator_().name(), "toy");
  EXPECT_EQ(base.workload().name(), "small");
  EXPECT_EQ(base.measurement().samples(), 5);
  EXPECT_EQ(base.lease_expires_unix_ms(), clock_.NowUnixMs() + 10000);

  // Candidates need the baseline's number: nothing else to run yet.
  ExpectNoWork("a1/b1");

  const v1::Round leased = StoredRound(id, 0);
  EXPECT_EQ(leased.state(), v1::ROUND_STATE_LEASED);
  EXPECT_EQ(leased.lease().board_id(), "a1/b0");
  EXPECT_EQ(leased.lease().agent_id(), "a1");
  EXPECT_EQ(leased.attempts(), 1);
  const v1::Sweep running = StoredSweep(id);
  EXPECT_EQ(running.state(), v1::SWEEP_STATE_RUNNING);
  EXPECT_EQ(running.started_unix_ms(), clock_.NowUnixMs());
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_STARTED), 1);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_ROUND_LEASED, 0), 1);
  EXPECT_EQ(BoardNow("a1/b0").state(), v1::BOARD_STATE_BUSY);
  EXPECT_EQ(BoardNow("a1/b0").current_lease_id(), base.lease_id());

  ReportOk(base, 100);
  const v1::Sweep after_base = StoredSweep(id);
  EXPECT_DOUBLE_EQ(after_base.baseline_us(), 100);
  EXPECT_EQ(after_base.best_round(), 0);
  EXPECT_EQ(StoredRound(id, 0).decision(), v1::DECISION_BASELINE);

  std::set<std::string> keys = {ParamsKey(StoredRound(id, 0).params())};
  std::set<int64_t> round_ids;
  for (const std::string board : {"a1/b1", "a1/b2", "a1/b3", "a1/b0"}) {
    const v1::WorkItem w = Lease(board);
    round_ids.insert(w.round_id());
    keys.insert(ParamsKey(w.params()));
    const v1::Round r = StoredRound(id, w.round_id());
    EXPECT_EQ(r.state(), v1::ROUND_STATE_LEASED);
    EXPECT_EQ(r.parent_round(), 0);
    EXPECT_FALSE(r.changes().empty());
    EXPECT_EQ(r.lease().board_id(), board);
    EXPECT_EQ(ParamsKey(r.params()), ParamsKey(w.params()));
  }
  EXPECT_THAT(round_ids, ElementsAre(1, 2, 3, 4));
  EXPECT_EQ(keys.size(), 5u);  // baseline + 4 distinct candidates
  EXPECT_EQ(metrics_.leases_granted, 5);
  EXPECT_EQ(StoredSweep(id).candidates_proposed(), 4);
  ExpectEventLogConsistent(id);
}

// Board states go to the metrics from the tick, once per tick when a board
// changed, never from a lease or a result: publishing is O(boards), and a
// farm of a thousand boards makes thousands of those calls a second. Each
// publish hands over only the boards that moved since the last.
TEST_F(CoordinatorTest, BoardStatesReachTheMetricsOncePerTickNotPerCall) {
  Submit(SpecYaml({}));
  Register("a1", {Board("a1/b0"), Board("a1/b1")});
  Tick();
  const int published = metrics_.board_state_publishes;
  EXPECT_EQ(metrics_.board_states["a1/b0"], v1::BOARD_STATE_IDLE);
  EXPECT_EQ(metrics_.board_states["a1/b1"], v1::BOARD_STATE_IDLE);
  EXPECT_EQ(metrics_.boards_by_state["idle"], 2);

  ReportOk(Lease("a1/b0"), 100);
  const v1::WorkItem w1 = Lease("a1/b0");
  const v1::WorkItem w2 = Lease("a1/b1");
  ReportOk(w2, 90);
  Lease("a1/b1");
  EXPECT_EQ(metrics_.board_state_publishes, published)
      << "board states published by a lease or a result";

  Tick();
  EXPECT_EQ(metrics_.board_state_publishes, published + 1);
  EXPECT_EQ(metrics_.board_states["a1/b0"], v1::BOARD_STATE_BUSY);
  EXPECT_EQ(metrics_.board_states["a1/b1"], v1::BOARD_STATE_BUSY);
  EXPECT_EQ(metrics_.boards_by_state["busy"], 2);
  Tick();  // nothing changed since
  EXPECT_EQ(metrics_.board_state_publishes, published + 1);
  ReportOk(w1, 95);  // b0 is free again; b1 still runs
  Tick();
  EXPECT_EQ(metrics_.board_state_publishes, published + 2);
  EXPECT_EQ(metrics_.last_board_states, 1u);
  EXPECT_EQ(metrics_.board_states["a1/b0"], v1::BOARD_STATE_IDLE);
  EXPECT_EQ(metrics_.board_states["a1/b1"], v1::BOARD_STATE_BUSY);
}

TEST_F(CoordinatorTest, LeaseRespectsTheBoardSelector) {
  const std::string id = Submit(
      SpecYaml({.boards = "{kind: sim, chip: chip-x, labels: {pool: blue}}"}));
  Register("a1", {Board("a1/cpu", "cpu", "chip-x", {{"pool", "blue"}}),
                  Board("a1/chip", "sim", "chip-y", {{"pool", "blue"}}),
                  Board("a1/nolabel", "sim", "chip-x"),
                  Board("a1/red", "sim", "chip-x", {{"pool", "red"}}),
                  Board("a1/good", "sim", "chip-x",
                        {{"pool", "blue"}, {"zone", "z1"}})});
  for (const std::string board :
       {"a1/cpu", "a1/chip", "a1/nolabel", "a1/red"}) {
    ExpectNoWork(board);
  }
  EXPECT_EQ(StoredRound(id, 0).state(), v1::ROUND_STATE_QUEUED);
  const v1::WorkItem w = Lease("a1/good");
  EXPECT_EQ(w.round_id(), 0);

  v1::BoardSelector selector = StoredSweep(id).spec().boards();
  std::vector<v1::BoardInfo> listed = coord()->ListBoards(selector);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].board_id(), "a1/good");
  EXPECT_EQ(coord()->ListBoards(v1::BoardSelector()).size(), 5u);
}

TEST_F(CoordinatorTest, ExpiredLeaseIsRequeuedAndItsEpochFenced) {
  const std::string id = Submit(SpecYaml({}));
  Register("a1", {Board("a1/b0"), Board("a1/b1")});
  RunBaseline("a1/b0");

  const v1::WorkItem w1 = Lease("a1/b0");
  ASSERT_EQ(w1.round_id(), 1);
  ASSERT_EQ(w1.epoch(), 1);

  clock_.Advance(absl::Seconds(5));
  Tick();
  EXPECT_EQ(StoredRound(id, 1).state(), v1::ROUND_STATE_LEASED);

  clock_.Advance(absl::Seconds(6));  // 11 s > the 10 s lease
  Tick();
  EXPECT_EQ(StoredRound(id, 1).state(), v1::ROUND_STATE_QUEUED);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_ROUND_REQUEUED, 1), 1);
  EXPECT_EQ(metrics_.leases_expired, 1);
  EXPECT_EQ(BoardNow("a1/b0").state(), v1::BOARD_STATE_IDLE);
  EXPECT_EQ(BoardNow("a1/b0").current_lease_id(), "");

  // The agent still holding it is told to stop.
  absl::StatusOr<v1::HeartbeatResponse> hb =
      Heartbeat("a1", {{"a1/b0", w1.lease_id()}});
  ASSERT_TRUE(hb.ok()) << hb.status();
  EXPECT_THAT(hb->revoked_lease_ids(), ElementsAre(w1.lease_id()));

  // A late result of the expired epoch is refused.
  absl::StatusOr<v1::ReportResultResponse> late =
      Report(w1, v1::OUTCOME_OK, 90);
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_FALSE(late->accepted());
  EXPECT_THAT(late->reason(), HasSubstr("stale"));

  // The same round goes out again with the next epoch.
  const v1::WorkItem w2 = Lease("a1/b1");
  EXPECT_EQ(w2.round_id(), 1);
  EXPECT_EQ(w2.epoch(), 2);
  EXPECT_EQ(w2.lease_id(), absl::StrCat(id, "/1/2"));
  EXPECT_EQ(ParamsKey(w2.params()), ParamsKey(w1.params()));
  late = Report(w1, v1::OUTCOME_OK, 90);
  ASSERT_TRUE(late.ok());
  EXPECT_FALSE(late->accepted());

  ReportOk(w2, 97);
  absl::StatusOr<v1::ReportResultResponse> dup = Report(w2, v1::OUTCOME_OK, 97);
  ASSERT_TRUE(dup.ok()) << dup.status();
  EXPECT_TRUE(dup->accepted());
  EXPECT_TRUE(dup->duplicate());
  // A retry with a different number is still the recorded duplicate.
  dup = Report(w2, v1::OUTCOME_OK, 50);
  ASSERT_TRUE(dup.ok());
  EXPECT_TRUE(dup->duplicate());

  const v1::Round done = StoredRound(id, 1);
  EXPECT_EQ(done.state(), v1::ROUND_STATE_DONE);
  EXPECT_EQ(done.attempts(), 2);
  EXPECT_EQ(done.lease().epoch(), 2);
  EXPECT_EQ(done.board_id(), "a1/b1");
  EXPECT_DOUBLE_EQ(done.result().measurement().median_us(), 97);
  EXPECT_EQ(done.decision(), v1::DECISION_KEPT);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_ROUND_FINISHED, 1), 1);
  EXPECT_EQ(StoredSweep(id).rounds_finished(), 1);
  EXPECT_EQ(metrics_.rounds_recorded["OUTCOME_OK"], 2);  // baseline + once
  absl::StatusOr<std::vector<v1::Measurement>> ms =
      store()->ListMeasurements(id, 1);
  ASSERT_TRUE(ms.ok()) << ms.status();
  ASSERT_EQ(ms->size(), 1u);
  EXPECT_DOUBLE_EQ((*ms)[0].median_us(), 97);
  ExpectEventLogConsistent(id);
}

TEST_F(CoordinatorTest, RenewLeaseExtendsTheExpiry) {
  const std::string id = Submit(SpecYaml({}));
  Register("a1", {Board("a1/b0")});
  const v1::WorkItem w = Lease("a1/b0");

  clock_.Advance(absl::Seconds(8));
  absl::StatusOr<v1::RenewLeaseResponse> renewed = Renew(w, w.epoch());
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  EXPECT_TRUE(renewed->valid());
  EXPECT_EQ(renewed->expires_unix_ms(), clock_.NowUnixMs() + 10000);

  clock_.Advance(absl::Seconds(8));  // 16 s after the grant, 8 after renewal
  Tick();
  EXPECT_EQ(StoredRound(id, 0).state(), v1::ROUND_STATE_LEASED);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_ROUND_REQUEUED), 0);

  absl::StatusOr<v1::RenewLeaseResponse> wrong_epoch = Renew(w, w.epoch() + 1);
  ASSERT_TRUE(wrong_epoch.ok()) << wrong_epoch.status();
  EXPECT_FALSE(wrong_epoch->valid());

  v1::RenewLeaseRequest malformed;
  malformed.set_agent_id("a1");
  malformed.set_lease_id("garbage");
  EXPECT_EQ(coord()->RenewLease(malformed).status().code(),
            absl::StatusCode::kInvalidArgument);

  clock_.Advance(absl::Seconds(3));  // past the renewed expiry
  Tick();
  EXPECT_EQ(StoredRound(id, 0).state(), v1::ROUND_STATE_QUEUED);
  renewed = Renew(w, w.epoch());
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  EXPECT_FALSE(renewed->valid());
  absl::StatusOr<v1::ReportResultResponse> late =
      Report(w, v1::OUTCOME_OK, 100);
  ASSERT_TRUE(late.ok());
  EXPECT_FALSE(late->accepted());
}

TEST_F(CoordinatorTest,
       HigherPrioritySweepsGetBoardsFirstAndIdleBoardsServeOthers) {
  const std::string low = Submit(SpecYaml({.name = "low"}));
  const std::string high = Submit(SpecYaml({.name = "high", .priority = 10}));
  Register("a1", {Board("a1/b0"), Board("a1/b1"), Board("a1/b2")});
  const v1::WorkItem first = Lease("a1/b0");
  EXPECT_EQ(first.sweep_id(), high);
  // The high sweep has nothing more until its baseline is in: b1 serves low.
  const v1::WorkItem second = Lease("a1/b1");
  EXPECT_EQ(second.sweep_id(), low);
  EXPECT_EQ(second.round_id(), 0);
  ExpectNoWork("a1/b2");
  ReportOk(first, 100);
  const v1::WorkItem third = Lease("a1/b2");
  EXPECT_EQ(third.sweep_id(), high);
  EXPECT_EQ(third.round_id(), 1);
}

TEST_F(CoordinatorTest, AskingForWorkWhileHoldingALeaseGivesThatLeaseUp) {
  const std::string id = Submit(SpecYaml({}));
  Register("a1", {Board("a1/b0")});
  const v1::WorkItem w1 = Lease("a1/b0");
  const v1::WorkItem w2 = Lease("a1/b0");
  EXPECT_EQ(w2.round_id(), 0);
  EXPECT_EQ(w2.epoch(), 2);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_ROUND_REQUEUED, 0), 1);
  absl::StatusOr<v1::ReportResultResponse> stale =
      Report(w1, v1::OUTCOME_OK, 100);
  ASSERT_TRUE(stale.ok());
  EXPECT_FALSE(stale->accepted());
  ReportOk(w2, 100);
}

TEST_F(CoordinatorTest, ReRegisteringWithoutTheLeaseRequeuesTheRound) {
  const std::string id = Submit(SpecYaml({}));
  Register("a1", {Board("a1/b0")});
  const v1::WorkItem w = Lease("a1/b0");
  Register("a1", {Board("a1/b0")});  // agent restarted, lost its work
  EXPECT_EQ(StoredRound(id, 0).state(), v1::ROUND_STATE_QUEUED);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_ROUND_REQUEUED, 0), 1);
  EXPECT_EQ(BoardNow("a1/b0").state(), v1::BOARD_STATE_IDLE);

  // Re-registering while still claiming the lease keeps it.
  const v1::WorkItem again = Lease("a1/b0");
  v1::BoardInfo busy = Board("a1/b0");
  busy.set_current_lease_id(again.lease_id());
  Register("a1", {busy});
  EXPECT_EQ(StoredRound(id, 0).state(), v1::ROUND_STATE_LEASED);
  EXPECT_EQ(BoardNow("a1/b0").state(), v1::BOARD_STATE_BUSY);
  ReportOk(again, 100);
  (void)w;
}

TEST_F(CoordinatorTest, ResultWithoutOutcomeIsRefused) {
  Submit(SpecYaml({}));
  Register("a1", {Board("a1/b0")});
  const v1::WorkItem w = Lease("a1/b0");
  absl::StatusOr<v1::ReportResultResponse> r =
      Report(w, v1::OUTCOME_UNSPECIFIED);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("outcome"));
  ReportOk(w, 100);
}

// --- agents
// -------------------------------------------------------------------

TEST_F(CoordinatorTest, SilentAgentLosesItsBoardsAndItsLeasedRound) {
  options_.agent_timeout = absl::Seconds(5);  // shorter than the lease
  Restart();
  const std::string id = Submit(SpecYaml({}));
  Register("a1", {Board("a1/b0"), Board("a1/b1")});
  Register("a2", {Board("a2/b0")});
  const v1::WorkItem w = Lease("a1/b0");

  clock_.Advance(absl::Seconds(3));
  ASSERT_TRUE(Heartbeat("a2").ok());
  Tick();
  EXPECT_EQ(BoardNow("a1/b0").state(), v1::BOARD_STATE_BUSY);

  clock_.Advance(absl::Seconds(3));  // a1 silent 6 s, a2 3 s
  Tick();
  for (const std::string board : {"a1/b0", "a1/b1"}) {
    const v1::BoardInfo b = BoardNow(board);
    EXPECT_EQ(b.state(), v1::BOARD_STATE_LOST) << board;
    EXPECT_THAT(b.health_detail(), HasSubstr("silent"));
    EXPECT_EQ(b.current_lease_id(), "");
  }
  EXPECT_EQ(BoardNow("a2/b0").state(), v1::BOARD_STATE_IDLE);
  absl::StatusOr<std::vector<v1::BoardInfo>> stored = store()->ListBoards();
  ASSERT_TRUE(stored.ok()) << stored.status();
  for (const v1::BoardInfo& b : *stored) {
    EXPECT_EQ(b.state(), AgentOf(b.board_id()) == "a1" ? v1::BOARD_STATE_LOST
                                                       : v1::BOARD_STATE_IDLE)
        << b.board_id();
  }
  EXPECT_EQ(metrics_.boards_by_state["lost"], 2);
  EXPECT_EQ(StoredRound(id, 0).state(), v1::ROUND_STATE_QUEUED);
  ASSERT_EQ(CountEvents(id, v1::EVENT_KIND_ROUND_REQUEUED, 0), 1);

  absl::StatusOr<v1::HeartbeatResponse> hb = Heartbeat("a1");
  EXPECT_EQ(hb.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(LeaseRaw("a1/b1").status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<v1::ReportResultResponse> late =
      Report(w, v1::OUTCOME_OK, 100);
  ASSERT_TRUE(late.ok());
  EXPECT_FALSE(late->accepted());

  // Registering again brings the boards back; the round runs again.
  Register("a1", {Board("a1/b0"), Board("a1/b1")});
  EXPECT_EQ(BoardNow("a1/b0").state(), v1::BOARD_STATE_IDLE);
  EXPECT_TRUE(Heartbeat("a1").ok());
  const v1::WorkItem again = Lease("a1/b1");
  EXPECT_EQ(again.round_id(), 0);
  EXPECT_EQ(again.epoch(), 2);
  ReportOk(again, 100);
  EXPECT_EQ(StoredRound(id, 0).state(), v1::ROUND_STATE_DONE);
}

TEST_F(CoordinatorTest, BoardLostOutcomeRequeuesWithoutJudging) {
  const std::string id = Submit(SpecYaml({}));
  Register("a1", {Board("a1/b0"), Board("a1/b1")});
  RunBaseline("a1/b0");
  const v1::WorkItem w = Lease("a1/b0");
  ASSERT_EQ(w.round_id(), 1);

  absl::StatusOr<v1::ReportResultResponse> r =
      Report(w, v1::OUTCOME_BOARD_LOST);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->accepted());

  const v1::Round round = StoredRound(id, 1);
  EXPECT_EQ(round.state(), v1::ROUND_STATE_QUEUED);
  EXPECT_EQ(round.decision(), v1::DECISION_UNSPECIFIED);
  EXPECT_EQ(round.result().outcome(), v1::OUTCOME_UNSPECIFIED);
  const v1::Sweep sweep = StoredSweep(id);
  EXPECT_EQ(sweep.rounds_finished(), 0);
  EXPECT_EQ(sweep.rounds_without_gain(), 0);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_ROUND_FINISHED, 1), 0);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_ROUND_REQUEUED, 1), 1);
  EXPECT_EQ(BoardNow("a1/b0").state(), v1::BOARD_STATE_IDLE);

  // The same variant runs again (elsewhere), not a new candidate.
  const v1::WorkItem again = Lease("a1/b1");
  EXPECT_EQ(again.round_id(), 1);
  EXPECT_EQ(again.epoch(), 2);
  ReportOk(again, 99);
  EXPECT_EQ(StoredRound(id, 1).decision(), v1::DECISION_ROLLED_BACK);
  EXPECT_EQ(StoredSweep(id).rounds_finished(), 1);
}

// --- decisions
// ----------------------------------------------------------------

TEST_F(CoordinatorTest, KeepsRollsBackAndRejects) {
  const std::string id = Submit(SpecYaml({}));  // min_gain 0.02
  Register("a1", {Board("a1/b0"), Board("a1/b1"), Board("a1/b2"),
                  Board("a1/b3"), Board("a1/b4")});
  RunBaseline("a1/b0", 100);
  std::vector<v1::WorkItem> w;
  for (const std::string board :
       {"a1/b0", "a1/b1", "a1/b2", "a1/b3", "a1/b4"}) {
    w.push_back(Lease(board));
    EXPECT_EQ(StoredRound(id, w.back().round_id()).parent_round(), 0);
  }

  ReportOk(w[0], 97);  // needs <= 98
  v1::Round r = StoredRound(id, w[0].round_id());
  EXPECT_EQ(r.decision(), v1::DECISION_KEPT);
  EXPECT_DOUBLE_EQ(r.parent_us(), 100);
  v1::Sweep s = StoredSweep(id);
  EXPECT_EQ(s.best_round(), w[0].round_id());
  EXPECT_DOUBLE_EQ(s.best_us(), 97);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_BEST_IMPROVED, w[0].round_id()), 1);

  ReportOk(w[1], 99);
  r = StoredRound(id, w[1].round_id());
  EXPECT_EQ(r.decision(), v1::DECISION_ROLLED_BACK);
  EXPECT_THAT(r.decision_reason(), HasSubstr("98.0"));

  ReportOk(w[2], 97.5);  // beats its parent by 2.5% but not the best (97)
  r = StoredRound(id, w[2].round_id());
  EXPECT_EQ(r.decision(), v1::DECISION_ROLLED_BACK);
  EXPECT_THAT(r.decision_reason(), HasSubstr("current best"));

  absl::StatusOr<v1::ReportResultResponse> resp =
      Report(w[3], v1::OUTCOME_PRECISION_FAILED);
  ASSERT_TRUE(resp.ok());
  EXPECT_TRUE(resp->accepted());
  r = StoredRound(id, w[3].round_id());
  EXPECT_EQ(r.state(), v1::ROUND_STATE_DONE);
  EXPECT_EQ(r.decision(), v1::DECISION_REJECTED);
  EXPECT_THAT(r.decision_reason(), HasSubstr("PRECISION_FAILED"));

  resp = Report(w[4], v1::OUTCOME_BUILD_FAILED);
  ASSERT_TRUE(resp.ok());
  EXPECT_EQ(StoredRound(id, w[4].round_id()).decision(), v1::DECISION_REJECTED);

  s = StoredSweep(id);
  EXPECT_EQ(s.state(), v1::SWEEP_STATE_RUNNING);
  EXPECT_EQ(s.best_round(), w[0].round_id());
  EXPECT_DOUBLE_EQ(s.best_us(), 97);
  EXPECT_EQ(s.rounds_finished(), 5);
  EXPECT_EQ(s.rounds_without_gain(), 4);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_BEST_IMPROVED), 1);

  // New candidates now start from the new best.
  const v1::WorkItem next = Lease("a1/b0");
  EXPECT_EQ(StoredRound(id, next.round_id()).parent_round(), w[0].round_id());
  ExpectEventLogConsistent(id);
}

TEST_F(CoordinatorTest, FailedBaselineFailsTheSweep) {
  const std::string id = Submit(SpecYaml({}));
  Register("a1", {Board("a1/b0"), Board("a1/b1")});
  const v1::WorkItem w = Lease("a1/b0");
  absl::StatusOr<v1::ReportResultResponse> r =
      Report(w, v1::OUTCOME_PRECISION_FAILED);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->accepted());

  const v1::Sweep s = StoredSweep(id);
  EXPECT_EQ(s.state(), v1::SWEEP_STATE_FAILED);
  EXPECT_EQ(s.termination(), v1::TERMINATION_BASELINE_FAILED);
  EXPECT_THAT(s.termination_detail(), HasSubstr("PRECISION_FAILED"));
  EXPECT_EQ(s.best_round(), -1);
  EXPECT_EQ(StoredRound(id, 0).decision(), v1::DECISION_BASELINE);
  EXPECT_EQ(coord()->active_sweeps(), 0);
  ExpectNoWork("a1/b1");
  EXPECT_TRUE(ReadFile(s.report_path()).ok()) << s.report_path();
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_FINISHED), 1);
}

// The hybrid's start-up draws need no measured baseline: the boards left
// free while the baseline runs get them (parent the baseline, a change list,
// stage "explore", a rationale that says so), and a result that comes in
// before the baseline's waits, undecided, until the baseline judges it. A
// failure needs no parent to be rejected. The waiting result survives a
// restart.
TEST_F(CoordinatorTest, HybridProposesToFreeBoardsWhileTheBaselineRuns) {
  const std::string id =
      Submit(SpecYaml({.strategy = "{name: hybrid, seed: 3}"}));
  Register("a1",
           {Board("a1/b0"), Board("a1/b1"), Board("a1/b2"), Board("a1/b3")});
  const v1::WorkItem base = Lease("a1/b0");
  ASSERT_EQ(base.round_id(), 0);
  std::map<int64_t, v1::WorkItem> early;
  for (const std::string board : {"a1/b1", "a1/b2", "a1/b3"}) {
    const v1::WorkItem w = Lease(board);
    early[w.round_id()] = w;
    const v1::Round r = StoredRound(id, w.round_id());
    EXPECT_EQ(r.state(), v1::ROUND_STATE_LEASED);
    EXPECT_EQ(r.parent_round(), 0);
    EXPECT_FALSE(r.changes().empty());
    EXPECT_EQ(r.stage(), "explore");
    EXPECT_THAT(r.rationale(), HasSubstr("while the baseline runs"));
    EXPECT_EQ(StoredRound(id, 0).state(), v1::ROUND_STATE_LEASED);
  }
  ASSERT_EQ(early.size(), 3u);
  EXPECT_EQ(early.begin()->first, 1);

  // Round 1 is faster than the baseline will be, and in before it.
  ReportOk(early[1], 80);
  v1::Round waiting = StoredRound(id, 1);
  EXPECT_EQ(waiting.state(), v1::ROUND_STATE_DONE);
  EXPECT_EQ(waiting.decision(), v1::DECISION_UNSPECIFIED);
  EXPECT_THAT(waiting.decision_reason(), HasSubstr("needs round 0"));
  EXPECT_EQ(StoredSweep(id).best_round(), -1);
  EXPECT_EQ(StoredSweep(id).rounds_finished(), 0);
  // Its board is free, and gets another draw while the baseline runs.
  const v1::WorkItem next = Lease("a1/b1");
  EXPECT_EQ(next.round_id(), 4);
  EXPECT_EQ(StoredRound(id, 4).parent_round(), 0);
  // A failure is rejected at once.
  ASSERT_TRUE(Report(early[2], v1::OUTCOME_BUILD_FAILED).ok());
  EXPECT_EQ(StoredRound(id, 2).decision(), v1::DECISION_REJECTED);

  const std::map<std::string, std::string> boards = lease_board_;
  ASSERT_NO_FATAL_FAILURE(Restart());
  lease_board_ = boards;
  ReportOk(base, 100);
  const v1::Sweep after = StoredSweep(id);
  EXPECT_DOUBLE_EQ(after.baseline_us(), 100);
  const v1::Round judged = StoredRound(id, 1);
  EXPECT_EQ(judged.decision(), v1::DECISION_KEPT) << judged.decision_reason();
  EXPECT_DOUBLE_EQ(judged.parent_us(), 100);
  EXPECT_EQ(after.best_round(), 1);
  EXPECT_DOUBLE_EQ(after.best_us(), 80);
  EXPECT_EQ(after.rounds_finished(), 2);  // rounds 1 and 2
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_BEST_IMPROVED, 1), 1);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_ROUND_FINISHED, 1), 2);

  // A round in flight when the baseline came in is judged as usual.
  ReportOk(early[3], 90);
  EXPECT_EQ(StoredRound(id, 3).decision(), v1::DECISION_ROLLED_BACK);
  ExpectEventLogConsistent(id);
}

// When the baseline fails, the sweep fails; what was leased is cancelled,
// and a result that waited for the baseline stays unjudged and says why.
TEST_F(CoordinatorTest, AFailedBaselineLeavesTheResultsThatWaitedUnjudged) {
  const std::string id =
      Submit(SpecYaml({.strategy = "{name: hybrid, seed: 3}"}));
  Register("a1", {Board("a1/b0"), Board("a1/b1"), Board("a1/b2")});
  const v1::WorkItem base = Lease("a1/b0");
  const v1::WorkItem one = Lease("a1/b1");
  const v1::WorkItem two = Lease("a1/b2");
  ASSERT_EQ(one.round_id(), 1);
  ASSERT_EQ(two.round_id(), 2);
  ReportOk(one, 80);
  ASSERT_TRUE(Report(base, v1::OUTCOME_PRECISION_FAILED).ok());
  const v1::Sweep s = StoredSweep(id);
  EXPECT_EQ(s.state(), v1::SWEEP_STATE_FAILED);
  EXPECT_EQ(s.termination(), v1::TERMINATION_BASELINE_FAILED);
  const v1::Round r1 = StoredRound(id, 1);
  EXPECT_EQ(r1.decision(), v1::DECISION_UNSPECIFIED);
  EXPECT_THAT(r1.decision_reason(), HasSubstr("not judged"));
  EXPECT_EQ(StoredRound(id, 2).state(), v1::ROUND_STATE_CANCELLED);
  EXPECT_EQ(BoardNow("a1/b2").current_lease_id(), "");
}

// --- termination
// --------------------------------------------------------------

TEST_F(CoordinatorTest, GoalReachedEndsTheSweepAndCancelsInFlightRounds) {
  const std::string id = Submit(SpecYaml({.goal = "{speedup: 1.25}"}));
  Register("a1", {Board("a1/b0"), Board("a1/b1"), Board("a1/b2")});
  RunBaseline("a1/b0", 100);
  const v1::WorkItem r1 = Lease("a1/b0");
  const v1::WorkItem r2 = Lease("a1/b1");
  const v1::WorkItem r3 = Lease("a1/b2");

  ReportOk(r1, 79);  // 1.27x
  RunClosingCheck(id, "a1/b0");
  const v1::Sweep s = StoredSweep(id);
  EXPECT_EQ(s.state(), v1::SWEEP_STATE_SUCCEEDED);
  EXPECT_EQ(s.termination(), v1::TERMINATION_GOAL_REACHED);
  EXPECT_EQ(s.best_round(), r1.round_id());
  EXPECT_GT(s.finished_unix_ms(), 0);
  for (const v1::WorkItem* w : {&r2, &r3}) {
    const v1::Round r = StoredRound(id, w->round_id());
    EXPECT_EQ(r.state(), v1::ROUND_STATE_CANCELLED);
    EXPECT_THAT(r.decision_reason(), HasSubstr("not run"));
  }
  EXPECT_EQ(coord()->active_sweeps(), 0);

  // Late results of the cancelled rounds are discarded.
  absl::StatusOr<v1::ReportResultResponse> late =
      Report(r2, v1::OUTCOME_OK, 50);
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_FALSE(late->accepted());
  EXPECT_FALSE(late->duplicate());
  EXPECT_EQ(StoredRound(id, r2.round_id()).state(), v1::ROUND_STATE_CANCELLED);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_ROUND_FINISHED, r2.round_id()), 0);
  EXPECT_EQ(StoredSweep(id).best_round(), r1.round_id());

  // The boards are free and there is nothing left to do.
  EXPECT_EQ(BoardNow("a1/b1").state(), v1::BOARD_STATE_IDLE);
  EXPECT_EQ(BoardNow("a1/b2").current_lease_id(), "");
  ExpectNoWork("a1/b1");

  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_FINISHED), 1);
  EXPECT_EQ(s.report_path(), options_.report_dir + "/" + id + ".md");
  absl::StatusOr<std::string> report = ReadFile(s.report_path());
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(*report, HasSubstr(id));
  ExpectEventLogConsistent(id);
}

TEST_F(CoordinatorTest, TargetLatencyReachedEndsTheSweep) {
  const std::string id = Submit(SpecYaml({.goal = "{target_us: 80}"}));
  Register("a1", {Board("a1/b0")});
  RunBaseline("a1/b0", 100);
  ReportOk(Lease("a1/b0"), 85);
  EXPECT_EQ(StoredSweep(id).state(), v1::SWEEP_STATE_RUNNING);
  ReportOk(Lease("a1/b0"), 79.5);
  RunClosingCheck(id, "a1/b0");
  EXPECT_EQ(StoredSweep(id).termination(), v1::TERMINATION_GOAL_REACHED);
}

TEST_F(CoordinatorTest, RoundBudgetEndsTheSweep) {
  const std::string id = Submit(
      SpecYaml({.budget = "{max_rounds: 3, max_rounds_without_gain: 30}"}));
  Register("a1",
           {Board("a1/b0"), Board("a1/b1"), Board("a1/b2"), Board("a1/b3")});
  RunBaseline("a1/b0", 100);
  std::vector<v1::WorkItem> w = {Lease("a1/b0"), Lease("a1/b1"),
                                 Lease("a1/b2")};
  ExpectNoWork("a1/b3");  // the budget counts rounds in flight too

  ReportOk(w[0], 100);
  ReportOk(w[1], 100);
  EXPECT_EQ(StoredSweep(id).state(), v1::SWEEP_STATE_RUNNING);
  ReportOk(w[2], 100);
  const v1::Sweep s = StoredSweep(id);
  EXPECT_EQ(s.state(), v1::SWEEP_STATE_SUCCEEDED);
  EXPECT_EQ(s.termination(), v1::TERMINATION_ROUND_BUDGET);
  EXPECT_EQ(s.rounds_finished(), 3);
  EXPECT_EQ(StoredRounds(id).size(), 4u);
}

TEST_F(CoordinatorTest, RoundsWithoutGainEndTheSweep) {
  const std::string id = Submit(
      SpecYaml({.budget = "{max_rounds: 30, max_rounds_without_gain: 2}"}));
  Register("a1", {Board("a1/b0")});
  RunBaseline("a1/b0", 100);
  ReportOk(Lease("a1/b0"), 99);  // rolled back: 1 without gain
  EXPECT_EQ(StoredSweep(id).rounds_without_gain(), 1);
  ReportOk(Lease("a1/b0"), 90);  // kept: the count starts again
  EXPECT_EQ(StoredSweep(id).rounds_without_gain(), 0);
  ReportOk(Lease("a1/b0"), 99);
  EXPECT_EQ(StoredSweep(id).state(), v1::SWEEP_STATE_RUNNING);
  ReportOk(Lease("a1/b0"), 99);
  RunClosingCheck(id, "a1/b0");
  const v1::Sweep s = StoredSweep(id);
  EXPECT_EQ(s.state(), v1::SWEEP_STATE_SUCCEEDED);
  EXPECT_EQ(s.termination(), v1::TERMINATION_NO_GAIN);
  EXPECT_EQ(s.rounds_without_gain(), 2);
  EXPECT_EQ(s.rounds_finished(), 4);
}

TEST_F(CoordinatorTest, TimeLimitEndsTheSweepOnTick) {
  const std::string id = Submit(
      SpecYaml({.budget = "{max_rounds: 30, max_rounds_without_gain: 30, "
                          "time_limit: 1m}"}));
  // The limit counts from the start (first lease), not from submission.
  clock_.Advance(absl::Minutes(2));
  Tick();
  EXPECT_EQ(StoredSweep(id).state(), v1::SWEEP_STATE_QUEUED);

  Register("a1", {Board("a1/b0")});
  RunBaseline("a1/b0", 100);
  const v1::WorkItem w = Lease("a1/b0");
  clock_.Advance(absl::Seconds(59));
  ASSERT_TRUE(Renew(w, w.epoch()).ok());
  Tick();
  EXPECT_EQ(StoredSweep(id).state(), v1::SWEEP_STATE_RUNNING);

  clock_.Advance(absl::Seconds(1));
  Tick();
  const v1::Sweep s = StoredSweep(id);
  EXPECT_EQ(s.state(), v1::SWEEP_STATE_SUCCEEDED);
  EXPECT_EQ(s.termination(), v1::TERMINATION_TIME_LIMIT);
  EXPECT_THAT(s.termination_detail(), HasSubstr("60"));
  EXPECT_EQ(StoredRound(id, w.round_id()).state(), v1::ROUND_STATE_CANCELLED);
  EXPECT_EQ(coord()->active_sweeps(), 0);
}

TEST_F(CoordinatorTest, ExhaustedSpaceEndsTheSweep) {
  const std::string id = Submit(SpecYaml({.op = "tiny"}));
  Register("a1", {Board("a1/b0"), Board("a1/b1")});
  RunBaseline("a1/b0", 100);
  const v1::WorkItem only = Lease("a1/b0");
  EXPECT_EQ(only.params().at("x").int_value(), 2);
  // Nothing else to try, but the sweep waits for the round in flight.
  ExpectNoWork("a1/b1");
  EXPECT_EQ(StoredSweep(id).state(), v1::SWEEP_STATE_RUNNING);

  ReportOk(only, 99);
  ExpectNoWork("a1/b1");
  const v1::Sweep s = StoredSweep(id);
  EXPECT_EQ(s.state(), v1::SWEEP_STATE_SUCCEEDED);
  EXPECT_EQ(s.termination(), v1::TERMINATION_SPACE_EXHAUSTED);
  EXPECT_EQ(StoredRounds(id).size(), 2u);
  absl::StatusOr<std::string> report = ReadFile(s.report_path());
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(*report, HasSubstr(id));
}

// --- cancel
// -------------------------------------------------------------------

TEST_F(CoordinatorTest, CancelEndsTheSweepOnce) {
  const std::string id = Submit(SpecYaml({}));
  Register("a1", {Board("a1/b0")});
  const v1::WorkItem w = Lease("a1/b0");

  v1::CancelSweepRequest cancel;
  cancel.set_sweep_id(id);
  cancel.set_reason("wrong workload");
  absl::StatusOr<v1::Sweep> cancelled =
      coord()->CancelSweep(cancel, AnonymousAdmin());
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->state(), v1::SWEEP_STATE_CANCELLED);
  EXPECT_EQ(cancelled->termination(), v1::TERMINATION_CANCELLED);
  EXPECT_THAT(cancelled->termination_detail(), HasSubstr("wrong workload"));

  const v1::Sweep s = StoredSweep(id);
  EXPECT_EQ(s.state(), v1::SWEEP_STATE_CANCELLED);
  EXPECT_EQ(StoredRound(id, 0).state(), v1::ROUND_STATE_CANCELLED);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_FINISHED), 1);
  EXPECT_EQ(coord()->active_sweeps(), 0);
  EXPECT_EQ(BoardNow("a1/b0").state(), v1::BOARD_STATE_IDLE);

  absl::StatusOr<v1::HeartbeatResponse> hb =
      Heartbeat("a1", {{"a1/b0", w.lease_id()}});
  ASSERT_TRUE(hb.ok());
  EXPECT_THAT(hb->revoked_lease_ids(), ElementsAre(w.lease_id()));
  absl::StatusOr<v1::RenewLeaseResponse> renew = Renew(w, w.epoch());
  ASSERT_TRUE(renew.ok());
  EXPECT_FALSE(renew->valid());
  absl::StatusOr<v1::ReportResultResponse> late = Report(w, v1::OUTCOME_OK, 90);
  ASSERT_TRUE(late.ok());
  EXPECT_FALSE(late->accepted());

  absl::StatusOr<v1::Sweep> twice =
      coord()->CancelSweep(cancel, AnonymousAdmin());
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(twice.status().message(), HasSubstr(id));

  cancel.set_sweep_id("sw-999999");
  EXPECT_EQ(coord()->CancelSweep(cancel, AnonymousAdmin()).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_FINISHED), 1);
  ExpectEventLogConsistent(id);
}

// --- recovery
// -----------------------------------------------------------------

TEST_F(CoordinatorTest, RestartResumesTheSweepWithoutLosingRounds) {
  const std::string id = Submit(SpecYaml({}));
  Register("a1", {Board("a1/b0"), Board("a1/b1"), Board("a1/b2")});
  RunBaseline("a1/b0", 100);
  const v1::WorkItem r1 = Lease("a1/b0");
  const v1::WorkItem r2 = Lease("a1/b1");
  ReportOk(r1, 90);  // kept
  const v1::WorkItem r3 = Lease("a1/b0");
  ReportOk(r3, 99);  // rolled back; r2 stays in flight across the restart
  ASSERT_EQ(r2.round_id(), 2);
  ASSERT_EQ(r3.round_id(), 3);
  const std::string r2_board = lease_board_[r2.lease_id()];

  Restart();
  lease_board_[r2.lease_id()] = r2_board;
  EXPECT_EQ(coord()->active_sweeps(), 1);
  for (const v1::BoardInfo& b : coord()->ListBoards(v1::BoardSelector())) {
    EXPECT_EQ(b.state(), v1::BOARD_STATE_LOST) << b.board_id();
  }
  EXPECT_EQ(StoredRound(id, 2).state(), v1::ROUND_STATE_LEASED);

  v1::BoardInfo busy = Board("a1/b1");
  busy.set_current_lease_id(r2.lease_id());
  Register("a1", {Board("a1/b0"), busy, Board("a1/b2")});

  // The lease granted before the restart is still honoured.
  absl::StatusOr<v1::RenewLeaseResponse> renew = Renew(r2, r2.epoch());
  ASSERT_TRUE(renew.ok()) << renew.status();
  EXPECT_TRUE(renew->valid());
  ReportOk(r2, 95);  // beats its parent (baseline) but not the best (r1)
  EXPECT_EQ(StoredRound(id, 2).decision(), v1::DECISION_ROLLED_BACK);
  absl::StatusOr<v1::ReportResultResponse> dup = Report(r2, v1::OUTCOME_OK, 95);
  ASSERT_TRUE(dup.ok());
  EXPECT_TRUE(dup->duplicate());

  // The strategy resumes after the last round, from the best one.
  const v1::WorkItem r4 = Lease("a1/b0");
  EXPECT_EQ(r4.round_id(), 4);
  EXPECT_EQ(StoredRound(id, 4).parent_round(), r1.round_id());
  ReportOk(r4, 80);

  const std::vector<v1::Round> rounds = StoredRounds(id);
  ASSERT_EQ(rounds.size(), 5u);
  std::set<std::string> configs;
  for (size_t i = 0; i < rounds.size(); ++i) {
    EXPECT_EQ(rounds[i].round_id(), static_cast<int64_t>(i));
    EXPECT_EQ(rounds[i].state(), v1::ROUND_STATE_DONE) << i;
    EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_ROUND_FINISHED, i), 1) << i;
    configs.insert(ParamsKey(rounds[i].params()));
  }
  EXPECT_EQ(configs.size(), rounds.size());
  const v1::Sweep s = StoredSweep(id);
  EXPECT_EQ(s.rounds_finished(), 4);
  EXPECT_EQ(s.best_round(), 4);
  EXPECT_EQ(s.next_round_id(), 5);
  ExpectEventLogConsistent(id);

  EXPECT_EQ(Submit(SpecYaml({.name = "second"})), "sw-000002");
}

TEST_F(CoordinatorTest, RestartGivesInFlightLeasesOneMoreLeaseDuration) {
  const std::string id = Submit(SpecYaml({}));
  Register("a1", {Board("a1/b0")});
  const v1::WorkItem w = Lease("a1/b0");  // expires in 10 s
  clock_.Advance(absl::Seconds(8));

  Restart();
  clock_.Advance(absl::Seconds(5));  // past the original expiry
  Tick();
  EXPECT_EQ(StoredRound(id, 0).state(), v1::ROUND_STATE_LEASED);
  clock_.Advance(absl::Seconds(6));  // past the grace period
  Tick();
  EXPECT_EQ(StoredRound(id, 0).state(), v1::ROUND_STATE_QUEUED);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_ROUND_REQUEUED, 0), 1);

  Register("a1", {Board("a1/b0")});
  const v1::WorkItem again = Lease("a1/b0");
  EXPECT_EQ(again.round_id(), 0);
  EXPECT_EQ(again.epoch(), 2);
  ExpectEventLogConsistent(id);
}

// An agent that kept running through a coordinator restart re-registers
// claiming its lease and then heartbeats with it. Recover() promises that
// lease stays valid, so the heartbeat must not revoke it (a revoked lease
// makes the agent abandon the work, agent/agent.cc HeartbeatLoop).
TEST_F(CoordinatorTest, RestartDoesNotRevokeLeasesAgentsStillHold) {
  const std::string id = Submit(SpecYaml({}));
  Register("a1", {Board("a1/b0")});
  const v1::WorkItem w = Lease("a1/b0");

  Restart();
  lease_board_[w.lease_id()] = "a1/b0";
  v1::BoardInfo busy = Board("a1/b0");
  busy.set_current_lease_id(w.lease_id());
  Register("a1", {busy});
  EXPECT_EQ(BoardNow("a1/b0").state(), v1::BOARD_STATE_BUSY);
  EXPECT_EQ(BoardNow("a1/b0").current_lease_id(), w.lease_id());

  absl::StatusOr<v1::HeartbeatResponse> hb =
      Heartbeat("a1", {{"a1/b0", w.lease_id()}});
  ASSERT_TRUE(hb.ok()) << hb.status();
  EXPECT_THAT(hb->revoked_lease_ids(), IsEmpty());
  ReportOk(w, 100);
  EXPECT_EQ(StoredRound(id, 0).state(), v1::ROUND_STATE_DONE);
}

// A sweep whose operator left the catalog cannot resume: it fails, and the
// other sweeps resume.
TEST_F(CoordinatorTest, RestartFailsSweepsWhoseOperatorIsGone) {
  const std::string gone = Submit(SpecYaml({.op = "tiny"}));
  const std::string kept = Submit(SpecYaml({.name = "kept"}));
  disk_.Close();  // the core points at the catalog
  catalog_ = OperatorCatalog();
  absl::StatusOr<v1::OperatorManifest> toy =
      ParseOperatorManifest(kToyOperator, "test/operator.yaml");
  ASSERT_TRUE(toy.ok());
  catalog_.Add(*toy);
  Restart();

  EXPECT_EQ(coord()->active_sweeps(), 1);
  const v1::Sweep s = StoredSweep(gone);
  EXPECT_EQ(s.state(), v1::SWEEP_STATE_FAILED);
  EXPECT_THAT(s.termination_detail(), HasSubstr("tiny"));
  EXPECT_EQ(StoredSweep(kept).state(), v1::SWEEP_STATE_QUEUED);
  Register("a1", {Board("a1/b0")});
  EXPECT_EQ(Lease("a1/b0").sweep_id(), kept);
}

// Watchers (FarmService::WatchSweep) stream until a FINISHED event, so every
// sweep that ends must log one, and must not leave rounds queued.
TEST_F(CoordinatorTest, SweepFailedOnRestartLogsFinishedEvent) {
  const std::string gone = Submit(SpecYaml({.op = "tiny"}));
  disk_.Close();  // the core points at the catalog
  catalog_ = OperatorCatalog();
  Restart();
  EXPECT_EQ(StoredSweep(gone).state(), v1::SWEEP_STATE_FAILED);
  EXPECT_EQ(CountEvents(gone, v1::EVENT_KIND_FINISHED), 1);
  EXPECT_EQ(StoredRound(gone, 0).state(), v1::ROUND_STATE_CANCELLED);
  ExpectEventLogConsistent(gone);
}

// --- diagnoses
// ----------------------------------------------------------------

TEST_F(CoordinatorTest, DiagnosisIsAttachedToItsRound) {
  const std::string id = Submit(SpecYaml({}));
  Register("a1", {Board("a1/b0")});
  RunBaseline("a1/b0", 100);

  v1::Diagnosis d;
  d.set_sweep_id(id);
  d.set_round_id(0);
  d.set_epoch(1);
  d.set_analyzer_id("an-1");
  d.set_bound("memory");
  d.set_simulated(true);
  v1::Hotspot* h = d.add_hotspots();
  h->set_op_name("MatMulV2");
  h->set_duration_us(40);
  h->set_share(0.8);
  absl::Status st = coord()->RecordDiagnosis(d);
  ASSERT_TRUE(st.ok()) << st;
  v1::Round r = StoredRound(id, 0);
  EXPECT_EQ(r.diagnosis().bound(), "memory");
  ASSERT_EQ(r.diagnosis().hotspots_size(), 1);
  EXPECT_EQ(r.diagnosis().hotspots(0).op_name(), "MatMulV2");
  EXPECT_EQ(r.state(), v1::ROUND_STATE_DONE);  // the rest of the round kept
  EXPECT_DOUBLE_EQ(r.result().measurement().median_us(), 100);
  std::vector<v1::SweepEvent> events = Events(id);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().kind(), v1::EVENT_KIND_DIAGNOSIS);
  EXPECT_THAT(events.back().message(), HasSubstr("MatMulV2"));
  EXPECT_EQ(metrics_.diagnoses, 1);

  v1::Diagnosis wrong = d;
  wrong.set_epoch(2);
  EXPECT_EQ(coord()->RecordDiagnosis(wrong).code(),
            absl::StatusCode::kFailedPrecondition);
  wrong = d;
  wrong.set_round_id(42);
  EXPECT_EQ(coord()->RecordDiagnosis(wrong).code(),
            absl::StatusCode::kNotFound);
  wrong = d;
  wrong.set_sweep_id("sw-999999");
  EXPECT_EQ(coord()->RecordDiagnosis(wrong).code(),
            absl::StatusCode::kNotFound);

  // Later rounds do not wipe it.
  ReportOk(Lease("a1/b0"), 99);
  EXPECT_EQ(StoredRound(id, 0).diagnosis().bound(), "memory");

  // A finished sweep still takes diagnoses (analyzers lag behind).
  v1::CancelSweepRequest cancel;
  cancel.set_sweep_id(id);
  ASSERT_TRUE(coord()->CancelSweep(cancel, AnonymousAdmin()).ok());
  const int64_t seq_before = StoredSweep(id).last_event_seq();
  v1::Diagnosis later = d;
  later.set_round_id(1);
  later.set_epoch(StoredRound(id, 1).lease().epoch());
  later.set_bound("compute");
  st = coord()->RecordDiagnosis(later);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(StoredRound(id, 1).diagnosis().bound(), "compute");
  const v1::Sweep s = StoredSweep(id);
  EXPECT_EQ(s.last_event_seq(), seq_before + 1);
  EXPECT_EQ(s.state(), v1::SWEEP_STATE_CANCELLED);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_DIAGNOSIS, 1), 1);
  ExpectEventLogConsistent(id);
  EXPECT_EQ(metrics_.diagnoses, 2);

  // A re-delivered diagnosis (the analyzer's ack was lost) is acked as a
  // duplicate and stored once: the first one stays, no second event.
  v1::Diagnosis again = d;
  again.set_bound("latency");
  EXPECT_EQ(coord()->RecordDiagnosis(again).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(StoredRound(id, 0).diagnosis().bound(), "memory");
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_DIAGNOSIS, 0), 1);
  EXPECT_EQ(StoredSweep(id).last_event_seq(), seq_before + 1);
  EXPECT_EQ(metrics_.diagnoses, 2);
  wrong = d;
  wrong.set_epoch(7);
  EXPECT_EQ(coord()->RecordDiagnosis(wrong).code(),
            absl::StatusCode::kFailedPrecondition);
}

// --- lineage
// ------------------------------------------------------------------

TEST_F(CoordinatorTest, KeptPathLeadsFromBaselineToBest) {
  const std::string id = Submit(SpecYaml({}));
  Register("a1", {Board("a1/b0")});
  RunBaseline("a1/b0", 100);
  // round: parent → result
  const std::vector<std::pair<int64_t, double>> plan = {
      {0, 90},  // 1 kept
      {1, 95},  // 2 rolled back
      {1, 80},  // 3 kept
      {3, 70},  // 4 kept
      {4, 69},  // 5 rolled back (needs <= 68.6)
  };
  for (size_t i = 0; i < plan.size(); ++i) {
    const v1::WorkItem w = Lease("a1/b0");
    ASSERT_EQ(w.round_id(), static_cast<int64_t>(i + 1));
    EXPECT_EQ(StoredRound(id, w.round_id()).parent_round(), plan[i].first)
        << "round " << w.round_id();
    ReportOk(w, plan[i].second);
  }
  const v1::Sweep s = StoredSweep(id);
  EXPECT_EQ(s.best_round(), 4);
  EXPECT_DOUBLE_EQ(s.best_us(), 70);

  absl::StatusOr<std::vector<int64_t>> path = store()->KeptPath(id);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_THAT(*path, ElementsAre(0, 1, 3, 4));
  absl::StatusOr<std::vector<int64_t>> from_rounds =
      KeptPathTo(StoredRounds(id), s.best_round());
  ASSERT_TRUE(from_rounds.ok()) << from_rounds.status();
  EXPECT_EQ(*from_rounds, *path);
  absl::StatusOr<std::vector<int64_t>> ancestors = store()->Ancestors(id, 5);
  ASSERT_TRUE(ancestors.ok());
  EXPECT_THAT(*ancestors, ElementsAre(4, 3, 1, 0));
  absl::StatusOr<std::vector<int64_t>> children = store()->Children(id, 1);
  ASSERT_TRUE(children.ok());
  EXPECT_THAT(*children, ElementsAre(2, 3));
  for (int64_t kept : {1, 3, 4}) {
    EXPECT_EQ(StoredRound(id, kept).decision(), v1::DECISION_KEPT);
  }
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_BEST_IMPROVED), 3);
  // The events say which way each round went against its parent.
  std::map<int64_t, std::string> finished =
      MessagesByRound(id, v1::EVENT_KIND_ROUND_FINISHED);
  EXPECT_THAT(finished[1], HasSubstr("kept (10.0% faster than its parent)"));
  EXPECT_THAT(finished[2],
              HasSubstr("rolled back (5.6% slower than its parent)"));
  EXPECT_THAT(finished[5],
              HasSubstr("rolled back (1.4% faster than its parent, under the "
                        "2.0% minimum gain)"));
}

// A board its agent reports quarantined (repeated device errors) gets no
// work until an admin re-admits it; the quarantine is counted.
TEST_F(CoordinatorTest, QuarantinedBoardGetsNoWorkUntilAdmitted) {
  Submit(SpecYaml({}));
  Register("a1", {Board("a1/b0")});
  v1::HeartbeatRequest hb;
  hb.set_agent_id("a1");
  v1::BoardInfo* b = hb.add_boards();
  b->set_board_id("a1/b0");
  b->set_state(v1::BOARD_STATE_QUARANTINED);
  b->set_health_detail("device error twice in a row");
  ASSERT_TRUE(coord()->Heartbeat(hb).ok());
  std::vector<v1::BoardInfo> boards = coord()->ListBoards(v1::BoardSelector());
  ASSERT_EQ(boards.size(), 1u);
  EXPECT_EQ(boards[0].state(), v1::BOARD_STATE_QUARANTINED);
  EXPECT_EQ(metrics_.quarantines["a1/b0"], 1);
  ExpectNoWork("a1/b0");
  v1::BoardAdminRequest admit;
  admit.set_board_id("a1/b0");
  ASSERT_TRUE(coord()->AdmitBoard(admit).ok());
  Lease("a1/b0");
}

// --- noise-aware keep / roll back (A/B) --------------------------------------

// A result with an A/B measurement: candidate median `median_us`, the
// parent's (timed in the same lease) `parent_us`, and a paired gain with its
// lower bound.
v1::Measurement Paired(double median_us, double parent_us, double gain_lower) {
  v1::Measurement m;
  m.set_median_us(median_us);
  m.set_p20_us(median_us * 0.99);
  m.set_p80_us(median_us * 1.01);
  m.set_samples(30);
  m.set_simulated(true);
  m.set_paired(true);
  m.mutable_reference()->set_median_us(parent_us);
  m.set_gain(1 - median_us / parent_us);
  m.set_gain_lower(gain_lower);
  m.set_gain_upper(2 * (1 - median_us / parent_us) - gain_lower);
  m.set_pairs(6);
  m.set_confidence(0.95);
  return m;
}

class KeepRuleTest : public CoordinatorTest {
 protected:
  void ReportMeasured(const v1::WorkItem& work, const v1::Measurement& m,
                      v1::Outcome outcome = v1::OUTCOME_OK) {
    v1::ReportResultRequest request =
        ResultFor(lease_board_[work.lease_id()], work, m.median_us(), outcome);
    request.mutable_result()->mutable_precision()->set_passed(
        outcome != v1::OUTCOME_PRECISION_FAILED);
    if (outcome != v1::OUTCOME_OK) {
      request.mutable_result()->set_detail("test says so");
    }
    *request.mutable_result()->mutable_measurement() = m;
    absl::StatusOr<v1::ReportResultResponse> r = coord()->ReportResult(request);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->accepted()) << r->reason();
  }
};

TEST_F(KeepRuleTest, WorkCarriesTheParentForAB) {
  const std::string id = Submit(SpecYaml({}));
  Register("a1", {Board("a1/b0")});
  const v1::WorkItem base = Lease("a1/b0");
  EXPECT_FALSE(base.has_reference());  // the baseline has no parent
  EXPECT_EQ(base.measurement().mode(), v1::MEASUREMENT_MODE_AB);
  ReportOk(base, 100);
  const v1::WorkItem w = Lease("a1/b0");
  ASSERT_TRUE(w.has_reference());
  EXPECT_EQ(w.reference_round(), 0);
  EXPECT_EQ(ParamsKey(w.reference_params()),
            ParamsKey(StoredRound(id, 0).params()));
  EXPECT_NE(ParamsKey(w.reference_params()), ParamsKey(w.params()));
}

// The board slowed between the baseline's lease and the candidate's: the
// candidate beats its parent side by side (130 -> 110 µs in its lease) but
// is timed slower than the baseline was (100 µs). It is kept, and the best
// event says times drift rather than showing a bare fall in speedup.
TEST_F(KeepRuleTest, AKeptRoundTimedSlowerThanTheBestWasSaysTimesDrift) {
  const std::string id = Submit(SpecYaml({}));
  Register("a1", {Board("a1/b0")});
  RunBaseline("a1/b0", 100);
  const v1::WorkItem w = Lease("a1/b0");
  ReportMeasured(w, Paired(110, 130, 0.12));
  EXPECT_EQ(StoredRound(id, w.round_id()).decision(), v1::DECISION_KEPT);
  std::string best =
      MessagesByRound(id, v1::EVENT_KIND_BEST_IMPROVED)[w.round_id()];
  EXPECT_THAT(best, HasSubstr("0.91x over the baseline"));
  EXPECT_THAT(best, HasSubstr("timed 10.0% slower than round 0 was (100.0 "
                              "µs) in another lease"));

  // A round timed faster than the best says nothing of the kind.
  const v1::WorkItem next = Lease("a1/b0");
  ReportMeasured(next, Paired(80, 110, 0.2));
  ASSERT_EQ(StoredRound(id, next.round_id()).decision(), v1::DECISION_KEPT);
  best = MessagesByRound(id, v1::EVENT_KIND_BEST_IMPROVED)[next.round_id()];
  EXPECT_THAT(best, HasSubstr("best is now round 2: 80.0 µs, 1.25x"));
  EXPECT_THAT(best, Not(HasSubstr("times drift")));
}

// --- the closing check (Sweep.closing_check) --------------------------------

// A sweep with a round budget of 1 whose one candidate is kept (1.67x from
// the two leases' medians): its search is over and the check waits.
class ClosingCheckTest : public KeepRuleTest {
 protected:
  std::string StartChecking(const std::string& budget =
                                "{max_rounds: 1, max_rounds_without_gain: 30}",
                            const std::string& measurement = "",
                            const std::string& goal = "{speedup: 100}") {
    std::string yaml = SpecYaml({.goal = goal, .budget = budget});
    if (!measurement.empty()) {
      const std::string plain = "measurement: {warmup: 1, samples: 5}";
      yaml.replace(yaml.find(plain), plain.size(), measurement);
    }
    const std::string id = Submit(yaml);
    Register("a1", {Board("a1/b0"), Board("a1/b1")});
    RunBaseline("a1/b0", 100);
    const v1::WorkItem one = Lease("a1/b0");
    EXPECT_EQ(one.round_id(), 1);
    ReportMeasured(one, Paired(60, 100, 0.35));
    EXPECT_EQ(StoredRound(id, 1).decision(), v1::DECISION_KEPT);
    return id;
  }
  std::string Finished(const std::string& id) {
    std::string out;
    for (const v1::SweepEvent& e : Events(id)) {
      if (e.kind() == v1::EVENT_KIND_FINISHED) out = e.message();
    }
    return out;
  }
};

// Side by side the best is 1.5x, not the 1.67x its lease and the
// baseline's said; the sweep ends with that result, and nothing else is
// proposed while the check runs.
TEST_F(ClosingCheckTest, TimesTheBestAgainstTheBaselineBeforeTheSweepEnds) {
  const std::string id = StartChecking(
      "{max_rounds: 2, max_rounds_without_gain: 30}");  // one more first
  const v1::WorkItem two = Lease("a1/b0");
  ReportMeasured(two, Paired(70, 60, -0.3));  // rolled back; budget spent
  v1::Sweep s = StoredSweep(id);
  EXPECT_EQ(s.state(), v1::SWEEP_STATE_RUNNING);
  ASSERT_TRUE(s.has_closing_check());
  const v1::ClosingCheck& c = s.closing_check();
  EXPECT_EQ(c.best_round(), 1);
  EXPECT_EQ(c.round_id(), 3);
  EXPECT_EQ(c.termination(), v1::TERMINATION_ROUND_BUDGET);
  EXPECT_NEAR(c.lease_speedup(), 100.0 / 60, 1e-9);
  EXPECT_EQ(c.speedup(), 0);
  EXPECT_EQ(s.rounds_finished(), 2);  // the check is not a budget round
  const v1::Round queued = StoredRound(id, 3);
  EXPECT_EQ(queued.state(), v1::ROUND_STATE_QUEUED);
  EXPECT_EQ(queued.parent_round(), 0);
  EXPECT_EQ(queued.stage(), "closing check");
  EXPECT_EQ(DescribeChanges(queued.changes()),
            DescribeChanges(StoredRound(id, 1).changes()));
  EXPECT_THAT(MessagesByRound(id, v1::EVENT_KIND_CLOSING_CHECK)[3],
              HasSubstr("round 3 times the best, round 1 (1.67x from the "
                        "two leases' medians), against the baseline"));

  const v1::WorkItem check = Lease("a1/b1");
  ASSERT_EQ(check.round_id(), 3);
  ASSERT_TRUE(check.has_reference());
  EXPECT_EQ(check.reference_round(), 0);
  EXPECT_EQ(ParamsKey(check.reference_params()),
            ParamsKey(StoredRound(id, 0).params()));
  EXPECT_EQ(ParamsKey(check.params()), ParamsKey(StoredRound(id, 1).params()));
  ExpectNoWork("a1/b0");

  ReportMeasured(check, Paired(62, 93, 0.30));  // gain 1/3: 1.5x
  s = StoredSweep(id);
  EXPECT_EQ(s.state(), v1::SWEEP_STATE_SUCCEEDED);
  EXPECT_EQ(s.termination(), v1::TERMINATION_ROUND_BUDGET);
  EXPECT_EQ(s.best_round(), 1);
  EXPECT_EQ(s.rounds_finished(), 2);
  EXPECT_NEAR(s.closing_check().speedup(), 1.5, 1e-9);
  EXPECT_NEAR(s.closing_check().speedup_low(), 1 / 0.7, 1e-9);
  EXPECT_NEAR(s.closing_check().speedup_high(), 1 / (1 - (2.0 / 3 - 0.3)),
              1e-9);
  EXPECT_EQ(s.closing_check().confidence(), 0.95);
  const v1::Round done = StoredRound(id, 3);
  EXPECT_EQ(done.state(), v1::ROUND_STATE_DONE);
  EXPECT_EQ(done.decision(), v1::DECISION_CLOSING_CHECK);
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_CLOSING_CHECK), 1);
  EXPECT_THAT(MessagesByRound(id, v1::EVENT_KIND_ROUND_FINISHED)[3],
              HasSubstr("round 3 (closing check): round 1 is 1.50x"));
  EXPECT_THAT(Finished(id),
              HasSubstr("closing check: round 1 is 1.50x the baseline's "
                        "speed side by side (1.43x to 1.58x, each bound at "
                        "95%) over 6 pairs on a1/b1 [simulated]; the two "
                        "leases' medians said 1.67x"));
  EXPECT_THAT(Finished(id), Not(HasSubstr("not shown faster")));
  // The sweep's speedup is the paired one.
  EXPECT_THAT(Finished(id), HasSubstr("best round 1 at 60.0 µs, 1.50x over "
                                      "the baseline (side by side)"));
  absl::StatusOr<std::string> report = ReadFile(s.report_path());
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(*report, HasSubstr("1.50x the baseline's speed side by side"));
  ExpectEventLogConsistent(id);
}

TEST_F(ClosingCheckTest, ABestNotShownFasterSideBySideIsSaidSo) {
  const std::string id = StartChecking();
  ReportMeasured(Lease("a1/b1"), Paired(99, 100, -0.05));
  const v1::Sweep s = StoredSweep(id);
  EXPECT_EQ(s.state(), v1::SWEEP_STATE_SUCCEEDED);
  EXPECT_NEAR(s.closing_check().speedup(), 100.0 / 99, 1e-9);
  EXPECT_THAT(Finished(id), HasSubstr("; not shown faster than the baseline"));
}

// A check that fails or gives no pairs leaves the lease speedup standing,
// and says so.
TEST_F(ClosingCheckTest, AFailedOrUnpairedCheckLeavesTheLeaseSpeedup) {
  std::string id = StartChecking();
  ReportMeasured(Lease("a1/b1"), Paired(60, 100, 0.35),
                 v1::OUTCOME_PRECISION_FAILED);
  v1::Sweep s = StoredSweep(id);
  EXPECT_EQ(s.state(), v1::SWEEP_STATE_SUCCEEDED);
  EXPECT_EQ(s.closing_check().speedup(), 0);
  EXPECT_THAT(s.closing_check().outcome(),
              HasSubstr("round 1 failed it: OUTCOME_PRECISION_FAILED: test "
                        "says so; the speedup stands at 1.67x, from medians "
                        "timed in different leases"));
  EXPECT_EQ(StoredRound(id, 2).decision(), v1::DECISION_CLOSING_CHECK);

  id = StartChecking();
  ReportOk(Lease("a1/b1"), 60);  // no pairs
  s = StoredSweep(id);
  EXPECT_EQ(s.state(), v1::SWEEP_STATE_SUCCEEDED);
  EXPECT_EQ(s.closing_check().speedup(), 0);
  EXPECT_THAT(s.closing_check().outcome(),
              HasSubstr("the board timed no pairs; the speedup stands"));
  EXPECT_THAT(Finished(id), HasSubstr("1.67x over the baseline (two leases' "
                                      "medians)"));
}

// The leases' medians reached the goal and ended the search with the
// round budget spent; side by side the best falls short, and the sweep's
// ending says so.
TEST_F(ClosingCheckTest, AGoalNotMetSideBySideWithNoBudgetLeftSaysSo) {
  const std::string id = StartChecking(
      "{max_rounds: 1, max_rounds_without_gain: 30}", "", "{speedup: 1.6}");
  v1::Sweep s = StoredSweep(id);
  ASSERT_TRUE(s.has_closing_check());
  EXPECT_EQ(s.closing_check().termination(), v1::TERMINATION_GOAL_REACHED);
  ReportMeasured(Lease("a1/b1"), Paired(62, 93, 0.30));  // 1.5x
  s = StoredSweep(id);
  EXPECT_EQ(s.state(), v1::SWEEP_STATE_SUCCEEDED);
  EXPECT_EQ(s.termination(), v1::TERMINATION_GOAL_REACHED);
  EXPECT_EQ(s.termination_detail(),
            "speedup 1.67x reached the goal of 1.60x; 1.67x by the paired "
            "gains along its lineage; side by side 1.50x, "
            "short of the goal");
  EXPECT_EQ(CountEvents(id, v1::EVENT_KIND_SEARCH_RESUMED), 0);
  absl::StatusOr<std::string> report = ReadFile(s.report_path());
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(*report, HasSubstr("**1.50x** side by side"));
  EXPECT_THAT(*report, HasSubstr("goal not met"));

  // Side by side at or above the goal: the ending stands as it was.
  const std::string met = StartChecking(
      "{max_rounds: 30, max_rounds_without_gain: 30}", "", "{speedup: 1.4}");
  ReportMeasured(Lease("a1/b1"), Paired(62, 93, 0.30));
  EXPECT_EQ(StoredSweep(met).termination_detail(),
            "speedup 1.67x reached the goal of 1.40x; 1.67x by the paired "
            "gains along its lineage");
}

// With budget left, a goal that the check does not confirm resumes the
// search (across a restart); the same best cannot end it for the goal
// again, a better one can.
TEST_F(ClosingCheckTest, AGoalNotMetSideBySideResumesTheSearch) {
  const std::string id = StartChecking(
      "{max_rounds: 30, max_rounds_without_gain: 30}", "", "{speedup: 1.6}");
  const v1::WorkItem first_check = Lease("a1/b1");
  ReportMeasured(first_check, Paired(62, 93, 0.30));  // 1.5x
  v1::Sweep s = StoredSweep(id);
  EXPECT_EQ(s.state(), v1::SWEEP_STATE_RUNNING);
  EXPECT_FALSE(s.has_closing_check());
  EXPECT_EQ(s.goal_refuted_round(), 1);
  EXPECT_EQ(StoredRound(id, first_check.round_id()).decision(),
            v1::DECISION_CLOSING_CHECK);
  EXPECT_THAT(StoredRound(id, first_check.round_id()).decision_reason(),
              HasSubstr("; short of the goal"));
  ASSERT_EQ(CountEvents(id, v1::EVENT_KIND_SEARCH_RESUMED), 1);
  std::string resumed;
  for (const v1::SweepEvent& e : Events(id)) {
    if (e.kind() == v1::EVENT_KIND_SEARCH_RESUMED) resumed = e.message();
  }
  EXPECT_EQ(resumed,
            "round 1 is 1.50x the baseline's speed side by side, short of "
            "the goal of 1.60x that ended the search (speedup 1.67x reached "
            "the goal of 1.60x; 1.67x by the paired gains along its "
            "lineage): the search goes on, and the goal needs a better round");
  Restart();
  Register("a1", {Board("a1/b0"), Board("a1/b1")});

  // A rolled-back candidate: the same best, so no end for the goal.
  const v1::WorkItem two = Lease("a1/b0");
  EXPECT_EQ(StoredRound(id, two.round_id()).parent_round(), 1);
  ReportMeasured(two, Paired(70, 60, -0.3));
  s = StoredSweep(id);
  EXPECT_EQ(s.state(), v1::SWEEP_STATE_RUNNING);
  EXPECT_FALSE(s.has_closing_check());

  // A better round: the goal ends the search again, and the check agrees.
  const v1::WorkItem three = Lease("a1/b0");
  ReportMeasured(three, Paired(30, 60, 0.4));  // 2x more: 3.33x
  s = StoredSweep(id);
  ASSERT_TRUE(s.has_closing_check());
  EXPECT_EQ(s.closing_check().best_round(), three.round_id());
  ReportMeasured(Lease("a1/b1"), Paired(31, 93, 0.6));  // 3x
  s = StoredSweep(id);
  EXPECT_EQ(s.state(), v1::SWEEP_STATE_SUCCEEDED);
  EXPECT_EQ(s.termination(), v1::TERMINATION_GOAL_REACHED);
  EXPECT_NEAR(s.closing_check().speedup(), 3.0, 1e-9);
  EXPECT_THAT(Finished(id), HasSubstr("3.00x over the baseline (side by "
                                      "side)"));
  ExpectEventLogConsistent(id);
}

// After a resume each strategy proposes on from a history that holds the
// check's round (a done round of the best's parameters, parent 0, decision
// CLOSING_CHECK): configurations not tried yet.
TEST_F(ClosingCheckTest, EveryStrategyProposesOnAfterAResume) {
  for (const std::string strategy :
       {"grid", "random", "guided", "{name: hybrid, seed: 3}", "tpe"}) {
    SCOPED_TRACE(strategy);
    const std::string id = Submit(
        SpecYaml({.goal = "{speedup: 1.6}",
                  .budget = "{max_rounds: 30, max_rounds_without_gain: 30}",
                  .strategy = strategy}));
    Register("a1", {Board("a1/b0"), Board("a1/b1")});
    RunBaseline("a1/b0", 100);
    const v1::WorkItem one = Lease("a1/b0");
    ReportMeasured(one, Paired(60, 100, 0.35));  // kept: 1.67x
    ASSERT_TRUE(StoredSweep(id).has_closing_check());
    ReportMeasured(Lease("a1/b1"), Paired(62, 93, 0.30));  // 1.5x
    ASSERT_FALSE(StoredSweep(id).has_closing_check());
    std::set<std::string> tried = {ParamsKey(StoredRound(id, 0).params()),
                                   ParamsKey(one.params())};
    for (int i = 0; i < 3; ++i) {
      const v1::WorkItem w = Lease("a1/b0");
      EXPECT_TRUE(tried.insert(ParamsKey(w.params())).second)
          << "proposed again: " << ParamsKey(w.params());
      ReportMeasured(w, Paired(70, 60, -0.3));  // rolled back
    }
    EXPECT_EQ(StoredSweep(id).state(), v1::SWEEP_STATE_RUNNING);
    v1::CancelSweepRequest cancel;
    cancel.set_sweep_id(id);
    cancel.set_reason("next strategy");
    ASSERT_TRUE(coord()->CancelSweep(cancel, AnonymousAdmin()).ok());
  }
}

// A restart while the check is queued resumes it: the check, not a new
// candidate, goes to the next board, and its result ends the sweep.
TEST_F(ClosingCheckTest, SurvivesARestart) {
  const std::string id = StartChecking();
  Restart();
  Register("a1", {Board("a1/b0"), Board("a1/b1")});
  const v1::WorkItem check = Lease("a1/b0");
  EXPECT_EQ(check.round_id(), 2);
  EXPECT_EQ(check.reference_round(), 0);
  ExpectNoWork("a1/b1");
  ReportMeasured(check, Paired(62, 93, 0.30));
  const v1::Sweep s = StoredSweep(id);
  EXPECT_EQ(s.state(), v1::SWEEP_STATE_SUCCEEDED);
  EXPECT_NEAR(s.closing_check().speedup(), 1.5, 1e-9);
}

TEST_F(ClosingCheckTest, CancelEndsTheSweepWithoutIt) {
  const std::string id = StartChecking();
  const v1::WorkItem check = Lease("a1/b1");
  v1::CancelSweepRequest cancel;
  cancel.set_sweep_id(id);
  cancel.set_reason("enough");
  ASSERT_TRUE(coord()->CancelSweep(cancel, AnonymousAdmin()).ok());
  const v1::Sweep s = StoredSweep(id);
  EXPECT_EQ(s.state(), v1::SWEEP_STATE_CANCELLED);
  EXPECT_EQ(StoredRound(id, check.round_id()).state(),
            v1::ROUND_STATE_CANCELLED);
  EXPECT_EQ(BoardNow("a1/b1").current_lease_id(), "");
  EXPECT_EQ(s.closing_check().speedup(), 0);
}

// The time limit still ends the sweep while the check runs, as the search's
// end said, and the check says why it has no result.
TEST_F(ClosingCheckTest, TheTimeLimitCutsItShort) {
  const std::string id = StartChecking(
      "{max_rounds: 1, max_rounds_without_gain: 30, time_limit: 1m}");
  const v1::WorkItem check = Lease("a1/b1");
  clock_.Advance(absl::Seconds(30));
  Tick();
  EXPECT_EQ(StoredSweep(id).state(), v1::SWEEP_STATE_RUNNING);
  clock_.Advance(absl::Seconds(31));
  Tick();
  const v1::Sweep s = StoredSweep(id);
  EXPECT_EQ(s.state(), v1::SWEEP_STATE_SUCCEEDED);
  EXPECT_EQ(s.termination(), v1::TERMINATION_ROUND_BUDGET);
  EXPECT_THAT(s.closing_check().outcome(),
              HasSubstr("not run to the end within the time limit of 60 s; "
                        "the speedup stands at 1.67x"));
  EXPECT_EQ(StoredRound(id, check.round_id()).state(),
            v1::ROUND_STATE_CANCELLED);
}

// The baseline's lease was slow (100 µs; 70 µs beside the first candidate):
// the two leases' medians say 2x, the paired gain 1.4x. The goal of 1.6x is
// reached only once the paired gains along the best's lineage say so too.
TEST_F(ClosingCheckTest, TheGoalNeedsThePairedGainsOfTheLineageToo) {
  const std::string id = Submit(
      SpecYaml({.goal = "{speedup: 1.6}",
                .budget = "{max_rounds: 30, max_rounds_without_gain: 30}"}));
  Register("a1", {Board("a1/b0"), Board("a1/b1")});
  RunBaseline("a1/b0", 100);
  const v1::WorkItem one = Lease("a1/b0");
  ReportMeasured(one, Paired(50, 70, 0.2));
  EXPECT_EQ(StoredRound(id, one.round_id()).decision(), v1::DECISION_KEPT);
  v1::Sweep s = StoredSweep(id);
  EXPECT_NEAR(s.baseline_us() / s.best_us(), 2.0, 1e-9);
  EXPECT_FALSE(s.has_closing_check()) << s.termination_detail();
  EXPECT_EQ(s.state(), v1::SWEEP_STATE_RUNNING);

  const v1::WorkItem two = Lease("a1/b0");
  ReportMeasured(two, Paired(40, 50, 0.15));  // 1.25x more: 1.75x paired
  s = StoredSweep(id);
  ASSERT_TRUE(s.has_closing_check());
  EXPECT_EQ(s.closing_check().termination(), v1::TERMINATION_GOAL_REACHED);
  EXPECT_EQ(s.closing_check().termination_detail(),
            "speedup 2.50x reached the goal of 1.60x; 1.75x by the paired "
            "gains along its lineage");
}

// A time-limited sweep keeps room for its closing check: its search ends
// once the limit is nearer than 1.5x its longest recent round (10 s here),
// and the check's result comes in before the limit.
TEST_F(ClosingCheckTest, TheTimeLimitLeavesRoomForTheCheck) {
  const std::string id = Submit(
      SpecYaml({.budget = "{max_rounds: 30, max_rounds_without_gain: 30, "
                          "time_limit: 100s}"}));
  Register("a1", {Board("a1/b0"), Board("a1/b1")});
  v1::WorkItem w = Lease("a1/b0");
  clock_.Advance(absl::Seconds(10));
  ReportOk(w, 100);
  w = Lease("a1/b0");
  clock_.Advance(absl::Seconds(10));
  ReportMeasured(w, Paired(60, 100, 0.35));  // kept: the best
  int64_t elapsed_s = 20;
  while (!StoredSweep(id).has_closing_check() && elapsed_s < 100) {
    w = Lease("a1/b0");
    clock_.Advance(absl::Seconds(10));
    elapsed_s += 10;
    ReportMeasured(w, Paired(70, 60, -0.3));  // rolled back
  }
  // 80 s + 15 s is inside the limit; 90 s + 15 s is not.
  EXPECT_EQ(elapsed_s, 90);
  v1::Sweep s = StoredSweep(id);
  ASSERT_TRUE(s.has_closing_check());
  EXPECT_EQ(s.state(), v1::SWEEP_STATE_RUNNING);
  EXPECT_EQ(s.closing_check().termination(), v1::TERMINATION_TIME_LIMIT);
  EXPECT_EQ(s.closing_check().termination_detail(),
            "time limit of 100 s: the search ended with 10.0 s left, for the "
            "closing check");
  const v1::WorkItem check = Lease("a1/b1");
  EXPECT_EQ(check.round_id(), s.closing_check().round_id());
  clock_.Advance(absl::Seconds(8));
  ReportMeasured(check, Paired(62, 93, 0.30));
  s = StoredSweep(id);
  EXPECT_EQ(s.state(), v1::SWEEP_STATE_SUCCEEDED);
  EXPECT_EQ(s.termination(), v1::TERMINATION_TIME_LIMIT);
  EXPECT_NEAR(s.closing_check().speedup(), 1.5, 1e-9);
  EXPECT_THAT(Finished(id), HasSubstr("1.50x over the baseline (side by "
                                      "side)"));
}

// Without a best to check, the search runs to the limit itself.
TEST_F(ClosingCheckTest, WithoutABestTheTimeLimitIsNotShortened) {
  const std::string id = Submit(
      SpecYaml({.budget = "{max_rounds: 30, max_rounds_without_gain: 30, "
                          "time_limit: 100s}"}));
  Register("a1", {Board("a1/b0")});
  v1::WorkItem w = Lease("a1/b0");
  clock_.Advance(absl::Seconds(10));
  ReportOk(w, 100);
  for (int i = 0; i < 8; ++i) {  // to 90 s
    w = Lease("a1/b0");
    clock_.Advance(absl::Seconds(10));
    ReportMeasured(w, Paired(130, 100, -0.35));  // rolled back
  }
  EXPECT_EQ(StoredSweep(id).state(), v1::SWEEP_STATE_RUNNING);
  EXPECT_FALSE(StoredSweep(id).has_closing_check());
  clock_.Advance(absl::Seconds(10));
  Tick();
  const v1::Sweep s = StoredSweep(id);
  EXPECT_EQ(s.state(), v1::SWEEP_STATE_SUCCEEDED);
  EXPECT_EQ(s.termination_detail(), "time limit of 100 s reached");
  EXPECT_FALSE(s.has_closing_check());
}

// Skipped in the spec, or with no pairs to time (independent mode), the
// sweep ends as its search does.
TEST_F(ClosingCheckTest, SkippedOrIndependentEndsAtOnce) {
  for (const std::string measurement :
       {"measurement: {warmup: 1, samples: 5, closing_check: false}",
        "measurement: {warmup: 1, samples: 5, mode: independent}"}) {
    SCOPED_TRACE(measurement);
    const std::string id = StartChecking(
        "{max_rounds: 1, max_rounds_without_gain: 30}", measurement);
    const v1::Sweep s = StoredSweep(id);
    EXPECT_EQ(s.state(), v1::SWEEP_STATE_SUCCEEDED);
    EXPECT_FALSE(s.has_closing_check());
    EXPECT_EQ(StoredRounds(id).size(), 2u);
  }
}

TEST_F(KeepRuleTest, IndependentModeSendsNoParent) {
  std::string yaml = SpecYaml({});
  yaml.replace(yaml.find("measurement: {warmup: 1, samples: 5}"),
               std::string("measurement: {warmup: 1, samples: 5}").size(),
               "measurement: {warmup: 1, samples: 5, mode: independent}");
  Submit(yaml);
  Register("a1", {Board("a1/b0")});
  RunBaseline("a1/b0", 100);
  const v1::WorkItem w = Lease("a1/b0");
  EXPECT_FALSE(w.has_reference());
  EXPECT_EQ(w.measurement().mode(), v1::MEASUREMENT_MODE_INDEPENDENT);
}

TEST_F(KeepRuleTest, GainInsideTheNoiseIsRemeasuredThenInconclusive) {
  const std::string id = Submit(SpecYaml({}));  // min_gain 0.02
  Register("a1", {Board("a1/b0")});
  RunBaseline("a1/b0", 100);
  // A 3% median gain, but its lower bound is -0.8%: inconclusive, so it is
  // measured again (a larger cap, a stricter confidence), twice, then
  // recorded as inconclusive.
  const v1::WorkItem w = Lease("a1/b0");
  ReportMeasured(w, Paired(97, 100, -0.008));
  v1::Round r = StoredRound(id, w.round_id());
  EXPECT_EQ(r.state(), v1::ROUND_STATE_QUEUED);
  EXPECT_EQ(r.remeasures(), 1);
  EXPECT_THAT(r.decision_reason(), HasSubstr("gain 3.0% [lower bound -0.8%"));
  EXPECT_THAT(r.decision_reason(), HasSubstr("inside noise"));
  for (int again = 1; again <= 2; ++again) {
    const v1::WorkItem wa = Lease("a1/b0");
    EXPECT_EQ(wa.round_id(), w.round_id());
    EXPECT_GT(wa.measurement().max_samples(), w.measurement().max_samples());
    EXPECT_GE(wa.measurement().confidence(), 0.99);
    ReportMeasured(wa, Paired(97, 100, -0.008));
  }
  r = StoredRound(id, w.round_id());
  EXPECT_EQ(r.state(), v1::ROUND_STATE_DONE);
  EXPECT_EQ(r.decision(), v1::DECISION_INCONCLUSIVE);
  EXPECT_THAT(r.decision_reason(),
              HasSubstr("inconclusive after 2 re-measurement(s)"));
  // A lower bound above the minimum gain is kept.
  const v1::WorkItem w2 = Lease("a1/b0");
  ReportMeasured(w2, Paired(90, 100, 0.07));
  r = StoredRound(id, w2.round_id());
  EXPECT_EQ(r.decision(), v1::DECISION_KEPT) << r.decision_reason();
  EXPECT_THAT(r.decision_reason(), HasSubstr("clears the 2.0% minimum gain"));
  // A lower bound of exactly the minimum is not enough (measured again).
  const v1::WorkItem w3 = Lease("a1/b0");
  ReportMeasured(w3, Paired(80, 90, 0.02));
  r = StoredRound(id, w3.round_id());
  EXPECT_NE(r.decision(), v1::DECISION_KEPT);
  EXPECT_EQ(r.remeasures(), 1);
}

TEST_F(KeepRuleTest, WithoutABTheGainMustClearTheMediansNoise) {
  const std::string id = Submit(SpecYaml({}));
  Register("a1", {Board("a1/b0")});
  RunBaseline("a1/b0", 100);  // p20 99
  const v1::WorkItem w = Lease("a1/b0");
  v1::Measurement m;
  m.set_median_us(97);  // 3% faster, above the minimum gain ...
  m.set_p20_us(95);
  m.set_p80_us(104);  // ... but over 5 samples this wide, inside noise
  m.set_samples(5);
  ReportMeasured(w, m);
  const v1::Round r = StoredRound(id, w.round_id());
  EXPECT_NE(r.decision(), v1::DECISION_KEPT);
  EXPECT_EQ(r.remeasures(), 1);  // inconclusive: measured again
  EXPECT_THAT(r.decision_reason(), HasSubstr("inside noise"));
  EXPECT_THAT(r.decision_reason(), HasSubstr("no A/B data"));
}

TEST_F(KeepRuleTest, PrecisionFailureIsNeverKeptHoweverFast) {
  const std::string id = Submit(SpecYaml({}));
  Register("a1", {Board("a1/b0")});
  RunBaseline("a1/b0", 100);
  const v1::WorkItem w = Lease("a1/b0");
  ReportMeasured(w, Paired(10, 100, 0.85), v1::OUTCOME_PRECISION_FAILED);
  const v1::Round r = StoredRound(id, w.round_id());
  EXPECT_EQ(r.decision(), v1::DECISION_REJECTED);
  EXPECT_THAT(r.decision_reason(), HasSubstr("PRECISION_FAILED"));
  EXPECT_EQ(StoredSweep(id).best_round(), 0);
}

TEST_F(KeepRuleTest, KBoardBatchKeepsOneAndRollsBackTheRest) {
  const std::string id = Submit(SpecYaml({}));
  constexpr int kBoards = 4;
  std::vector<v1::BoardInfo> boards;
  for (int i = 0; i < kBoards; ++i) {
    boards.push_back(Board(absl::StrCat("a1/b", i)));
  }
  Register("a1", boards);
  RunBaseline("a1/b0", 100);
  std::vector<v1::WorkItem> batch;
  for (int i = 0; i < kBoards; ++i) {
    batch.push_back(Lease(absl::StrCat("a1/b", i)));
    ASSERT_EQ(batch.back().reference_round(), 0);
  }
  // Every sibling is a real ~20% gain over the shared parent (each timed
  // A/B on its own board); they are equally good, so only the first kept
  // one counts and the others do not beat it by the minimum gain.
  const double medians[kBoards] = {80, 79.5, 80.5, 79.8};
  for (int i = 0; i < kBoards; ++i) {
    ReportMeasured(batch[i], Paired(medians[i], 100, 0.18));
  }
  std::map<int64_t, std::string> finished =
      MessagesByRound(id, v1::EVENT_KIND_ROUND_FINISHED);
  int kept = 0, rolled_back = 0;
  for (const v1::WorkItem& w : batch) {
    const v1::Round r = StoredRound(id, w.round_id());
    if (r.decision() == v1::DECISION_KEPT) ++kept;
    if (r.decision() == v1::DECISION_ROLLED_BACK) {
      ++rolled_back;
      EXPECT_THAT(r.decision_reason(), HasSubstr("not the current best round"));
      // The event says why a gain over the parent still rolled back.
      EXPECT_THAT(finished[w.round_id()],
                  HasSubstr(absl::StrCat(
                      "faster than its parent, not 2.0% faster than the best, "
                      "round ",
                      batch[0].round_id(), ")")));
    }
  }
  EXPECT_EQ(kept, 1);
  EXPECT_EQ(rolled_back, kBoards - 1);
  EXPECT_EQ(StoredSweep(id).best_round(), batch[0].round_id());
}

}  // namespace
}  // namespace tunefarm
