// BatchedLoopTest: the set-up the group-commit and pipelined-commit tests
// share. A coordinator over a FaultInjectingStore (CoordinatorOverFaults),
// its ControlLoop with group commit (synchronous, or pipelined through
// SealBatch), one random sweep whose baseline is done, and an agent "a1"
// with kBoards boards ("a1/b0" ...), so every board can lease a candidate.
// The fixture owns all of it; tests call it from their own thread.
#ifndef TUNEFARM_TESTS_COORDINATOR_BATCHED_LOOP_FIXTURE_H_
#define TUNEFARM_TESTS_COORDINATOR_BATCHED_LOOP_FIXTURE_H_

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

class BatchedLoopTest : public ::testing::Test {
 protected:
  static constexpr int kBoards = 8;

  // Starts the loop, batching up to `max_batch` calls (it waits for that
  // many, so batches are deterministic), and runs the sweep's baseline.
  void StartLoop(int max_batch, bool pipelined) {
    ASSERT_TRUE(AddOperator(&catalog_, ToyOperatorYaml(8, 8)).ok());
    CoordinatorOptions options;
    options.lease_duration = absl::Seconds(60);
    options.agent_timeout = absl::Seconds(60);
    ASSERT_TRUE(core_.Open(&catalog_, &clock_, options).ok());
    coord_ = core_.coordinator();
    ControlLoop::Options loop_options;
    loop_options.max_batch = max_batch;
    loop_options.max_batch_wait = absl::Seconds(2);
    ControlLoop::BatchHooks hooks{[this] { coord_->BeginBatch(); }, nullptr,
                                  nullptr};
    if (pipelined) {
      hooks.seal = [this] { return coord_->SealBatch(); };
    } else {
      hooks.commit = [this] { return coord_->CommitBatch(); };
    }
    loop_ = std::make_unique<ControlLoop>(
        absl::Hours(1), [] {}, std::move(hooks), loop_options);
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
  void TearDown() override {
    if (loop_ != nullptr) loop_->Stop();
  }

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

  // Every board leases again: each is granted a round at its first epoch,
  // stored as leased once (a retry after a failed commit recorded nothing).
  void ExpectEveryBoardLeasesOnce() {
    for (const auto& lease : LeaseAll()) {
      ASSERT_TRUE(lease.ok()) << lease.status();
      ASSERT_TRUE(lease->granted());
      EXPECT_EQ(lease->work().epoch(), 1);
      auto round = base_->GetRound(sweep_id_, lease->work().round_id());
      ASSERT_TRUE(round.ok());
      EXPECT_EQ(round->attempts(), 1);
    }
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

}  // namespace tunefarm

#endif  // TUNEFARM_TESTS_COORDINATOR_BATCHED_LOOP_FIXTURE_H_
