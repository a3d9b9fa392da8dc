// Group commit: agents' calls queued together on the control loop share one
// synced commit, their answers wait for it, and when it fails every call of
// the batch is answered with the error and memory is as before the batch.
// A batch is bounded by count (max_batch) and by wait (max_batch_wait).
#include <algorithm>
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

// A report that asks for the board's next lease is one call: eight of them
// queued together are one batch and one synced commit.
TEST_F(GroupCommitTest, ReportsWithTheirNextLeasesShareOneCommit) {
  auto leases = LeaseAll();
  const int64_t before = faults_.commits();
  std::vector<absl::StatusOr<v1::ReportResultResponse>> acks(
      kBoards, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int b = 0; b < kBoards; ++b) {
    ASSERT_TRUE(leases[b].ok() && leases[b]->granted()) << leases[b].status();
    threads.emplace_back([&, b] {
      v1::ReportResultRequest report = Result(b, leases[b]->work());
      report.mutable_next_lease();
      acks[b] =
          loop_->CallBatched([&] { return coord_->ReportResult(report); });
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(faults_.commits() - before, 1)
      << "8 results and 8 leases, one synced commit";
  for (int b = 0; b < kBoards; ++b) {
    ASSERT_TRUE(acks[b].ok()) << acks[b].status();
    EXPECT_TRUE(acks[b]->accepted() && !acks[b]->duplicate());
    ASSERT_TRUE(acks[b]->next_lease().granted());
    auto round =
        base_->GetRound(sweep_id_, acks[b]->next_lease().work().round_id());
    ASSERT_TRUE(round.ok());
    EXPECT_EQ(round->state(), v1::ROUND_STATE_LEASED);
    EXPECT_EQ(round->lease().board_id(), Board(b));
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

namespace tunefarm {
namespace {

// The size of every batch the loop ran (closures between begin and the
// commit or seal), in the loop's order. Touched on the loop thread only;
// read once the loop has stopped.
struct BatchSizes {
  std::vector<int> sizes;
  int open = 0;
  void Begin() { open = 0; }
  void Ran() { ++open; }
  void End() { sizes.push_back(open); }
};

class Durable : public SealedBatch {
 public:
  absl::Status Write() override { return absl::OkStatus(); }
  void Settle(const absl::Status&) override {}
};

ControlLoop::BatchHooks CountingHooks(BatchSizes* b, bool pipelined) {
  ControlLoop::BatchHooks hooks{[b] { b->Begin(); }, nullptr, nullptr};
  if (pipelined) {
    hooks.seal = [b] {
      b->End();
      return std::make_unique<Durable>();
    };
  } else {
    hooks.commit = [b] {
      b->End();
      return absl::OkStatus();
    };
  }
  return hooks;
}

// A batch holds at most max_batch calls however many are queued, in both
// the synchronous and the pipelined commit: 7 calls queued at once with
// max_batch 3 make batches of at most 3 that run each call once.
TEST(GroupCommitBoundsTest, ABatchHoldsAtMostMaxBatchCalls) {
  for (const bool pipelined : {false, true}) {
    SCOPED_TRACE(pipelined ? "pipelined" : "synchronous");
    BatchSizes batches;
    ControlLoop::Options options;
    options.max_batch = 3;
    ControlLoop loop(
        absl::Hours(1), [] {}, CountingHooks(&batches, pipelined), options);
    loop.Start();
    absl::Mutex mu;
    bool holding = false, release = false;
    int answered = 0;
    std::vector<int> runs(7, 0);
    // Holds the loop until every call is queued behind it.
    loop.Post(
        [&] {
          absl::MutexLock lock(&mu);
          holding = true;
          auto released = [&] { return release; };
          mu.Await(absl::Condition(&released));
          return absl::OkStatus();
        },
        [](absl::Status) {});
    {
      absl::MutexLock lock(&mu);
      auto held = [&] { return holding; };
      mu.Await(absl::Condition(&held));
    }
    for (int i = 0; i < 7; ++i) {
      loop.Post(
          [&, i] {
            batches.Ran();
            ++runs[i];
            return absl::OkStatus();
          },
          [&](absl::Status st) {
            EXPECT_TRUE(st.ok()) << st;
            absl::MutexLock lock(&mu);
            ++answered;
          });
    }
    {
      absl::MutexLock lock(&mu);
      release = true;
      auto all = [&] { return answered == 7; };
      mu.Await(absl::Condition(&all));
    }
    loop.Stop();
    int total = 0;
    for (int size : batches.sizes) {
      EXPECT_LE(size, 3) << "a batch went past max_batch";
      total += size;
    }
    EXPECT_EQ(total, 7);
    EXPECT_EQ(*std::max_element(batches.sizes.begin(), batches.sizes.end()), 3)
        << "calls queued together were not batched up to the bound";
    EXPECT_GE(batches.sizes.size(), 3u + 1u) << "the holding call's batch, "
                                                "then at least 3 of 7 calls";
    for (int i = 0; i < 7; ++i) EXPECT_EQ(runs[i], 1) << "call " << i;
  }
}

// A batch that does not fill waits for more calls at most max_batch_wait,
// then commits what it has: a lone call is answered, after about that wait.
TEST(GroupCommitBoundsTest, ABatchThatDoesNotFillWaitsAtMostMaxBatchWait) {
  for (const bool pipelined : {false, true}) {
    SCOPED_TRACE(pipelined ? "pipelined" : "synchronous");
    BatchSizes batches;
    ControlLoop::Options options;
    options.max_batch = 100;
    options.max_batch_wait = absl::Milliseconds(200);
    ControlLoop loop(
        absl::Hours(1), [] {}, CountingHooks(&batches, pipelined), options);
    loop.Start();
    const absl::Time start = absl::Now();
    absl::Status st = loop.CallBatched([&] {
      batches.Ran();
      return absl::OkStatus();
    });
    const absl::Duration waited = absl::Now() - start;
    loop.Stop();
    EXPECT_TRUE(st.ok()) << st;
    EXPECT_GE(waited, absl::Milliseconds(190)) << "it did not wait for more";
    EXPECT_LT(waited, absl::Seconds(20)) << "it waited past the bound";
    ASSERT_EQ(batches.sizes.size(), 1u);
    EXPECT_EQ(batches.sizes[0], 1);
  }
}

}  // namespace
}  // namespace tunefarm
