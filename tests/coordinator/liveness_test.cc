// Liveness that a slow control loop cannot fool: any agent call counts as a
// heartbeat from the moment it arrives (AgentLiveness, stamped by the gRPC
// threads before the call waits for the loop), so an agent whose calls
// queue behind slow commits is not declared silent.
#include "coordinator/liveness.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "coordinator/control_loop.h"
#include "coordinator/coordinator.h"
#include "coordinator/service.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "ops/catalog.h"
#include "storage/fault_injecting_store.h"
#include "storage/memory_store.h"

namespace tunefarm {
namespace {

v1::RegisterAgentRequest Registration(const std::string& agent) {
  v1::RegisterAgentRequest request;
  request.set_agent_id(agent);
  request.set_node("node");
  v1::BoardInfo* b = request.add_boards();
  b->set_board_id(agent + "/b0");
  b->set_kind("sim");
  return request;
}

v1::BoardState StateOf(Coordinator& c, const std::string& board) {
  for (const v1::BoardInfo& b : c.ListBoards({})) {
    if (b.board_id() == board) return b.state();
  }
  return v1::BOARD_STATE_UNSPECIFIED;
}

TEST(LivenessTest, ACallHeardAnywhereKeepsTheAgentAlive) {
  FakeClock clock;
  std::unique_ptr<Store> store = NewMemoryStore();
  OperatorCatalog catalog;
  CoordinatorOptions options;
  options.agent_timeout = absl::Seconds(30);
  Coordinator c(store.get(), &catalog, &clock, options, nullptr);
  ASSERT_TRUE(c.Recover().ok());
  AgentLiveness liveness(&clock);
  c.SetLiveness(&liveness);
  ASSERT_TRUE(c.RegisterAgent(Registration("a1")).ok());
  clock.Advance(absl::Seconds(31));
  liveness.Heard("a1");  // a call arrived; the loop has not run it yet
  ASSERT_TRUE(c.Tick().ok());
  EXPECT_EQ(StateOf(c, "a1/b0"), v1::BOARD_STATE_IDLE);
  clock.Advance(absl::Seconds(31));  // and then nothing
  ASSERT_TRUE(c.Tick().ok());
  EXPECT_EQ(StateOf(c, "a1/b0"), v1::BOARD_STATE_LOST);
}

// A real gRPC service whose commits take 1 s (a slow disk), agent timeout
// 600 ms: the loop runs a call at most every second, so an agent
// known only from calls the loop ran looks silent between them. The agent
// heartbeats every 50 ms and leases work all along, as a real one does.
// The margins are wide so that a loaded host's scheduling delays do not
// look like silence.
// Returns how many times it was declared lost in `run_for`.
int LostAgentsUnderSlowCommits(bool use_liveness, absl::Duration run_for) {
  std::unique_ptr<Store> base = NewMemoryStore();
  FaultInjectingStore store(base.get());
  OperatorCatalog catalog;
  CoordinatorOptions options;
  options.agent_timeout = absl::Milliseconds(600);
  Coordinator c(&store, &catalog, &SystemClock(), options, nullptr);
  EXPECT_TRUE(c.Recover().ok());
  AgentLiveness liveness(&SystemClock());
  if (use_liveness) c.SetLiveness(&liveness);
  std::atomic<int> lost{0};
  ControlLoop loop(
      absl::Milliseconds(20),
      [&] {
        EXPECT_TRUE(c.Tick().ok());
        for (const v1::BoardInfo& b : c.ListBoards({})) {
          if (b.board_id() == "a1/b0" && b.state() == v1::BOARD_STATE_LOST) {
            ++lost;
            // Back in service, so a second loss counts again.
            EXPECT_TRUE(c.RegisterAgent(Registration("a1")).ok());
          }
        }
      },
      {[&] { c.BeginBatch(); }, [&] { return c.CommitBatch(); },
       /*seal=*/nullptr});
  loop.Start();
  AgentGrpcService service(&c, &loop, nullptr, &liveness);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  EXPECT_NE(port, 0);
  auto stub = v1::AgentService::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  {
    grpc::ClientContext ctx;
    v1::RegisterAgentResponse r;
    EXPECT_TRUE(stub->RegisterAgent(&ctx, Registration("a1"), &r).ok());
  }
  store.SetCommitDelay(absl::Seconds(1));
  std::atomic<bool> stop{false};
  // Heartbeats every 50 ms, each on its own thread so a slow answer does
  // not delay the next one (an agent's heartbeat timer keeps time).
  std::thread beats([&] {
    std::vector<std::thread> calls;
    while (!stop) {
      calls.emplace_back([&] {
        grpc::ClientContext ctx;
        v1::HeartbeatRequest hb;
        hb.set_agent_id("a1");
        v1::HeartbeatResponse r;
        (void)stub->Heartbeat(&ctx, hb, &r);
      });
      absl::SleepFor(absl::Milliseconds(50));
    }
    for (auto& t : calls) t.join();
  });
  // Re-registering commits, so the loop is always busy with slow commits.
  std::thread traffic([&] {
    while (!stop) {
      grpc::ClientContext ctx;
      v1::RegisterAgentResponse r;
      (void)stub->RegisterAgent(&ctx, Registration("a2"), &r);
    }
  });
  absl::SleepFor(run_for);
  stop = true;
  beats.join();
  traffic.join();
  server->Shutdown(std::chrono::system_clock::now());
  loop.Stop();
  return lost;
}

TEST(LivenessTest, SlowCommitsDoNotMakeAHeartbeatingAgentLookSilent) {
  // Without liveness this scenario does lose the agent: the test can tell.
  EXPECT_GT(LostAgentsUnderSlowCommits(false, absl::Seconds(3)), 0);
  EXPECT_EQ(LostAgentsUnderSlowCommits(true, absl::Seconds(3)), 0);
}

}  // namespace
}  // namespace tunefarm
