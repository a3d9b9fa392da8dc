// Issue 17 end to end, through real processes: replay boards serving a
// Kernel Tuner cache through the whole farm (`tunefarm local --boards
// replay:FILE`), and the tuning database: ops/gemm tuned on a cpu board for
// four workloads in one per_workload sweep, `tunefarm export`, a tiny C++
// program compiled against the generated header and the Python module
// picking each exported configuration and the fallbacks, and a second sweep
// warm-started from the database (`baseline: {from_db: PATH}` through
// `tunefarm submit`).
#include <sys/wait.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/params.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "tests/integration/farm_fixture.h"
#include "tuning_db/database.h"

namespace tunefarm {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;

// Runs argv to its end (up to `timeout`); the exit code (-1 when it did not
// exit) and its output.
int RunTool(const std::vector<std::string>& argv, const std::string& log,
            std::string* output, absl::Duration timeout = absl::Seconds(120)) {
  auto p = Subprocess::Start(argv, log);
  if (!p.ok()) {
    *output = std::string(p.status().message());
    return -1;
  }
  std::optional<int> status = (*p)->Wait(timeout);
  if (!status.has_value()) (*p)->Stop(absl::Seconds(5));
  *output = ReadFile(log).value_or("");
  if (!status.has_value() || !WIFEXITED(*status)) return -1;
  return WEXITSTATUS(*status);
}

const std::string kTunefarm = std::string(kFarmBinDir) + "/tunefarm";

class ReplayLocalTest : public FarmFixture {};

TEST_F(ReplayLocalTest, GuidedSweepOnAKernelTunerCacheRunsToItsEnd) {
  const std::string space = std::string(TUNEFARM_SHARED_DIR) +
                            "/fixtures/spaces/gemm_RTX_3090.kt.json.gz";
  std::string out;
  const int rc = RunTool(
      {kTunefarm, "local", "--boards", "replay:" + space, "--agents", "1",
       "--boards-per-agent", "2", "--data-dir", dir_, "--log-level", "debug"},
      dir_ + "/local.log", &out, absl::Seconds(240));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_THAT(out, HasSubstr("replaying " + space));
  EXPECT_THAT(out, HasSubstr("measured on NVIDIA GeForce RTX 3090"));
  EXPECT_THAT(out, HasSubstr("[replayed]"));
  EXPECT_THAT(out, HasSubstr("replayed: recorded in a measured space"));
  EXPECT_THAT(
      out, HasSubstr("tuning database: " + dir_ + "/tuning-db/tuning_db.json"));
  // The report: real coordinator records, every number labelled replayed.
  std::vector<std::string> reports;
  for (const auto& e : std::filesystem::directory_iterator(dir_ + "/reports")) {
    if (e.is_directory()) reports.push_back(e.path().string());
  }
  ASSERT_EQ(reports.size(), 1u) << out;
  auto md = ReadFile(reports[0] + "/report.md");
  ASSERT_TRUE(md.ok()) << md.status();
  EXPECT_THAT(*md, HasSubstr("**Replayed.**"));
  auto report_text = ReadFile(reports[0] + "/report.json");
  ASSERT_TRUE(report_text.ok());
  const json report = json::parse(*report_text);
  EXPECT_TRUE(report.at("replayed").get<bool>());
  EXPECT_EQ(report.at("overview").at("board_kind"), "replay");
  EXPECT_EQ(report.at("overview").at("strategy"), "guided");
  EXPECT_EQ(report.at("overview").at("state"), "succeeded") << *md;
  EXPECT_GT(report.at("overview").at("rounds_finished").get<int64_t>(), 5);
  EXPECT_THAT(report.at("best").at("policy").get<std::string>(),
              HasSubstr("replayed from " + space));
  EXPECT_GT(report.at("best").at("speedup").get<double>(), 1.0);
}

// One small cpu gemm sweep over several inline shapes, each its own lineage.
std::string MultiGemmSpec(const std::vector<std::vector<int64_t>>& shapes) {
  std::string spec =
      "name: shapes\nteam: demo\noperator: gemm\nobjective: per_workload\n"
      "workloads:\n";
  for (size_t i = 0; i < shapes.size(); ++i) {
    absl::StrAppend(&spec, "  - {name: w", i, ", dtype: fp32, dims: {m: ",
                    shapes[i][0], ", n: ", shapes[i][1], ", k: ", shapes[i][2],
                    "}}\n");
  }
  absl::StrAppend(
      &spec, "goal: {speedup: 50}\nstrategy: {name: random, seed: 3}\n",
      "budget: {max_rounds: 2, time_limit: 5m, max_rounds_without_gain: 2}\n",
      "boards: {kind: cpu}\n",
      "measurement: {warmup: 1, samples: 3, mode: independent}\n");
  return spec;
}

// A small cpu gemm sweep on an inline shape.
std::string GemmSpec(const std::string& name, int64_t m, int64_t n, int64_t k,
                     const std::string& baseline = "") {
  return absl::StrCat(
      "name: ", name, "\nteam: demo\noperator: gemm\n",
      "workload: {name: ", name, ", dtype: fp32, dims: {m: ", m, ", n: ", n,
      ", k: ", k, "}}\n",
      "goal: {speedup: 50}\nstrategy: {name: random, seed: 3}\n",
      "budget: {max_rounds: 2, time_limit: 5m, max_rounds_without_gain: 2}\n",
      "boards: {kind: cpu}\n",
      "measurement: {warmup: 1, samples: 3, mode: independent}\n", baseline);
}

class TuningDbFarmTest : public FarmFixture {
 protected:
  // The CLI against this farm, as its admin.
  int Cli(std::vector<std::string> args, std::string* out) {
    const std::string token = dir_ + "/admin.token";
    EXPECT_TRUE(WriteFileAtomic(token, farm_->admin_token() + "\n").ok());
    std::vector<std::string> argv = {kTunefarm, "--coordinator",
                                     farm_->coordinator_address(),
                                     "--token_file", token};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunTool(argv, absl::StrCat(dir_, "/cli-", ++calls_, ".log"), out);
  }
  int calls_ = 0;
};

TEST_F(TuningDbFarmTest, ExportLookupInCppAndPythonThenWarmStart) {
  LocalFarmOptions o;
  o.agents = 1;
  o.board_kind = "cpu";
  o.boards_per_agent = 1;
  o.agent_flags = {"--profile=false"};
  StartFarm(o);
  const std::vector<std::vector<int64_t>> shapes = {
      {64, 64, 64}, {96, 96, 96}, {128, 64, 128}, {160, 160, 32}};
  // One sweep, four workloads.
  const std::string id = Submit(MultiGemmSpec(shapes));
  const v1::Sweep sweep = WaitFinished(id, absl::Minutes(3));
  ASSERT_EQ(sweep.state(), v1::SWEEP_STATE_SUCCEEDED)
      << sweep.termination_detail();
  EXPECT_EQ(sweep.spec().operator_source_hash().size(), 64u);
  ASSERT_EQ(sweep.workload_progress_size(), 4);
  for (const v1::WorkloadProgress& w : sweep.workload_progress()) {
    EXPECT_TRUE(w.done()) << w.workload();
    EXPECT_GE(w.best_round(), 0) << w.workload();
    EXPECT_GT(w.rounds_finished(), 0) << w.workload();
  }
  // `rounds`, `status` and the report name each round's workload.
  std::string out;
  ASSERT_EQ(Cli({"rounds", id}, &out), 0) << out;
  for (int i = 0; i < 4; ++i) {
    EXPECT_THAT(out, HasSubstr(absl::StrCat(i, " w", i, " ")));
  }
  ASSERT_EQ(Cli({"status", id}, &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("objective: per_workload"));
  for (int i = 0; i < 4; ++i) {
    EXPECT_THAT(out, HasSubstr(absl::StrCat("workload w", i, ": baseline ")));
  }
  ASSERT_EQ(Cli({"report", id}, &out), 0) << out;
  for (int i = 0; i < 4; ++i) {
    EXPECT_THAT(out, HasSubstr(absl::StrCat("### Workload w", i, " (fp32, ")));
  }

  const std::string db_dir = dir_ + "/db";
  std::vector<std::string> args = {"export", id, "--out", db_dir};
  ASSERT_EQ(Cli(args, &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("tuning database: " + db_dir +
                             "/tuning_db.json (4 entries"));
  auto db = LoadTuningDb(db_dir + "/tuning_db.json");
  ASSERT_TRUE(db.ok()) << db.status();
  ASSERT_EQ(db->entries.size(), 4u);
  ASSERT_EQ(db->defaults.size(), 1u);
  const std::string device = db->entries[0].device;
  EXPECT_FALSE(device.empty());
  for (const TunedEntry& e : db->entries) {
    EXPECT_EQ(e.op, "gemm");
    EXPECT_EQ(e.backend, "cpu");
    EXPECT_GT(e.time_us, 0);
    EXPECT_LE(e.p20_us, e.time_us);
    EXPECT_GE(e.p80_us, e.time_us);
    EXPECT_EQ(e.source_hash.size(), 64u);
    EXPECT_EQ(e.board, "agent-1/cpu0");
  }
  // Re-exporting merges into what is there: nothing changes, nothing logged.
  ASSERT_EQ(Cli(args, &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("(4 entries"));
  EXPECT_THAT(out, Not(HasSubstr("replaced")));

  // Every shape, an unknown shape (nearest) and an unknown device (the
  // manifest default), asked of the header and the module; the expected
  // answers come from the database file.
  struct Q {
    std::vector<int64_t> mnk;
    std::string device;
  };
  std::vector<Q> queries;
  for (const auto& s : shapes) queries.push_back({s, device});
  queries.push_back({{100, 100, 100}, device});
  queries.push_back({{64, 64, 64}, "some other cpu"});
  std::string expected;
  for (const Q& q : queries) {
    const Lookup l =
        LookupConfig(*db, "gemm", "cpu", q.device, "fp32",
                     {{"m", q.mnk[0]}, {"n", q.mnk[1]}, {"k", q.mnk[2]}});
    ASSERT_NE(l.source, Lookup::Source::kNone);
    const json& p = l.entry != nullptr ? l.entry->params : l.def->params;
    absl::StrAppend(&expected, LookupSourceName(l.source),
                    " mc=", p.at("mc").get<int64_t>(),
                    " nc=", p.at("nc").get<int64_t>(),
                    " threads=", p.at("threads").get<int64_t>(), "\n");
  }
  EXPECT_THAT(expected, HasSubstr("nearest"));
  EXPECT_THAT(expected, HasSubstr("default mc=64 nc=256 threads=1"));

  std::string program =
      "#include <cstdio>\n#include \"tuning_db.h\"\nint main() {\n  "
      "tunefarm_tuned::Config c;\n";
  std::string script = absl::StrCat("import sys\nsys.path.insert(0, \"", db_dir,
                                    "\")\nimport tuning_db\n");
  for (const Q& q : queries) {
    absl::StrAppend(
        &program, "  if (!tunefarm_tuned::Lookup(\"gemm\", \"cpu\", \"",
        q.device, "\", \"fp32\", {{\"m\", ", q.mnk[0], "}, {\"n\", ", q.mnk[1],
        "}, {\"k\", ", q.mnk[2],
        "}}, &c)) return 1;\n  std::printf(\"%s mc=%lld nc=%lld "
        "threads=%lld\\n\", c.source.c_str(), c.Int(\"mc\"), c.Int(\"nc\"), "
        "c.Int(\"threads\"));\n");
    absl::StrAppend(&script, "r = tuning_db.lookup(\"gemm\", \"cpu\", \"",
                    q.device, "\", \"fp32\", {\"m\": ", q.mnk[0],
                    ", \"n\": ", q.mnk[1], ", \"k\": ", q.mnk[2],
                    "})\nprint(\"%s mc=%d nc=%d threads=%d\" % (r[\"source\"], "
                    "r[\"params\"][\"mc\"], r[\"params\"][\"nc\"], "
                    "r[\"params\"][\"threads\"]))\n");
  }
  absl::StrAppend(&program, "  return 0;\n}\n");
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/pick.cc", program).ok());
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/pick.py", script).ok());
  const std::string cxx = FindExecutable("c++");
  ASSERT_FALSE(cxx.empty()) << "the cpu board needs c++ too";
  ASSERT_EQ(RunTool({cxx, "-std=c++17", "-Wall", "-Werror", "-I", db_dir,
                     dir_ + "/pick.cc", "-o", dir_ + "/pick"},
                    dir_ + "/pick-build.log", &out),
            0)
      << out;
  ASSERT_EQ(RunTool({dir_ + "/pick"}, dir_ + "/pick.log", &out), 0) << out;
  EXPECT_EQ(out, expected);
  const std::string python = FindExecutable("python3");
  if (python.empty()) {
    ADD_FAILURE() << "python3 is not on PATH: the Python module is unchecked";
  } else {
    ASSERT_EQ(RunTool({python, dir_ + "/pick.py"}, dir_ + "/pick-py.log", &out),
              0)
        << out;
    EXPECT_EQ(out, expected);
  }

  // A new shape warm-starts from the database through `tunefarm submit`.
  ASSERT_TRUE(
      WriteFileAtomic(dir_ + "/warm.yaml",
                      GemmSpec("warm", 100, 100, 100,
                               absl::StrCat("baseline: {from_db: ", db_dir,
                                            "/tuning_db.json}\n")))
          .ok());
  ASSERT_EQ(Cli({"submit", dir_ + "/warm.yaml"}, &out), 0) << out;
  // "submitted sw-000002 (gemm, team demo)"
  const size_t at = out.find("submitted ");
  ASSERT_NE(at, std::string::npos) << out;
  const std::string warm_id =
      out.substr(at + 10, out.find(' ', at + 10) - (at + 10));
  const v1::Sweep warm = WaitFinished(warm_id, absl::Minutes(2));
  ASSERT_EQ(warm.state(), v1::SWEEP_STATE_SUCCEEDED)
      << warm.termination_detail();
  const Lookup nearest = LookupConfig(*db, "gemm", "cpu", "", "fp32",
                                      {{"m", 100}, {"n", 100}, {"k", 100}});
  ASSERT_NE(nearest.entry, nullptr);
  EXPECT_THAT(warm.spec().baseline_source(),
              HasSubstr(absl::StrCat("tuning db ", db_dir,
                                     "/tuning_db.json: nearest entry ",
                                     nearest.entry->Key())));
  EXPECT_THAT(warm.spec().baseline_source(),
              HasSubstr(absl::StrCat("sweep ", nearest.entry->sweep_id)));
  EXPECT_TRUE(warm.spec().baseline_db_json().empty());
  // The lineage starts at the database's configuration.
  const v1::ListRoundsResponse rounds = Rounds(warm_id);
  ASSERT_GE(rounds.rounds_size(), 1);
  const ParamMap& round0 = rounds.rounds(0).params();
  for (auto it = nearest.entry->params.begin();
       it != nearest.entry->params.end(); ++it) {
    ASSERT_TRUE(round0.contains(it.key())) << it.key();
    EXPECT_EQ(ParamValueToString(round0.at(it.key())),
              ParamValueToString(*ParamValueFromJson(*it)))
        << it.key();
  }
  ASSERT_EQ(Cli({"report", warm_id}, &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("| baseline from | tuning db "));
  ASSERT_EQ(Cli({"status", warm_id}, &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("baseline from: tuning db "));
}

}  // namespace
}  // namespace tunefarm
