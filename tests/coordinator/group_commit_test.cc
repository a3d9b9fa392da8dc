// Group commit: agents' calls queued together on the control loop share one
// synced commit, their answers wait for it, and when it fails every call of
// the batch is answered with the error and memory is as before the batch.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "coordinator/control_loop.h"
#include "coordinator/coordinator.h"
#include "gtest/gtest.h"
#include "ops/catalog.h"
#include "storage/fault_injecting_store.h"
#include "storage/memory_store.h"

namespace tunefarm {
namespace {

constexpr int kBoards = 8;

constexpr char kOperator[] = R"(
name: toy
parameters:
  - {name: a, values: [1, 2, 3, 4, 5, 6, 7, 8], default: 1}
  - {name: b, values: [1, 2, 3, 4, 5, 6, 7, 8], default: 1}
workloads:
  - {name: small, dtype: fp16, dims: {m: 64, n: 64, k: 64}}
tolerances: {rtol: 0.01, atol: 0.001}
backends:
  sim: {command: ["{bin}/toy"]}
)";

constexpr char kSpec[] = R"(
name: grouped
team: qa
operator: toy
goal: {speedup: 100}
strategy: random
budget: {max_rounds: 60, max_rounds_without_gain: 60}
min_gain: 0.02
boards: {kind: sim}
measurement: {warmup: 1, samples: 5}
)";

class GroupCommitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto op = ParseOperatorManifest(kOperator, "test/toy.yaml");
    ASSERT_TRUE(op.ok()) << op.status();
    catalog_.Add(*op);
    options_.lease_duration = absl::Seconds(60);
    options_.agent_timeout = absl::Seconds(60);
    coord_ = std::make_unique<Coordinator>(&faults_, &catalog_, &clock_,
                                           options_, nullptr);
    ASSERT_TRUE(coord_->Recover().ok());
    ControlLoop::Options loop_options;
    // Wait for the whole wave of calls, so the batches are deterministic.
    loop_options.max_batch = kBoards;
    loop_options.max_batch_wait = absl::Seconds(2);
    loop_ = std::make_unique<ControlLoop>(
        absl::Hours(1), [] {},
        ControlLoop::BatchHooks{[this] { coord_->BeginBatch(); },
                                [this] { return coord_->CommitBatch(); }},
        loop_options);
    loop_->Start();
    v1::SubmitSweepRequest submit;
    submit.set_spec_yaml(kSpec);
    auto sweep = loop_->Call(
        [&] { return coord_->SubmitSweep(submit, AnonymousAdmin()); });
    ASSERT_TRUE(sweep.ok()) << sweep.status();
    sweep_id_ = sweep->sweep().sweep_id();
    v1::RegisterAgentRequest reg;
    reg.set_agent_id("a1");
    for (int b = 0; b < kBoards; ++b) {
      v1::BoardInfo* info = reg.add_boards();
      info->set_board_id(absl::StrCat("a1/b", b));
      info->set_kind("sim");
    }
    ASSERT_TRUE(loop_->Call([&] { return coord_->RegisterAgent(reg); }).ok());
    // The baseline, so every board gets a candidate.
    auto base = loop_->Call([&] { return coord_->LeaseWork(Lease(0)); });
    ASSERT_TRUE(base.ok() && base->granted());
    ASSERT_TRUE(loop_
                    ->Call([&] {
                      return coord_->ReportResult(Result(0, base->work()));
                    })
                    .ok());
  }
  void TearDown() override { loop_->Stop(); }

  static v1::LeaseWorkRequest Lease(int board) {
    v1::LeaseWorkRequest r;
    r.set_agent_id("a1");
    r.set_board_id(absl::StrCat("a1/b", board));
    return r;
  }
  static v1::ReportResultRequest Result(int board, const v1::WorkItem& work) {
    v1::ReportResultRequest r;
    r.set_agent_id("a1");
    r.set_board_id(absl::StrCat("a1/b", board));
    r.set_lease_id(work.lease_id());
    r.set_epoch(work.epoch());
    r.set_sweep_id(work.sweep_id());
    r.set_round_id(work.round_id());
    r.mutable_result()->set_outcome(v1::OUTCOME_OK);
    r.mutable_result()->mutable_precision()->set_passed(true);
    v1::Measurement* m = r.mutable_result()->mutable_measurement();
    m->set_median_us(200);
    m->set_p20_us(199);
    m->set_p80_us(201);
    m->set_samples(5);
    return r;
  }

  // Every board leases at once, each call on its own thread.
  std::vector<absl::StatusOr<v1::LeaseWorkResponse>> LeaseAll() {
    std::vector<absl::StatusOr<v1::LeaseWorkResponse>> out(
        kBoards, absl::UnknownError("not run"));
    std::vector<std::thread> threads;
    for (int b = 0; b < kBoards; ++b) {
      threads.emplace_back([&, b] {
        out[b] =
            loop_->CallBatched([&] { return coord_->LeaseWork(Lease(b)); });
      });
    }
    for (auto& t : threads) t.join();
    return out;
  }

  OperatorCatalog catalog_;
  FakeClock clock_;
  CoordinatorOptions options_;
  std::unique_ptr<Store> base_ = NewMemoryStore();
  FaultInjectingStore faults_{base_.get()};
  std::unique_ptr<Coordinator> coord_;
  std::unique_ptr<ControlLoop> loop_;
  std::string sweep_id_;
};

TEST_F(GroupCommitTest, CallsQueuedTogetherShareOneCommit) {
  const int64_t before = faults_.commits();
  auto leases = LeaseAll();
  EXPECT_EQ(faults_.commits() - before, 1) << "8 leases, one synced commit";
  std::vector<std::thread> threads;
  std::atomic<int> accepted{0};
  for (int b = 0; b < kBoards; ++b) {
    ASSERT_TRUE(leases[b].ok()) << leases[b].status();
    ASSERT_TRUE(leases[b]->granted());
    threads.emplace_back([&, b] {
      auto ack = loop_->CallBatched(
          [&] { return coord_->ReportResult(Result(b, leases[b]->work())); });
      if (ack.ok() && ack->accepted() && !ack->duplicate()) ++accepted;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(accepted, kBoards);
  EXPECT_EQ(faults_.commits() - before, 2);
  for (int b = 0; b < kBoards; ++b) {
    auto round = base_->GetRound(sweep_id_, leases[b]->work().round_id());
    ASSERT_TRUE(round.ok());
    EXPECT_EQ(round->state(), v1::ROUND_STATE_DONE);
  }
}

TEST_F(GroupCommitTest, AFailedBatchAnswersEveryCallWithItsError) {
  const std::string state =
      loop_->Call([&] { return coord_->DescribeState(); });
  faults_.FailNthCommit(1);
  for (const auto& lease : LeaseAll()) {
    EXPECT_FALSE(lease.ok()) << "a lease was answered from a failed batch";
    if (!lease.ok()) EXPECT_TRUE(absl::IsUnavailable(lease.status()));
  }
  EXPECT_EQ(loop_->Call([&] { return coord_->DescribeState(); }), state);
  // Retried after the store recovered: each round leased once.
  for (const auto& lease : LeaseAll()) {
    ASSERT_TRUE(lease.ok()) << lease.status();
    ASSERT_TRUE(lease->granted());
    EXPECT_EQ(lease->work().epoch(), 1);
    auto round = base_->GetRound(sweep_id_, lease->work().round_id());
    ASSERT_TRUE(round.ok());
    EXPECT_EQ(round->attempts(), 1);
  }
}

}  // namespace
}  // namespace tunefarm
