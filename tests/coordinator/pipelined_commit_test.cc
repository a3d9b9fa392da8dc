// Pipelined group commit: the control loop runs the next batch of calls
// while the last one is synced, answers each batch only once it is durable,
// and when a sync fails undoes the batch built on it too (newest first),
// answers every call of both with the error and never writes the second;
// a sweep ended by an undone batch leaves no report.
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/files.h"
#include "coordinator/control_loop.h"
#include "coordinator/coordinator.h"
#include "gtest/gtest.h"
#include "ops/catalog.h"
#include "storage/fault_injecting_store.h"
#include "tests/coordinator/batched_loop_fixture.h"
#include "tests/coordinator/coordinator_harness.h"

namespace tunefarm {
namespace {

// Half the boards' calls in a batch, committed pipelined.
class PipelinedCommitTest : public BatchedLoopTest {
 protected:
  static constexpr int kWave = kBoards / 2;  // one batch

  void SetUp() override { StartLoop(kWave, /*pipelined=*/true); }

  // Two waves of leases (boards 0-3, then 4-7), each one batch; the second
  // is queued once the first has run (so while it is being written). Logs
  // "run A", "done A", ... in the order the loop thread got there.
  std::vector<absl::StatusOr<v1::LeaseWorkResponse>> TwoWaves() {
    std::vector<absl::StatusOr<v1::LeaseWorkResponse>> out(
        kBoards, absl::UnknownError("not answered"));
    int answered = 0, ran_first = 0;
    auto post = [&](int b, const std::string& wave) {
      loop_->Post(
          [&, b, wave] {
            Log("run " + wave);
            if (b < kWave) {
              absl::MutexLock lock(&mu_);
              ++ran_first;
            }
            return coord_->LeaseWork(Lease(b));
          },
          [&, b, wave](absl::StatusOr<v1::LeaseWorkResponse> r) {
            Log("done " + wave);
            absl::MutexLock lock(&mu_);
            out[b] = std::move(r);
            ++answered;
          });
    };
    for (int b = 0; b < kWave; ++b) post(b, "A");
    {
      absl::MutexLock lock(&mu_);
      auto first_ran = [&] { return ran_first == kWave; };
      mu_.Await(absl::Condition(&first_ran));
    }
    for (int b = kWave; b < kBoards; ++b) post(b, "B");
    absl::MutexLock lock(&mu_);
    auto all = [&] { return answered == kBoards; };
    mu_.Await(absl::Condition(&all));
    return out;
  }
  void Log(const std::string& what) {
    absl::MutexLock lock(&mu_);
    if (log_.empty() || log_.back() != what) log_.push_back(what);
  }

  absl::Mutex mu_;
  std::vector<std::string> log_;  // consecutive repeats folded
};

TEST_F(PipelinedCommitTest, TheNextBatchRunsWhileTheLastIsSynced) {
  const int64_t before = faults_.commits();
  faults_.SetCommitDelay(absl::Seconds(1));
  std::vector<absl::StatusOr<v1::LeaseWorkResponse>> leases = TwoWaves();
  // B ran during A's 1 s sync; A was answered only after it, B after its
  // own.
  EXPECT_EQ(log_,
            (std::vector<std::string>{"run A", "run B", "done A", "done B"}));
  EXPECT_EQ(faults_.commits() - before, 2);
  for (int b = 0; b < kBoards; ++b) {
    ASSERT_TRUE(leases[b].ok()) << leases[b].status();
    ASSERT_TRUE(leases[b]->granted());
    auto round = base_->GetRound(sweep_id_, leases[b]->work().round_id());
    ASSERT_TRUE(round.ok()) << round.status();
    EXPECT_EQ(round->state(), v1::ROUND_STATE_LEASED);
    EXPECT_EQ(round->lease().lease_id(), leases[b]->work().lease_id());
  }
}

TEST_F(PipelinedCommitTest, AFailedSyncUndoesTheBatchBuiltOnItUnwritten) {
  const std::string state =
      loop_->Call([&] { return coord_->DescribeState(); });
  const int64_t before = faults_.commits();
  faults_.SetCommitDelay(absl::Seconds(1));
  faults_.FailNthCommit(1);
  for (const auto& lease : TwoWaves()) {
    EXPECT_FALSE(lease.ok()) << "a lease was answered from a failed batch";
    if (!lease.ok()) {
      EXPECT_TRUE(absl::IsUnavailable(lease.status()));
    }
  }
  EXPECT_EQ(log_,
            (std::vector<std::string>{"run A", "run B", "done B", "done A"}))
      << "the batch built on the failed one is undone first";
  EXPECT_EQ(faults_.failed_commits(), 1);
  EXPECT_EQ(faults_.commits(), before) << "the second batch was written";
  EXPECT_EQ(loop_->Call([&] { return coord_->DescribeState(); }), state);
  // Retried after the store recovered: each round leased once.
  faults_.SetCommitDelay(absl::ZeroDuration());
  ExpectEveryBoardLeasesOnce();
}

// A written batch is answered while calls are still queued behind it: the
// loop runs queued calls a few at a time and settles between those runs,
// so an answer waits for one write, not for every call queued after it.
TEST(PipelinedLoopTest, AWrittenBatchIsAnsweredBeforeTheQueueBehindItRuns) {
  class Written : public SealedBatch {
   public:
    absl::Status Write() override { return absl::OkStatus(); }
    void Settle(const absl::Status&) override {}
  };
  ControlLoop loop(
      absl::Hours(1), [] {},
      ControlLoop::BatchHooks{[] {}, nullptr,
                              [] { return std::make_unique<Written>(); }});
  loop.Start();
  constexpr int kCalls = 200;
  absl::Mutex mu;
  std::vector<std::string> log;
  bool holding = false, release = false;
  int answered = 0;
  auto note = [&](std::string what) {
    absl::MutexLock lock(&mu);
    log.push_back(std::move(what));
  };
  // Holds the loop until every call is queued behind it.
  loop.Post(
      [&] {
        absl::MutexLock lock(&mu);
        holding = true;
        auto released = [&] { return release; };
        mu.Await(absl::Condition(&released));
        return absl::OkStatus();
      },
      [&](absl::Status) {
        absl::MutexLock lock(&mu);
        ++answered;
      });
  {
    absl::MutexLock lock(&mu);
    auto held = [&] { return holding; };
    mu.Await(absl::Condition(&held));
  }
  for (int i = 0; i < kCalls; ++i) {
    loop.Post(
        [&, i] {
          note(absl::StrCat("run ", i));
          absl::SleepFor(absl::Microseconds(500));
          return absl::OkStatus();
        },
        [&, i](absl::Status st) {
          EXPECT_TRUE(st.ok()) << st;
          note(absl::StrCat("done ", i));
          absl::MutexLock lock(&mu);
          ++answered;
        });
  }
  {
    absl::MutexLock lock(&mu);
    release = true;
    auto all = [&] { return answered == kCalls + 1; };
    mu.Await(absl::Condition(&all));
  }
  loop.Stop();
  const auto at = [&](const std::string& what) {
    return std::find(log.begin(), log.end(), what) - log.begin();
  };
  ASSERT_LT(at("done 0"), static_cast<int64_t>(log.size()));
  EXPECT_LT(at("done 0"), at(absl::StrCat("run ", kCalls - 20)))
      << "the first call waited for the whole queue to run: answered at "
      << at("done 0") << " of " << log.size();
}

// The batch that ends a sweep writes its report before its write, while the
// batch before it is still being synced. When that earlier sync fails, the
// end is undone unwritten and its report removed; the retry ends the sweep
// with its report.
TEST(PipelinedReportTest, AnEndUndoneBehindAFailedSyncLeavesNoReport) {
  absl::StatusOr<std::string> dir = MakeTempDir("pipelined_report");
  ASSERT_TRUE(dir.ok()) << dir.status();
  OperatorCatalog catalog;
  ASSERT_TRUE(AddOperator(&catalog, ToyOperatorYaml(3, 4)).ok());
  FakeClock clock;
  CoordinatorOptions options;
  options.report_dir = *dir + "/reports";
  CoordinatorOverFaults core;
  ASSERT_TRUE(core.Open(&catalog, &clock, options).ok());
  Coordinator* coord = core.coordinator();
  FaultInjectingStore& faults = *core.faults();
  ControlLoop loop(
      absl::Hours(1), [] {},
      ControlLoop::BatchHooks{[&] { coord->BeginBatch(); }, nullptr,
                              [&] { return coord->SealBatch(); }});
  loop.Start();

  v1::SubmitSweepRequest submit;
  submit.set_spec_yaml(ToySpecYaml("reported", "grid", 2));
  auto sweep =
      loop.Call([&] { return coord->SubmitSweep(submit, AnonymousAdmin()); });
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  const std::string id = sweep->sweep().sweep_id();
  const std::string report = options.report_dir + "/" + id + ".md";
  ASSERT_TRUE(
      loop.Call([&] { return coord->RegisterAgent(SimAgent("a1", 1)); }).ok());
  // Each result runs as batch B on top of batch A (another agent registers),
  // whose 1 s sync fails; then it is retried. Memory is put back exactly, so
  // the retry decides what the undone attempt decided: the attempt whose
  // retry ends the sweep ended it, and wrote its report, behind A.
  int active = 1;
  bool report_written_then_removed = false;
  for (int round = 0; round < 10 && active > 0; ++round) {
    auto lease =
        loop.CallBatched([&] { return coord->LeaseWork(LeaseFor("a1/b0")); });
    ASSERT_TRUE(lease.ok() && lease->granted()) << lease.status();
    const v1::ReportResultRequest result =
        ResultFor("a1/b0", lease->work(), 100 - round);
    faults.SetCommitDelay(absl::Seconds(1));
    faults.FailNthCommit(1);
    absl::Mutex mu;
    bool a_ran = false;
    int answered = 0;
    absl::Status a_status, b_status;
    loop.Post(
        [&] {
          absl::Status st = coord->RegisterAgent(SimAgent("a2", 1)).status();
          absl::MutexLock lock(&mu);
          a_ran = true;
          return st;
        },
        [&](absl::Status st) {
          absl::MutexLock lock(&mu);
          a_status = st;
          ++answered;
        });
    {
      absl::MutexLock lock(&mu);
      mu.Await(absl::Condition(&a_ran));
    }
    loop.Post([&] { return coord->ReportResult(result).status(); },
              [&](absl::Status st) {
                absl::MutexLock lock(&mu);
                b_status = st;
                ++answered;
              });
    {
      absl::MutexLock lock(&mu);
      auto both = [&] { return answered == 2; };
      mu.Await(absl::Condition(&both));
    }
    EXPECT_FALSE(a_status.ok());
    EXPECT_FALSE(b_status.ok()) << "a result acknowledged that is not stored";
    auto stored = core.base()->GetSweep(id);
    ASSERT_TRUE(stored.ok()) << stored.status();
    EXPECT_EQ(stored->state(), v1::SWEEP_STATE_RUNNING);
    EXPECT_FALSE(ReadFile(report).ok())
        << "a report of an end that was not stored";
    // The reports folder is made by the first report written.
    report_written_then_removed =
        report_written_then_removed ||
        std::filesystem::is_directory(options.report_dir);
    faults.SetCommitDelay(absl::ZeroDuration());
    ASSERT_TRUE(
        loop.CallBatched([&] { return coord->ReportResult(result); }).ok());
    active = loop.Call([&] { return coord->active_sweeps(); });
  }
  EXPECT_EQ(active, 0) << "the sweep never ended: proves nothing";
  EXPECT_TRUE(report_written_then_removed)
      << "no undone end wrote its report: proves nothing";

  loop.Stop();
  auto stored = core.base()->GetSweep(id);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->state(), v1::SWEEP_STATE_SUCCEEDED);
  EXPECT_EQ(stored->report_path(), report);
  absl::StatusOr<std::string> text = ReadFile(report);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_NE(text->find(id), std::string::npos);
  EXPECT_TRUE(RemoveAll(*dir).ok());
}

}  // namespace
}  // namespace tunefarm
