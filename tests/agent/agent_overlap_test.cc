// Build/run overlap (issue 5): prefetched leases in the coordinator core and
// the agent that leases and builds a board's next variant while the current
// one runs.
//
// The coordinator tests drive a real Coordinator (real RocksDB in a temp
// dir, FakeClock for expiry). The agent tests run a real Agent against a real
// Coordinator core through an in-process CoordinatorClient (the core is
// single-threaded, so calls are serialised as the gRPC adapter does), with
// real sim boards running the real tunefarm-sim-matmul program. The boards
// are wrapped to record when each variant is built ahead and evaluated, and
// (for determinism) to hold an evaluation until the test releases it.
#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "agent/agent.h"
#include "agent/sim_board.h"
#include "common/clock.h"
#include "common/files.h"
#include "coordinator/auth.h"
#include "coordinator/coordinator.h"
#include "gtest/gtest.h"
#include "ops/catalog.h"
#include "storage/store.h"
#include "tests/coordinator/coordinator_harness.h"

namespace tunefarm {
namespace {

std::string SimSpec(const std::string& name, int max_rounds) {
  return absl::StrCat("name: ", name,
                      "\nteam: qa\noperator: sim_matmul\ngoal: {speedup: 100}\n"
                      "strategy: grid\nbudget: {max_rounds: ",
                      max_rounds, ", max_rounds_without_gain: ", max_rounds,
                      "}\nmin_gain: 0.02\nboards: {kind: sim}\n"
                      "measurement: {warmup: 1, samples: 5}\n");
}

// A real Coordinator over a real store; the tests call it directly.
class CoreFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(disk_.MakeDir("agent_overlap_test").ok());
    absl::StatusOr<v1::OperatorManifest> op = LoadOperatorManifest(
        std::string(TUNEFARM_SOURCE_DIR) + "/ops/sim_matmul");
    ASSERT_TRUE(op.ok()) << op.status();
    catalog_.Add(*op);
    ASSERT_NO_FATAL_FAILURE(Restart());
  }
  // Opens the core, or restarts it (memory dropped, state recovered).
  void Restart() {
    CoordinatorOptions options;
    options.lease_duration = absl::Seconds(10);
    options.agent_timeout = absl::Seconds(30);
    absl::Status st = disk_.Open(&catalog_, clock(), options);
    ASSERT_TRUE(st.ok()) << st;
  }
  Coordinator* coord() { return disk_.coordinator(); }
  virtual Clock* clock() { return &fake_clock_; }

  std::string Submit(const std::string& yaml) {
    v1::SubmitSweepRequest request;
    request.set_spec_yaml(yaml);
    auto r = coord()->SubmitSweep(request, AnonymousAdmin());
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->sweep().sweep_id() : "";
  }
  // The agent (re-)registers `board`, claiming the leases it holds.
  void RegisterBoard(const std::string& agent, const std::string& board,
                     const std::string& current_lease = "",
                     const std::string& lease_ahead = "",
                     const std::vector<std::string>& more_ahead = {}) {
    v1::RegisterAgentRequest request;
    request.set_agent_id(agent);
    request.set_node("node");
    v1::BoardInfo* b = request.add_boards();
    b->set_board_id(board);
    b->set_kind("sim");
    b->set_chip("Ascend910B-sim");
    b->set_simulated(true);
    b->set_current_lease_id(current_lease);
    b->set_lease_ahead_id(lease_ahead);
    for (const std::string& id : more_ahead) b->add_more_lease_ahead_ids(id);
    ASSERT_TRUE(coord()->RegisterAgent(request).ok());
  }
  v1::LeaseWorkResponse Lease(const std::string& agent,
                              const std::string& board, bool prefetch,
                              int max_ahead = 0) {
    v1::LeaseWorkRequest request;
    request.set_agent_id(agent);
    request.set_board_id(board);
    request.set_prefetch(prefetch);
    request.set_max_ahead(max_ahead);
    auto r = coord()->LeaseWork(request);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : v1::LeaseWorkResponse();
  }
  bool Renew(const std::string& agent, const v1::WorkItem& w) {
    v1::RenewLeaseRequest request;
    request.set_agent_id(agent);
    request.set_lease_id(w.lease_id());
    request.set_epoch(w.epoch());
    auto r = coord()->RenewLease(request);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() && r->valid();
  }
  v1::ReportResultResponse ReportOk(const std::string& agent,
                                    const std::string& board,
                                    const v1::WorkItem& w) {
    v1::ReportResultRequest request;
    request.set_agent_id(agent);
    request.set_board_id(board);
    request.set_lease_id(w.lease_id());
    request.set_epoch(w.epoch());
    request.set_sweep_id(w.sweep_id());
    request.set_round_id(w.round_id());
    v1::RoundResult* result = request.mutable_result();
    result->set_outcome(v1::OUTCOME_OK);
    result->mutable_precision()->set_passed(true);
    v1::Measurement* m = result->mutable_measurement();
    m->set_median_us(100);
    m->set_p20_us(99);
    m->set_p80_us(101);
    m->set_min_us(98);
    m->set_max_us(102);
    m->set_samples(5);
    m->set_warmup(1);
    auto r = coord()->ReportResult(request);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : v1::ReportResultResponse();
  }
  std::string CurrentLease(const std::string& board) {
    for (const v1::BoardInfo& b : coord()->ListBoards({})) {
      if (b.board_id() == board) return b.current_lease_id();
    }
    return "?";
  }
  v1::RoundState RoundState(const std::string& sweep, int64_t round) {
    auto r = disk_.store()->GetRound(sweep, round);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->state() : v1::ROUND_STATE_UNSPECIFIED;
  }

  // Board a1/sim0 runs sweep "one"'s baseline and holds sweep "two"'s
  // baseline ahead.
  struct CurrentAndAhead {
    std::string s1, s2;
    v1::WorkItem current, ahead;
  };
  void LeaseCurrentAndAhead(CurrentAndAhead* held) {
    RegisterBoard("a1", "a1/sim0");
    held->s1 = Submit(SimSpec("one", 3));
    held->s2 = Submit(SimSpec("two", 3));
    v1::LeaseWorkResponse current = Lease("a1", "a1/sim0", false);
    v1::LeaseWorkResponse ahead = Lease("a1", "a1/sim0", true);
    ASSERT_TRUE(current.granted() && ahead.granted());
    ASSERT_EQ(current.work().sweep_id(), held->s1);
    ASSERT_EQ(ahead.work().sweep_id(), held->s2);
    held->current = current.work();
    held->ahead = ahead.work();
  }

  FakeClock fake_clock_;
  OperatorCatalog catalog_;
  CoordinatorOnDisk disk_;
};

using PrefetchLeaseTest = CoreFixture;

TEST_F(PrefetchLeaseTest, IdleBoardGetsNoPrefetchedLease) {
  RegisterBoard("a1", "a1/sim0");
  const std::string sweep = Submit(SimSpec("s", 3));
  EXPECT_FALSE(Lease("a1", "a1/sim0", /*prefetch=*/true).granted());
  // The refusal took nothing: a plain lease still gets the baseline.
  v1::LeaseWorkResponse plain = Lease("a1", "a1/sim0", false);
  ASSERT_TRUE(plain.granted());
  EXPECT_EQ(plain.work().sweep_id(), sweep);
  EXPECT_EQ(plain.work().round_id(), 0);
}

TEST_F(PrefetchLeaseTest, AtMostOneAheadAndItBecomesCurrentWhenTheBoardFrees) {
  RegisterBoard("a1", "a1/sim0");
  const std::string s1 = Submit(SimSpec("one", 3));
  const std::string s2 = Submit(SimSpec("two", 3));
  const std::string s3 = Submit(SimSpec("three", 3));
  v1::LeaseWorkResponse current = Lease("a1", "a1/sim0", false);
  ASSERT_TRUE(current.granted());
  EXPECT_EQ(current.work().sweep_id(), s1);
  // s1's candidates wait for its baseline; s2's baseline is leased ahead.
  v1::LeaseWorkResponse ahead = Lease("a1", "a1/sim0", true);
  ASSERT_TRUE(ahead.granted());
  EXPECT_EQ(ahead.work().sweep_id(), s2);
  EXPECT_EQ(ahead.work().round_id(), 0);
  // s3 has work too, but a board holds one lease ahead at most.
  EXPECT_FALSE(Lease("a1", "a1/sim0", true).granted());
  EXPECT_EQ(RoundState(s3, 0), v1::ROUND_STATE_QUEUED);
  EXPECT_EQ(CurrentLease("a1/sim0"), current.work().lease_id());

  // Waiting behind the current run is covered by renewals.
  fake_clock_.Advance(absl::Seconds(8));
  EXPECT_TRUE(Renew("a1", current.work()));
  EXPECT_TRUE(Renew("a1", ahead.work()));
  fake_clock_.Advance(absl::Seconds(8));
  ASSERT_TRUE(coord()->Tick().ok());
  EXPECT_EQ(RoundState(s2, 0), v1::ROUND_STATE_LEASED);

  // The current result frees the board: the lease ahead becomes current,
  // and a new one ahead may be granted.
  EXPECT_TRUE(ReportOk("a1", "a1/sim0", current.work()).accepted());
  EXPECT_EQ(CurrentLease("a1/sim0"), ahead.work().lease_id());
  v1::LeaseWorkResponse next = Lease("a1", "a1/sim0", true);
  ASSERT_TRUE(next.granted());
  EXPECT_NE(next.work().lease_id(), ahead.work().lease_id());
  EXPECT_TRUE(ReportOk("a1", "a1/sim0", ahead.work()).accepted());
  EXPECT_EQ(CurrentLease("a1/sim0"), next.work().lease_id());
}

// An agent whose builds outlast its runs asks for more leases ahead
// (max_ahead): they are granted up to that count, run in the order granted,
// and a restarted coordinator adopts them all.
TEST_F(PrefetchLeaseTest, SeveralLeasesAheadRunInOrderAndSurviveARestart) {
  RegisterBoard("a1", "a1/sim0");
  std::vector<std::string> sweeps;
  for (int i = 0; i < 5; ++i) {
    sweeps.push_back(Submit(SimSpec(absl::StrCat("s", i), 3)));
  }
  v1::LeaseWorkResponse current = Lease("a1", "a1/sim0", false);
  ASSERT_TRUE(current.granted());
  std::vector<v1::WorkItem> ahead;
  for (int i = 0; i < 3; ++i) {
    v1::LeaseWorkResponse r = Lease("a1", "a1/sim0", true, /*max_ahead=*/3);
    ASSERT_TRUE(r.granted()) << i;
    ahead.push_back(r.work());
  }
  // Three ahead is what the agent asked for; a fourth waits.
  EXPECT_FALSE(Lease("a1", "a1/sim0", true, 3).granted());
  EXPECT_EQ(RoundState(sweeps[4], 0), v1::ROUND_STATE_QUEUED);

  ASSERT_NO_FATAL_FAILURE(Restart());
  RegisterBoard("a1", "a1/sim0", current.work().lease_id(), ahead[0].lease_id(),
                {ahead[1].lease_id(), ahead[2].lease_id()});
  for (const v1::WorkItem& w : ahead) EXPECT_TRUE(Renew("a1", w));
  EXPECT_FALSE(Lease("a1", "a1/sim0", true, 3).granted());
  // Each result moves the next lease ahead up, in the order granted.
  v1::WorkItem running = current.work();
  for (const v1::WorkItem& next : ahead) {
    EXPECT_TRUE(ReportOk("a1", "a1/sim0", running).accepted());
    EXPECT_EQ(CurrentLease("a1/sim0"), next.lease_id());
    running = next;
  }
}

TEST_F(PrefetchLeaseTest, RevokedLeaseAheadIsInvalidAndFreesTheSlot) {
  CurrentAndAhead held;
  ASSERT_NO_FATAL_FAILURE(LeaseCurrentAndAhead(&held));
  Submit(SimSpec("three", 3));
  v1::CancelSweepRequest cancel;
  cancel.set_sweep_id(held.s2);
  ASSERT_TRUE(coord()->CancelSweep(cancel, AnonymousAdmin()).ok());
  EXPECT_FALSE(Renew("a1", held.ahead));
  EXPECT_TRUE(Renew("a1", held.current));
  EXPECT_EQ(CurrentLease("a1/sim0"), held.current.lease_id());
  // The slot ahead is free again.
  v1::LeaseWorkResponse again = Lease("a1", "a1/sim0", true);
  ASSERT_TRUE(again.granted());
  EXPECT_NE(again.work().sweep_id(), held.s2);
}

// The agent runs a lease ahead whose build ended first, before the current
// one: its heartbeat names it as the board's current lease, and the
// coordinator follows instead of revoking it; the one it overtook waits
// ahead, still valid, and both results are recorded once.
TEST_F(PrefetchLeaseTest, HeartbeatRunningALeaseAheadPromotesIt) {
  CurrentAndAhead held;
  ASSERT_NO_FATAL_FAILURE(LeaseCurrentAndAhead(&held));
  v1::HeartbeatRequest beat;
  beat.set_agent_id("a1");
  v1::BoardInfo* b = beat.add_boards();
  b->set_board_id("a1/sim0");
  b->set_current_lease_id(held.ahead.lease_id());
  b->set_lease_ahead_id(held.current.lease_id());
  absl::StatusOr<v1::HeartbeatResponse> r = coord()->Heartbeat(beat);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->revoked_lease_ids_size(), 0);
  EXPECT_EQ(CurrentLease("a1/sim0"), held.ahead.lease_id());
  EXPECT_TRUE(Renew("a1", held.current));
  EXPECT_TRUE(Renew("a1", held.ahead));
  // One slot ahead is held (the overtaken lease): no more is granted.
  EXPECT_FALSE(Lease("a1", "a1/sim0", true).granted());
  EXPECT_TRUE(ReportOk("a1", "a1/sim0", held.ahead).accepted());
  EXPECT_EQ(CurrentLease("a1/sim0"), held.current.lease_id());
  EXPECT_TRUE(ReportOk("a1", "a1/sim0", held.current).accepted());
  EXPECT_EQ(RoundState(held.s1, 0), v1::ROUND_STATE_DONE);
  EXPECT_EQ(RoundState(held.s2, 0), v1::ROUND_STATE_DONE);
  // A lease the board holds neither as current nor ahead is still revoked.
  b->set_current_lease_id("sw-999/0/1");
  r = coord()->Heartbeat(beat);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->revoked_lease_ids_size(), 1);
  EXPECT_EQ(r->revoked_lease_ids(0), "sw-999/0/1");
}

TEST_F(PrefetchLeaseTest, LostAgentsLeaseAndLeaseAheadBothRequeue) {
  CurrentAndAhead held;
  ASSERT_NO_FATAL_FAILURE(LeaseCurrentAndAhead(&held));
  fake_clock_.Advance(absl::Seconds(31));  // silent past agent_timeout
  ASSERT_TRUE(coord()->Tick().ok());
  EXPECT_EQ(RoundState(held.s1, 0), v1::ROUND_STATE_QUEUED);
  EXPECT_EQ(RoundState(held.s2, 0), v1::ROUND_STATE_QUEUED);
  EXPECT_FALSE(Renew("a1", held.ahead));
  // Another agent picks both up.
  RegisterBoard("a2", "a2/sim0");
  v1::LeaseWorkResponse rerun = Lease("a2", "a2/sim0", false);
  ASSERT_TRUE(rerun.granted());
  EXPECT_EQ(rerun.work().sweep_id(), held.s1);
  EXPECT_EQ(rerun.work().epoch(), 2);
}

TEST_F(PrefetchLeaseTest, PlainLeaseRequeuesTheLeaseAheadToo) {
  CurrentAndAhead held;
  ASSERT_NO_FATAL_FAILURE(LeaseCurrentAndAhead(&held));
  // A plain request means the agent runs neither (it restarted).
  ASSERT_TRUE(Lease("a1", "a1/sim0", false).granted());
  EXPECT_FALSE(Renew("a1", held.ahead));
}

// A restarted agent holds neither lease: both go back to the queue at once,
// and the lease ahead is not moved up in the current one's place.
TEST_F(PrefetchLeaseTest, AgentRestartRequeuesTheLeaseAheadToo) {
  CurrentAndAhead held;
  ASSERT_NO_FATAL_FAILURE(LeaseCurrentAndAhead(&held));
  RegisterBoard("a1", "a1/sim0");
  EXPECT_EQ(RoundState(held.s1, 0), v1::ROUND_STATE_QUEUED);
  EXPECT_EQ(RoundState(held.s2, 0), v1::ROUND_STATE_QUEUED);
  EXPECT_EQ(CurrentLease("a1/sim0"), "");
  EXPECT_FALSE(Renew("a1", held.ahead));
}

// A restarted coordinator adopts both leases the agent reports, so the lease
// ahead still moves up when the current result comes in and no second one
// is granted ahead meanwhile.
TEST_F(PrefetchLeaseTest, RestartedCoordinatorAdoptsTheLeaseAhead) {
  CurrentAndAhead held;
  ASSERT_NO_FATAL_FAILURE(LeaseCurrentAndAhead(&held));
  Submit(SimSpec("three", 3));
  ASSERT_NO_FATAL_FAILURE(Restart());
  RegisterBoard("a1", "a1/sim0", held.current.lease_id(),
                held.ahead.lease_id());
  EXPECT_EQ(CurrentLease("a1/sim0"), held.current.lease_id());
  EXPECT_TRUE(Renew("a1", held.ahead));
  EXPECT_FALSE(Lease("a1", "a1/sim0", /*prefetch=*/true).granted());
  EXPECT_TRUE(ReportOk("a1", "a1/sim0", held.current).accepted());
  EXPECT_EQ(CurrentLease("a1/sim0"), held.ahead.lease_id());
  EXPECT_EQ(RoundState(held.s2, 0), v1::ROUND_STATE_LEASED);
}

// After a coordinator restart, a lease ahead that the agent no longer holds
// (it restarted too) is re-queued when the agent registers, not at expiry.
TEST_F(PrefetchLeaseTest, RestartedCoordinatorRequeuesALeaseAheadNobodyHolds) {
  CurrentAndAhead held;
  ASSERT_NO_FATAL_FAILURE(LeaseCurrentAndAhead(&held));
  ASSERT_NO_FATAL_FAILURE(Restart());
  RegisterBoard("a1", "a1/sim0", held.current.lease_id());
  EXPECT_EQ(CurrentLease("a1/sim0"), held.current.lease_id());
  EXPECT_EQ(RoundState(held.s1, 0), v1::ROUND_STATE_LEASED);
  EXPECT_EQ(RoundState(held.s2, 0), v1::ROUND_STATE_QUEUED);
  EXPECT_FALSE(Renew("a1", held.ahead));
  EXPECT_TRUE(ReportOk("a1", "a1/sim0", held.current).accepted());
  EXPECT_EQ(CurrentLease("a1/sim0"), "");
}

// An agent between two runs holds no current lease, only leases ahead (the
// last result was recorded, the next build has not ended). A restarted
// coordinator adopts them: the first becomes the board's current lease (as
// the recorded result had made it), the rest wait ahead, and the heartbeat
// that names whichever one the agent starts revokes nothing.
TEST_F(PrefetchLeaseTest,
       RestartedCoordinatorAdoptsLeasesAheadWithoutACurrent) {
  RegisterBoard("a1", "a1/sim0");
  std::vector<std::string> sweeps;
  for (int i = 0; i < 3; ++i) {
    sweeps.push_back(Submit(SimSpec(absl::StrCat("s", i), 3)));
  }
  v1::LeaseWorkResponse current = Lease("a1", "a1/sim0", false);
  ASSERT_TRUE(current.granted());
  std::vector<v1::WorkItem> ahead;
  for (int i = 0; i < 2; ++i) {
    v1::LeaseWorkResponse r = Lease("a1", "a1/sim0", true, /*max_ahead=*/2);
    ASSERT_TRUE(r.granted()) << i;
    ahead.push_back(r.work());
  }
  ASSERT_TRUE(ReportOk("a1", "a1/sim0", current.work()).accepted());

  ASSERT_NO_FATAL_FAILURE(Restart());
  RegisterBoard("a1", "a1/sim0", /*current_lease=*/"", ahead[0].lease_id(),
                {ahead[1].lease_id()});
  EXPECT_EQ(CurrentLease("a1/sim0"), ahead[0].lease_id());
  EXPECT_EQ(RoundState(sweeps[1], 0), v1::ROUND_STATE_LEASED);
  EXPECT_EQ(RoundState(sweeps[2], 0), v1::ROUND_STATE_LEASED);
  for (const v1::WorkItem& w : ahead) EXPECT_TRUE(Renew("a1", w));
  // Two held ahead before the restart, one current and one ahead now: no
  // third lease is granted ahead.
  EXPECT_FALSE(Lease("a1", "a1/sim0", true, 1).granted());

  // The agent starts the second one first (its build ended first).
  v1::HeartbeatRequest beat;
  beat.set_agent_id("a1");
  v1::BoardInfo* b = beat.add_boards();
  b->set_board_id("a1/sim0");
  b->set_current_lease_id(ahead[1].lease_id());
  absl::StatusOr<v1::HeartbeatResponse> r = coord()->Heartbeat(beat);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->revoked_lease_ids_size(), 0);
  EXPECT_EQ(CurrentLease("a1/sim0"), ahead[1].lease_id());
  EXPECT_TRUE(ReportOk("a1", "a1/sim0", ahead[1]).accepted());
  EXPECT_EQ(CurrentLease("a1/sim0"), ahead[0].lease_id());
  EXPECT_TRUE(ReportOk("a1", "a1/sim0", ahead[0]).accepted());
  EXPECT_EQ(RoundState(sweeps[1], 0), v1::ROUND_STATE_DONE);
  EXPECT_EQ(RoundState(sweeps[2], 0), v1::ROUND_STATE_DONE);
}

// Draining a board means no new variant starts on it: the round it holds
// ahead is re-queued (its renewals fail, so the agent drops it unrun) and
// runs on another board; the round it runs now finishes and is recorded.
TEST_F(PrefetchLeaseTest,
       DrainRequeuesTheLeaseAheadAndTheCurrentRoundFinishes) {
  CurrentAndAhead held;
  ASSERT_NO_FATAL_FAILURE(LeaseCurrentAndAhead(&held));
  const std::string& s1 = held.s1;
  const std::string& s2 = held.s2;
  v1::BoardAdminRequest drain;
  drain.set_board_id("a1/sim0");
  drain.set_reason("maintenance");
  ASSERT_TRUE(coord()->DrainBoard(drain).ok());
  EXPECT_EQ(RoundState(s2, 0), v1::ROUND_STATE_QUEUED);
  EXPECT_FALSE(Renew("a1", held.ahead));
  EXPECT_TRUE(Renew("a1", held.current));
  EXPECT_TRUE(ReportOk("a1", "a1/sim0", held.current).accepted());
  EXPECT_EQ(RoundState(s1, 0), v1::ROUND_STATE_DONE);
  // Nothing was promoted in the lease ahead's place, and nothing new comes.
  EXPECT_EQ(CurrentLease("a1/sim0"), "");
  EXPECT_FALSE(Lease("a1", "a1/sim0", false).granted());
  EXPECT_FALSE(Lease("a1", "a1/sim0", true).granted());
  // s2's baseline runs on another board, as its second epoch.
  RegisterBoard("a2", "a2/sim0");
  v1::WorkItem moved;
  for (int i = 0; i < 5 && moved.sweep_id() != s2; ++i) {
    v1::LeaseWorkResponse r = Lease("a2", "a2/sim0", false);
    ASSERT_TRUE(r.granted());
    moved = r.work();
    if (moved.sweep_id() != s2) ReportOk("a2", "a2/sim0", moved);
  }
  EXPECT_EQ(moved.sweep_id(), s2);
  EXPECT_EQ(moved.round_id(), 0);
  EXPECT_EQ(moved.epoch(), 2);
}

// --- the agent --------------------------------------------------------------

// The agent's calls go straight to the core, one at a time.
class InProcessClient : public CoordinatorClient {
 public:
  explicit InProcessClient(Coordinator* c) : c_(c) {}
  absl::StatusOr<v1::RegisterAgentResponse> RegisterAgent(
      const v1::RegisterAgentRequest& r) override {
    absl::MutexLock lock(&mu_);
    ++registrations_;
    return c_->RegisterAgent(r);
  }
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(
      const v1::HeartbeatRequest& r) override {
    absl::MutexLock lock(&mu_);
    return c_->Heartbeat(r);
  }
  absl::StatusOr<v1::LeaseWorkResponse> LeaseWork(
      const v1::LeaseWorkRequest& r) override {
    absl::MutexLock lock(&mu_);
    return c_->LeaseWork(r);
  }
  absl::StatusOr<v1::RenewLeaseResponse> RenewLease(
      const v1::RenewLeaseRequest& r) override {
    absl::MutexLock lock(&mu_);
    return c_->RenewLease(r);
  }
  absl::StatusOr<v1::ReportResultResponse> ReportResult(
      const v1::ReportResultRequest& r) override {
    absl::SleepFor(absl::Milliseconds(report_delay_ms_.load()));
    absl::MutexLock lock(&mu_);
    if (gate_ == Gate::kArmed) {
      // The coordinator goes away while this report is on the wire.
      gate_ = Gate::kHeld;
      mu_.Await(absl::Condition(
          +[](Gate* g) { return *g == Gate::kOpen; }, &gate_));
      return absl::UnavailableError("the coordinator restarted");
    }
    absl::StatusOr<v1::ReportResultResponse> answer = c_->ReportResult(r);
    if (answer.ok()) {
      ++reports_.answered;
      if (r.has_next_lease()) ++reports_.asking;
      if (answer->next_lease().granted()) ++reports_.leased;
    }
    return answer;
  }
  // Reports answered; those that asked for the next lease; and those whose
  // next lease was granted.
  struct ReportCounts {
    int answered = 0;
    int asking = 0;
    int leased = 0;
  };
  ReportCounts reports() {
    absl::MutexLock lock(&mu_);
    return reports_;
  }
  // The next report is held (and then fails) until Reopen.
  void HoldNextReport() {
    absl::MutexLock lock(&mu_);
    gate_ = Gate::kArmed;
  }
  void WaitReportHeld() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](Gate* g) { return *g == Gate::kHeld; }, &gate_));
  }
  // Runs `restart` (which replaces the core) with no call in between, and
  // talks to `next()` from then on.
  template <typename F, typename G>
  void Replace(F restart, G next) {
    absl::MutexLock lock(&mu_);
    restart();
    c_ = next();
  }
  int registrations() {
    absl::MutexLock lock(&mu_);
    return registrations_;
  }
  void Reopen() {
    absl::MutexLock lock(&mu_);
    gate_ = Gate::kOpen;
  }
  // Each result reaches the core this much later (a slow network or a
  // busy control loop), so the agent's next call may overtake it.
  void set_report_delay(absl::Duration d) {
    report_delay_ms_ = absl::ToInt64Milliseconds(d);
  }
  // Test-side calls into the same core.
  template <typename F>
  auto Locked(F f) {
    absl::MutexLock lock(&mu_);
    return f(c_);
  }

 private:
  absl::Mutex mu_;
  Coordinator* c_;
  std::atomic<int64_t> report_delay_ms_{0};
  enum class Gate { kOpen, kArmed, kHeld };
  Gate gate_ ABSL_GUARDED_BY(mu_) = Gate::kOpen;
  int registrations_ ABSL_GUARDED_BY(mu_) = 0;
  ReportCounts reports_ ABSL_GUARDED_BY(mu_);
};

struct BoardEvent {
  enum Kind { kBuildAhead, kBuildEnd, kEvalStart, kEvalEnd } kind;
  std::string sweep_id;
  int64_t round_id;
  absl::Time at;
};

// A real board, with what happened to it recorded.
class RecordingBoard : public Board {
 public:
  explicit RecordingBoard(std::unique_ptr<Board> inner)
      : inner_(std::move(inner)) {}
  v1::BoardInfo info() const override { return inner_->info(); }
  absl::StatusOr<Evaluation> Evaluate(
      const v1::WorkItem& work, const std::atomic<bool>& cancel) override {
    Record(BoardEvent::kEvalStart, work);
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](bool* held) { return !*held; }, &hold_first_eval_));
    }
    absl::StatusOr<Evaluation> e = inner_->Evaluate(work, cancel);
    Record(BoardEvent::kEvalEnd, work);
    return e;
  }
  absl::Status Prefetch(const v1::WorkItem& work,
                        const std::atomic<bool>& cancel) override {
    Record(BoardEvent::kBuildAhead, work);
    bool first = false;
    {
      absl::MutexLock lock(&mu_);
      first = built_.insert(work.lease_id()).second;
    }
    // A compile the first time a lease is built, a cache hit after.
    absl::Duration delay = build_delay_;
    {
      absl::MutexLock lock(&mu_);
      if (auto it = sweep_build_delay_.find(work.sweep_id());
          it != sweep_build_delay_.end()) {
        delay = it->second;
      }
    }
    if (first && delay > absl::ZeroDuration()) absl::SleepFor(delay);
    absl::Status st = inner_->Prefetch(work, cancel);
    Record(BoardEvent::kBuildEnd, work);
    return st;
  }
  void set_build_delay(absl::Duration d) { build_delay_ = d; }
  // The builds of `sweep_id`'s variants take `d` instead.
  void set_sweep_build_delay(const std::string& sweep_id, absl::Duration d) {
    absl::MutexLock lock(&mu_);
    sweep_build_delay_[sweep_id] = d;
  }

  void HoldEvaluations() {
    absl::MutexLock lock(&mu_);
    hold_first_eval_ = true;
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    hold_first_eval_ = false;
  }
  std::vector<BoardEvent> events() {
    absl::MutexLock lock(&mu_);
    return events_;
  }
  // Waits until `pred(events)` holds (or 20 s pass).
  template <typename P>
  bool WaitFor(P pred) {
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (absl::Now() < deadline) {
      if (pred(events())) return true;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return false;
  }

 private:
  void Record(BoardEvent::Kind kind, const v1::WorkItem& w) {
    absl::MutexLock lock(&mu_);
    events_.push_back({kind, w.sweep_id(), w.round_id(), absl::Now()});
  }
  std::unique_ptr<Board> inner_;
  absl::Duration build_delay_;
  absl::Mutex mu_;
  std::set<std::string> built_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, absl::Duration> sweep_build_delay_ ABSL_GUARDED_BY(mu_);
  bool hold_first_eval_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<BoardEvent> events_ ABSL_GUARDED_BY(mu_);
};

class AgentOverlapTest : public CoreFixture {
 protected:
  Clock* clock() override { return &SystemClock(); }

  // One agent with one sim board whose runs take `run_delay` of real time.
  // `hold`: evaluations wait until board_->Release().
  void StartAgent(bool prefetch, absl::Duration run_delay, bool hold = false,
                  absl::Duration build_delay = absl::ZeroDuration()) {
    client_ = std::make_unique<InProcessClient>(coord());
    SimBoardOptions o;
    o.board_id = "a1/sim0";
    o.agent_id = "a1";
    o.node = "node";
    const std::string bin = SIM_MATMUL_BIN;
    o.bin_dir = bin.substr(0, bin.rfind('/'));
    o.work_root = disk_.dir() + "/work";
    o.run_delay = run_delay;
    auto board = std::make_unique<RecordingBoard>(NewSimBoard(o));
    board->set_build_delay(build_delay);
    for (const auto& [sweep, delay] : sweep_build_delay_) {
      board->set_sweep_build_delay(sweep, delay);
    }
    board_ = board.get();
    if (hold) board_->HoldEvaluations();
    std::vector<std::unique_ptr<Board>> boards;
    boards.push_back(std::move(board));
    AgentOptions options;
    options.agent_id = "a1";
    options.node = "node";
    options.prefetch = prefetch;
    agent_ = std::make_unique<Agent>(std::move(options), client_.get(), nullptr,
                                     std::move(boards));
    runner_ = std::thread([this] { agent_->Run(stop_); });
  }
  void TearDown() override {
    if (board_ != nullptr) board_->Release();
    stop_ = true;
    if (runner_.joinable()) runner_.join();
    agent_.reset();
  }
  bool WaitSweepsDone() {
    const absl::Time deadline = absl::Now() + absl::Seconds(40);
    while (absl::Now() < deadline) {
      if (client_->Locked([](Coordinator* c) { return c->active_sweeps(); }) ==
          0) {
        return true;
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
    return false;
  }
  std::vector<v1::Round> Rounds(const std::string& sweep) {
    auto r = disk_.store()->ListRounds(sweep);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : std::vector<v1::Round>();
  }

  // Per-sweep build times for the next StartAgent.
  std::map<std::string, absl::Duration> sweep_build_delay_;
  std::atomic<bool> stop_{false};
  std::unique_ptr<InProcessClient> client_;
  RecordingBoard* board_ = nullptr;
  std::unique_ptr<Agent> agent_;
  std::thread runner_;
};

// [start, end) of each evaluation, in order; checks they never overlap.
std::vector<std::pair<BoardEvent, BoardEvent>> Evaluations(
    const std::vector<BoardEvent>& events) {
  std::vector<std::pair<BoardEvent, BoardEvent>> out;
  int running = 0;
  for (const BoardEvent& e : events) {
    if (e.kind == BoardEvent::kEvalStart) {
      EXPECT_EQ(running, 0) << "two variants on one board: round " << e.round_id
                            << " started while one ran";
      ++running;
      out.push_back({e, e});
    } else if (e.kind == BoardEvent::kEvalEnd) {
      --running;
      out.back().second = e;
    }
  }
  return out;
}

TEST_F(AgentOverlapTest, NextRoundIsBuiltWhileTheCurrentOneRuns) {
  const std::string sweep = Submit(SimSpec("overlap", 4));
  StartAgent(/*prefetch=*/true, absl::Milliseconds(150));
  ASSERT_TRUE(WaitSweepsDone());
  const std::vector<BoardEvent> events = board_->events();
  const auto evals = Evaluations(events);
  ASSERT_EQ(evals.size(), 5u);  // baseline + 4 candidates, each once
  for (const v1::Round& r : Rounds(sweep)) {
    EXPECT_EQ(r.state(), v1::ROUND_STATE_DONE) << r.round_id();
    EXPECT_EQ(r.attempts(), 1) << r.round_id();
  }
  // Candidates need the baseline's result, so round 1 cannot be leased
  // ahead of it; every later round is built before its predecessor ends.
  int overlapped = 0;
  for (size_t i = 1; i < evals.size(); ++i) {
    const BoardEvent& prev_end = evals[i - 1].second;
    const BoardEvent& start = evals[i].first;
    auto built =
        std::find_if(events.begin(), events.end(), [&](const BoardEvent& e) {
          return e.kind == BoardEvent::kBuildAhead &&
                 e.round_id == start.round_id;
        });
    ASSERT_NE(built, events.end()) << "round " << start.round_id;
    if (built->at < prev_end.at) ++overlapped;
  }
  EXPECT_EQ(overlapped, 3);
}

// The agent reports a result while it goes on (one report in flight). With
// no lease ahead it asks for plain work next, which gives up the lease the
// coordinator still counts as the board's: that request must not overtake
// the report it follows, or the result is discarded as stale and the round
// run again. Each report reaches the core 300 ms late here.
TEST_F(AgentOverlapTest, APlainLeaseNeverOvertakesTheReportBeforeIt) {
  const std::string sweep = Submit(SimSpec("reports", 2));
  StartAgent(/*prefetch=*/false, absl::Milliseconds(20));
  client_->set_report_delay(absl::Milliseconds(300));
  ASSERT_TRUE(WaitSweepsDone());
  for (const v1::Round& r : Rounds(sweep)) {
    EXPECT_EQ(r.state(), v1::ROUND_STATE_DONE) << r.round_id();
    EXPECT_EQ(r.attempts(), 1) << "round " << r.round_id() << " ran again";
  }
}

// Without build-ahead a board's next lease rides with its report: one call
// a round. Every report asks for it, and every round after the first is
// leased by the report before it (the last report finds the sweep done).
TEST_F(AgentOverlapTest, WithoutPrefetchEachReportLeasesTheNextRound) {
  const std::string sweep = Submit(SimSpec("one-call", 4));
  StartAgent(/*prefetch=*/false, absl::Milliseconds(20));
  ASSERT_TRUE(WaitSweepsDone());
  const std::vector<v1::Round> rounds = Rounds(sweep);
  ASSERT_EQ(rounds.size(), 5u);  // the baseline and 4 candidates
  for (const v1::Round& r : rounds) {
    EXPECT_EQ(r.state(), v1::ROUND_STATE_DONE) << r.round_id();
    EXPECT_EQ(r.attempts(), 1) << "round " << r.round_id() << " ran again";
  }
  const InProcessClient::ReportCounts reports = client_->reports();
  EXPECT_EQ(reports.answered, 5);
  EXPECT_EQ(reports.asking, 5);
  EXPECT_EQ(reports.leased, 4);
}

// The coordinator restarts while a result is on its way: the agent
// registers again claiming the lease it is reporting, so the restarted
// coordinator keeps it and takes the result when it is sent again, instead
// of running the round a second time.
TEST_F(AgentOverlapTest,
       ARestartedCoordinatorKeepsTheLeaseWhoseReportIsOnItsWay) {
  const std::string sweep = Submit(SimSpec("restart", 1));
  StartAgent(/*prefetch=*/false, absl::Milliseconds(20));
  client_->HoldNextReport();
  client_->WaitReportHeld();
  const int before = client_->registrations();
  client_->Replace([this] { ASSERT_NO_FATAL_FAILURE(Restart()); },
                   [this] { return coord(); });
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (client_->registrations() == before && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_GT(client_->registrations(), before)
      << "the agent never re-registered";
  client_->Reopen();
  ASSERT_TRUE(WaitSweepsDone());
  for (const v1::Round& r : Rounds(sweep)) {
    EXPECT_EQ(r.state(), v1::ROUND_STATE_DONE) << r.round_id();
    EXPECT_EQ(r.attempts(), 1) << "round " << r.round_id() << " ran again";
  }
}

// Builds that take several runs' time: the agent leases further ahead (its
// measured build time over its run time) and builds in parallel, so the
// board is not left waiting for one compile after another.
TEST_F(AgentOverlapTest, SlowBuildsAreLeasedFurtherAheadAndBuiltInParallel) {
  for (int i = 0; i < 8; ++i) Submit(SimSpec(absl::StrCat("b", i), 1));
  StartAgent(/*prefetch=*/true, absl::Milliseconds(30), /*hold=*/false,
             /*build_delay=*/absl::Milliseconds(400));
  ASSERT_TRUE(WaitSweepsDone());
  const std::vector<BoardEvent> events = board_->events();
  // Builds under way at once (a lease's first Prefetch is its compile).
  std::set<std::string> seen;
  int running = 0, most = 0;
  std::map<std::string, int> open;
  for (const BoardEvent& e : events) {
    const std::string key = absl::StrCat(e.sweep_id, "/", e.round_id);
    if (e.kind == BoardEvent::kBuildAhead && seen.insert(key).second) {
      ++open[key];
      most = std::max(most, ++running);
    } else if (e.kind == BoardEvent::kBuildEnd && open[key] > 0) {
      --open[key];
      --running;
    }
  }
  EXPECT_GE(most, 2) << "builds ran one after another";
  EXPECT_EQ(Evaluations(events).size(), 16u);  // 8 baselines + 8 candidates
}

// One sweep's variants compile for much longer than the others': the board
// runs the leases ahead whose builds ended instead of waiting behind it,
// and the coordinator follows (no lease revoked, every round run once).
TEST_F(AgentOverlapTest, LeasesAheadRunInTheOrderTheirBuildsEnd) {
  std::vector<std::string> sweeps;
  for (int i = 0; i < 6; ++i) {
    sweeps.push_back(Submit(SimSpec(absl::StrCat("o", i), 1)));
  }
  const std::string slow = sweeps[2];
  sweep_build_delay_[slow] = absl::Milliseconds(1500);
  StartAgent(/*prefetch=*/true, absl::Milliseconds(30), /*hold=*/false,
             /*build_delay=*/absl::Milliseconds(150));
  ASSERT_TRUE(WaitSweepsDone());
  const std::vector<BoardEvent> events = board_->events();
  EXPECT_EQ(Evaluations(events).size(), 12u);  // 6 baselines + 6 candidates
  for (const std::string& sweep : sweeps) {
    for (const v1::Round& r : Rounds(sweep)) {
      EXPECT_EQ(r.state(), v1::ROUND_STATE_DONE)
          << sweep << " " << r.round_id();
      EXPECT_EQ(r.attempts(), 1) << sweep << " " << r.round_id();
    }
  }
  // Some round leased ahead after one of the slow sweep's started running
  // before it.
  int overtaken = 0;
  for (const BoardEvent& s : events) {
    if (s.kind != BoardEvent::kBuildAhead || s.sweep_id != slow) continue;
    auto slow_start =
        std::find_if(events.begin(), events.end(), [&](const BoardEvent& e) {
          return e.kind == BoardEvent::kEvalStart && e.sweep_id == slow &&
                 e.round_id == s.round_id;
        });
    ASSERT_NE(slow_start, events.end());
    for (const BoardEvent& o : events) {
      if (o.kind != BoardEvent::kBuildAhead || o.sweep_id == slow ||
          o.at <= s.at) {
        continue;
      }
      auto o_start =
          std::find_if(events.begin(), events.end(), [&](const BoardEvent& e) {
            return e.kind == BoardEvent::kEvalStart &&
                   e.sweep_id == o.sweep_id && e.round_id == o.round_id;
          });
      if (o_start != events.end() && o_start->at < slow_start->at) {
        ++overtaken;
      }
    }
  }
  EXPECT_GE(overtaken, 1) << "the board waited behind the slow build";
}

TEST_F(AgentOverlapTest, WithoutPrefetchNothingIsBuiltAhead) {
  const std::string sweep = Submit(SimSpec("serial", 2));
  StartAgent(/*prefetch=*/false, absl::Milliseconds(20));
  ASSERT_TRUE(WaitSweepsDone());
  const std::vector<BoardEvent> events = board_->events();
  EXPECT_EQ(Evaluations(events).size(), 3u);
  for (const BoardEvent& e : events) {
    EXPECT_NE(e.kind, BoardEvent::kBuildAhead) << "round " << e.round_id;
  }
}

TEST_F(AgentOverlapTest, RevokedLeaseAheadIsDroppedUnrun) {
  const std::string first = Submit(SimSpec("first", 1));
  const std::string doomed = Submit(SimSpec("doomed", 1));
  StartAgent(/*prefetch=*/true, absl::Milliseconds(20), /*hold=*/true);
  // The board holds first's baseline; doomed's baseline is leased ahead and
  // built. Then doomed is cancelled while first's run is still held.
  ASSERT_TRUE(board_->WaitFor([&](const std::vector<BoardEvent>& ev) {
    return std::any_of(ev.begin(), ev.end(), [&](const BoardEvent& e) {
      return e.kind == BoardEvent::kBuildAhead && e.sweep_id == doomed;
    });
  }));
  v1::CancelSweepRequest cancel;
  cancel.set_sweep_id(doomed);
  ASSERT_TRUE(client_
                  ->Locked([&](Coordinator* c) {
                    return c->CancelSweep(cancel, AnonymousAdmin());
                  })
                  .ok());
  board_->Release();
  ASSERT_TRUE(WaitSweepsDone());
  for (const BoardEvent& e : board_->events()) {
    if (e.kind == BoardEvent::kEvalStart || e.kind == BoardEvent::kEvalEnd) {
      EXPECT_NE(e.sweep_id, doomed) << "a revoked lease ran";
    }
  }
  for (const v1::Round& r : Rounds(first)) {
    EXPECT_EQ(r.state(), v1::ROUND_STATE_DONE) << r.round_id();
  }
  EXPECT_EQ(RoundState(doomed, 0), v1::ROUND_STATE_CANCELLED);
}

}  // namespace
}  // namespace tunefarm
