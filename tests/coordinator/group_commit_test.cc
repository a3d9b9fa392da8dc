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
#include "tests/coordinator/coordinator_harness.h"

namespace tunefarm {
namespace {

constexpr int kBoards = 8;

class GroupCommitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(AddOperator(&catalog_, ToyOperatorYaml(8, 8)).ok());
    CoordinatorOptions options;
    options.lease_duration = absl::Seconds(60);
    options.agent_timeout = absl::Seconds(60);
    ASSERT_TRUE(core_.Open(&catalog_, &clock_, options).ok());
    coord_ = core_.coordinator();
    ControlLoop::Options loop_options;
    // Wait for the whole wave of calls, so the batches are deterministic.
    loop_options.max_batch = kBoards;
    loop_options.max_batch_wait = absl::Seconds(2);
    loop_ = std::make_unique<ControlLoop>(
        absl::Hours(1), [] {},
        ControlLoop::BatchHooks{[this] { coord_->BeginBatch(); },
                                [this] { return coord_->CommitBatch(); },
                                /*seal=*/nullptr},
        loop_options);
    loop_->Start();
    v1::SubmitSweepRequest submit;
    submit.set_spec_yaml(ToySpecYaml("grouped", "random", 60));
    auto sweep = loop_->Call(
        [&] { return coord_->SubmitSweep(submit, AnonymousAdmin()); });
    ASSERT_TRUE(sweep.ok()) << sweep.status();
    sweep_id_ = sweep->sweep().sweep_id();
    ASSERT_TRUE(loop_
                    ->Call([&] {
                      return coord_->RegisterAgent(SimAgent("a1", kBoards));
                    })
                    .ok());
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

  static std::string Board(int b) { return absl::StrCat("a1/b", b); }
  static v1::LeaseWorkRequest Lease(int board) {
    return LeaseFor(Board(board));
  }
  static v1::ReportResultRequest Result(int board, const v1::WorkItem& work) {
    return ResultFor(Board(board), work, 200);
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
  CoordinatorOverFaults core_;
  Coordinator* coord_ = nullptr;  // core_'s
  Store* base_ = core_.base();
  FaultInjectingStore& faults_ = *core_.faults();
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
    if (!lease.ok()) {
      EXPECT_TRUE(absl::IsUnavailable(lease.status()));
    }
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
