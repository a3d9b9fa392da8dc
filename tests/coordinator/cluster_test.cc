// A farm shared by teams: board reservations (policy file and admin RPCs),
// re-admitting a board that quarantined itself, and an admin's drain that
// outlives the agent's reconnects.
//
// The core tests drive a real Coordinator over a real RocksDB store with a
// FakeClock. The service tests go through the real gRPC services on loopback
// (port 0) as nobody, a user, an agent and an admin; the re-admit test runs
// a real Agent over gRPC with a real sim board that quarantines itself on
// cue, as an Ascend card does after device errors.
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/agent.h"
#include "agent/grpc_coordinator_client.h"
#include "agent/sim_board.h"
#include "common/clock.h"
#include "common/files.h"
#include "coordinator/auth.h"
#include "coordinator/control_loop.h"
#include "coordinator/coordinator.h"
#include "coordinator/farm_metrics.h"
#include "coordinator/health.h"
#include "coordinator/policy.h"
#include "coordinator/service.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "ops/catalog.h"
#include "storage/store.h"
#include "tests/coordinator/coordinator_harness.h"

namespace tunefarm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string Spec(const std::string& team, const std::string& boards) {
  return absl::StrCat(
      "name: cluster-test\nteam: ", team,
      "\noperator: sim_matmul\nworkload: square_2k\ngoal: {speedup: 1000}\n"
      "strategy: {name: random, seed: 5}\n"
      "budget: {max_rounds: 3, max_rounds_without_gain: 100}\nboards: ",
      boards, "\nmeasurement: {warmup: 1, samples: 3}\n");
}

v1::BoardInfo SimBoardInfo(const std::string& id,
                           const std::map<std::string, std::string>& labels) {
  v1::BoardInfo b;
  b.set_board_id(id);
  b.set_kind("sim");
  b.set_chip("Ascend910B-sim");
  b.set_simulated(true);
  for (const auto& [k, v] : labels) (*b.mutable_labels())[k] = v;
  return b;
}

v1::BoardReservation OfBoard(const std::string& board,
                             const std::string& team) {
  v1::BoardReservation r;
  r.set_board_id(board);
  r.set_team(team);
  return r;
}

v1::BoardReservation OfPool(const std::string& key, const std::string& value,
                            const std::string& team) {
  v1::BoardReservation r;
  (*r.mutable_labels())[key] = value;
  r.set_team(team);
  return r;
}

class CountingMetrics : public NoFarmMetrics {
 public:
  void BoardQuarantined(const v1::BoardInfo& b) override {
    ++quarantines[b.board_id()];
  }
  void HealthCheckRecorded(const v1::BoardInfo& b, bool passed) override {
    ++health_checks[b.board_id() + (passed ? "/passed" : "/failed")];
  }
  std::map<std::string, int> quarantines;
  std::map<std::string, int> health_checks;
};

class ClusterCoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto catalog = OperatorCatalog::LoadFromDirs({TUNEFARM_SOURCE_DIR "/ops"});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = std::make_unique<OperatorCatalog>(std::move(*catalog));
    options_.lease_duration = absl::Hours(1);
    options_.agent_timeout = absl::Hours(1);
    options_.default_quota.set_weight(1);
    ASSERT_TRUE(disk_.MakeDir("cluster_test").ok());
    ASSERT_NO_FATAL_FAILURE(Restart());
    Register({SimBoardInfo("a/0", {}), SimBoardInfo("a/1", {{"pool", "gold"}}),
              SimBoardInfo("a/2", {{"pool", "gold"}})});
  }
  // Opens the core, or restarts it, with the current `options_`.
  void Restart() {
    absl::Status st = disk_.Open(catalog_.get(), &clock_, options_, &metrics_);
    ASSERT_TRUE(st.ok()) << st;
  }
  Coordinator* coord() { return disk_.coordinator(); }
  Store* store() { return disk_.store(); }
  void Register(const std::vector<v1::BoardInfo>& boards) {
    v1::RegisterAgentRequest r;
    r.set_agent_id("a");
    r.set_node("node-a");
    for (const auto& b : boards) *r.add_boards() = b;
    ASSERT_TRUE(coord()->RegisterAgent(r).ok());
  }
  std::string Submit(const std::string& team, const std::string& boards) {
    v1::SubmitSweepRequest r;
    r.set_spec_yaml(Spec(team, boards));
    auto s = coord()->SubmitSweep(r, AnonymousAdmin());
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? s->sweep().sweep_id() : "";
  }
  // The sweep whose round board `id` gets now, "" when none.
  std::string LeaseSweep(const std::string& id) {
    v1::LeaseWorkRequest r;
    r.set_agent_id("a");
    r.set_board_id(id);
    auto w = coord()->LeaseWork(r);
    EXPECT_TRUE(w.ok()) << w.status();
    return w.ok() && w->granted() ? w->work().sweep_id() : "";
  }
  v1::LeaseWorkResponse LeaseWork(const std::string& id) {
    v1::LeaseWorkRequest r;
    r.set_agent_id("a");
    r.set_board_id(id);
    auto w = coord()->LeaseWork(r);
    EXPECT_TRUE(w.ok()) << w.status();
    return w.ok() ? *w : v1::LeaseWorkResponse();
  }
  v1::ReportResultResponse Report(const std::string& board,
                                  const v1::WorkItem& work, v1::Outcome outcome,
                                  double median_us) {
    v1::ReportResultRequest r;
    r.set_agent_id("a");
    r.set_board_id(board);
    r.set_lease_id(work.lease_id());
    r.set_epoch(work.epoch());
    r.set_sweep_id(work.sweep_id());
    r.set_round_id(work.round_id());
    r.mutable_result()->set_outcome(outcome);
    r.mutable_result()->set_detail(
        outcome == v1::OUTCOME_BOARD_LOST ? "device error 507015" : "");
    r.mutable_result()->mutable_precision()->set_passed(true);
    v1::Measurement* m = r.mutable_result()->mutable_measurement();
    m->set_median_us(median_us);
    m->set_samples(median_us > 0 ? 10 : 0);
    m->set_simulated(true);
    auto resp = coord()->ReportResult(r);
    EXPECT_TRUE(resp.ok()) << resp.status();
    return resp.ok() ? *resp : v1::ReportResultResponse();
  }
  std::string DetailOf(const std::string& id) {
    for (const v1::BoardInfo& b : coord()->ListBoards({})) {
      if (b.board_id() == id) return b.health_detail();
    }
    return "<no board>";
  }
  std::string ReservedFor(const std::string& id) {
    for (const v1::BoardInfo& b : coord()->ListBoards({})) {
      if (b.board_id() == id) return b.reserved_for();
    }
    return "<no board>";
  }
  v1::BoardState StateOf(const std::string& id) {
    for (const v1::BoardInfo& b : coord()->ListBoards({})) {
      if (b.board_id() == id) return b.state();
    }
    return v1::BOARD_STATE_UNSPECIFIED;
  }
  v1::HeartbeatResponse Beat(const std::string& id, v1::BoardState state) {
    v1::HeartbeatRequest r;
    r.set_agent_id("a");
    v1::BoardInfo* b = r.add_boards();
    b->set_board_id(id);
    b->set_state(state);
    if (state == v1::BOARD_STATE_QUARANTINED) {
      b->set_health_detail("2 device errors in a row");
    }
    auto resp = coord()->Heartbeat(r);
    EXPECT_TRUE(resp.ok()) << resp.status();
    return resp.ok() ? *resp : v1::HeartbeatResponse();
  }

  FakeClock clock_;
  CountingMetrics metrics_;
  CoordinatorOptions options_;
  std::unique_ptr<OperatorCatalog> catalog_;
  CoordinatorOnDisk disk_;
};

TEST_F(ClusterCoreTest, ReservedBoardServesOnlyItsTeamOthersGoElsewhere) {
  ASSERT_TRUE(coord()->ReserveBoards(OfBoard("a/0", "alpha")).ok());
  EXPECT_EQ(ReservedFor("a/0"), "alpha");
  EXPECT_EQ(ReservedFor("a/1"), "");
  const std::string beta = Submit("beta", "{kind: sim}");
  EXPECT_EQ(LeaseSweep("a/0"), "");  // beta never leases alpha's board
  EXPECT_EQ(LeaseSweep("a/1"), beta);
  const std::string alpha = Submit("alpha", "{kind: sim}");
  EXPECT_EQ(LeaseSweep("a/0"), alpha);
}

TEST_F(ClusterCoreTest, ReservedOnlySweepWaitsForItsTeamsPool) {
  const std::string alpha = Submit("alpha", "{kind: sim, reserved_only: true}");
  EXPECT_EQ(LeaseSweep("a/0"), "");
  EXPECT_EQ(LeaseSweep("a/1"), "");
  auto list = coord()->ReserveBoards(OfPool("pool", "gold", "alpha"));
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->reservations_size(), 1);
  EXPECT_FALSE(list->reservations(0).from_policy());
  EXPECT_EQ(ReservedFor("a/1"), "alpha");
  EXPECT_EQ(ReservedFor("a/2"), "alpha");
  EXPECT_EQ(LeaseSweep("a/0"),
            "");  // unreserved: not for a reserved_only sweep
  EXPECT_EQ(LeaseSweep("a/1"), alpha);
}

TEST_F(ClusterCoreTest, BoardReservationWinsOverPoolAndUnreserveFreesIt) {
  ASSERT_TRUE(coord()->ReserveBoards(OfPool("pool", "gold", "alpha")).ok());
  ASSERT_TRUE(coord()->ReserveBoards(OfBoard("a/2", "beta")).ok());
  EXPECT_EQ(ReservedFor("a/1"), "alpha");
  EXPECT_EQ(ReservedFor("a/2"), "beta");
  // Reserving the same pool again moves it to another team.
  ASSERT_TRUE(coord()->ReserveBoards(OfPool("pool", "gold", "gamma")).ok());
  EXPECT_EQ(ReservedFor("a/1"), "gamma");
  auto left = coord()->UnreserveBoards(OfPool("pool", "gold", ""));
  ASSERT_TRUE(left.ok()) << left.status();
  ASSERT_EQ(left->reservations_size(), 1);
  EXPECT_EQ(left->reservations(0).board_id(), "a/2");
  EXPECT_EQ(ReservedFor("a/1"), "");
  const std::string delta = Submit("delta", "{kind: sim}");
  EXPECT_EQ(LeaseSweep("a/1"), delta);
}

TEST_F(ClusterCoreTest, BadReservationsAreRefusedNamingTheField) {
  v1::BoardReservation both = OfBoard("a/0", "alpha");
  (*both.mutable_labels())["pool"] = "gold";
  auto st = coord()->ReserveBoards(both).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()), HasSubstr("board_id and labels"));
  st = coord()->ReserveBoards(v1::BoardReservation()).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  st = coord()->ReserveBoards(OfBoard("a/0", "")).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()), HasSubstr("reservation.team"));
  st = coord()->UnreserveBoards(OfBoard("a/0", "")).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(st.message()), HasSubstr("board a/0"));
  EXPECT_EQ(ReservedFor("a/0"), "");  // nothing changed
}

TEST_F(ClusterCoreTest, AdminReservationsSurviveRestartPolicyOnesAreFixed) {
  ASSERT_TRUE(coord()->ReserveBoards(OfBoard("a/0", "alpha")).ok());
  v1::BoardReservation from_file = OfPool("pool", "gold", "beta");
  from_file.set_from_policy(true);
  options_.reservations = {from_file};
  Restart();
  // Until its agent registers again the board is lost, but still reserved.
  EXPECT_EQ(ReservedFor("a/0"), "alpha");
  Register({SimBoardInfo("a/0", {}), SimBoardInfo("a/1", {{"pool", "gold"}})});
  EXPECT_EQ(ReservedFor("a/0"), "alpha");
  EXPECT_EQ(ReservedFor("a/1"), "beta");
  for (auto st :
       {coord()->ReserveBoards(OfPool("pool", "gold", "alpha")).status(),
        coord()->UnreserveBoards(OfPool("pool", "gold", "")).status()}) {
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(st.message()), HasSubstr("policy file"));
  }
  EXPECT_EQ(ReservedFor("a/1"), "beta");
}

TEST_F(ClusterCoreTest, ReadmitIsSentToTheAgentUntilItLiftsItsFlag) {
  EXPECT_THAT(Beat("a/0", v1::BOARD_STATE_IDLE).readmitted_board_ids(),
              IsEmpty());
  Beat("a/0", v1::BOARD_STATE_QUARANTINED);
  EXPECT_EQ(StateOf("a/0"), v1::BOARD_STATE_QUARANTINED);
  EXPECT_EQ(metrics_.quarantines["a/0"], 1);
  EXPECT_THAT(Beat("a/0", v1::BOARD_STATE_QUARANTINED).readmitted_board_ids(),
              IsEmpty());
  Submit("alpha", "{kind: sim}");
  EXPECT_EQ(LeaseSweep("a/0"), "");

  v1::BoardAdminRequest admit;
  admit.set_board_id("a/0");
  admit.set_reason("card reseated");
  ASSERT_TRUE(coord()->AdmitBoard(admit).ok());
  EXPECT_EQ(StateOf("a/0"), v1::BOARD_STATE_IDLE);
  // The agent has not heard yet: it is told again on every heartbeat, and
  // its stale report does not quarantine the board again.
  for (int i = 0; i < 2; ++i) {
    EXPECT_THAT(Beat("a/0", v1::BOARD_STATE_QUARANTINED).readmitted_board_ids(),
                ElementsAre("a/0"));
    EXPECT_EQ(StateOf("a/0"), v1::BOARD_STATE_IDLE);
  }
  EXPECT_THAT(Beat("a/0", v1::BOARD_STATE_IDLE).readmitted_board_ids(),
              IsEmpty());
  // A new fault after that is a new quarantine.
  EXPECT_THAT(Beat("a/0", v1::BOARD_STATE_QUARANTINED).readmitted_board_ids(),
              IsEmpty());
  EXPECT_EQ(StateOf("a/0"), v1::BOARD_STATE_QUARANTINED);
  EXPECT_EQ(metrics_.quarantines["a/0"], 2);
}

TEST_F(ClusterCoreTest, DrainOutlivesTheAgentReconnecting) {
  v1::BoardAdminRequest drain;
  drain.set_board_id("a/0");
  ASSERT_TRUE(coord()->DrainBoard(drain).ok());
  Register({SimBoardInfo("a/0", {}), SimBoardInfo("a/1", {{"pool", "gold"}})});
  EXPECT_EQ(StateOf("a/0"), v1::BOARD_STATE_DRAINING);
  Submit("alpha", "{kind: sim}");
  EXPECT_EQ(LeaseSweep("a/0"), "");
}

// --- health checks (LAVA style) ----------------------------------------------

class HealthCheckTest : public ClusterCoreTest {
 protected:
  void SetUp() override {
    ClusterCoreTest::SetUp();
    auto checks =
        LoadHealthChecks(TUNEFARM_SOURCE_DIR "/ops/health", *catalog_);
    ASSERT_TRUE(checks.ok()) << checks.status();
    ASSERT_TRUE(checks->contains("sim"));
    golden_ = checks->at("sim");
    options_.health_checks = *std::move(checks);
    options_.health_check_interval = absl::Minutes(60);
    options_.health_retry_interval = absl::Minutes(5);
    options_.agent_timeout = absl::Hours(24);  // the clock jumps by hours
    ASSERT_NO_FATAL_FAILURE(Restart());
    Register({SimBoardInfo("a/0", {}), SimBoardInfo("a/1", {})});
    sweep_ = Submit("alpha", "{kind: sim}");
  }
  double InRange() const { return (golden_.min_us + golden_.max_us) / 2; }
  // Runs the golden on `id` and reports `median_us`; the lease must be a
  // health check.
  v1::ReportResultResponse Check(const std::string& id, double median_us,
                                 v1::Outcome outcome = v1::OUTCOME_OK) {
    v1::LeaseWorkResponse w = LeaseWork(id);
    EXPECT_TRUE(w.granted());
    EXPECT_TRUE(w.work().health_check()) << w.work().lease_id();
    return Report(id, w.work(), outcome, median_us);
  }

  HealthCheck golden_;
  std::string sweep_;
};

TEST_F(HealthCheckTest, ABoardRunsItsGoldenWhenItJoinsBeforeAnySweepWork) {
  v1::LeaseWorkResponse w = LeaseWork("a/0");
  ASSERT_TRUE(w.granted());
  EXPECT_TRUE(w.work().health_check());
  EXPECT_EQ(w.work().sweep_id(), "");
  EXPECT_EQ(w.work().operator_().name(), "sim_matmul");
  EXPECT_EQ(w.work().workload().name(), "square_2k");
  EXPECT_EQ(w.work().measurement().samples(), 10);
  EXPECT_FALSE(w.work().params().empty());  // the operator's defaults
  EXPECT_EQ(StateOf("a/0"), v1::BOARD_STATE_BUSY);
  // A renewal keeps it alive like any lease.
  v1::RenewLeaseRequest renew;
  renew.set_agent_id("a");
  renew.set_lease_id(w.work().lease_id());
  renew.set_epoch(w.work().epoch());
  auto renewed = coord()->RenewLease(renew);
  ASSERT_TRUE(renewed.ok()) << renewed.status();
  EXPECT_TRUE(renewed->valid());

  v1::ReportResultResponse r =
      Report("a/0", w.work(), v1::OUTCOME_OK, InRange());
  EXPECT_TRUE(r.accepted()) << r.reason();
  EXPECT_EQ(StateOf("a/0"), v1::BOARD_STATE_IDLE);
  EXPECT_THAT(DetailOf("a/0"), HasSubstr("health check passed"));
  EXPECT_THAT(DetailOf("a/0"), HasSubstr("[simulated]"));
  EXPECT_EQ(metrics_.health_checks["a/0/passed"], 1);
  // A retry of the same report is stale: recorded once.
  EXPECT_FALSE(Report("a/0", w.work(), v1::OUTCOME_OK, InRange()).accepted());
  EXPECT_EQ(metrics_.health_checks["a/0/passed"], 1);
  // Now the sweep's baseline, and the check left no trace in the sweep.
  v1::LeaseWorkResponse next = LeaseWork("a/0");
  ASSERT_TRUE(next.granted());
  EXPECT_FALSE(next.work().health_check());
  EXPECT_EQ(next.work().sweep_id(), sweep_);
  EXPECT_EQ(next.work().round_id(), 0);
  EXPECT_EQ(next.work().epoch(), 1);
  auto rounds = store()->ListRounds(sweep_);
  ASSERT_TRUE(rounds.ok());
  EXPECT_EQ(rounds->size(), 1u);
}

TEST_F(HealthCheckTest, AFailedCheckQuarantinesUntilARecheckPasses) {
  // Too slow: outside the golden's range.
  EXPECT_TRUE(Check("a/0", golden_.max_us * 3).accepted());
  EXPECT_EQ(StateOf("a/0"), v1::BOARD_STATE_QUARANTINED);
  EXPECT_THAT(DetailOf("a/0"), HasSubstr("health check failed"));
  EXPECT_THAT(DetailOf("a/0"), HasSubstr("outside"));
  EXPECT_EQ(metrics_.quarantines["a/0"], 1);
  EXPECT_EQ(metrics_.health_checks["a/0/failed"], 1);
  // No sweep work, and no re-check before the retry interval.
  v1::LeaseWorkResponse none = LeaseWork("a/0");
  EXPECT_FALSE(none.granted());
  clock_.Advance(absl::Minutes(5));
  // The re-check fails too (wrong output): still quarantined, counted once.
  EXPECT_TRUE(Check("a/0", 0, v1::OUTCOME_PRECISION_FAILED).accepted());
  EXPECT_EQ(StateOf("a/0"), v1::BOARD_STATE_QUARANTINED);
  EXPECT_THAT(DetailOf("a/0"), HasSubstr("OUTCOME_PRECISION_FAILED"));
  EXPECT_EQ(metrics_.quarantines["a/0"], 1);
  EXPECT_EQ(metrics_.health_checks["a/0/failed"], 2);
  clock_.Advance(absl::Minutes(5));
  EXPECT_TRUE(Check("a/0", InRange()).accepted());
  EXPECT_EQ(StateOf("a/0"), v1::BOARD_STATE_IDLE);
  EXPECT_EQ(LeaseWork("a/0").work().sweep_id(), sweep_);
}

TEST_F(HealthCheckTest, BoardFaultRequeuesTheRoundUnblamedAndRechecksTheBoard) {
  EXPECT_TRUE(Check("a/0", InRange()).accepted());
  EXPECT_TRUE(Check("a/1", InRange()).accepted());
  v1::LeaseWorkResponse w = LeaseWork("a/0");
  ASSERT_EQ(w.work().sweep_id(), sweep_);
  EXPECT_TRUE(Report("a/0", w.work(), v1::OUTCOME_BOARD_LOST, 0).accepted());
  // The variant is not judged: its round is queued again, nothing counted.
  auto sweep = store()->GetSweep(sweep_);
  ASSERT_TRUE(sweep.ok());
  EXPECT_EQ(sweep->rounds_finished(), 0);
  EXPECT_EQ(sweep->rounds_without_gain(), 0);
  auto round = store()->GetRound(sweep_, 0);
  ASSERT_TRUE(round.ok());
  EXPECT_EQ(round->state(), v1::ROUND_STATE_QUEUED);
  EXPECT_EQ(round->decision(), v1::DECISION_UNSPECIFIED);
  // The faulty board proves itself first; the other board takes the round.
  v1::LeaseWorkResponse check = LeaseWork("a/0");
  EXPECT_TRUE(check.work().health_check());
  v1::LeaseWorkResponse again = LeaseWork("a/1");
  EXPECT_EQ(again.work().sweep_id(), sweep_);
  EXPECT_EQ(again.work().round_id(), 0);
  EXPECT_EQ(again.work().epoch(), 2);
}

TEST_F(HealthCheckTest, PeriodicRecheckExpiryAndAdminReadmit) {
  EXPECT_TRUE(Check("a/0", InRange()).accepted());
  EXPECT_FALSE(LeaseWork("a/0").work().health_check());  // the baseline
  clock_.Advance(absl::Minutes(61));
  ASSERT_TRUE(coord()->Tick().ok());  // expires the baseline's lease
  // Due again after the interval; the agent never answers this one.
  v1::LeaseWorkResponse w = LeaseWork("a/0");
  ASSERT_TRUE(w.work().health_check());
  clock_.Advance(options_.lease_duration + absl::Seconds(1));
  ASSERT_TRUE(coord()->Tick().ok());
  EXPECT_EQ(StateOf("a/0"), v1::BOARD_STATE_QUARANTINED);
  EXPECT_THAT(DetailOf("a/0"), HasSubstr("no result within the lease"));
  // Its late result is stale, and changes nothing.
  EXPECT_FALSE(Report("a/0", w.work(), v1::OUTCOME_OK, InRange()).accepted());
  EXPECT_EQ(StateOf("a/0"), v1::BOARD_STATE_QUARANTINED);
  // An admin's word puts it straight back in service.
  v1::BoardAdminRequest admit;
  admit.set_board_id("a/0");
  ASSERT_TRUE(coord()->AdmitBoard(admit).ok());
  v1::LeaseWorkResponse next = LeaseWork("a/0");
  EXPECT_TRUE(next.granted());
  EXPECT_FALSE(next.work().health_check());
}

TEST(HealthCheckFileTest, BadGoldensAreRefusedNamingFileAndField) {
  auto catalog = OperatorCatalog::LoadFromDirs({TUNEFARM_SOURCE_DIR "/ops"});
  ASSERT_TRUE(catalog.ok());
  struct Bad {
    const char* yaml;
    const char* names;
  } bad[] = {
      {"operator: sim_matmul\n", "expect_us: missing"},
      {"operator: sim_matmul\nexpect_us: {min: 9, max: 3}\n",
       "need 0 <= min < max"},
      {"operator: sim_matmul\nexpect_us: {min: 1}\n", "expect_us: expected"},
      {"operator: nope\nexpect_us: {min: 1, max: 3}\n", "unknown operator"},
      {"operator: sim_matmul\nworkload: huge\nexpect_us: {min: 1, max: 3}\n",
       "workload"},
      {"operator: sim_matmul\nbaseline: {tile_q: 3}\n"
       "expect_us: {min: 1, max: 3}\n",
       "baseline.tile_q"},
      {"operator: sim_matmul\nexpect: {min: 1, max: 3}\n",
       "expect: unknown key"},
      {"[1", "not valid YAML"},
  };
  for (const Bad& b : bad) {
    auto r = ParseHealthCheck(b.yaml, "health/sim.yaml", "sim", *catalog);
    ASSERT_FALSE(r.ok()) << b.yaml;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(b.names))
        << r.status();
    EXPECT_THAT(std::string(r.status().message()),
                HasSubstr("health/sim.yaml"));
  }
  auto shipped = LoadHealthChecks(TUNEFARM_SOURCE_DIR "/ops/health", *catalog);
  ASSERT_TRUE(shipped.ok()) << shipped.status();
  for (const auto& [kind, check] : *shipped) {
    EXPECT_EQ(check.spec.boards().kind(), kind);
    EXPECT_LT(check.min_us, check.max_us);
  }
  EXPECT_EQ(LoadHealthChecks("/nonexistent/health", *catalog).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(ReservationPolicyTest, ParsesReservationsAndNamesBadEntries) {
  auto p = ParseTeamPolicy(
      "reservations:\n"
      "  - {board: rack1/npu0, team: vision, reason: qualification}\n"
      "  - {labels: {pool: a100}, team: speech}\n",
      "policy.yaml");
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->reservations.size(), 2u);
  EXPECT_EQ(p->reservations[0].board_id(), "rack1/npu0");
  EXPECT_EQ(p->reservations[0].team(), "vision");
  EXPECT_TRUE(p->reservations[0].from_policy());
  EXPECT_EQ(p->reservations[1].labels().at("pool"), "a100");
  struct Bad {
    const char* yaml;
    const char* names;
  } bad[] = {
      {"reservations: {board: x}\n", "reservations: not a list"},
      {"reservations:\n  - {board: x}\n", "reservations[0].team"},
      {"reservations:\n  - {team: t}\n", "reservations[0]: name exactly one"},
      {"reservations:\n  - {board: x, labels: {a: b}, team: t}\n",
       "reservations[0]: name exactly one"},
      {"reservations:\n  - {board: x, team: t}\n  - {bord: y, team: t}\n",
       "reservations[1].bord: unknown key"},
      {"reservations:\n  - {labels: {}, team: t}\n",
       "reservations[0].labels: expected a non-empty mapping"},
  };
  for (const Bad& b : bad) {
    auto r = ParseTeamPolicy(b.yaml, "p.yaml");
    ASSERT_FALSE(r.ok()) << b.yaml;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(b.names))
        << r.status();
  }
}

// --- over real gRPC ---------------------------------------------------------

constexpr char kTokens[] = R"(
tokens:
  - {name: alice, team: alpha, role: user, token: "alpha-token-0123456789"}
  - {name: bob, team: beta, role: user, token: "beta-token-0123456789ab"}
  - {name: ops, role: admin, token: "admin-token-0123456789a"}
  - {name: rack1, role: agent, token: "agent-token-0123456789a"}
)";
constexpr char kAlpha[] = "alpha-token-0123456789";
constexpr char kBeta[] = "beta-token-0123456789ab";
constexpr char kAdmin[] = "admin-token-0123456789a";
constexpr char kAgent[] = "agent-token-0123456789a";

// A real sim board that quarantines itself on cue, as an Ascend card does
// after device errors, and lifts it only when re-admitted.
class SelfQuarantiningBoard : public Board {
 public:
  explicit SelfQuarantiningBoard(std::unique_ptr<Board> inner)
      : inner_(std::move(inner)), healthy_(inner_->info()), sick_(healthy_) {
    sick_.set_state(v1::BOARD_STATE_QUARANTINED);
    sick_.set_health_detail("2 device errors in a row (test)");
  }
  v1::BoardInfo info() const override {
    return quarantined.load() ? sick_ : healthy_;
  }
  absl::StatusOr<Evaluation> Evaluate(
      const v1::WorkItem& work, const std::atomic<bool>& cancel) override {
    if (quarantined.load()) {
      return absl::FailedPreconditionError("quarantined");
    }
    ++evaluations;
    return inner_->Evaluate(work, cancel);
  }
  void Readmit() override {
    quarantined = false;
    ++readmits;
  }

  std::atomic<bool> quarantined{true};
  std::atomic<int> evaluations{0};
  std::atomic<int> readmits{0};

 private:
  std::unique_ptr<Board> inner_;
  v1::BoardInfo healthy_, sick_;
};

class ClusterServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto catalog = OperatorCatalog::LoadFromDirs({TUNEFARM_SOURCE_DIR "/ops"});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = std::make_unique<OperatorCatalog>(std::move(*catalog));
    auto tokens = TokenTable::Parse(kTokens, "tokens.yaml");
    ASSERT_TRUE(tokens.ok());
    tokens_ = std::make_unique<TokenTable>(std::move(*tokens));
    CoordinatorOptions o;
    o.lease_duration = absl::Seconds(30);
    o.heartbeat_interval = absl::Milliseconds(20);
    o.agent_timeout = absl::Hours(1);
    o.default_quota.set_weight(1);
    ASSERT_TRUE(disk_.MakeDir("cluster_service_test").ok());
    absl::Status st = disk_.Open(catalog_.get(), &SystemClock(), o);
    ASSERT_TRUE(st.ok()) << st;
    st = services_.Start(disk_.coordinator(), disk_.store(), tokens_.get());
    ASSERT_TRUE(st.ok()) << st;
  }
  static std::unique_ptr<grpc::ClientContext> As(const std::string& token) {
    return LoopbackServices::As(token);
  }
  v1::TuneFarm::Stub* farm() { return services_.farm(); }
  v1::AgentService::Stub* agent() { return services_.agent(); }
  grpc::Status Reserve(const std::string& token, const v1::BoardReservation& r,
                       bool reserve = true) {
    v1::ReserveBoardsRequest req;
    *req.mutable_reservation() = r;
    v1::ListReservationsResponse resp;
    return reserve ? farm()->ReserveBoards(As(token).get(), req, &resp)
                   : farm()->UnreserveBoards(As(token).get(), req, &resp);
  }
  std::string Submit(const std::string& token, const std::string& team,
                     const std::string& boards) {
    v1::SubmitSweepRequest req;
    req.set_spec_yaml(Spec(team, boards));
    v1::SubmitSweepResponse resp;
    grpc::Status st = farm()->SubmitSweep(As(token).get(), req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp.sweep().sweep_id();
  }
  // The agent's gRPC client, with the agents' token.
  absl::StatusOr<std::unique_ptr<CoordinatorClient>> AgentClient() {
    ClientSecurity security;
    security.token = kAgent;
    return NewGrpcCoordinatorClient(
        absl::StrCat("127.0.0.1:", services_.port()), security,
        absl::Seconds(10));
  }
  v1::BoardInfo BoardSeenBy(const std::string& token, const std::string& id) {
    v1::ListBoardsResponse resp;
    EXPECT_TRUE(
        farm()
            ->ListBoards(As(token).get(), v1::ListBoardsRequest(), &resp)
            .ok());
    for (const v1::BoardInfo& b : resp.boards()) {
      if (b.board_id() == id) return b;
    }
    return v1::BoardInfo();
  }

  std::unique_ptr<OperatorCatalog> catalog_;
  std::unique_ptr<TokenTable> tokens_;
  CoordinatorOnDisk disk_;
  LoopbackServices services_;  // after disk_: stops first
};

TEST_F(ClusterServiceTest, OnlyAdminsReserveAndOtherTeamsNeverLeaseIt) {
  v1::RegisterAgentRequest reg;
  reg.set_agent_id("rack1");
  *reg.add_boards() = SimBoardInfo("rack1/0", {});
  *reg.add_boards() = SimBoardInfo("rack1/1", {});
  v1::RegisterAgentResponse reg_resp;
  ASSERT_TRUE(agent()->RegisterAgent(As(kAgent).get(), reg, &reg_resp).ok());

  const v1::BoardReservation r = OfBoard("rack1/0", "alpha");
  EXPECT_EQ(Reserve("", r).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Reserve("forged-token-0000000000", r).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  for (const char* token : {kAlpha, kBeta, kAgent}) {
    EXPECT_EQ(Reserve(token, r).error_code(),
              grpc::StatusCode::PERMISSION_DENIED)
        << token;
    EXPECT_EQ(Reserve(token, r, false).error_code(),
              grpc::StatusCode::PERMISSION_DENIED)
        << token;
  }
  EXPECT_EQ(BoardSeenBy(kAlpha, "rack1/0").reserved_for(), "");
  ASSERT_TRUE(Reserve(kAdmin, r).ok());
  EXPECT_EQ(BoardSeenBy(kBeta, "rack1/0").reserved_for(), "alpha");
  EXPECT_EQ(Reserve(kAdmin, OfBoard("rack1/1", "")).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  // Beta's sweep is scheduled elsewhere, never refused.
  const std::string beta = Submit(kBeta, "beta", "{kind: sim}");
  auto lease = [&](const std::string& board) {
    v1::LeaseWorkRequest req;
    req.set_agent_id("rack1");
    req.set_board_id(board);
    v1::LeaseWorkResponse resp;
    EXPECT_TRUE(agent()->LeaseWork(As(kAgent).get(), req, &resp).ok());
    return resp.granted() ? resp.work().sweep_id() : "";
  };
  EXPECT_EQ(lease("rack1/0"), "");
  EXPECT_EQ(lease("rack1/1"), beta);
  const std::string alpha = Submit(kAlpha, "alpha", "{kind: sim}");
  EXPECT_EQ(lease("rack1/0"), alpha);
  ASSERT_TRUE(Reserve(kAdmin, r, false).ok());
  EXPECT_EQ(BoardSeenBy(kAdmin, "rack1/0").reserved_for(), "");
}

// An operator manifest crosses the wire once per agent: a lease request
// that names its digest gets the work item without it, and the agent's
// client puts it back, so its boards see whole work items.
TEST_F(ClusterServiceTest, AnAgentGetsAnOperatorsManifestOnceOverTheWire) {
  v1::RegisterAgentRequest reg;
  reg.set_agent_id("rack1");
  *reg.add_boards() = SimBoardInfo("rack1/0", {});
  *reg.add_boards() = SimBoardInfo("rack1/1", {});
  v1::RegisterAgentResponse reg_resp;
  ASSERT_TRUE(agent()->RegisterAgent(As(kAgent).get(), reg, &reg_resp).ok());
  const std::string first = Submit(kAlpha, "alpha", "{kind: sim}");
  const std::string second = Submit(kAlpha, "alpha", "{kind: sim}");
  auto lease = [&](const std::string& board,
                   const std::vector<std::string>& held) {
    v1::LeaseWorkRequest req;
    req.set_agent_id("rack1");
    req.set_board_id(board);
    for (const std::string& d : held) req.add_held_operator_digests(d);
    v1::LeaseWorkResponse resp;
    EXPECT_TRUE(agent()->LeaseWork(As(kAgent).get(), req, &resp).ok());
    EXPECT_TRUE(resp.granted()) << board;
    return resp.work();
  };

  // Nothing held: the manifest comes, named by its digest.
  const v1::WorkItem whole = lease("rack1/0", {});
  EXPECT_EQ(whole.sweep_id(), first);
  ASSERT_TRUE(whole.has_operator_());
  EXPECT_EQ(whole.operator_().name(), "sim_matmul");
  ASSERT_EQ(whole.operator_digest().size(), 64u) << whole.operator_digest();

  // Held: the other sweep of the same operator comes without it.
  const v1::WorkItem bare = lease("rack1/1", {"0123", whole.operator_digest()});
  EXPECT_EQ(bare.sweep_id(), second);
  EXPECT_FALSE(bare.has_operator_());
  EXPECT_EQ(bare.operator_digest(), whole.operator_digest());

  // A digest of something else does not stand for it.
  const v1::WorkItem again = lease("rack1/0", {std::string(64, 'a')});
  EXPECT_TRUE(again.has_operator_());
  EXPECT_EQ(again.operator_digest(), whole.operator_digest());

  // The agent's client: the first lease brings the manifest, the next ones
  // are completed from what it holds.
  auto client = AgentClient();
  ASSERT_TRUE(client.ok()) << client.status();
  v1::LeaseWorkRequest req;
  req.set_agent_id("rack1");
  for (const char* board : {"rack1/0", "rack1/1", "rack1/0"}) {
    req.set_board_id(board);
    absl::StatusOr<v1::LeaseWorkResponse> r = (*client)->LeaseWork(req);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(r->granted()) << board;
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
        r->work().operator_(), whole.operator_()))
        << board;
  }
}

TEST_F(ClusterServiceTest, AdminReadmitLiftsTheAgentsOwnQuarantine) {
  const std::string bin = SIM_MATMUL_BIN;
  SimBoardOptions so;
  so.board_id = "rack1/sim0";
  so.agent_id = "rack1";
  so.node = "node1";
  so.bin_dir = bin.substr(0, bin.rfind('/'));
  so.work_root = disk_.dir() + "/work";
  auto board = std::make_unique<SelfQuarantiningBoard>(NewSimBoard(so));
  SelfQuarantiningBoard* sick = board.get();
  std::vector<std::unique_ptr<Board>> boards;
  boards.push_back(std::move(board));
  auto client = AgentClient();
  ASSERT_TRUE(client.ok()) << client.status();
  // The agent's waits run on simulated time, which moves only here.
  FakeClock agent_clock;
  AgentOptions ao;
  ao.agent_id = "rack1";
  ao.node = "node1";
  ao.clock = &agent_clock;
  Agent agent(ao, client->get(), nullptr, std::move(boards));
  std::atomic<bool> stop{false};
  std::thread runner([&] { agent.Run(stop); });

  const std::string sweep = Submit(kAlpha, "alpha", "{kind: sim}");
  // One heartbeat interval (20 ms) of agent time per step, each step once
  // the agent sleeps again (or after 50 ms of real time while it works),
  // until `cond` holds; at most 30 s of real time.
  auto advance_until = [&](const std::function<bool()>& cond) {
    const absl::Time end = absl::Now() + absl::Seconds(30);
    while (!cond() && absl::Now() < end) {
      agent_clock.WaitForSleepers(2, absl::Milliseconds(50));
      agent_clock.Advance(absl::Milliseconds(20));
    }
    return cond();
  };
  EXPECT_TRUE(advance_until([&] {
    return BoardSeenBy(kAdmin, "rack1/sim0").state() ==
           v1::BOARD_STATE_QUARANTINED;
  }));
  // Three seconds of agent time later (150 heartbeats, three looks at the
  // quarantine by the board's worker, each step taken only once the
  // heartbeat thread and the worker both sleep) it has still run nothing.
  for (int i = 0; i < 150; ++i) {
    ASSERT_TRUE(agent_clock.WaitForSleepers(2))
        << "the agent's heartbeat thread and worker never both slept";
    agent_clock.Advance(absl::Milliseconds(20));
  }
  ASSERT_TRUE(agent_clock.WaitForSleepers(2));
  EXPECT_EQ(sick->evaluations.load(), 0);
  EXPECT_EQ(sick->readmits.load(), 0);

  v1::BoardAdminRequest admit;
  admit.set_board_id("rack1/sim0");
  admit.set_reason("card reseated");
  v1::BoardInfo admitted;
  EXPECT_EQ(farm()->AdmitBoard(As(kAlpha).get(), admit, &admitted).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  ASSERT_TRUE(farm()->AdmitBoard(As(kAdmin).get(), admit, &admitted).ok());
  EXPECT_TRUE(advance_until([&] { return sick->readmits.load() == 1; }));
  EXPECT_FALSE(sick->quarantined.load());
  // Back in service: the board runs the sweep's rounds.
  EXPECT_TRUE(advance_until([&] { return sick->evaluations.load() > 0; }));
  EXPECT_NE(BoardSeenBy(kAdmin, "rack1/sim0").state(),
            v1::BOARD_STATE_QUARANTINED);
  stop = true;
  runner.join();
  EXPECT_EQ(sick->readmits.load(), 1);
  EXPECT_FALSE(sweep.empty());
}

}  // namespace
}  // namespace tunefarm
