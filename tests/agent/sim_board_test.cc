#include "agent/sim_board.h"

#include <sys/stat.h>

#include <fstream>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "agent/process_runner.h"
#include "agent/stage_runner.h"
#include "common/files.h"
#include "common/params.h"
#include "gtest/gtest.h"

namespace tunefarm {
namespace {

std::string DirOf(const std::string& path) {
  return path.substr(0, path.rfind('/'));
}

v1::Workload MakeWorkload(const std::string& name, int64_t m, int64_t n,
                          int64_t k) {
  v1::Workload w;
  w.set_name(name);
  w.set_dtype("fp16");
  (*w.mutable_dims())["m"] = m;
  (*w.mutable_dims())["n"] = n;
  (*w.mutable_dims())["k"] = k;
  return w;
}

// sim_matmul's manifest, built in code (the catalog loader is tested on its
// own); `command` replaces the sim backend command when given.
v1::OperatorManifest Manifest(std::vector<std::string> command = {
                                  "{bin}/tunefarm-sim-matmul"}) {
  v1::OperatorManifest op;
  op.set_name("sim_matmul");
  op.set_package_dir(std::string(TUNEFARM_SOURCE_DIR) + "/ops/sim_matmul");
  struct P {
    const char* name;
    std::vector<int64_t> values;
    int64_t def;
  };
  for (const P& p : std::vector<P>{{"tile_m", {16, 32, 64, 128, 256}, 32},
                                   {"tile_n", {16, 32, 64, 128, 256}, 32},
                                   {"tile_k", {16, 32, 64, 128}, 32},
                                   {"buffer_count", {1, 2, 3, 4}, 1},
                                   {"block_dim", {8, 16, 24, 32}, 16}}) {
    v1::ParameterDomain* d = op.add_parameters();
    d->set_name(p.name);
    for (int64_t v : p.values) *d->add_values() = IntParam(v);
    *d->mutable_default_value() = IntParam(p.def);
  }
  *op.add_workloads() = MakeWorkload("square_2k", 2048, 2048, 2048);
  *op.add_workloads() = MakeWorkload("ragged", 1000, 1000, 512);
  op.mutable_tolerances()->set_rtol(0.01);
  op.mutable_tolerances()->set_atol(0.001);
  for (std::string& c : command) (*op.mutable_backends())["sim"].add_command(c);
  return op;
}

ParamMap Params(int64_t tm, int64_t tn, int64_t tk, int64_t b, int64_t bd) {
  ParamMap p;
  p["tile_m"] = IntParam(tm);
  p["tile_n"] = IntParam(tn);
  p["tile_k"] = IntParam(tk);
  p["buffer_count"] = IntParam(b);
  p["block_dim"] = IntParam(bd);
  return p;
}

class SimBoardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> dir = MakeTempDir("sim_board_test");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = *dir;
    options_.board_id = "agent-1/sim0";
    options_.agent_id = "agent-1";
    options_.node = "node-a";
    options_.bin_dir = DirOf(SIM_MATMUL_BIN);
    options_.work_root = dir_ + "/work";
    options_.seed = 7;
    options_.stage_timeout = absl::Seconds(20);
    options_.labels = {{"pool", "test"}};
  }
  void TearDown() override { ASSERT_TRUE(RemoveAll(dir_).ok()); }

  v1::WorkItem Work(const ParamMap& params,
                    const std::string& workload = "square_2k",
                    v1::OperatorManifest op = Manifest()) {
    v1::WorkItem w;
    w.set_lease_id("lease-1");
    w.set_epoch(3);
    w.set_sweep_id("sweep-abc");
    w.set_round_id(++round_);
    *w.mutable_operator_() = op;
    for (const v1::Workload& wl : op.workloads()) {
      if (wl.name() == workload) *w.mutable_workload() = wl;
    }
    *w.mutable_params() = params;
    w.mutable_measurement()->set_warmup(2);
    w.mutable_measurement()->set_samples(15);
    return w;
  }

  Evaluation Eval(const v1::WorkItem& work, const SimBoardOptions& options) {
    std::unique_ptr<Board> board = NewSimBoard(options);
    std::atomic<bool> cancel{false};
    absl::StatusOr<Evaluation> e = board->Evaluate(work, cancel);
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? *std::move(e) : Evaluation{};
  }
  Evaluation Eval(const v1::WorkItem& work) { return Eval(work, options_); }

  std::string dir_;
  SimBoardOptions options_;
  int64_t round_ = 0;
};

TEST_F(SimBoardTest, InfoDescribesASimulatedChip) {
  std::unique_ptr<Board> board = NewSimBoard(options_);
  const v1::BoardInfo& info = board->info();
  EXPECT_EQ(info.board_id(), "agent-1/sim0");
  EXPECT_EQ(info.agent_id(), "agent-1");
  EXPECT_EQ(info.node(), "node-a");
  EXPECT_EQ(info.kind(), "sim");
  EXPECT_EQ(info.chip(), "Ascend910B-sim");
  EXPECT_TRUE(info.simulated());
  EXPECT_EQ(info.labels().at("pool"), "test");
  EXPECT_EQ(info.capabilities().cube_cores(), 24);
  EXPECT_EQ(info.capabilities().ub_bytes(), 196608);
}

TEST_F(SimBoardTest, OkResultWithSimulatedMeasurementAndMsprofBundle) {
  const ParamMap params = Params(128, 128, 64, 2, 24);
  Evaluation e = Eval(Work(params));
  const v1::RoundResult& r = e.result;
  ASSERT_EQ(r.outcome(), v1::OUTCOME_OK) << r.detail();
  EXPECT_TRUE(r.precision().passed()) << r.precision().detail();
  EXPECT_GT(r.precision().elements(), 0);
  const v1::Measurement& m = r.measurement();
  EXPECT_TRUE(m.simulated());
  EXPECT_EQ(m.samples(), 15);
  EXPECT_EQ(m.warmup(), 2);
  EXPECT_LE(m.min_us(), m.p20_us());
  EXPECT_LE(m.p20_us(), m.median_us());
  EXPECT_LE(m.median_us(), m.p80_us());
  EXPECT_LE(m.p80_us(), m.max_us());
  EXPECT_GT(m.median_us(), 5.0);
  EXPECT_TRUE(absl::StrContains(m.policy(), "simulated")) << m.policy();
  EXPECT_TRUE(absl::StrContains(m.policy(), "samples=15")) << m.policy();
  EXPECT_GT(r.build_s(), 0);
  EXPECT_GT(r.run_s(), 0);

  ASSERT_TRUE(e.bundle.has_value());
  const v1::ProfileBundle& b = *e.bundle;
  EXPECT_EQ(b.bundle_id(), r.bundle_id());
  EXPECT_FALSE(b.bundle_id().empty());
  EXPECT_EQ(b.sweep_id(), "sweep-abc");
  EXPECT_EQ(b.epoch(), 3);
  EXPECT_EQ(b.board_id(), "agent-1/sim0");
  EXPECT_EQ(b.board_kind(), "sim");
  EXPECT_EQ(b.chip(), "Ascend910B-sim");
  EXPECT_TRUE(b.simulated());
  EXPECT_EQ(b.profiler(), "msprof");
  EXPECT_EQ(b.measurement().median_us(), m.median_us());
  EXPECT_EQ(b.capabilities().cube_cores(), 24);
  EXPECT_EQ(ParamsKey(b.params()), ParamsKey(params));

  // The op_summary / op_statistic headers equal the real msprof fixture's.
  const std::string fixture =
      std::string(TUNEFARM_SHARED_DIR) +
      "/fixtures/ascend/helix_msprof_real/mindstudio_profiler_output/";
  auto first_line = [](const std::string& s) {
    return s.substr(0, s.find('\n'));
  };
  absl::StatusOr<std::string> real_summary =
      ReadFile(fixture + "op_summary_20260511093035.csv");
  absl::StatusOr<std::string> real_stat =
      ReadFile(fixture + "op_statistic_20260511093035.csv");
  ASSERT_TRUE(real_summary.ok() && real_stat.ok());
  bool saw_summary = false, saw_stat = false, saw_simulated = false;
  for (const v1::ProfileFile& f : b.files()) {
    EXPECT_TRUE(absl::StartsWith(f.path(), "PROF_")) << f.path();
    EXPECT_NE(f.path()[0], '/');
    if (absl::StrContains(f.path(), "mindstudio_profiler_output/op_summary_")) {
      saw_summary = true;
      EXPECT_EQ(first_line(f.content()), first_line(*real_summary));
      // The MatMul row: AI_CORE, block dim 24, a tab-terminated start time,
      // triple-quoted shapes.
      bool matmul = false;
      for (absl::string_view line : absl::StrSplit(f.content(), '\n')) {
        if (!absl::StrContains(line, ",MatMulV2,")) continue;
        matmul = true;
        EXPECT_TRUE(absl::StrContains(line, ",AI_CORE,")) << line;
        EXPECT_TRUE(absl::StrContains(line, "\t,")) << line;
        EXPECT_TRUE(absl::StrContains(line, "\"\"\"2048,2048;2048,2048\"\"\""))
            << line;
        const std::vector<std::string> cells = absl::StrSplit(line, ',');
        EXPECT_EQ(cells[11], "24");  // Block Dim
      }
      EXPECT_TRUE(matmul);
    }
    if (absl::StrContains(f.path(),
                          "mindstudio_profiler_output/op_statistic_")) {
      saw_stat = true;
      EXPECT_EQ(first_line(f.content()), first_line(*real_stat));
    }
    if (absl::EndsWith(f.path(), "/SIMULATED.txt")) {
      saw_simulated = true;
      EXPECT_TRUE(absl::StrContains(f.content(), "simulated") ||
                  absl::StrContains(f.content(), "SIMULATED"));
    }
  }
  EXPECT_TRUE(saw_summary);
  EXPECT_TRUE(saw_stat);
  EXPECT_TRUE(saw_simulated);
}

TEST_F(SimBoardTest, DeterministicGivenSeedAndFasterForABetterVariant) {
  Evaluation base1 = Eval(Work(Params(32, 32, 32, 1, 16)));
  Evaluation base2 = Eval(Work(Params(32, 32, 32, 1, 16)));
  Evaluation best = Eval(Work(Params(128, 128, 64, 2, 24)));
  ASSERT_EQ(base1.result.outcome(), v1::OUTCOME_OK) << base1.result.detail();
  ASSERT_EQ(best.result.outcome(), v1::OUTCOME_OK) << best.result.detail();
  EXPECT_EQ(base1.result.measurement().median_us(),
            base2.result.measurement().median_us());
  EXPECT_EQ(base1.result.measurement().max_us(),
            base2.result.measurement().max_us());
  EXPECT_GT(base1.result.measurement().median_us(),
            4 * best.result.measurement().median_us());
}

// The sim board evaluates in-process through its shipped program whatever
// the sweep's isolation: both modes give the same outcomes, precision
// verdicts and (deterministic) numbers.
TEST_F(SimBoardTest, BothIsolationModesGiveTheSameResults) {
  for (const auto& [params, workload] :
       std::vector<std::pair<ParamMap, std::string>>{
           {Params(32, 32, 32, 1, 16), "square_2k"},
           {Params(64, 128, 64, 2, 24), "ragged"},
           {Params(256, 256, 128, 4, 16), "square_2k"}}) {
    v1::WorkItem runner = Work(params, workload);
    runner.mutable_measurement()->set_isolation(v1::ISOLATION_RUNNER);
    v1::WorkItem process = Work(params, workload);
    process.mutable_measurement()->set_isolation(v1::ISOLATION_PROCESS);
    const v1::RoundResult a = Eval(runner).result;
    const v1::RoundResult b = Eval(process).result;
    EXPECT_EQ(a.outcome(), b.outcome()) << workload;
    EXPECT_EQ(a.precision().passed(), b.precision().passed()) << workload;
    EXPECT_EQ(a.precision().nan_count(), b.precision().nan_count());
    EXPECT_EQ(a.measurement().median_us(), b.measurement().median_us());
  }
}

// With a cache folder, the reference of a (program, workload, seed) runs
// once: another variant reuses it and is still judged against it (a wrong
// kernel still fails); another seed or workload computes its own.
TEST_F(SimBoardTest, ReferenceIsComputedOncePerWorkloadAndSeed) {
  options_.cache_dir = dir_ + "/cache";
  std::unique_ptr<Board> board = NewSimBoard(options_);
  std::atomic<bool> cancel{false};
  auto evaluate = [&](const v1::WorkItem& w, bool* ran_reference) {
    absl::StatusOr<Evaluation> e = board->Evaluate(w, cancel);
    EXPECT_TRUE(e.ok()) << e.status();
    struct stat st;
    *ran_reference =
        stat((WorkDirFor(options_.work_root, w) + "/logs/reference.stderr")
                 .c_str(),
             &st) == 0;
    return e.ok() ? e->result : v1::RoundResult();
  };
  bool ran = false;
  const v1::WorkItem first = Work(Params(32, 32, 32, 1, 16));
  v1::RoundResult r = evaluate(first, &ran);
  EXPECT_EQ(r.outcome(), v1::OUTCOME_OK) << r.detail();
  EXPECT_TRUE(ran);
  r = evaluate(Work(Params(64, 64, 64, 2, 24)), &ran);
  EXPECT_EQ(r.outcome(), v1::OUTCOME_OK) << r.detail();
  EXPECT_TRUE(r.precision().passed());
  EXPECT_FALSE(ran) << "the reference ran again for another variant";
  v1::WorkItem other_seed = Work(Params(64, 64, 64, 2, 24));
  other_seed.set_seed(99);
  r = evaluate(other_seed, &ran);
  EXPECT_EQ(r.outcome(), v1::OUTCOME_OK) << r.detail();
  EXPECT_TRUE(ran) << "another seed needs its own reference";
  r = evaluate(Work(Params(64, 64, 64, 2, 24), "ragged"), &ran);
  EXPECT_EQ(r.outcome(), v1::OUTCOME_OK) << r.detail();
  EXPECT_TRUE(ran) << "another workload needs its own reference";
  r = evaluate(Work(Params(64, 128, 64, 2, 24), "ragged"), &ran);
  EXPECT_EQ(r.outcome(), v1::OUTCOME_PRECISION_FAILED) << r.detail();
  EXPECT_FALSE(ran);
}

TEST_F(SimBoardTest, UbOverflowIsBuildFailed) {
  Evaluation e = Eval(Work(Params(256, 256, 128, 4, 16)));
  EXPECT_EQ(e.result.outcome(), v1::OUTCOME_BUILD_FAILED);
  EXPECT_TRUE(absl::StrContains(
      e.result.detail(),
      "UB overflow: tile_m=256 tile_n=256 tile_k=128 "
      "buffer_count=4 needs 786432 bytes, UB holds 196608 bytes"))
      << e.result.detail();
  EXPECT_FALSE(e.bundle.has_value());
}

TEST_F(SimBoardTest, TailBugFailsPrecisionOnRaggedOnly) {
  Evaluation bad = Eval(Work(Params(64, 128, 64, 2, 24), "ragged"));
  EXPECT_EQ(bad.result.outcome(), v1::OUTCOME_PRECISION_FAILED)
      << bad.result.detail();
  EXPECT_FALSE(bad.result.precision().passed());
  EXPECT_GT(bad.result.precision().nan_count(), 0);
  EXPECT_TRUE(absl::StrContains(bad.result.detail(), "NaN"))
      << bad.result.detail();
  EXPECT_EQ(bad.result.measurement().samples(), 0);  // never ranked
  EXPECT_FALSE(bad.bundle.has_value());

  // The same tiling is correct on a workload without a ragged tail, and a
  // narrow tile is correct on the ragged one.
  EXPECT_EQ(
      Eval(Work(Params(64, 128, 64, 2, 24), "square_2k")).result.outcome(),
      v1::OUTCOME_OK);
  Evaluation narrow = Eval(Work(Params(64, 64, 64, 2, 24), "ragged"));
  EXPECT_EQ(narrow.result.outcome(), v1::OUTCOME_OK) << narrow.result.detail();
}

TEST_F(SimBoardTest, CrashingKernelIsRunCrashed) {
  Evaluation e = Eval(Work(Params(32, 32, 32, 1, 16), "square_2k",
                           Manifest({TEST_KERNEL_BIN, "--mode", "crash"})));
  EXPECT_EQ(e.result.outcome(), v1::OUTCOME_RUN_CRASHED);
  EXPECT_TRUE(absl::StrContains(e.result.detail(), "SIGSEGV"))
      << e.result.detail();
  EXPECT_TRUE(absl::StrContains(e.result.detail(), "about to crash"))
      << e.result.detail();
}

TEST_F(SimBoardTest, HangingKernelIsRunTimeoutAndItsGroupIsKilled) {
  options_.stage_timeout = absl::Milliseconds(500);
  v1::WorkItem work = Work(Params(32, 32, 32, 1, 16), "square_2k",
                           Manifest({TEST_KERNEL_BIN, "--mode", "hang"}));
  const absl::Time start = absl::Now();
  Evaluation e = Eval(work);
  EXPECT_EQ(e.result.outcome(), v1::OUTCOME_RUN_TIMEOUT) << e.result.detail();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  const std::string pid_file = options_.work_root + "/sweep-abc/round_" +
                               std::to_string(work.round_id()) +
                               "/epoch_3/run/grandchild.pid";
  absl::StatusOr<std::string> pid_text = ReadFile(pid_file);
  ASSERT_TRUE(pid_text.ok()) << pid_text.status();
  int pid = 0;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(*pid_text), &pid));
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    gone = !stat || !std::getline(stat, line) ||
           line.find(") Z") != std::string::npos;
    if (!gone) absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_TRUE(gone) << "grandchild " << pid << " survived";
}

TEST_F(SimBoardTest, GarbageTimingAndMissingProfile) {
  Evaluation e =
      Eval(Work(Params(32, 32, 32, 1, 16), "square_2k",
                Manifest({TEST_KERNEL_BIN, "--mode", "bad_timing"})));
  EXPECT_EQ(e.result.outcome(), v1::OUTCOME_RUN_CRASHED);
  EXPECT_TRUE(absl::StrContains(e.result.detail(), "line 2"))
      << e.result.detail();

  v1::WorkItem work = Work(Params(32, 32, 32, 1, 16), "square_2k",
                           Manifest({TEST_KERNEL_BIN, "--mode", "no_profile"}));
  work.clear_measurement();  // defaults: 3 warm-up + 20 samples
  e = Eval(work);
  EXPECT_EQ(e.result.outcome(), v1::OUTCOME_PROFILE_FAILED)
      << e.result.detail();
  EXPECT_TRUE(absl::StrContains(e.result.detail(), "PROF_"))
      << e.result.detail();
  EXPECT_EQ(e.result.measurement().samples(), 20);  // the measurement is kept
  EXPECT_FALSE(e.bundle.has_value());
}

TEST_F(SimBoardTest, HostileParametersFailClearlyAndNeverReachArgv) {
  const std::string marker = dir_ + "/pwned";
  ParamMap p = Params(32, 32, 32, 1, 16);
  p["tile_m"] = StringParam("; rm -rf / ; touch " + marker);
  Evaluation e = Eval(Work(p));
  EXPECT_EQ(e.result.outcome(), v1::OUTCOME_BUILD_FAILED);
  EXPECT_TRUE(absl::StrContains(e.result.detail(), "tile_m must be an integer"))
      << e.result.detail();

  p = Params(32, 32, 32, 1, 16);
  p["../../etc/passwd"] = StringParam("$(touch " + marker + ")");
  e = Eval(Work(p));
  EXPECT_EQ(e.result.outcome(), v1::OUTCOME_BUILD_FAILED);
  EXPECT_TRUE(absl::StrContains(e.result.detail(),
                                "unknown parameter \"../../etc/passwd\""))
      << e.result.detail();

  p = Params(32, 32, 32, 1, 16);
  p["tile_k"] = IntParam(int64_t{1} << 60);
  e = Eval(Work(p));
  EXPECT_EQ(e.result.outcome(), v1::OUTCOME_BUILD_FAILED);
  EXPECT_TRUE(absl::StrContains(e.result.detail(), "tile_k"))
      << e.result.detail();

  // The argv the operator program receives holds no parameter value.
  p = Params(32, 32, 32, 1, 16);
  p["tile_m"] = StringParam("`touch " + marker + "`");
  v1::WorkItem work =
      Work(p, "square_2k", Manifest({TEST_KERNEL_BIN, "--mode", "record"}));
  e = Eval(work);
  EXPECT_EQ(e.result.outcome(), v1::OUTCOME_BUILD_FAILED);
  absl::StatusOr<std::string> argv =
      ReadFile(options_.work_root + "/sweep-abc/round_" +
               std::to_string(work.round_id()) + "/epoch_3/argv.log");
  ASSERT_TRUE(argv.ok()) << argv.status();
  EXPECT_FALSE(absl::StrContains(*argv, "touch")) << *argv;
  EXPECT_TRUE(absl::StrContains(*argv, "params.json")) << *argv;

  struct stat st;
  EXPECT_NE(stat(marker.c_str(), &st), 0) << "a parameter was executed";
}

TEST_F(SimBoardTest, RejectsBadCommands) {
  for (const std::vector<std::string>& cmd :
       std::vector<std::vector<std::string>>{{"tunefarm-sim-matmul"},
                                             {"{bin}/../../bin/sh"},
                                             {"relative/{bin}"}}) {
    Evaluation e =
        Eval(Work(Params(32, 32, 32, 1, 16), "square_2k", Manifest(cmd)));
    EXPECT_EQ(e.result.outcome(), v1::OUTCOME_BUILD_FAILED) << cmd[0];
    EXPECT_TRUE(absl::StrContains(e.result.detail(), "absolute") ||
                absl::StrContains(e.result.detail(), "escapes"))
        << e.result.detail();
  }
  v1::OperatorManifest no_sim = Manifest();
  no_sim.mutable_backends()->clear();
  Evaluation e = Eval(Work(Params(32, 32, 32, 1, 16), "square_2k", no_sim));
  EXPECT_EQ(e.result.outcome(), v1::OUTCOME_BUILD_FAILED);
  EXPECT_TRUE(absl::StrContains(e.result.detail(), "no command for board kind"))
      << e.result.detail();

  // The board's own program missing is the board's failure, not the variant's.
  options_.bin_dir = dir_ + "/empty-bin";
  std::unique_ptr<Board> board = NewSimBoard(options_);
  std::atomic<bool> cancel{false};
  absl::StatusOr<Evaluation> r =
      board->Evaluate(Work(Params(32, 32, 32, 1, 16)), cancel);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "tunefarm-sim-matmul"))
      << r.status();
}

TEST_F(SimBoardTest, CancelAbortsEarly) {
  options_.run_delay = absl::Seconds(15);
  std::unique_ptr<Board> board = NewSimBoard(options_);
  std::atomic<bool> cancel{false};
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(300));
    cancel = true;
  });
  const absl::Time start = absl::Now();
  absl::StatusOr<Evaluation> r =
      board->Evaluate(Work(Params(32, 32, 32, 1, 16)), cancel);
  canceller.join();
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST_F(SimBoardTest, RunDelayMakesTheRoundTakeTime) {
  options_.run_delay = absl::Milliseconds(300);
  Evaluation e = Eval(Work(Params(32, 32, 32, 1, 16)));
  EXPECT_EQ(e.result.outcome(), v1::OUTCOME_OK) << e.result.detail();
  EXPECT_GE(e.result.run_s(), 0.3);
}

// --- A/B against the parent in the same lease
// ---------------------------------

TEST_F(SimBoardTest, AbTimesTheParentInterleavedAndEstimatesTheGain) {
  v1::WorkItem w = Work(Params(128, 128, 64, 2, 24));
  w.set_has_reference(true);
  w.set_reference_round(4);
  *w.mutable_reference_params() = Params(32, 32, 32, 1, 16);
  w.mutable_measurement()->set_samples(12);
  Evaluation e = Eval(w);
  const v1::RoundResult& r = e.result;
  ASSERT_EQ(r.outcome(), v1::OUTCOME_OK) << r.detail();
  const v1::Measurement& m = r.measurement();
  ASSERT_TRUE(m.paired()) << m.policy();
  EXPECT_EQ(m.reference_round(), 4);
  EXPECT_GE(m.pairs(), 6);
  EXPECT_EQ(m.samples(), m.reference().samples());
  EXPECT_TRUE(m.simulated());
  EXPECT_TRUE(m.reference().simulated());
  // Timed alone, each variant gives the same modelled latency.
  Evaluation alone_best = Eval(Work(Params(128, 128, 64, 2, 24)));
  Evaluation alone_parent = Eval(Work(Params(32, 32, 32, 1, 16)));
  const double want = 1 - alone_best.result.measurement().median_us() /
                              alone_parent.result.measurement().median_us();
  EXPECT_GT(want, 0.3);
  EXPECT_NEAR(m.gain(), want, 0.02);
  EXPECT_GT(m.gain_lower(), 0.3);
  EXPECT_LE(m.gain_lower(), m.gain());
  EXPECT_GE(m.gain_upper(), m.gain());
  EXPECT_NEAR(m.reference().median_us(),
              alone_parent.result.measurement().median_us(),
              alone_parent.result.measurement().median_us() * 0.02);
  EXPECT_TRUE(absl::StrContains(m.policy(), "A/B")) << m.policy();
  EXPECT_TRUE(absl::StrContains(m.policy(), "simulated")) << m.policy();
  // The parent ran in its own folder with its own params, block by block.
  const std::string parent_dir = dir_ + "/work/sweep-abc/round_" +
                                 std::to_string(w.round_id()) +
                                 "/epoch_3/parent";
  absl::StatusOr<std::string> pp = ReadFile(parent_dir + "/params.json");
  ASSERT_TRUE(pp.ok()) << pp.status();
  EXPECT_TRUE(absl::StrContains(*pp, "\"tile_m\": 32")) << *pp;
  EXPECT_TRUE(ReadFile(parent_dir + "/run/timing_us.txt").ok());
  EXPECT_TRUE(ReadFile(parent_dir + "/run_5/timing_us.txt").ok());
  // Baseline (no parent): timed alone, and says so.
  EXPECT_FALSE(alone_best.result.measurement().paired());
  EXPECT_TRUE(
      absl::StrContains(alone_best.result.measurement().policy(), "baseline"))
      << alone_best.result.measurement().policy();
}

TEST_F(SimBoardTest, InjectedNoiseWithNoRealDifferenceGivesNoKeepableGain) {
  options_.noise = 0.03;
  options_.fixed_latency_us = 200;
  int straddles = 0;
  for (int i = 0; i < 2; ++i) {
    v1::WorkItem w = Work(Params(128, 128, 64, 2, 24));
    w.set_seed(100 + i);
    w.set_has_reference(true);
    w.set_reference_round(0);
    *w.mutable_reference_params() = Params(32, 32, 32, 1, 16);
    w.mutable_measurement()->set_samples(6);
    w.mutable_measurement()->set_warmup(1);
    w.mutable_measurement()->set_max_samples(8);
    Evaluation e = Eval(w);
    ASSERT_EQ(e.result.outcome(), v1::OUTCOME_OK) << e.result.detail();
    const v1::Measurement& m = e.result.measurement();
    ASSERT_TRUE(m.paired());
    EXPECT_LT(m.gain_lower(), 0.02) << m.policy();
    EXPECT_TRUE(absl::StrContains(m.policy(), "injected noise")) << m.policy();
    if (m.gain_lower() < 0 && m.gain_upper() > 0) ++straddles;
  }
  EXPECT_GE(straddles, 1);
}

// The check runs beside the blocks after the checked one; its verdict is
// the outcome, and nothing of the timing reaches the result.
TEST_F(SimBoardTest, PrecisionFailureOutranksTheTimingBlocks) {
  // tile_n >= 128 on the ragged workload: the kernel's tail bug.
  v1::WorkItem w = Work(Params(64, 128, 64, 2, 24), "ragged");
  w.set_has_reference(true);
  *w.mutable_reference_params() = Params(32, 32, 32, 1, 16);
  Evaluation e = Eval(w);
  EXPECT_EQ(e.result.outcome(), v1::OUTCOME_PRECISION_FAILED)
      << e.result.detail();
  EXPECT_FALSE(e.result.precision().passed());
  EXPECT_TRUE(absl::StartsWith(e.result.detail(), "precision: "))
      << e.result.detail();
  EXPECT_FALSE(e.result.has_measurement());
  EXPECT_FALSE(e.bundle.has_value());
}

}  // namespace
}  // namespace tunefarm

namespace tunefarm {
namespace {

// The kernel program itself, on bad input: exit 2 and a message naming what
// is wrong, never a crash.
class KernelProgramTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> dir = MakeTempDir("kernel_program_test");
    ASSERT_TRUE(dir.ok());
    dir_ = *dir;
    ASSERT_TRUE(
        WriteFileAtomic(
            dir_ + "/params.json",
            R"({"tile_m":32,"tile_n":32,"tile_k":32,"buffer_count":1,"block_dim":16})")
            .ok());
    ASSERT_TRUE(
        WriteFileAtomic(
            dir_ + "/workload.json",
            R"({"name":"w","dtype":"fp16","dims":{"m":64,"n":64,"k":64}})")
            .ok());
  }
  void TearDown() override { ASSERT_TRUE(RemoveAll(dir_).ok()); }

  ProcessResult Run(std::vector<std::string> args) {
    ProcessSpec spec;
    spec.argv = {SIM_MATMUL_BIN};
    for (std::string& a : args) spec.argv.push_back(std::move(a));
    spec.stderr_path = dir_ + "/stderr";
    spec.timeout = absl::Seconds(20);
    absl::StatusOr<ProcessResult> r = RunProcess(spec);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : ProcessResult{};
  }
  ProcessResult Build(const std::string& params_json,
                      const std::string& workload_json) {
    EXPECT_TRUE(WriteFileAtomic(dir_ + "/p.json", params_json).ok());
    EXPECT_TRUE(WriteFileAtomic(dir_ + "/w.json", workload_json).ok());
    return Run({"--stage", "build", "--params", dir_ + "/p.json", "--workload",
                dir_ + "/w.json", "--out", dir_ + "/out"});
  }

  std::string dir_;
};

TEST_F(KernelProgramTest, GoodInputBuilds) {
  ProcessResult r =
      Run({"--stage", "build", "--params", dir_ + "/params.json", "--workload",
           dir_ + "/workload.json", "--out", dir_ + "/out"});
  EXPECT_EQ(r.exit_code, 0) << r.stderr_tail;
}

TEST_F(KernelProgramTest, BadInputExits2NamingTheField) {
  const std::string good_w =
      R"({"name":"w","dtype":"fp16","dims":{"m":64,"n":64,"k":64}})";
  const std::string good_p =
      R"({"tile_m":32,"tile_n":32,"tile_k":32,"buffer_count":1,"block_dim":16})";
  struct Case {
    std::string params, workload, expect;
  };
  for (
      const Case& c : std::vector<Case>{
          {"{not json", good_w, "not valid JSON"},
          {"[1,2]", good_w, "must hold a JSON object"},
          {R"({"tile_m":32})", good_w, "tile_n is missing"},
          {R"({"tile_m":32.5,"tile_n":32,"tile_k":32,"buffer_count":1,"block_dim":16})",
           good_w, "tile_m must be an integer"},
          {R"({"tile_m":[1],"tile_n":32,"tile_k":32,"buffer_count":1,"block_dim":16})",
           good_w, "parameter tile_m"},
          {R"({"tile_m":18446744073709551615,"tile_n":32,"tile_k":32,"buffer_count":1,"block_dim":16})",
           good_w, "tile_m"},
          {R"({"tile_m":48,"tile_n":32,"tile_k":32,"buffer_count":1,"block_dim":16})",
           good_w, "tile_m=48 is outside its domain"},
          {R"J({"tile_m":32,"tile_n":32,"tile_k":32,"buffer_count":1,"block_dim":16,"evil":"$(id)"})J",
           good_w, "unknown parameter \"evil\""},
          {good_p, R"({"dtype":"fp16","dims":{"m":64,"n":64}})",
           "dim k is missing"},
          {good_p, R"({"dtype":"fp16","dims":{"m":64,"n":99999999999,"k":64}})",
           "dim n"},
          {good_p, R"({"dtype":"fp16","dims":{"m":"64","n":64,"k":64}})",
           "dim m"},
          {good_p, R"({"dtype":"bf17","dims":{"m":64,"n":64,"k":64}})",
           "dtype"},
      }) {
    ProcessResult r = Build(c.params, c.workload);
    EXPECT_EQ(r.exit_code, 2) << c.params << " " << c.workload;
    EXPECT_TRUE(absl::StrContains(r.stderr_tail, c.expect))
        << c.params << " " << c.workload << " → " << r.stderr_tail;
  }
}

TEST_F(KernelProgramTest, BadFlagsExit2) {
  EXPECT_TRUE(absl::StrContains(
      Run({"--stage", "build", "--params", dir_ + "/missing.json", "--workload",
           dir_ + "/workload.json", "--out", dir_ + "/out"})
          .stderr_tail,
      "missing.json"));
  ProcessResult r =
      Run({"--stage", "explode", "--params", dir_ + "/params.json",
           "--workload", dir_ + "/workload.json", "--out", dir_ + "/out"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.stderr_tail, "--stage")) << r.stderr_tail;
  r = Run({"--stage", "run", "--params", dir_ + "/params.json", "--workload",
           dir_ + "/workload.json", "--out", dir_ + "/out", "--samples",
           "1e99"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.stderr_tail, "--samples")) << r.stderr_tail;
  r = Run({"--bogus", "1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.stderr_tail, "--bogus")) << r.stderr_tail;
  r = Run({"--stage"});
  EXPECT_EQ(r.exit_code, 2);
}

}  // namespace
}  // namespace tunefarm
