#include "analyzer/worker.h"

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/analyzer/test_bundles.h"
#include "zmq.hpp"

namespace tunefarm {
namespace {

using ::testing::HasSubstr;
using ::tunefarm::testing::MsprofRealBundle;

constexpr absl::Duration kWait = absl::Seconds(10);

// Waits until `done` holds or `limit` passes; polls briefly because the
// state it waits on lives in another thread or process.
template <typename Pred>
bool WaitFor(Pred done, absl::Duration limit = kWait) {
  absl::Time deadline = absl::Now() + limit;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return true;
}

TEST(AnalyzerWorkerTest, BundleInDiagnosisOut) {
  // The coordinator's side: a receiver for diagnoses.
  absl::StatusOr<std::unique_ptr<PipelineReceiver>> coordinator =
      PipelineReceiver::Bind("tcp://127.0.0.1:*");
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();

  FakeClock clock(absl::FromUnixMillis(1'700'000'123'456));
  std::atomic<int> analyses{0};
  std::mutex report_mu;
  AnalysisReport report;
  AnalyzerWorker::Options options;
  options.id = "analyzer-t";
  options.coordinator_endpoints = {(*coordinator)->bound_endpoint()};
  options.poll_interval = absl::Milliseconds(20);
  options.clock = &clock;
  options.on_analyzed = [&](const AnalysisReport& r) {
    std::lock_guard<std::mutex> lock(report_mu);
    report = r;
    ++analyses;
  };
  absl::StatusOr<std::unique_ptr<AnalyzerWorker>> worker =
      AnalyzerWorker::Create(options);
  ASSERT_TRUE(worker.ok()) << worker.status();

  std::atomic<bool> stop{false};
  std::thread runner([&] { (*worker)->Run(stop); });

  // A garbled frame and a diagnosis (not a bundle) first, over a raw
  // socket: both are counted and dropped, the worker keeps going.
  zmq::context_t ctx(1);
  zmq::socket_t raw(ctx, zmq::socket_type::dealer);
  raw.set(zmq::sockopt::linger, 0);
  raw.connect((*worker)->bound_endpoint());
  raw.send(zmq::buffer(std::string("\x0f garbage")), zmq::send_flags::none);
  v1::PipelineMessage stray;
  stray.set_version(kPipelineVersion);
  stray.mutable_diagnosis()->set_bundle_id("stray");
  raw.send(zmq::buffer(stray.SerializeAsString()), zmq::send_flags::none);

  absl::StatusOr<std::unique_ptr<PipelineSender>> agent =
      PipelineSender::Connect({(*worker)->bound_endpoint()});
  ASSERT_TRUE(agent.ok()) << agent.status();
  v1::PipelineMessage msg;
  *msg.mutable_bundle() = MsprofRealBundle();
  msg.mutable_bundle()->set_created_unix_ms(1'700'000'120'456);
  msg.set_attempt(2);  // a re-send
  // A broken op_summary beside the real one: a parse error of format
  // msprof for the metrics; the real table still gives the hotspot.
  v1::ProfileFile* broken = msg.mutable_bundle()->add_files();
  broken->set_path(
      "PROF_000001_20260511093035/mindstudio_profiler_output/"
      "op_summary_99999999999999.csv");
  broken->set_content("Op Name,\"unterminated\n");
  ASSERT_TRUE((*agent)->Send(msg, kWait).ok());

  absl::StatusOr<PipelineDelivery> got = (*coordinator)->Receive(kWait);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->message.has_diagnosis());
  const v1::Diagnosis& d = got->message.diagnosis();
  EXPECT_EQ(d.bundle_id(), "bundle-msprof");
  EXPECT_EQ(d.sweep_id(), "sweep-1");
  EXPECT_EQ(d.round_id(), 3);
  EXPECT_EQ(d.analyzer_id(), "analyzer-t");
  EXPECT_EQ(d.analyzed_unix_ms(), 1'700'000'123'456);
  ASSERT_GE(d.hotspots_size(), 1);
  EXPECT_EQ(d.hotspots(0).op_name(), "matmul_kernel");
  EXPECT_THAT(d.perf_analysis_md(), HasSubstr("# Round Performance Analysis"));

  // Not durable yet, so the agent has no ack.
  EXPECT_EQ((*agent)->Receive(absl::Milliseconds(50)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  // A stale ack for another bundle does not count; the real one does, and
  // the worker passes it on to the agent.
  v1::PipelineMessage ack;
  ack.mutable_ack()->set_bundle_id("some-earlier-bundle");
  ASSERT_TRUE((*coordinator)->Reply(got->peer, ack).ok());
  ack.mutable_ack()->set_bundle_id("bundle-msprof");
  ack.mutable_ack()->set_round_id(3);
  ack.mutable_ack()->set_duplicate(true);
  ASSERT_TRUE((*coordinator)->Reply(got->peer, ack).ok());
  absl::StatusOr<v1::PipelineMessage> agent_ack = (*agent)->Receive(kWait);
  ASSERT_TRUE(agent_ack.ok()) << agent_ack.status();
  EXPECT_EQ(agent_ack->ack().bundle_id(), "bundle-msprof");
  EXPECT_TRUE(agent_ack->ack().duplicate());

  EXPECT_TRUE(WaitFor([&] {
    AnalyzerStats s = (*worker)->stats();
    return s.garbled == 2 && s.diagnoses_sent == 1;
  })) << (*worker)->stats().garbled;
  AnalyzerStats stats = (*worker)->stats();
  EXPECT_EQ(stats.bundles_received, 1);
  EXPECT_EQ(stats.redeliveries, 1);
  EXPECT_EQ(stats.diagnoses_sent, 1);
  EXPECT_EQ(stats.duplicates, 1);
  EXPECT_EQ(stats.rejected, 0);
  EXPECT_EQ(stats.send_failures, 0);
  EXPECT_EQ(analyses.load(), 1);
  {
    std::lock_guard<std::mutex> lock(report_mu);
    EXPECT_EQ(report.bundle_bytes,
              static_cast<int64_t>(msg.bundle().ByteSizeLong()));
    EXPECT_EQ(report.parse_errors,
              (std::map<std::string, int64_t>{{"msprof", 1}}));
    EXPECT_GT(report.took, absl::ZeroDuration());
    ASSERT_TRUE(report.lag.has_value());
    EXPECT_EQ(*report.lag, absl::Seconds(3));  // FakeClock: created 3 s ago
  }

  stop = true;
  runner.join();
}

TEST(AnalyzerWorkerTest, UnackedDiagnosisLeavesTheBundleUnacked) {
  // A coordinator that takes diagnoses but never acks (a commit failing).
  absl::StatusOr<std::unique_ptr<PipelineReceiver>> coordinator =
      PipelineReceiver::Bind("tcp://127.0.0.1:*");
  ASSERT_TRUE(coordinator.ok());
  std::string gone_endpoint;
  {
    absl::StatusOr<std::unique_ptr<PipelineReceiver>> gone =
        PipelineReceiver::Bind("tcp://127.0.0.1:*");
    ASSERT_TRUE(gone.ok());
    gone_endpoint = (*gone)->bound_endpoint();
  }
  for (const std::string& endpoint :
       {(*coordinator)->bound_endpoint(), gone_endpoint}) {
    AnalyzerWorker::Options options;
    options.id = "analyzer-lonely";
    options.coordinator_endpoints = {endpoint};
    options.poll_interval = absl::Milliseconds(20);
    options.send_timeout = absl::Milliseconds(30);
    options.ack_timeout = absl::Milliseconds(100);
    absl::StatusOr<std::unique_ptr<AnalyzerWorker>> worker =
        AnalyzerWorker::Create(options);
    ASSERT_TRUE(worker.ok()) << worker.status();
    std::atomic<bool> stop{false};
    std::thread runner([&] { (*worker)->Run(stop); });

    absl::StatusOr<std::unique_ptr<PipelineSender>> agent =
        PipelineSender::Connect({(*worker)->bound_endpoint()});
    ASSERT_TRUE(agent.ok());
    v1::PipelineMessage msg;
    msg.mutable_bundle()->set_bundle_id("b");
    ASSERT_TRUE((*agent)->Send(msg, kWait).ok());
    ASSERT_TRUE((*agent)->Send(msg, kWait).ok());
    EXPECT_TRUE(WaitFor([&] { return (*worker)->stats().send_failures == 2; }))
        << endpoint;
    EXPECT_EQ((*worker)->stats().bundles_received, 2);
    EXPECT_EQ((*worker)->stats().diagnoses_sent, 0);
    // The agent got no ack, so its outbox will send the bundle again.
    EXPECT_EQ((*agent)->Receive(absl::Milliseconds(50)).status().code(),
              absl::StatusCode::kDeadlineExceeded);
    stop = true;
    runner.join();
  }
}

TEST(AnalyzerWorkerTest, CreateNeedsACoordinator) {
  AnalyzerWorker::Options options;
  EXPECT_EQ(AnalyzerWorker::Create(options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The real executable as a child process: it writes its endpoint, answers
// a bundle with a diagnosis, and exits 0 on SIGTERM.
TEST(AnalyzerProcessTest, ExecutableAnswersAndStopsOnSigterm) {
  const std::string binary =
      std::string(TUNEFARM_BINARY_DIR) + "/bin/tunefarm-analyzer";
  ASSERT_TRUE(std::filesystem::exists(binary)) << binary;
  absl::StatusOr<std::string> dir = MakeTempDir("analyzer_process_test");
  ASSERT_TRUE(dir.ok()) << dir.status();
  const std::string endpoint_file = *dir + "/endpoint";

  absl::StatusOr<std::unique_ptr<PipelineReceiver>> coordinator =
      PipelineReceiver::Bind("tcp://127.0.0.1:*");
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();

  std::vector<std::string> args = {binary,
                                   "--coordinator",
                                   (*coordinator)->bound_endpoint(),
                                   "--endpoint_file",
                                   endpoint_file,
                                   "--metrics_address",
                                   "127.0.0.1:0",
                                   "--id",
                                   "analyzer-child",
                                   "--log_level",
                                   "warn"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execv(binary.c_str(), argv.data());
    _exit(127);
  }

  std::string endpoint;
  bool ready = WaitFor([&] {
    absl::StatusOr<std::string> text = ReadFile(endpoint_file);
    if (!text.ok() || text->empty()) return false;
    endpoint = *text;
    return true;
  });
  if (!ready) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    FAIL() << "the analyzer never wrote " << endpoint_file;
  }
  EXPECT_THAT(endpoint, HasSubstr("tcp://127.0.0.1:"));

  absl::StatusOr<std::unique_ptr<PipelineSender>> agent =
      PipelineSender::Connect({endpoint});
  ASSERT_TRUE(agent.ok()) << agent.status();
  v1::PipelineMessage msg;
  *msg.mutable_bundle() = MsprofRealBundle();
  ASSERT_TRUE((*agent)->Send(msg, kWait).ok());
  absl::StatusOr<PipelineDelivery> got = (*coordinator)->Receive(kWait);
  ASSERT_TRUE(got.ok()) << got.status();
  const v1::Diagnosis& d = got->message.diagnosis();
  EXPECT_EQ(d.analyzer_id(), "analyzer-child");
  EXPECT_EQ(d.bundle_id(), "bundle-msprof");
  ASSERT_GE(d.hotspots_size(), 1);
  EXPECT_EQ(d.hotspots(0).op_name(), "matmul_kernel");
  v1::PipelineMessage ack;
  ack.mutable_ack()->set_bundle_id(d.bundle_id());
  ASSERT_TRUE((*coordinator)->Reply(got->peer, ack).ok());
  absl::StatusOr<v1::PipelineMessage> agent_ack = (*agent)->Receive(kWait);
  ASSERT_TRUE(agent_ack.ok()) << agent_ack.status();
  EXPECT_EQ(agent_ack->ack().bundle_id(), "bundle-msprof");

  ASSERT_EQ(kill(pid, SIGTERM), 0);
  int status = 0;
  pid_t done = 0;
  EXPECT_TRUE(WaitFor([&] {
    done = waitpid(pid, &status, WNOHANG);
    return done == pid;
  }));
  if (done != pid) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_TRUE(RemoveAll(*dir).ok());
}

}  // namespace
}  // namespace tunefarm
