// BoardRegistry (coordinator/board_registry.h) on its own (SweepPartsTest:
// boards a1/b0 and a1/b1 and a sweep with three queued rounds): which boards
// fit a selector, the boards per state that /metrics shows, and its calls:
// a registration adopts the leases the agent claims and re-queues the rest,
// a heartbeat carries the agent's word on health and leases, a silent
// agent's boards are lost, drain and admit; each staged, and undone
// exactly.
#include "coordinator/board_registry.h"

#include <map>
#include <string>

#include "absl/time/time.h"
#include "coordinator/liveness.h"
#include "gtest/gtest.h"
#include "tests/coordinator/sweep_parts_fixture.h"

namespace tunefarm {
namespace {

class BoardRegistryTest : public SweepPartsTest {
 protected:
  void Add(const std::string& id, const std::string& kind,
           const std::string& chip,
           const std::map<std::string, std::string>& labels,
           v1::BoardState state) {
    BoardRuntime& b = registry_.boards()[id];
    b.info.set_board_id(id);
    b.info.set_kind(kind);
    b.info.set_chip(chip);
    b.info.set_state(state);
    for (const auto& [key, value] : labels)
      (*b.info.mutable_labels())[key] = value;
  }
  // Agent a1's registration of its two boards, b0 claiming `current` and
  // `ahead` (lease ids, "" for none).
  static v1::RegisterAgentRequest Registration(const std::string& current,
                                               const std::string& ahead) {
    v1::RegisterAgentRequest request;
    request.set_agent_id("a1");
    request.set_node("host1");
    for (const char* id : {"a1/b0", "a1/b1"}) {
      v1::BoardInfo* b = request.add_boards();
      b->set_board_id(id);
      b->set_kind("sim");
    }
    request.mutable_boards(0)->set_current_lease_id(current);
    request.mutable_boards(0)->set_lease_ahead_id(ahead);
    return request;
  }
  void Register() {
    Txn txn;
    ASSERT_TRUE(registry_.Register(txn, Registration("", "")).ok());
  }
};

TEST_F(BoardRegistryTest, ASelectorMatchesKindChipAndEveryLabel) {
  registry_.boards().clear();
  Add("a1/b0", "sim", "A", {{"pool", "x"}, {"rack", "1"}},
      v1::BOARD_STATE_IDLE);
  Add("a1/b1", "sim", "B", {{"pool", "x"}}, v1::BOARD_STATE_BUSY);
  Add("a2/b0", "cpu", "A", {}, v1::BOARD_STATE_IDLE);
  BoardRegistry& r = registry_;
  v1::BoardSelector any;
  EXPECT_EQ(r.List(any).size(), 3u);
  v1::BoardSelector sim;
  sim.set_kind("sim");
  EXPECT_EQ(r.List(sim).size(), 2u);
  v1::BoardSelector sim_a = sim;
  sim_a.set_chip("A");
  ASSERT_EQ(r.List(sim_a).size(), 1u);
  EXPECT_EQ(r.List(sim_a)[0].board_id(), "a1/b0");
  v1::BoardSelector pool_rack;
  (*pool_rack.mutable_labels())["pool"] = "x";
  (*pool_rack.mutable_labels())["rack"] = "1";
  ASSERT_EQ(r.List(pool_rack).size(), 1u);
  EXPECT_EQ(r.List(pool_rack)[0].board_id(), "a1/b0");
  (*pool_rack.mutable_labels())["rack"] = "2";
  EXPECT_TRUE(r.List(pool_rack).empty());
}

TEST_F(BoardRegistryTest, EveryStateIsCountedZeroIncluded) {
  registry_.boards().clear();
  Add("a1/b0", "sim", "A", {}, v1::BOARD_STATE_IDLE);
  Add("a1/b1", "sim", "A", {}, v1::BOARD_STATE_IDLE);
  Add("a1/b2", "sim", "A", {}, v1::BOARD_STATE_QUARANTINED);
  const std::map<std::string, int> counts = registry_.CountByState();
  EXPECT_EQ(counts, (std::map<std::string, int>{{"busy", 0},
                                                {"draining", 0},
                                                {"idle", 2},
                                                {"lost", 0},
                                                {"quarantined", 1}}));
  EXPECT_EQ(registry_.boards().size(), 3u);
  EXPECT_EQ(BoardRegistry::StateName(v1::BOARD_STATE_UNSPECIFIED), "unknown");
}

TEST_F(BoardRegistryTest, RecoveredBoardsAreLostUntilTheirAgentRegisters) {
  registry_.boards().clear();
  v1::BoardInfo b;
  b.set_board_id("a1/b0");
  b.set_state(v1::BOARD_STATE_BUSY);
  b.set_current_lease_id("sw-000001/1/1");
  registry_.Recover({b});
  const BoardRuntime& r = Board("a1/b0");
  EXPECT_EQ(r.info.state(), v1::BOARD_STATE_LOST);
  EXPECT_TRUE(r.info.current_lease_id().empty());
  EXPECT_TRUE(r.lease_id.empty());
}

TEST_F(BoardRegistryTest, ARegistrationKeepsClaimedLeasesAndRequeuesTheRest) {
  Register();
  Grant(1, "a1/b0", /*ahead=*/false);
  Grant(2, "a1/b1", /*ahead=*/false);
  // The agent restarted: b0 still runs round 1, b1 lost its round 2.
  Txn txn;
  ASSERT_TRUE(registry_.Register(txn, Registration("sw-000001/1/1", "")).ok());
  EXPECT_EQ(Round(1).state(), v1::ROUND_STATE_LEASED);
  EXPECT_EQ(Board("a1/b0").lease_id, "sw-000001/1/1");
  EXPECT_EQ(Board("a1/b0").info.state(), v1::BOARD_STATE_BUSY);
  EXPECT_EQ(Board("a1/b0").info.node(), "host1");
  EXPECT_EQ(Round(2).state(), v1::ROUND_STATE_QUEUED);
  EXPECT_TRUE(Board("a1/b1").lease_id.empty());
  EXPECT_EQ(Board("a1/b1").info.state(), v1::BOARD_STATE_IDLE);
  EXPECT_EQ(registry_.agents().at("a1").board_ids,
            (std::vector<std::string>{"a1/b0", "a1/b1"}));

  // The commit failed: round 2 is b1's again.
  Undo(txn);
  EXPECT_EQ(Round(2).state(), v1::ROUND_STATE_LEASED);
  EXPECT_EQ(Board("a1/b1").lease_id, "sw-000001/2/1");
  EXPECT_EQ(Board("a1/b1").info.state(), v1::BOARD_STATE_BUSY);
}

TEST_F(BoardRegistryTest, AnAgentBetweenRunsHasItsLeaseAheadMadeCurrent) {
  // As a restarted coordinator holds them: rounds 1 and 2 leased to b0 in
  // the store, the board recovered with no lease.
  Grant(1, "a1/b0", /*ahead=*/false);
  Grant(2, "a1/b0", /*ahead=*/true);
  Board("a1/b0").lease_id.clear();
  Board("a1/b0").prefetch_lease_ids.clear();
  // The agent recorded round 1's result and holds round 2 ahead.
  Round(1).set_state(v1::ROUND_STATE_DONE);
  Txn txn;
  ASSERT_TRUE(registry_.Register(txn, Registration("", "sw-000001/2/1")).ok());
  EXPECT_EQ(Board("a1/b0").lease_id, "sw-000001/2/1");
  EXPECT_TRUE(Board("a1/b0").prefetch_lease_ids.empty());
  EXPECT_EQ(Board("a1/b0").info.state(), v1::BOARD_STATE_BUSY);
  EXPECT_EQ(Round(2).state(), v1::ROUND_STATE_LEASED);
}

TEST_F(BoardRegistryTest, ARegistrationNamesWhatIsWrongWithIt) {
  Txn txn;
  v1::RegisterAgentRequest request = Registration("", "");
  request.set_agent_id("");
  EXPECT_EQ(registry_.Register(txn, request),
            absl::InvalidArgumentError("agent_id: must not be empty"));
  request = Registration("", "");
  request.mutable_boards(1)->set_board_id("a1/b0");
  EXPECT_EQ(registry_.Register(txn, request),
            absl::InvalidArgumentError("boards: duplicate board_id a1/b0"));
  Register();
  request = Registration("", "");
  request.set_agent_id("a2");
  absl::Status taken = registry_.Register(txn, request);
  EXPECT_TRUE(absl::IsAlreadyExists(taken)) << taken;
  EXPECT_NE(taken.message().find("registered by agent a1"), std::string::npos);
  EXPECT_TRUE(txn.writes.empty()) << "a refused registration stages nothing";
  EXPECT_FALSE(registry_.agents().contains("a2"));
}

TEST_F(BoardRegistryTest, AHeartbeatCarriesTheAgentsWordOnHealthAndLeases) {
  v1::HeartbeatRequest request;
  request.set_agent_id("a1");
  v1::HeartbeatResponse response;
  Txn txn;
  EXPECT_TRUE(
      absl::IsNotFound(registry_.Heartbeat(txn, request, &response).status()));
  Register();
  Grant(1, "a1/b0", /*ahead=*/false);
  Grant(2, "a1/b0", /*ahead=*/true);
  // b0 runs the lease it held ahead; b1 is quarantined by its agent and
  // names a lease it does not hold.
  v1::BoardInfo* b0 = request.add_boards();
  b0->set_board_id("a1/b0");
  b0->set_current_lease_id("sw-000001/2/1");
  v1::BoardInfo* b1 = request.add_boards();
  b1->set_board_id("a1/b1");
  b1->set_state(v1::BOARD_STATE_QUARANTINED);
  b1->set_health_detail("ECC errors");
  b1->set_current_lease_id("sw-000001/0/1");
  auto changed = registry_.Heartbeat(txn, request, &response);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_TRUE(*changed);
  EXPECT_EQ(Board("a1/b0").lease_id, "sw-000001/2/1");
  EXPECT_EQ(Board("a1/b1").info.state(), v1::BOARD_STATE_QUARANTINED);
  EXPECT_EQ(Board("a1/b1").info.health_detail(), "ECC errors");
  ASSERT_EQ(response.revoked_lease_ids_size(), 1);
  EXPECT_EQ(response.revoked_lease_ids(0), "sw-000001/0/1");

  Undo(txn);
  EXPECT_EQ(Board("a1/b0").lease_id, "sw-000001/1/1");
  EXPECT_EQ(Board("a1/b1").info.state(), v1::BOARD_STATE_IDLE);

  // An admin readmitted it while the agent still holds its flag.
  Board("a1/b1").readmit_pending = true;
  v1::HeartbeatResponse readmit;
  ASSERT_TRUE(registry_.Heartbeat(txn, request, &readmit).ok());
  ASSERT_EQ(readmit.readmitted_board_ids_size(), 1);
  EXPECT_EQ(readmit.readmitted_board_ids(0), "a1/b1");
}

TEST_F(BoardRegistryTest, ASilentAgentsBoardsAreLostWithTheirLeases) {
  Register();
  Grant(1, "a1/b0", /*ahead=*/false);
  Grant(2, "a1/b0", /*ahead=*/true);
  AgentLiveness liveness(&clock_);
  clock_.Advance(absl::Seconds(4));
  liveness.Heard("a1");  // a call still waiting for the loop
  clock_.Advance(absl::Seconds(4));
  Txn txn;
  EXPECT_FALSE(registry_.LoseSilentAgents(txn, clock_.Now(), absl::Seconds(5),
                                          &liveness));
  EXPECT_FALSE(registry_.LoseSilentAgents(txn, clock_.Now(), absl::Seconds(10),
                                          nullptr));
  EXPECT_TRUE(txn.writes.empty());
  EXPECT_TRUE(
      registry_.LoseSilentAgents(txn, clock_.Now(), absl::Seconds(5), nullptr));
  EXPECT_FALSE(registry_.agents().contains("a1"));
  EXPECT_EQ(Board("a1/b0").info.state(), v1::BOARD_STATE_LOST);
  EXPECT_NE(Board("a1/b0").info.health_detail().find("agent a1 silent for"),
            std::string::npos);
  EXPECT_TRUE(Board("a1/b0").lease_id.empty());
  EXPECT_TRUE(Board("a1/b0").prefetch_lease_ids.empty());
  EXPECT_EQ(Round(1).state(), v1::ROUND_STATE_QUEUED);
  EXPECT_EQ(Round(2).state(), v1::ROUND_STATE_QUEUED);

  Undo(txn);
  EXPECT_TRUE(registry_.agents().contains("a1"));
  EXPECT_EQ(Board("a1/b0").lease_id, "sw-000001/1/1");
  EXPECT_EQ(Round(2).state(), v1::ROUND_STATE_LEASED);
}

TEST_F(BoardRegistryTest, ADrainedBoardFinishesItsRoundAndAdmitLiftsIt) {
  Register();
  Grant(1, "a1/b0", /*ahead=*/false);
  Grant(2, "a1/b0", /*ahead=*/true);
  v1::BoardAdminRequest request;
  request.set_board_id("a1/b0");
  request.set_reason("firmware");
  Txn txn;
  auto drained = registry_.Drain(txn, request);
  ASSERT_TRUE(drained.ok()) << drained.status();
  EXPECT_EQ((*drained)->info.state(), v1::BOARD_STATE_DRAINING);
  EXPECT_EQ((*drained)->info.health_detail(), "drained by an admin: firmware");
  EXPECT_EQ((*drained)->lease_id, "sw-000001/1/1") << "its round finishes";
  EXPECT_EQ(Round(2).state(), v1::ROUND_STATE_QUEUED) << "nothing more";

  auto admitted = registry_.Admit(txn, request);
  ASSERT_TRUE(admitted.ok()) << admitted.status();
  EXPECT_EQ((*admitted)->info.state(), v1::BOARD_STATE_BUSY);
  EXPECT_FALSE((*admitted)->readmit_pending);
  Board("a1/b1").info.set_state(v1::BOARD_STATE_QUARANTINED);
  request.set_board_id("a1/b1");
  ASSERT_TRUE(registry_.Admit(txn, request).ok());
  EXPECT_EQ(Board("a1/b1").info.state(), v1::BOARD_STATE_IDLE);
  EXPECT_TRUE(Board("a1/b1").readmit_pending) << "the agent lifts its flag";

  request.set_board_id("a9/b0");
  EXPECT_EQ(registry_.Drain(txn, request).status(),
            absl::NotFoundError("no board a9/b0"));
  EXPECT_EQ(registry_.Admit(txn, request).status(),
            absl::NotFoundError("no board a9/b0"));
}

}  // namespace
}  // namespace tunefarm
