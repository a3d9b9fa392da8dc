// No lost diagnosis (issue 16): the agent keeps a round's profile bundle in
// its fsynced outbox BEFORE it reports the result, and sends it whatever the
// coordinator answers (a duplicate too: the coordinator may have committed
// the result and died before replying).
//
// A real Agent with the real outbox sink (real folder, real ZeroMQ) whose
// analyzer is played by the test with a PipelineReceiver. The coordinator is
// a scripted CoordinatorClient (one lease, then none) so that the answer to
// ReportResult, and the moment the agent dies, are chosen by the test.
#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "agent/agent.h"
#include "agent/pipeline_bundle_sink.h"
#include "common/files.h"
#include "gtest/gtest.h"
#include "pipeline/bundle_outbox.h"
#include "pipeline/transport.h"

namespace tunefarm {
namespace {

constexpr char kBundleId[] = "sw-1.r3.e1.b0";

int CountBundles(const std::string& dir) {
  int n = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    n += f.path().extension() == ".bundle" ? 1 : 0;
  }
  return n;
}

// A board whose every evaluation succeeds with one small profile bundle.
class BundleBoard : public Board {
 public:
  BundleBoard() {
    info_.set_board_id("b0");
    info_.set_kind("sim");
    info_.set_state(v1::BOARD_STATE_IDLE);
  }
  v1::BoardInfo info() const override { return info_; }
  absl::StatusOr<Evaluation> Evaluate(const v1::WorkItem& work,
                                      const std::atomic<bool>&) override {
    Evaluation e;
    e.result.set_outcome(v1::OUTCOME_OK);
    e.result.mutable_measurement()->set_median_us(10);
    v1::ProfileBundle& b = e.bundle.emplace();
    b.set_bundle_id(kBundleId);
    b.set_sweep_id(work.sweep_id());
    b.set_round_id(work.round_id());
    b.set_epoch(work.epoch());
    v1::ProfileFile* f = b.add_files();
    f->set_path("op_summary_1.csv");
    f->set_content("Op Name,Task Duration(us)\nk,1\n");
    return e;
  }

 private:
  v1::BoardInfo info_;
};

// One lease, then none. ReportResult records how many bundles the outbox
// folder held when it was called, then answers as scripted: `duplicate`, or
// (`hang`) never, until the test lets the agent die.
class ScriptedCoordinator : public CoordinatorClient {
 public:
  ScriptedCoordinator(std::string outbox_dir, bool duplicate, bool hang)
      : outbox_dir_(std::move(outbox_dir)),
        duplicate_(duplicate),
        hang_(hang) {}

  absl::StatusOr<v1::RegisterAgentResponse> RegisterAgent(
      const v1::RegisterAgentRequest&) override {
    v1::RegisterAgentResponse r;
    r.set_heartbeat_interval_ms(50);
    return r;
  }
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(
      const v1::HeartbeatRequest&) override {
    return v1::HeartbeatResponse();
  }
  absl::StatusOr<v1::LeaseWorkResponse> LeaseWork(
      const v1::LeaseWorkRequest& request) override {
    v1::LeaseWorkResponse r;
    absl::MutexLock lock(&mu_);
    if (leased_ || request.prefetch()) {
      r.set_retry_after_ms(50);
      return r;
    }
    leased_ = true;
    r.set_granted(true);
    v1::WorkItem* w = r.mutable_work();
    w->set_lease_id("lease-1");
    w->set_sweep_id("sw-1");
    w->set_round_id(3);
    w->set_epoch(1);
    w->set_lease_duration_ms(60000);
    return r;
  }
  absl::StatusOr<v1::RenewLeaseResponse> RenewLease(
      const v1::RenewLeaseRequest&) override {
    v1::RenewLeaseResponse r;
    r.set_valid(true);
    return r;
  }
  absl::StatusOr<v1::ReportResultResponse> ReportResult(
      const v1::ReportResultRequest& request) override {
    {
      absl::MutexLock lock(&mu_);
      if (bundles_at_report_ < 0) {
        bundles_at_report_ = CountBundles(outbox_dir_);
        reported_bundle_id_ = request.result().bundle_id();
      }
      reported_ = true;
    }
    if (hang_) {
      // The coordinator committed, and this agent dies before the reply.
      return absl::UnavailableError("connection reset (test)");
    }
    v1::ReportResultResponse r;
    r.set_accepted(true);
    r.set_duplicate(duplicate_);
    return r;
  }

  bool reported() {
    absl::MutexLock lock(&mu_);
    return reported_;
  }
  int bundles_at_report() {
    absl::MutexLock lock(&mu_);
    return bundles_at_report_;
  }
  std::string reported_bundle_id() {
    absl::MutexLock lock(&mu_);
    return reported_bundle_id_;
  }

 private:
  const std::string outbox_dir_;
  const bool duplicate_;
  const bool hang_;
  absl::Mutex mu_;
  bool leased_ ABSL_GUARDED_BY(mu_) = false;
  bool reported_ ABSL_GUARDED_BY(mu_) = false;
  int bundles_at_report_ ABSL_GUARDED_BY(mu_) = -1;
  std::string reported_bundle_id_ ABSL_GUARDED_BY(mu_);
};

class AgentBundleOrderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = MakeTempDir("agent_bundle_order_test");
    ASSERT_TRUE(dir.ok()) << dir.status();
    root_ = *dir;
    outbox_dir_ = root_ + "/outbox";
    auto analyzer = PipelineReceiver::Bind("tcp://127.0.0.1:*");
    ASSERT_TRUE(analyzer.ok()) << analyzer.status();
    analyzer_ = *std::move(analyzer);
  }
  void TearDown() override { (void)RemoveAll(root_); }

  std::unique_ptr<BundleSink> Sink() {
    BundleOutbox::Options o;
    o.endpoints = {analyzer_->bound_endpoint()};
    o.dir = outbox_dir_;
    o.poll_interval = absl::Milliseconds(5);
    auto outbox = BundleOutbox::Open(std::move(o));
    EXPECT_TRUE(outbox.ok()) << outbox.status();
    return outbox.ok() ? NewPipelineBundleSink(*std::move(outbox)) : nullptr;
  }

  // Runs an agent until the coordinator saw its report (plus `after`), then
  // stops it as a kill would: no more calls go out.
  void RunAgentUntilReported(ScriptedCoordinator& coordinator,
                             absl::Duration after) {
    std::unique_ptr<BundleSink> sink = Sink();
    ASSERT_NE(sink, nullptr);
    std::vector<std::unique_ptr<Board>> boards;
    boards.push_back(std::make_unique<BundleBoard>());
    AgentOptions options;
    options.agent_id = "a1";
    options.node = "n1";
    options.prefetch = false;
    options.max_backoff = absl::Milliseconds(50);
    Agent agent(options, &coordinator, sink.get(), std::move(boards));
    std::atomic<bool> stop{false};
    std::thread run([&] { agent.Run(stop); });
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (!coordinator.reported() && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    absl::SleepFor(after);
    stop = true;
    run.join();
    ASSERT_TRUE(coordinator.reported()) << "the agent never reported";
  }

  // The next bundle the analyzer gets, or an empty id after `wait`.
  std::string NextBundleId(absl::Duration wait) {
    absl::StatusOr<PipelineDelivery> d = analyzer_->Receive(wait);
    if (!d.ok()) return "";
    return d->message.bundle().bundle_id();
  }

  std::string root_, outbox_dir_;
  std::unique_ptr<PipelineReceiver> analyzer_;
};

// The coordinator recorded the result earlier (its reply was lost) and now
// answers the retry as a duplicate: the bundle must still go out, and it
// must have been on disk before the report.
TEST_F(AgentBundleOrderTest, BundleKeptBeforeReportAndSentOnDuplicate) {
  ScriptedCoordinator coordinator(outbox_dir_, /*duplicate=*/true,
                                  /*hang=*/false);
  ASSERT_NO_FATAL_FAILURE(
      RunAgentUntilReported(coordinator, absl::Milliseconds(300)));
  EXPECT_EQ(coordinator.reported_bundle_id(), kBundleId);
  EXPECT_EQ(coordinator.bundles_at_report(), 1)
      << "the bundle was not in the outbox folder when the result was "
         "reported";
  EXPECT_EQ(NextBundleId(absl::Seconds(10)), kBundleId)
      << "a result answered as a duplicate left its bundle unsent";
}

// The agent dies after the coordinator committed the result but before it
// saw the reply: the bundle is on disk, and the restarted agent's outbox
// sends it.
TEST_F(AgentBundleOrderTest, AgentKilledAfterReportKeepsBundleForRestart) {
  ScriptedCoordinator coordinator(outbox_dir_, /*duplicate=*/false,
                                  /*hang=*/true);
  ASSERT_NO_FATAL_FAILURE(
      RunAgentUntilReported(coordinator, absl::Milliseconds(50)));
  EXPECT_EQ(coordinator.bundles_at_report(), 1);
  EXPECT_EQ(CountBundles(outbox_dir_), 1)
      << "the dead agent's bundle is not in its outbox";
  // Nothing was sent before the result was answered.
  EXPECT_EQ(NextBundleId(absl::Milliseconds(200)), "");
  // The restarted agent's outbox sends what the dead one kept.
  std::unique_ptr<BundleSink> restarted = Sink();
  ASSERT_NE(restarted, nullptr);
  EXPECT_EQ(NextBundleId(absl::Seconds(10)), kBundleId);
}

// A result answered normally: the bundle goes out once, after the answer.
TEST_F(AgentBundleOrderTest, AcceptedResultSendsItsBundle) {
  ScriptedCoordinator coordinator(outbox_dir_, /*duplicate=*/false,
                                  /*hang=*/false);
  ASSERT_NO_FATAL_FAILURE(
      RunAgentUntilReported(coordinator, absl::Milliseconds(300)));
  EXPECT_EQ(coordinator.bundles_at_report(), 1);
  EXPECT_EQ(NextBundleId(absl::Seconds(10)), kBundleId);
}

}  // namespace
}  // namespace tunefarm
