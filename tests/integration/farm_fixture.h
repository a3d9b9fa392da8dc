// FarmFixture: the whole-farm tests' base. Each test gets a fresh temp
// folder and starts a LocalFarm (cli/local_farm.h: coordinator, analyzer and
// agents as real processes on loopback) in it, then talks to the
// coordinator over real gRPC with the farm's admin token. Logs are kept when
// a test fails.
//
// Owned by the test's thread; not thread-safe.
#ifndef TUNEFARM_TESTS_INTEGRATION_FARM_FIXTURE_H_
#define TUNEFARM_TESTS_INTEGRATION_FARM_FIXTURE_H_

#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cli/local_farm.h"
#include "common/files.h"
#include "common/grpc_client.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tunefarm/v1/farm.grpc.pb.h"

namespace tunefarm {

constexpr char kFarmBinDir[] = TUNEFARM_BINARY_DIR "/bin";

// A sweep of team itest over sim_matmul's square_2k on sim boards whose goal
// is out of reach, so it ends by its budget: `max_rounds` rounds, or
// `no_gain` rounds without a gain.
inline std::string SimMatmulSpec(const std::string& name,
                                 const std::string& strategy, int seed,
                                 int max_rounds, int no_gain = 100) {
  return absl::StrCat("name: ", name,
                      "\nteam: itest\noperator: sim_matmul\n"
                      "workload: square_2k\ngoal: {speedup: 1000}\n"
                      "strategy: {name: ",
                      strategy, ", seed: ", seed,
                      "}\nbudget: {max_rounds: ", max_rounds,
                      ", time_limit: 10m, max_rounds_without_gain: ", no_gain,
                      "}\nmin_gain: 0.02\nboards: {kind: sim}\n"
                      "measurement: {warmup: 2, samples: 10}\n");
}

// A farm whose coordinator a test kills mid-sweep: rounds slow enough
// (150 ms) that some are in flight at the kill, heartbeats every 100 ms,
// leases short (2 s) so the restarted coordinator soon re-leases lost ones.
inline LocalFarmOptions KillableFarm(int agents, int boards_per_agent) {
  LocalFarmOptions o;
  o.agents = agents;
  o.boards_per_agent = boards_per_agent;
  o.sim_delay_ms = 150;
  o.heartbeat_ms = 100;
  o.lease_ms = 2000;
  return o;
}

class FarmFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = MakeTempDir("tunefarm-it-");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = *dir;
  }
  void TearDown() override {
    if (farm_) farm_->Stop();
    if (HasFailure()) {
      std::cerr << "logs kept in " << dir_ << "/logs\n";
    } else {
      (void)RemoveAll(dir_);
    }
  }

  void StartFarm(LocalFarmOptions o) {
    o.bin_dir = kFarmBinDir;
    o.data_dir = dir_;
    o.log_level = "debug";
    farm_ = std::make_unique<LocalFarm>(o);
    absl::Status st = farm_->Start();
    ASSERT_TRUE(st.ok()) << st;
    Connect();
  }

  // Every call carries the farm's admin token (authentication is on).
  void Auth(grpc::ClientContext* ctx) const {
    if (!farm_->admin_token().empty()) {
      ctx->AddMetadata("authorization", "Bearer " + farm_->admin_token());
    }
  }

  void Connect() {
    // Replies as large as the coordinator sends (every round of a long
    // sweep with its diagnoses).
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(kMaxGrpcMessageBytes);
    stub_ = v1::TuneFarm::NewStub(
        grpc::CreateCustomChannel(farm_->coordinator_address(),
                                  grpc::InsecureChannelCredentials(), args));
  }

  std::string Submit(const std::string& yaml) {
    v1::SubmitSweepRequest req;
    req.set_spec_yaml(yaml);
    v1::SubmitSweepResponse resp;
    grpc::ClientContext ctx;
    Auth(&ctx);
    grpc::Status st = stub_->SubmitSweep(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp.sweep().sweep_id();
  }

  // GetSweep, retried while the coordinator is unreachable (restarts).
  absl::StatusOr<v1::Sweep> GetSweep(const std::string& id) {
    v1::GetSweepRequest req;
    req.set_sweep_id(id);
    v1::Sweep sweep;
    grpc::ClientContext ctx;
    Auth(&ctx);
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(5));
    grpc::Status st = stub_->GetSweep(&ctx, req, &sweep);
    if (!st.ok()) return absl::UnavailableError(st.error_message());
    return sweep;
  }

  v1::Sweep WaitFinished(const std::string& id, absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    v1::Sweep last;
    while (absl::Now() < deadline) {
      auto s = GetSweep(id);
      if (s.ok()) {
        last = *s;
        if (s->state() == v1::SWEEP_STATE_SUCCEEDED ||
            s->state() == v1::SWEEP_STATE_FAILED ||
            s->state() == v1::SWEEP_STATE_CANCELLED) {
          return last;
        }
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
    ADD_FAILURE() << "sweep " << id << " did not finish; last state "
                  << v1::SweepState_Name(last.state());
    return last;
  }

  // Every round (all pages; the kept path comes with the first).
  v1::ListRoundsResponse Rounds(const std::string& id) {
    v1::ListRoundsRequest req;
    req.set_sweep_id(id);
    req.set_include_diagnosis(true);
    v1::ListRoundsResponse all;
    do {
      v1::ListRoundsResponse resp;
      grpc::ClientContext ctx;
      Auth(&ctx);
      ctx.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(5));
      grpc::Status st = stub_->ListRounds(&ctx, req, &resp);
      EXPECT_TRUE(st.ok()) << st.error_message();
      if (!st.ok()) break;
      if (req.page_token().empty()) *all.mutable_kept_path() = resp.kept_path();
      for (v1::Round& r : *resp.mutable_rounds()) {
        *all.add_rounds() = std::move(r);
      }
      req.set_page_token(resp.next_page_token());
    } while (!req.page_token().empty());
    return all;
  }

  // Every event the coordinator recorded for the sweep, through WatchSweep.
  std::vector<v1::SweepEvent> Events(const std::string& id) {
    v1::WatchSweepRequest req;
    req.set_sweep_id(id);
    req.set_from_seq(1);
    grpc::ClientContext ctx;
    Auth(&ctx);
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(10));
    auto reader = stub_->WatchSweep(&ctx, req);
    std::vector<v1::SweepEvent> out;
    v1::SweepEvent ev;
    while (reader->Read(&ev)) out.push_back(ev);
    EXPECT_TRUE(reader->Finish().ok());
    return out;
  }

  std::string dir_;
  std::unique_ptr<LocalFarm> farm_;
  std::unique_ptr<v1::TuneFarm::Stub> stub_;
};

}  // namespace tunefarm

#endif  // TUNEFARM_TESTS_INTEGRATION_FARM_FIXTURE_H_
