// The cpu board end to end on real compiled variants: the shipped gemm and
// softmax operators (OK, measured, precision passed, profile with hardware
// counters or the "counters unavailable" evidence gap), and the faulty test
// operator (SIGSEGV → RUN_CRASHED, hang → RUN_TIMEOUT, wrong answer →
// PRECISION_FAILED, compile error → BUILD_FAILED, cached), after each of
// which the board still evaluates the next variant fine. Both isolation
// modes: the persistent runner (the default: started once, restarted after
// a variant that failed in it) and one process per stage.
#include "agent/cpu_board.h"

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "agent/perf_counters.h"
#include "agent/stage_runner.h"
#include "agent/variant_runner.h"
#include "common/files.h"
#include "gtest/gtest.h"
#include "ops/catalog.h"

namespace tunefarm {
namespace {

// TF_SOURCE_DIR overrides the build-time tree (the device run copies the
// tree elsewhere).
const std::string kSource = std::getenv("TF_SOURCE_DIR") != nullptr
                                ? std::getenv("TF_SOURCE_DIR")
                                : TUNEFARM_SOURCE_DIR;

class CpuBoardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> dir = MakeTempDir("tf_cpu_board_test");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = *dir;
    // A private copy of the packages, so edits to the live tree during the
    // test cannot change the build keys under it.
    std::error_code ec;
    for (const char* p :
         {"ops/common", "ops/gemm", "ops/softmax", "tests/agent/faulty_op"}) {
      std::filesystem::create_directories(dir_ + "/src/" + p, ec);
      std::filesystem::copy(kSource + "/" + p, dir_ + "/src/" + p,
                            std::filesystem::copy_options::recursive, ec);
      ASSERT_FALSE(ec) << p << ": " << ec.message();
    }
    src_ = dir_ + "/src";
    CpuBoardOptions o;
    o.board_id = "agent-t/cpu0";
    o.agent_id = "agent-t";
    o.node = "localhost";
    o.work_root = dir_ + "/work";
    o.harness_dir = src_ + "/ops/common";
    o.seed = 7;
    o.stage_timeout = absl::Seconds(3);
    o.runner_binary = VARIANT_RUNNER_BIN;
    board_ = NewCpuBoard(o);
  }
  void TearDown() override { (void)RemoveAll(dir_); }

  v1::WorkItem Work(const std::string& package, const std::string& workload,
                    const ParamMap& overrides, int64_t round,
                    v1::Isolation isolation = v1::ISOLATION_UNSPECIFIED) {
    absl::StatusOr<v1::OperatorManifest> op = LoadOperatorManifest(package);
    EXPECT_TRUE(op.ok()) << op.status();
    v1::WorkItem w;
    w.set_sweep_id("sweep-cpu");
    w.set_round_id(round);
    w.set_epoch(1);
    *w.mutable_operator_() = ProjectManifest(*op, "cpu");
    for (const v1::Workload& wl : op->workloads()) {
      if (wl.name() == workload) *w.mutable_workload() = wl;
    }
    EXPECT_EQ(w.workload().name(), workload);
    ParamMap params = DefaultParams(w.operator_());
    for (const auto& [k, v] : overrides) params[k] = v;
    EXPECT_TRUE(ValidateParams(w.operator_(), params).ok());
    *w.mutable_params() = params;
    w.mutable_measurement()->set_warmup(1);
    w.mutable_measurement()->set_samples(5);
    w.mutable_measurement()->set_isolation(isolation);
    return w;
  }

  v1::RoundResult Eval(const v1::WorkItem& w, Evaluation* out = nullptr) {
    absl::StatusOr<Evaluation> e = board_->Evaluate(w, cancel_);
    EXPECT_TRUE(e.ok()) << e.status();
    if (!e.ok()) return {};
    if (out != nullptr) *out = *e;
    return e->result;
  }

  // The bundle holds counters or says why it cannot, matching the probe.
  void ExpectCountersOrGap(const v1::ProfileBundle& b) {
    std::string counters, gap, facts;
    for (const v1::ProfileFile& f : b.files()) {
      if (f.path() == "PROF_cpu/counters.csv") counters = f.content();
      if (f.path() == "PROF_cpu/counters_unavailable.txt") gap = f.content();
      if (f.path() == "PROF_cpu/run_facts.csv") facts = f.content();
    }
    EXPECT_TRUE(absl::StrContains(facts, "median_us,")) << facts;
    const absl::Status probe = ProbePerfCounters();
    if (probe.ok()) {
      absl::StatusOr<std::map<std::string, uint64_t>> c =
          ParseCountersCsv(counters);
      ASSERT_TRUE(c.ok()) << c.status() << counters;
      EXPECT_GT(c->at("cycles"), 0u);
      EXPECT_GT(c->at("instructions"), 0u);
    } else {
      EXPECT_TRUE(counters.empty());
      EXPECT_TRUE(absl::StartsWith(gap, "counters unavailable: ")) << gap;
      EXPECT_TRUE(absl::StrContains(gap, "perf_event_open")) << gap;
    }
  }

  std::string dir_, src_;
  std::unique_ptr<Board> board_;
  std::atomic<bool> cancel_{false};
};

TEST_F(CpuBoardTest, InfoIsRealHardware) {
  const v1::BoardInfo& info = board_->info();
  EXPECT_EQ(info.kind(), "cpu");
  EXPECT_FALSE(info.simulated());
  EXPECT_FALSE(info.chip().empty());
  EXPECT_GE(info.capabilities().vector_cores(), 1);
  EXPECT_GT(info.capabilities().memory_bandwidth_gbps(), 0);
  EXPECT_TRUE(info.capabilities().extra().contains("perf_counters"));
}

TEST_F(CpuBoardTest, GemmVariantIsMeasuredAndCached) {
  ParamMap fast;
  fast["mr"] = IntParam(4);
  fast["nr"] = IntParam(32);
  Evaluation eval;
  v1::RoundResult r = Eval(Work(src_ + "/ops/gemm", "cpu_256", fast, 1), &eval);
  ASSERT_EQ(r.outcome(), v1::OUTCOME_OK) << r.detail();
  EXPECT_TRUE(r.precision().passed());
  EXPECT_EQ(r.precision().elements(), 256 * 256);
  EXPECT_FALSE(r.measurement().simulated());
  EXPECT_EQ(r.measurement().samples(), 5);
  EXPECT_GT(r.measurement().median_us(), 0);
  EXPECT_TRUE(absl::StrContains(r.measurement().policy(), "measured on"));
  ASSERT_TRUE(eval.bundle.has_value());
  EXPECT_FALSE(eval.bundle->simulated());
  EXPECT_EQ(eval.bundle->profiler(), "perf");
  EXPECT_EQ(eval.bundle->board_kind(), "cpu");
  ExpectCountersOrGap(*eval.bundle);

  // The same variant again: the build comes from the cache.
  v1::RoundResult again = Eval(Work(src_ + "/ops/gemm", "cpu_256", fast, 2));
  ASSERT_EQ(again.outcome(), v1::OUTCOME_OK) << again.detail();
  EXPECT_LT(again.build_s(), r.build_s());
  EXPECT_LT(again.build_s(), 0.5);
}

// A/B on real compiled variants: the parent variant (another build) is
// timed in ABBA blocks in the same lease. Only the candidate's first block
// writes output.bin for the precision check; every other block is timing
// only (--output 0), which is what keeps a large operator's round cheap.
TEST_F(CpuBoardTest, AbTimesTheParentAndChecksOnlyTheCandidatesFirstBlock) {
  ParamMap fast, parent;
  fast["mr"] = IntParam(4);
  fast["nr"] = IntParam(32);
  v1::WorkItem w = Work(src_ + "/ops/gemm", "cpu_256", fast, 4);
  w.set_has_reference(true);
  w.set_reference_round(3);
  *w.mutable_reference_params() = DefaultParams(w.operator_());
  v1::RoundResult r = Eval(w);
  ASSERT_EQ(r.outcome(), v1::OUTCOME_OK) << r.detail();
  EXPECT_TRUE(r.precision().passed());
  const v1::Measurement& m = r.measurement();
  EXPECT_TRUE(m.paired());
  EXPECT_GE(m.pairs(), 6);
  EXPECT_EQ(m.reference_round(), 3);
  EXPECT_GT(m.reference().median_us(), 0);
  EXPECT_TRUE(absl::StrContains(m.policy(), "A/B interleaved")) << m.policy();

  const std::string work = WorkDirFor(dir_ + "/work", w);
  std::error_code ec;
  EXPECT_TRUE(std::filesystem::exists(work + "/run/output.bin", ec));
  int timed = 0, outputs = 0;
  for (const std::string& d : {work, work + "/parent"}) {
    for (const auto& e : std::filesystem::directory_iterator(d, ec)) {
      const std::string name = e.path().filename().string();
      if (!e.is_directory() || !absl::StartsWith(name, "run")) continue;
      timed += std::filesystem::exists(e.path() / "timing_us.txt", ec) ? 1 : 0;
      outputs += std::filesystem::exists(e.path() / "output.bin", ec) ? 1 : 0;
    }
  }
  EXPECT_EQ(timed, 2 * m.pairs());
  EXPECT_EQ(outputs, 1);
}

// Build/run overlap: Prefetch compiles the variant into the build cache
// without running it, so the Evaluate that follows skips the compile.
TEST_F(CpuBoardTest, PrefetchBuildsAheadSoEvaluateFindsTheBuild) {
  ParamMap fast;
  fast["mr"] = IntParam(4);
  fast["nr"] = IntParam(32);
  const v1::WorkItem w = Work(src_ + "/ops/gemm", "cpu_256", fast, 1);
  const absl::Time start = absl::Now();
  ASSERT_TRUE(board_->Prefetch(w, cancel_).ok());
  const absl::Duration compile = absl::Now() - start;
  // Built, not run: one cache entry, and no work directory yet.
  std::error_code ec;
  int entries = 0;
  for (const auto& e :
       std::filesystem::directory_iterator(dir_ + "/work/build_cache", ec)) {
    entries += e.is_directory() ? 1 : 0;
  }
  EXPECT_EQ(entries, 1);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/work/sweep-cpu", ec));
  v1::RoundResult r = Eval(w);
  ASSERT_EQ(r.outcome(), v1::OUTCOME_OK) << r.detail();
  EXPECT_LT(r.build_s(), 0.5);
  EXPECT_LT(r.build_s(), absl::ToDoubleSeconds(compile));
}

TEST_F(CpuBoardTest, SoftmaxVariantsPass) {
  ParamMap poly;
  poly["exp_impl"] = StringParam("poly");
  poly["vec"] = IntParam(16);
  for (const ParamMap& p : {ParamMap(), poly}) {
    Evaluation eval;
    v1::RoundResult r =
        Eval(Work(src_ + "/ops/softmax", "cpu_small", p, 3), &eval);
    ASSERT_EQ(r.outcome(), v1::OUTCOME_OK) << r.detail();
    EXPECT_TRUE(r.precision().passed());
    EXPECT_FALSE(r.measurement().simulated());
    ASSERT_TRUE(eval.bundle.has_value());
    ExpectCountersOrGap(*eval.bundle);
  }
}

// The perf_event_open path itself, where the kernel allows it (bare metal
// with kernel.perf_event_paranoid <= 2; most VMs and containers refuse, and
// then the test says why and skips). The counters must count the kernel's
// work, not just be non-zero: a 256^3 GEMM needs at least 256^3/16 FMA
// instructions per run even with 16 fp32 lanes.
TEST_F(CpuBoardTest, HardwareCountersCountTheKernelWhereTheKernelAllowsThem) {
  const absl::Status probe = ProbePerfCounters();
  if (!probe.ok()) {
    GTEST_SKIP() << "hardware counters unavailable on this machine: "
                 << probe.message();
  }
  ParamMap fast;
  fast["mr"] = IntParam(4);
  fast["nr"] = IntParam(32);
  Evaluation eval;
  v1::RoundResult r =
      Eval(Work(src_ + "/ops/gemm", "cpu_256", fast, 20), &eval);
  ASSERT_EQ(r.outcome(), v1::OUTCOME_OK) << r.detail();
  ASSERT_TRUE(eval.bundle.has_value());
  std::string counters;
  for (const v1::ProfileFile& f : eval.bundle->files()) {
    if (f.path() == "PROF_cpu/counters.csv") counters = f.content();
    EXPECT_NE(f.path(), "PROF_cpu/counters_unavailable.txt") << f.content();
  }
  absl::StatusOr<std::map<std::string, uint64_t>> c =
      ParseCountersCsv(counters);
  ASSERT_TRUE(c.ok()) << c.status() << "\n" << counters;
  ASSERT_TRUE(c->contains("runs") && c->contains("cycles") &&
              c->contains("instructions"))
      << counters;
  const uint64_t runs = c->at("runs");
  ASSERT_GT(runs, 0u);
  const uint64_t min_instructions = runs * 256ull * 256 * 256 / 16;
  EXPECT_GE(c->at("instructions"), min_instructions) << counters;
  const double ipc = static_cast<double>(c->at("instructions")) /
                     static_cast<double>(c->at("cycles"));
  EXPECT_GT(ipc, 0.05) << counters;
  EXPECT_LT(ipc, 10.0) << counters;
}

class CpuBoardIsolationTest
    : public CpuBoardTest,
      public ::testing::WithParamInterface<v1::Isolation> {};

// Every failure is typed the same in both modes, and after each the board
// evaluates the next variant fine (in the runner: in a fresh runner).
TEST_P(CpuBoardIsolationTest,
       CrashHangWrongAndBrokenVariantsAreTypedAndBoardGoesOn) {
  const v1::Isolation iso = GetParam();
  const std::string pkg = src_ + "/tests/agent/faulty_op";
  auto mode = [](const std::string& m) {
    ParamMap p;
    p["mode"] = StringParam(m);
    return p;
  };
  const int64_t starts0 = TotalVariantRunnerStarts();
  v1::RoundResult crash = Eval(Work(pkg, "tiny", mode("segv"), 10, iso));
  EXPECT_EQ(crash.outcome(), v1::OUTCOME_RUN_CRASHED) << crash.detail();
  EXPECT_TRUE(absl::StrContains(crash.detail(), "SIGSEGV")) << crash.detail();

  v1::RoundResult ok = Eval(Work(pkg, "tiny", mode("ok"), 11, iso));
  EXPECT_EQ(ok.outcome(), v1::OUTCOME_OK) << ok.detail();

  const absl::Time start = absl::Now();
  v1::RoundResult hang = Eval(Work(pkg, "tiny", mode("hang"), 12, iso));
  EXPECT_EQ(hang.outcome(), v1::OUTCOME_RUN_TIMEOUT) << hang.detail();
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));

  v1::RoundResult after_hang = Eval(Work(pkg, "tiny", mode("ok"), 13, iso));
  EXPECT_EQ(after_hang.outcome(), v1::OUTCOME_OK) << after_hang.detail();

  v1::RoundResult wrong = Eval(Work(pkg, "tiny", mode("wrong"), 14, iso));
  EXPECT_EQ(wrong.outcome(), v1::OUTCOME_PRECISION_FAILED) << wrong.detail();
  EXPECT_EQ(wrong.precision().mismatches(), 1);

  v1::RoundResult aborted = Eval(Work(pkg, "tiny", mode("abort"), 18, iso));
  EXPECT_EQ(aborted.outcome(), v1::OUTCOME_RUN_CRASHED) << aborted.detail();
  EXPECT_TRUE(absl::StrContains(aborted.detail(), "SIGABRT"))
      << aborted.detail();
  EXPECT_EQ(Eval(Work(pkg, "tiny", mode("ok"), 19, iso)).outcome(),
            v1::OUTCOME_OK);

  v1::RoundResult garbage = Eval(Work(pkg, "tiny", mode("garbage"), 20, iso));
  EXPECT_EQ(garbage.outcome(), v1::OUTCOME_PRECISION_FAILED)
      << garbage.detail();
  EXPECT_EQ(garbage.precision().nan_count(), 1024);
  EXPECT_EQ(Eval(Work(pkg, "tiny", mode("ok"), 21, iso)).outcome(),
            v1::OUTCOME_OK);

  v1::RoundResult exited = Eval(Work(pkg, "tiny", mode("exit"), 22, iso));
  EXPECT_EQ(exited.outcome(), v1::OUTCOME_RUN_CRASHED) << exited.detail();
  EXPECT_TRUE(absl::StrContains(exited.detail(), "exited with code 7"))
      << exited.detail();

  v1::RoundResult broken = Eval(Work(pkg, "tiny", mode("broken"), 15, iso));
  EXPECT_EQ(broken.outcome(), v1::OUTCOME_BUILD_FAILED);
  EXPECT_TRUE(
      absl::StrContains(broken.detail(), "mode=broken does not compile"))
      << broken.detail();
  v1::RoundResult broken_again =
      Eval(Work(pkg, "tiny", mode("broken"), 16, iso));
  EXPECT_EQ(broken_again.outcome(), v1::OUTCOME_BUILD_FAILED);
  EXPECT_TRUE(absl::StrContains(broken_again.detail(), "cached verdict"))
      << broken_again.detail();

  ParamMap scaled = mode("ok");
  scaled["scale"] = IntParam(2);
  v1::RoundResult last = Eval(Work(pkg, "tiny", scaled, 17, iso));
  EXPECT_EQ(last.outcome(), v1::OUTCOME_OK) << last.detail();

  const int64_t starts = TotalVariantRunnerStarts() - starts0;
  if (iso == v1::ISOLATION_PROCESS) {
    EXPECT_EQ(starts, 0);
  } else {
    // The first start, then one fresh runner after each of segv, hang,
    // wrong, abort, garbage and exit.
    EXPECT_EQ(starts, 7);
    EXPECT_TRUE(absl::StrContains(last.measurement().policy(),
                                  "in the board's persistent runner"))
        << last.measurement().policy();
  }
}

// A/B inside the runner keeps the ABBA order: pair j runs the candidate
// first when j is even, the parent first when odd.
TEST_P(CpuBoardIsolationTest, AbBlocksRunInAbbaOrder) {
  const std::string log = dir_ + "/order.log";
  ASSERT_EQ(setenv("TF_FAULTY_ORDER_LOG", log.c_str(), 1), 0);
  ParamMap cand, parent;
  cand["mode"] = StringParam("ok");
  parent["mode"] = StringParam("ok");
  parent["scale"] = IntParam(2);
  v1::WorkItem w =
      Work(src_ + "/tests/agent/faulty_op", "tiny", cand, 30, GetParam());
  w.set_has_reference(true);
  w.set_reference_round(29);
  *w.mutable_reference_params() = parent;
  v1::RoundResult r = Eval(w);
  unsetenv("TF_FAULTY_ORDER_LOG");
  ASSERT_EQ(r.outcome(), v1::OUTCOME_OK) << r.detail();
  ASSERT_TRUE(r.measurement().paired());
  const int pairs = r.measurement().pairs();
  absl::StatusOr<std::string> text = ReadFile(log);
  ASSERT_TRUE(text.ok()) << text.status();
  std::vector<std::string> order;  // 'C' candidate, 'P' parent
  for (absl::string_view line : absl::StrSplit(*text, '\n', absl::SkipEmpty())) {
    order.push_back(absl::EndsWith(line, "/parent") ? "P" : "C");
  }
  // The timed blocks, then the profile stage (candidate).
  ASSERT_EQ(order.size(), static_cast<size_t>(2 * pairs + 1)) << *text;
  for (int j = 0; j < pairs; ++j) {
    const bool cand_first = j % 2 == 0;
    EXPECT_EQ(order[2 * j], cand_first ? "C" : "P") << "pair " << j;
    EXPECT_EQ(order[2 * j + 1], cand_first ? "P" : "C") << "pair " << j;
  }
  EXPECT_EQ(order.back(), "C");
}

INSTANTIATE_TEST_SUITE_P(
    Isolation, CpuBoardIsolationTest,
    ::testing::Values(v1::ISOLATION_RUNNER, v1::ISOLATION_PROCESS),
    [](const ::testing::TestParamInfo<v1::Isolation>& info) {
      return info.param == v1::ISOLATION_PROCESS ? std::string("Process")
                                                 : std::string("Runner");
    });

// One runner serves every round of a board: N rounds of different gemm
// variants (A/B against the defaults) start it once, and the reference is
// computed once for all of them.
TEST_F(CpuBoardTest, OneRunnerStartServesManyRounds) {
  const int64_t starts0 = TotalVariantRunnerStarts();
  const int kRounds = 4;
  const int nr[kRounds] = {8, 16, 32, 16};
  const int mr[kRounds] = {4, 4, 4, 2};
  for (int i = 0; i < kRounds; ++i) {
    ParamMap p;
    p["mr"] = IntParam(mr[i]);
    p["nr"] = IntParam(nr[i]);
    v1::WorkItem w = Work(src_ + "/ops/gemm", "cpu_256", p, 40 + i);
    w.set_has_reference(true);
    w.set_reference_round(39 + i);
    *w.mutable_reference_params() = DefaultParams(w.operator_());
    v1::RoundResult r = Eval(w);
    ASSERT_EQ(r.outcome(), v1::OUTCOME_OK) << r.detail();
    EXPECT_TRUE(r.measurement().paired());
    // The reference is computed by the first round only, then cached.
    std::error_code ec;
    EXPECT_EQ(std::filesystem::exists(
                  WorkDirFor(dir_ + "/work", w) + "/reference/reference.bin",
                  ec),
              i == 0)
        << "round " << i;
  }
  EXPECT_EQ(TotalVariantRunnerStarts() - starts0, 1);
}

// A manifest whose backend says `isolation: process` is never loaded into
// the runner, whatever the sweep asks.
TEST_F(CpuBoardTest, ManifestCanRequireProcessIsolation) {
  const int64_t starts0 = TotalVariantRunnerStarts();
  ParamMap p;
  p["mode"] = StringParam("ok");
  v1::WorkItem w = Work(src_ + "/tests/agent/faulty_op", "tiny", p, 50,
                        v1::ISOLATION_RUNNER);
  (*w.mutable_operator_()->mutable_backends())["cpu"].set_isolation(
      v1::ISOLATION_PROCESS);
  v1::RoundResult r = Eval(w);
  ASSERT_EQ(r.outcome(), v1::OUTCOME_OK) << r.detail();
  EXPECT_TRUE(absl::StrContains(r.measurement().policy(),
                                "one process per stage"))
      << r.measurement().policy();
  EXPECT_EQ(TotalVariantRunnerStarts() - starts0, 0);
}

TEST(SplitAllowedCpusTest, DisjointGroupsCoverAllowedCpus) {
  std::vector<std::vector<int>> groups = SplitAllowedCpus(64);
  ASSERT_FALSE(groups.empty());
  std::set<int> seen;
  for (const auto& g : groups) {
    EXPECT_FALSE(g.empty());
    for (int c : g) EXPECT_TRUE(seen.insert(c).second);
  }
  EXPECT_EQ(SplitAllowedCpus(1).size(), 1u);
}

}  // namespace
}  // namespace tunefarm
