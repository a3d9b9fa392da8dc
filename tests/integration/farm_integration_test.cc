// Whole-farm tests: a coordinator, an analyzer worker and agents run as
// separate processes (cli/local_farm.h) on loopback; the test talks to the
// coordinator over real gRPC and kills processes with real signals.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cli/local_farm.h"
#include "common/files.h"
#include "common/subprocess.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/integration/farm_fixture.h"
#include "tests/integration/scrape_metrics.h"
#include "tunefarm/v1/farm.grpc.pb.h"

namespace tunefarm {
namespace {

std::string SpecYaml(const std::string& strategy, int max_rounds, int no_gain) {
  return SimMatmulSpec("it-sweep", strategy, 3, max_rounds, no_gain);
}

class FarmTest : public FarmFixture {
 protected:
  // Lineage and exactly-once checks every whole-farm test shares.
  void CheckRecord(const std::string& id, const v1::Sweep& sweep) {
    v1::ListRoundsResponse rounds = Rounds(id);
    ASSERT_GT(rounds.rounds_size(), 1);
    int done_candidates = 0;
    for (int i = 0; i < rounds.rounds_size(); ++i) {
      const v1::Round& r = rounds.rounds(i);
      EXPECT_EQ(r.round_id(), i) << "round ids must be contiguous";
      if (i == 0) {
        EXPECT_EQ(r.parent_round(), -1);
        EXPECT_EQ(r.decision(), v1::DECISION_BASELINE);
      } else {
        ASSERT_GE(r.parent_round(), 0);
        ASSERT_LT(r.parent_round(), i) << "a parent precedes its child";
        EXPECT_FALSE(r.changes().empty());
      }
      if (r.decision() == v1::DECISION_CLOSING_CHECK) {
        // The best timed against the baseline after the search: no
        // candidate, the sweep's last round.
        EXPECT_EQ(r.round_id(), sweep.closing_check().round_id());
        EXPECT_EQ(r.parent_round(), 0);
        EXPECT_EQ(i, rounds.rounds_size() - 1);
      } else if (r.state() == v1::ROUND_STATE_DONE && i > 0) {
        ++done_candidates;
      }
      if (r.decision() == v1::DECISION_KEPT) {
        const v1::Round& parent = rounds.rounds(r.parent_round());
        EXPECT_LT(r.result().measurement().median_us(),
                  parent.result().measurement().median_us() * 0.98);
      }
      if (r.state() == v1::ROUND_STATE_DONE &&
          r.result().outcome() == v1::OUTCOME_OK) {
        EXPECT_TRUE(r.result().measurement().simulated());
        EXPECT_GT(r.result().measurement().samples(), 0);
      }
    }
    EXPECT_EQ(done_candidates, sweep.rounds_finished());
    // Kept path: baseline → … → best, each step a kept child of the last.
    ASSERT_FALSE(rounds.kept_path().empty());
    EXPECT_EQ(rounds.kept_path(0), 0);
    EXPECT_EQ(*rounds.kept_path().rbegin(), sweep.best_round());
    for (int i = 1; i < rounds.kept_path_size(); ++i) {
      const v1::Round& r = rounds.rounds(rounds.kept_path(i));
      EXPECT_EQ(r.parent_round(), rounds.kept_path(i - 1));
      EXPECT_EQ(r.decision(), v1::DECISION_KEPT);
    }
    // Exactly once: one ROUND_FINISHED event per finished round.
    std::map<int64_t, int> finished;
    for (const v1::SweepEvent& ev : Events(id)) {
      if (ev.kind() == v1::EVENT_KIND_ROUND_FINISHED) {
        ++finished[ev.round().round_id()];
      }
    }
    for (const v1::Round& r : rounds.rounds()) {
      const int n = finished.count(r.round_id()) ? finished[r.round_id()] : 0;
      EXPECT_EQ(n, r.state() == v1::ROUND_STATE_DONE ? 1 : 0)
          << "round " << r.round_id();
    }
  }
};

TEST_F(FarmTest, SweepRunsToCompletionAcrossTwoAgentsWithDiagnoses) {
  LocalFarmOptions o;
  o.agents = 2;
  o.boards_per_agent = 1;
  o.metrics_team_labels = true;  // the dashboard check reads team series
  StartFarm(o);
  const std::string id = Submit(SpecYaml("grid", 12, 100));
  v1::Sweep sweep = WaitFinished(id, absl::Seconds(120));
  ASSERT_EQ(sweep.state(), v1::SWEEP_STATE_SUCCEEDED)
      << sweep.termination_detail();
  EXPECT_EQ(sweep.termination(), v1::TERMINATION_ROUND_BUDGET);
  EXPECT_EQ(sweep.rounds_finished(), 12);
  EXPECT_TRUE(sweep.simulated());
  CheckRecord(id, sweep);

  // Both agents' boards ran rounds.
  std::set<std::string> boards;
  const v1::ListRoundsResponse all = Rounds(id);
  for (const v1::Round& r : all.rounds()) boards.insert(r.board_id());
  EXPECT_TRUE(boards.count("agent-1/sim0")) << "agent-1 ran nothing";
  EXPECT_TRUE(boards.count("agent-2/sim0")) << "agent-2 ran nothing";

  // agent → ZeroMQ → analyzer → coordinator: the baseline's diagnosis names
  // the hotspot parsed from the op_summary the sim board wrote.
  v1::Diagnosis diagnosis;
  for (int i = 0; i < 200 && diagnosis.hotspots().empty(); ++i) {
    diagnosis = Rounds(id).rounds(0).diagnosis();
    if (diagnosis.hotspots().empty()) absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_FALSE(diagnosis.hotspots().empty());
  EXPECT_NE(diagnosis.hotspots(0).op_name().find("MatMul"), std::string::npos)
      << diagnosis.hotspots(0).op_name();
  EXPECT_GT(diagnosis.hotspots(0).duration_us(), 0);
  EXPECT_TRUE(diagnosis.simulated());

  // The coordinator's /metrics counts what it recorded.
  const std::string metrics = ScrapeMetrics(farm_->coordinator_metrics_port());
  EXPECT_NE(metrics.find("tunefarm_rounds_total{outcome=\"ok\"}"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("tunefarm_boards{state=\"idle\"}"), std::string::npos);
  EXPECT_NE(metrics.find("tunefarm_lease_latency_seconds_count"),
            std::string::npos);
  EXPECT_NE(metrics.find("tunefarm_board_state{"), std::string::npos);
  EXPECT_NE(metrics.find("tunefarm_team_rounds_total{"), std::string::npos);
  EXPECT_NE(metrics.find("team=\"itest\""), std::string::npos) << metrics;
  // Every process serves /metrics; the Grafana dashboard check
  // (tests/helm/dashboard_metrics_test.sh) reads these scrapes.
  const std::map<std::string, int> ports = farm_->MetricsPorts();
  EXPECT_EQ(ports.size(), 4u);  // coordinator, analyzer, two agents
  const char* dump = std::getenv("TUNEFARM_METRICS_DUMP");
  for (const auto& [name, port] : ports) {
    std::string body = ScrapeMetrics(port);
    const size_t header_end = body.find("\r\n\r\n");
    body = header_end == std::string::npos ? "" : body.substr(header_end + 4);
    EXPECT_NE(body.find("# TYPE tunefarm_"), std::string::npos) << name;
    if (dump != nullptr) {
      EXPECT_TRUE(
          WriteFileAtomic(absl::StrCat(dump, "/", name, ".prom"), body).ok());
    }
  }

  // The report is on disk where the sweep says as soon as the end is seen
  // (written before the end is committed).
  auto report = ReadFile(sweep.report_path());
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_NE(report->find("Simulated board"), std::string::npos);
  EXPECT_NE(report->find("Kept path"), std::string::npos);
}

TEST_F(FarmTest, KilledAgentsRoundIsRerunElsewhereAndRecordedOnce) {
  LocalFarmOptions o;
  o.agents = 2;
  o.boards_per_agent = 1;
  o.sim_delay_ms = 1500;  // each round takes real time
  o.heartbeat_ms = 100;
  o.agent_timeout_ms = 1000;
  o.lease_ms = 3000;
  StartFarm(o);
  const std::string id = Submit(SpecYaml("random", 4, 100));

  // Wait until agent-1 holds a lease, then kill it mid-round.
  int64_t victim = -1;
  for (int i = 0; i < 400 && victim < 0; ++i) {
    const v1::ListRoundsResponse now = Rounds(id);
    for (const v1::Round& r : now.rounds()) {
      if (r.state() == v1::ROUND_STATE_LEASED &&
          r.lease().board_id() == "agent-1/sim0") {
        victim = r.round_id();
      }
    }
    if (victim < 0) absl::SleepFor(absl::Milliseconds(25));
  }
  ASSERT_GE(victim, 0) << "agent-1 never got a lease";
  farm_->KillAgent(0, SIGKILL);

  v1::Sweep sweep = WaitFinished(id, absl::Seconds(120));
  ASSERT_EQ(sweep.state(), v1::SWEEP_STATE_SUCCEEDED)
      << sweep.termination_detail();
  CheckRecord(id, sweep);
  const v1::Round r = Rounds(id).rounds(victim);
  EXPECT_EQ(r.state(), v1::ROUND_STATE_DONE);
  EXPECT_EQ(r.board_id(), "agent-2/sim0") << "re-run on the surviving agent";
  EXPECT_GE(r.attempts(), 2);
  bool requeued = false;
  for (const v1::SweepEvent& ev : Events(id)) {
    requeued |= ev.kind() == v1::EVENT_KIND_ROUND_REQUEUED &&
                ev.round().round_id() == victim;
  }
  EXPECT_TRUE(requeued);
}

// /proc facts for the runner test: the pids whose executable is `exe`
// and whose parent is `ppid` (any parent when 0), and whether a pid is
// still running (a zombie or a vanished pid is not).
std::vector<pid_t> ProcessesOf(const std::string& exe, pid_t ppid) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::error_code lec;
    const std::string target =
        std::filesystem::read_symlink(e.path() / "exe", lec).string();
    if (lec || target != exe) continue;
    absl::StatusOr<std::string> stat = ReadFile(e.path().string() + "/stat");
    if (!stat.ok()) continue;
    // "pid (comm) S ppid ...": fields after the last ')'.
    const size_t close = stat->rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat->substr(close + 2));
    std::string state;
    pid_t parent = 0;
    rest >> state >> parent;
    if (state == "Z") continue;
    if (ppid == 0 || parent == ppid) out.push_back(std::stoi(name));
  }
  return out;
}

bool Running(pid_t pid) {
  absl::StatusOr<std::string> stat =
      ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  if (!stat.ok()) return false;
  const size_t close = stat->rfind(')');
  return close != std::string::npos && close + 2 < stat->size() &&
         (*stat)[close + 2] != 'Z';
}

// A cpu board's persistent runner dies with its agent: SIGKILL the agent
// while its runner serves a round, and no runner outlives it.
TEST_F(FarmTest, KilledAgentTakesItsRunnersWithIt) {
  LocalFarmOptions o;
  o.agents = 1;
  o.board_kind = "cpu";
  o.boards_per_agent = 1;
  o.heartbeat_ms = 100;
  StartFarm(o);
  Submit(R"(
name: it-runner
team: itest
operator: gemm
workload: cpu_256
goal: {speedup: 1000}
strategy: {name: random, seed: 5}
budget: {max_rounds: 50, time_limit: 10m, max_rounds_without_gain: 100}
boards: {kind: cpu}
measurement: {warmup: 1, samples: 5}
)");
  const std::string agent_exe = std::string(kFarmBinDir) + "/tunefarm-agent";
  const std::string runner_exe =
      std::string(kFarmBinDir) + "/tunefarm-variant-runner";
  // The farm's agent: the tunefarm-agent whose command line names our data.
  pid_t agent = 0;
  std::vector<pid_t> runners;
  for (int i = 0; i < 2400 && runners.empty(); ++i) {
    if (agent == 0) {
      for (pid_t pid : ProcessesOf(agent_exe, 0)) {
        absl::StatusOr<std::string> cmd =
            ReadFile(absl::StrCat("/proc/", pid, "/cmdline"));
        if (cmd.ok() && cmd->find(dir_) != std::string::npos) agent = pid;
      }
    }
    if (agent != 0) runners = ProcessesOf(runner_exe, agent);
    if (runners.empty()) absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_NE(agent, 0) << "the farm's agent was not found";
  ASSERT_FALSE(runners.empty()) << "the cpu board never started its runner";
  farm_->KillAgent(0, SIGKILL);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  bool alive = true;
  while (alive && absl::Now() < deadline) {
    alive = false;
    for (pid_t r : runners) alive |= Running(r);
    if (alive) absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_FALSE(alive) << "a runner outlived its agent";
}

TEST_F(FarmTest, KilledCoordinatorResumesWithoutLosingOrDuplicatingRounds) {
  StartFarm(KillableFarm(/*agents=*/2, /*boards_per_agent=*/2));
  const std::string id = Submit(SpecYaml("random", 16, 100));

  // Let some rounds be acknowledged, then kill -9 the coordinator.
  std::map<int64_t, v1::Round> acknowledged;
  for (int i = 0; i < 600; ++i) {
    acknowledged.clear();
    const v1::ListRoundsResponse now = Rounds(id);
    for (const v1::Round& r : now.rounds()) {
      if (r.state() == v1::ROUND_STATE_DONE) acknowledged[r.round_id()] = r;
    }
    if (acknowledged.size() >= 5) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_GE(acknowledged.size(), 5u);
  farm_->KillCoordinator(SIGKILL);
  // Whatever became durable between our read and the kill is fine; what we
  // saw acknowledged must survive unchanged.
  absl::Status st = farm_->RestartCoordinator();
  ASSERT_TRUE(st.ok()) << st;
  Connect();

  v1::Sweep sweep = WaitFinished(id, absl::Seconds(120));
  ASSERT_EQ(sweep.state(), v1::SWEEP_STATE_SUCCEEDED)
      << sweep.termination_detail();
  EXPECT_EQ(sweep.rounds_finished(), 16);
  CheckRecord(id, sweep);
  v1::ListRoundsResponse after = Rounds(id);
  for (const auto& [round_id, before] : acknowledged) {
    const v1::Round& r = after.rounds(round_id);
    EXPECT_EQ(r.state(), v1::ROUND_STATE_DONE);
    EXPECT_EQ(r.lease().epoch(), before.lease().epoch());
    EXPECT_EQ(r.board_id(), before.board_id());
    EXPECT_EQ(r.result().measurement().median_us(),
              before.result().measurement().median_us());
    EXPECT_EQ(r.decision(), before.decision());
  }
}

// The CLI against a live farm: output modes and exit codes that tell bad
// input from failure.
class CliTest : public FarmTest {
 protected:
  // Runs `tunefarm ARGS`; returns the exit code, output in *out.
  int Cli(const std::vector<std::string>& args, std::string* out) {
    std::vector<std::string> argv = {
        std::string(kFarmBinDir) + "/tunefarm", "--coordinator",
        farm_ ? farm_->coordinator_address() : "127.0.0.1:1"};
    if (farm_ && !farm_->admin_token().empty()) {
      const std::string token_file = dir_ + "/admin.token";
      EXPECT_TRUE(WriteFileAtomic(token_file, farm_->admin_token()).ok());
      argv.push_back("--token_file");
      argv.push_back(token_file);
    }
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string log = absl::StrCat(dir_, "/cli-", ++calls_, ".out");
    auto p = Subprocess::Start(argv, log);
    EXPECT_TRUE(p.ok()) << p.status();
    auto status = (*p)->Wait(absl::Seconds(120));
    EXPECT_TRUE(status.has_value());
    *out = ReadFile(log).value_or("");
    return WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
  }
  int calls_ = 0;
};

TEST_F(CliTest, SubmitWatchRoundsReportAndExitCodes) {
  std::string out;
  EXPECT_EQ(Cli({"boards"}, &out), 5) << "no coordinator: unavailable\n" << out;
  EXPECT_NE(out.find("unreachable"), std::string::npos) << out;

  LocalFarmOptions o;
  o.agents = 1;
  o.boards_per_agent = 2;
  StartFarm(o);
  const std::string spec = dir_ + "/spec.yaml";
  ASSERT_TRUE(WriteFileAtomic(spec, SpecYaml("random", 6, 100)).ok());
  EXPECT_EQ(Cli({"submit", spec, "--watch"}, &out), 0) << out;
  EXPECT_NE(out.find("submitted sw-000001"), std::string::npos) << out;
  EXPECT_NE(out.find("best configuration:"), std::string::npos) << out;
  EXPECT_NE(out.find("speedup over the baseline"), std::string::npos) << out;
  EXPECT_NE(out.find("report: "), std::string::npos) << out;
  const std::string watched = out;

  EXPECT_EQ(Cli({"rounds", "sw-000001"}, &out), 0) << out;
  EXPECT_NE(out.find("kept path: 0"), std::string::npos) << out;
  EXPECT_EQ(Cli({"--output", "json", "status", "sw-000001"}, &out), 0);
  EXPECT_NE(out.find("\"sweep_id\":\"sw-000001\""), std::string::npos) << out;
  // The text status gives the closing check's outcome when there was one
  // (a best other than the baseline), as the end of the watch did.
  v1::Sweep listed;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(out, &listed).ok())
      << out;
  const bool checked = listed.has_closing_check();
  // Its speedup is the check's paired one when the check measured one.
  const bool side_by_side = listed.closing_check().speedup() > 0;
  EXPECT_EQ(Cli({"status", "sw-000001"}, &out), 0);
  EXPECT_NE(out.find("speedup: "), std::string::npos) << out;
  EXPECT_EQ(out.find("x (side by side)") != std::string::npos, side_by_side)
      << out;
  EXPECT_EQ(out.find("x (two leases' medians)") != std::string::npos,
            !side_by_side)
      << out;
  EXPECT_EQ(out.find("  closing check: ") != std::string::npos, checked) << out;
  EXPECT_EQ(watched.find("closing check: ") != std::string::npos, checked)
      << watched;
  EXPECT_EQ(Cli({"report", "sw-000001"}, &out), 0);
  EXPECT_NE(out.find("# Tuning report"), std::string::npos) << out;
  // The live view (submit --watch) printed a status board after the fifth
  // finished round.
  EXPECT_NE(watched.find("── status of sw-000001: 5 rounds done"),
            std::string::npos)
      << watched;
  EXPECT_EQ(Cli({"report", "sw-000001", "--format", "json"}, &out), 0);
  EXPECT_NE(out.find("\"schema\": \"tunefarm.report\""), std::string::npos)
      << out;
  const std::string folder = dir_ + "/report";
  EXPECT_EQ(Cli({"report", "sw-000001", "--out", folder}, &out), 0) << out;
  for (const char* name :
       {"report.md", "report.json", "progress.svg", "lineage.dot"}) {
    EXPECT_TRUE(ReadFile(folder + "/" + name).ok()) << name << "\n" << out;
  }
  const std::string md = ReadFile(folder + "/report.md").value_or("");
  EXPECT_NE(md.find("](progress.svg)"), std::string::npos) << md;
  if (::access("/usr/bin/dot", X_OK) == 0) {
    EXPECT_TRUE(ReadFile(folder + "/lineage.svg").ok()) << out;
    EXPECT_NE(md.find("](lineage.svg)"), std::string::npos) << md;
  } else {
    EXPECT_NE(md.find("`dot` is not installed"), std::string::npos) << md;
  }
  EXPECT_EQ(Cli({"-o", "json", "boards"}, &out), 0);
  EXPECT_NE(out.find("agent-1/sim1"), std::string::npos) << out;

  // Bad input: exit 2 naming what is wrong; nothing is recorded.
  const std::string bad = dir_ + "/bad.yaml";
  ASSERT_TRUE(WriteFileAtomic(bad, absl::StrCat(SpecYaml("random", 6, 100),
                                                "operator_typo: x\n"))
                  .ok());
  EXPECT_EQ(Cli({"submit", bad}, &out), 2) << out;
  EXPECT_NE(out.find("operator_typo"), std::string::npos) << out;
  EXPECT_EQ(Cli({"submit", dir_ + "/missing.yaml"}, &out), 2) << out;
  EXPECT_EQ(Cli({"status", "sw-999999"}, &out), 3) << out;
  EXPECT_EQ(Cli({"cancel", "sw-000001"}, &out), 2)
      << "a finished sweep cannot be cancelled\n"
      << out;
  EXPECT_EQ(Cli({"frobnicate"}, &out), 2) << out;
  EXPECT_EQ(Cli({"status"}, &out), 0);
  EXPECT_EQ(out.find("sw-000002"), std::string::npos)
      << "a rejected spec must record nothing\n"
      << out;
}

}  // namespace
}  // namespace tunefarm
