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
#include "tests/coordinator/batched_loop_fixture.h"
#include "tests/coordinator/coordinator_harness.h"

namespace tunefarm {
namespace {

// All eight boards' calls in one batch, committed synchronously.
class GroupCommitTest : public BatchedLoopTest {
 protected:
  void SetUp() override { StartLoop(kBoards, /*pipelined=*/false); }
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
  ExpectEveryBoardLeasesOnce();
}

}  // namespace
}  // namespace tunefarm
