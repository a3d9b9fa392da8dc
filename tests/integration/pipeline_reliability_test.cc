// The reliable profile pipeline with real processes: a coordinator, two
// analyzer workers and an agent with a simulated board, on loopback. One
// analyzer is SIGKILLed while it holds a bundle (a test-only flag makes it
// stall at a chosen point, so the kill always lands mid-bundle); every
// bundle's diagnosis must still end up stored exactly once.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/files.h"
#include "common/subprocess.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/integration/farm_fixture.h"
#include "tests/integration/scrape_metrics.h"
#include "tunefarm/v1/farm.grpc.pb.h"

namespace tunefarm {
namespace {

// The value of an unlabelled sample `name` in /metrics of 127.0.0.1:port;
// -1 when absent.
double Metric(int port, const std::string& name) {
  const std::string out = ScrapeMetrics(port);
  for (absl::string_view line : absl::StrSplit(out, '\n')) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
    double v;
    if (f.size() == 2 && f[0] == name &&
        absl::SimpleAtod(absl::StripSuffix(f[1], "\r"), &v)) {
      return v;
    }
  }
  return -1;
}

class PipelineReliabilityTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto dir = MakeTempDir("tunefarm-pipeline-it-");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = *dir;
    ASSERT_TRUE(MakeDirs(dir_ + "/logs").ok());
    ASSERT_TRUE(MakeDirs(dir_ + "/run").ok());
  }
  void TearDown() override {
    for (auto* p : {&agent_, &analyzer_b_, &analyzer_a_, &coordinator_}) {
      if (*p) (*p)->Stop(absl::Seconds(5));
    }
    if (HasFailure()) {
      std::cerr << "logs kept in " << dir_ << "/logs\n";
    } else {
      (void)RemoveAll(dir_);
    }
  }

  std::string Run(const std::string& name) const {
    return absl::StrCat(dir_, "/run/", name);
  }

  std::unique_ptr<Subprocess> Start(const std::vector<std::string>& argv,
                                    const std::string& name) {
    auto p =
        Subprocess::Start(argv, absl::StrCat(dir_, "/logs/", name, ".log"));
    EXPECT_TRUE(p.ok()) << p.status();
    return p.ok() ? *std::move(p) : nullptr;
  }

  std::string WaitFile(const std::string& path) {
    auto text = WaitForFile(path, absl::Seconds(30));
    EXPECT_TRUE(text.ok()) << text.status();
    return text.value_or("");
  }

  // Analyzer `id`, diagnoses to `diagnoses`; extra flags appended.
  std::unique_ptr<Subprocess> StartAnalyzer(const std::string& id,
                                            const std::string& diagnoses,
                                            std::vector<std::string> extra) {
    std::vector<std::string> argv = {
        absl::StrCat(kFarmBinDir, "/tunefarm-analyzer"),
        "--id",
        id,
        "--coordinator",
        diagnoses,
        "--endpoint_file",
        Run(id + ".endpoint"),
        "--metrics_port_file",
        Run(id + ".metrics"),
        "--log_level",
        "debug"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return Start(argv, id);
  }

  v1::ListRoundsResponse Rounds(const std::string& id) {
    v1::ListRoundsRequest req;
    req.set_sweep_id(id);
    req.set_include_diagnosis(true);
    v1::ListRoundsResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(5));
    grpc::Status st = stub_->ListRounds(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return resp;
  }

  // DIAGNOSIS events per round, every event up to the sweep's last: a
  // watch ends at FINISHED, and diagnoses may come after it, so watch again
  // from there.
  std::map<int64_t, int> DiagnosisEvents(const std::string& id) {
    v1::Sweep sweep;
    {
      grpc::ClientContext ctx;
      v1::GetSweepRequest get;
      get.set_sweep_id(id);
      grpc::Status st = stub_->GetSweep(&ctx, get, &sweep);
      EXPECT_TRUE(st.ok()) << st.error_message();
    }
    std::map<int64_t, int> out;
    int64_t next = 1;
    for (int call = 0; call < 5 && next <= sweep.last_event_seq(); ++call) {
      v1::WatchSweepRequest req;
      req.set_sweep_id(id);
      req.set_from_seq(next);
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
      auto reader = stub_->WatchSweep(&ctx, req);
      v1::SweepEvent ev;
      while (next <= sweep.last_event_seq() && reader->Read(&ev)) {
        if (ev.kind() == v1::EVENT_KIND_DIAGNOSIS) ++out[ev.round().round_id()];
        next = ev.seq() + 1;
      }
      ctx.TryCancel();
      (void)reader->Finish();
    }
    EXPECT_GT(next, sweep.last_event_seq()) << "events missing";
    return out;
  }

  std::string dir_;
  std::unique_ptr<Subprocess> coordinator_, analyzer_a_, analyzer_b_, agent_;
  std::unique_ptr<v1::TuneFarm::Stub> stub_;
};

TEST_P(PipelineReliabilityTest, KilledAnalyzerLosesNoBundleAndStoresNoneTwice) {
  const std::string stage = GetParam();
  coordinator_ = Start(
      {absl::StrCat(kFarmBinDir, "/tunefarm-coordinator"), "--data_dir", dir_,
       "--listen", "127.0.0.1:0", "--port_file", Run("coordinator.port"),
       "--diagnosis_endpoint_file", Run("diagnosis.endpoint"),
       "--metrics_port_file", Run("coordinator.metrics"), "--heartbeat_ms",
       "500", "--agent_timeout_ms", "5000", "--log_level", "debug"},
      "coordinator");
  ASSERT_NE(coordinator_, nullptr);
  const std::string port = WaitFile(Run("coordinator.port"));
  const std::string diagnoses = WaitFile(Run("diagnosis.endpoint"));
  ASSERT_FALSE(port.empty());
  ASSERT_FALSE(diagnoses.empty());
  stub_ = v1::TuneFarm::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));

  // Analyzer A holds the first bundle it gets at `stage`; B is healthy.
  analyzer_a_ = StartAnalyzer(
      "analyzer-a", diagnoses,
      {"--test_hold_file", Run("held"), "--test_hold_stage", stage});
  analyzer_b_ = StartAnalyzer("analyzer-b", diagnoses, {});
  ASSERT_NE(analyzer_a_, nullptr);
  ASSERT_NE(analyzer_b_, nullptr);
  const std::string endpoint_a = WaitFile(Run("analyzer-a.endpoint"));
  const std::string endpoint_b = WaitFile(Run("analyzer-b.endpoint"));
  int metrics_b = 0;
  ASSERT_TRUE(
      absl::SimpleAtoi(WaitFile(Run("analyzer-b.metrics")), &metrics_b));

  agent_ = Start({absl::StrCat(kFarmBinDir, "/tunefarm-agent"),
                  "--coordinator",
                  absl::StrCat("127.0.0.1:", port),
                  "--agent_id",
                  "agent-1",
                  "--node",
                  "localhost",
                  "--boards",
                  "sim:1",
                  "--analyzer",
                  endpoint_a,
                  "--analyzer",
                  endpoint_b,
                  "--work_dir",
                  dir_ + "/work",
                  "--bin_dir",
                  kFarmBinDir,
                  "--bundle_ack_timeout_ms",
                  "1000",
                  "--log_level",
                  "debug"},
                 "agent-1");
  ASSERT_NE(agent_, nullptr);

  v1::SubmitSweepRequest submit;
  submit.set_spec_yaml(SimMatmulSpec("pipeline-it", "grid", 3, 6));
  v1::SubmitSweepResponse submitted;
  {
    grpc::ClientContext ctx;
    grpc::Status st = stub_->SubmitSweep(&ctx, submit, &submitted);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  const std::string id = submitted.sweep().sweep_id();

  // Kill A while it holds a bundle.
  const std::string held = WaitFile(Run("held"));
  ASSERT_FALSE(held.empty()) << "analyzer-a never got a bundle";
  analyzer_a_->Signal(SIGKILL);
  ASSERT_TRUE(analyzer_a_->Wait(absl::Seconds(10)).has_value());

  // Every round that made a bundle gets that bundle's diagnosis.
  const absl::Time deadline = absl::Now() + absl::Seconds(120);
  v1::ListRoundsResponse rounds;
  int with_bundle = 0, diagnosed = 0;
  bool finished = false;
  while (absl::Now() < deadline) {
    rounds = Rounds(id);
    with_bundle = diagnosed = 0;
    for (const v1::Round& r : rounds.rounds()) {
      if (r.result().bundle_id().empty()) continue;
      ++with_bundle;
      if (r.diagnosis().bundle_id() == r.result().bundle_id()) ++diagnosed;
    }
    grpc::ClientContext ctx;
    v1::GetSweepRequest get;
    get.set_sweep_id(id);
    v1::Sweep sweep;
    finished = stub_->GetSweep(&ctx, get, &sweep).ok() &&
               sweep.state() == v1::SWEEP_STATE_SUCCEEDED;
    if (finished && with_bundle >= 7 && diagnosed == with_bundle) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_TRUE(finished);
  EXPECT_GE(with_bundle, 7);  // baseline + 6 rounds
  EXPECT_EQ(diagnosed, with_bundle);

  // B saw the held bundle again; held after the coordinator's ack, B's
  // diagnosis of it was a duplicate. (Metrics refresh every 200 ms.)
  auto wait_metric = [&](const std::string& name) {
    const absl::Time until = absl::Now() + absl::Seconds(20);
    double v = -1;
    while ((v = Metric(metrics_b, name)) < 1 && absl::Now() < until) {
      absl::SleepFor(absl::Milliseconds(100));
    }
    return v;
  };
  EXPECT_GE(wait_metric("tunefarm_analyzer_redeliveries_total"), 1);
  if (stage == "recorded") {
    EXPECT_GE(wait_metric("tunefarm_analyzer_duplicate_diagnoses_total"), 1);
  }
  EXPECT_GE(wait_metric("tunefarm_analyzer_bundle_lag_seconds_count"), 1);

  // Exactly once: one DIAGNOSIS event per diagnosed round.
  rounds = Rounds(id);
  std::map<int64_t, int> events = DiagnosisEvents(id);
  bool saw_held = false;
  for (const v1::Round& r : rounds.rounds()) {
    if (r.result().bundle_id().empty()) continue;
    EXPECT_EQ(events[r.round_id()], 1) << "round " << r.round_id();
    if (r.result().bundle_id() != held) continue;
    saw_held = true;
    // Held before analysis: B diagnosed it. Held after the coordinator's
    // ack: A's diagnosis is the record, B's re-analysis a duplicate.
    EXPECT_EQ(r.diagnosis().analyzer_id(),
              stage == "received" ? "analyzer-b" : "analyzer-a");
  }
  EXPECT_TRUE(saw_held) << held;
}

INSTANTIATE_TEST_SUITE_P(HoldStage, PipelineReliabilityTest,
                         ::testing::Values("received", "recorded"));

}  // namespace
}  // namespace tunefarm
