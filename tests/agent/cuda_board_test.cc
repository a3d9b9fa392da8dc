// The cuda board: nvidia-smi parsing, the chip table, Nsight Compute command
// construction and CSV clean-up (checked on the public ncu fixtures with the
// analyzer's CSV reader), the board's flow end to end with a stand-in
// nvcc/ncu/stage program (cuda_fake_tool), and, on a machine with an NVIDIA
// GPU, the shipped gemm and softmax kernels through the real board (skipped,
// saying why, elsewhere).
#include "agent/cuda_board.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "agent/gpu_discovery.h"
#include "agent/ncu.h"
#include "agent/variant_runner.h"
#include "analyzer/csv.h"
#include "common/files.h"
#include "common/params.h"
#include "gtest/gtest.h"
#include "ops/catalog.h"

namespace tunefarm {
namespace {

namespace fs = std::filesystem;

// Paths compiled in, overridable from the environment so a build made on one
// machine runs from another checkout (scripts/device-cuda.sh).
std::string EnvOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}
std::string FakeTool() { return EnvOr("TF_CUDA_FAKE_TOOL", FAKE_TOOL); }
// tunefarm-variant-runner (TF_VARIANT_RUNNER where the tree was moved).
std::string RunnerBin() {
  return EnvOr("TF_VARIANT_RUNNER", VARIANT_RUNNER_BIN);
}
std::string SourceDir() { return EnvOr("TF_SOURCE_DIR", TUNEFARM_SOURCE_DIR); }

// Captured from `nvidia-smi --query-gpu=... --format=csv,noheader,nounits`
// on an 8-GPU H200 host (first two rows), with one power reading N/A.
constexpr char kSmiSample[] =
    "0, NVIDIA H200, GPU-5f3c1a2b-0000-1111-2222-333344445555, 143771, 1980, "
    "31, 74.52\n"
    "1, NVIDIA H200, GPU-6a7b8c9d-0000-1111-2222-333344445555, 143771, 1980, "
    "29, [N/A]\n";

TEST(GpuDiscoveryTest, QueryArgvAsksTheDocumentedFields) {
  EXPECT_EQ(NvidiaSmiQueryArgv("nvidia-smi"),
            (std::vector<std::string>{
                "nvidia-smi",
                "--query-gpu=index,name,uuid,memory.total,clocks.max.sm,"
                "temperature.gpu,power.draw",
                "--format=csv,noheader,nounits"}));
}

TEST(GpuDiscoveryTest, ParsesCapturedOutput) {
  absl::StatusOr<std::vector<GpuInfo>> gpus = ParseNvidiaSmiGpus(kSmiSample);
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  ASSERT_EQ(gpus->size(), 2u);
  const GpuInfo& g = (*gpus)[0];
  EXPECT_EQ(g.index, 0);
  EXPECT_EQ(g.name, "NVIDIA H200");
  EXPECT_EQ(g.uuid, "GPU-5f3c1a2b-0000-1111-2222-333344445555");
  EXPECT_DOUBLE_EQ(g.memory_total_mib.value_or(0), 143771);
  EXPECT_DOUBLE_EQ(g.max_sm_clock_mhz.value_or(0), 1980);
  EXPECT_DOUBLE_EQ(g.temperature_c.value_or(0), 31);
  EXPECT_DOUBLE_EQ(g.power_draw_w.value_or(0), 74.52);
  EXPECT_FALSE((*gpus)[1].power_draw_w.has_value());
  EXPECT_EQ(GpuHealthLine((*gpus)[1]),
            "gpu 1 NVIDIA H200: 29.0 C, ? W, 143771.0 MiB");
  EXPECT_TRUE(ParseNvidiaSmiGpus("").value().empty());
}

TEST(GpuDiscoveryTest, RejectsMalformedLinesNamingThem) {
  absl::StatusOr<std::vector<GpuInfo>> r =
      ParseNvidiaSmiGpus("0, NVIDIA H200, GPU-1\n");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "line 1")) << r.status();
  r = ParseNvidiaSmiGpus("x, NVIDIA H200, GPU-1, 1, 1, 1, 1\n");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "index \"x\""))
      << r.status();
}

TEST(GpuDiscoveryTest, ChipTableAndCapabilities) {
  std::optional<GpuSpec> h200 = LookupGpuSpec("NVIDIA H200");
  ASSERT_TRUE(h200.has_value());
  EXPECT_EQ(h200->chip, "H200");
  EXPECT_EQ(h200->sms, 132);
  EXPECT_EQ(LookupGpuSpec("NVIDIA H100 80GB HBM3")->chip, "H100-SXM");
  EXPECT_EQ(LookupGpuSpec("NVIDIA H100 PCIe")->chip, "H100-PCIe");
  EXPECT_EQ(LookupGpuSpec("NVIDIA GH200 480GB")->chip, "GH200");
  EXPECT_EQ(LookupGpuSpec("NVIDIA H20")->chip, "H20");
  EXPECT_EQ(LookupGpuSpec("NVIDIA A100-SXM4-80GB")->chip, "A100");
  EXPECT_EQ(LookupGpuSpec("NVIDIA L40S")->chip, "L40S");
  EXPECT_FALSE(LookupGpuSpec("Matrox G200").has_value());
  EXPECT_EQ(NvccArch(9, 0), "sm_90a");
  EXPECT_EQ(NvccArch(8, 9), "sm_89");

  GpuInfo g = ParseNvidiaSmiGpus(kSmiSample).value()[0];
  v1::BoardCapabilities c = GpuCapabilities(g, *h200);
  EXPECT_EQ(c.vector_cores(), 132);
  EXPECT_DOUBLE_EQ(c.clock_mhz(), 1980);
  EXPECT_DOUBLE_EQ(c.memory_bandwidth_gbps(), 4800);
  EXPECT_NEAR(c.peak_tflops(), 132 * 128 * 2 * 1980e6 / 1e12, 1e-9);  // ~66.9
  EXPECT_EQ(c.extra().at("nvcc_arch"), "sm_90a");
  EXPECT_EQ(c.extra().at("uuid"), g.uuid);
}

TEST(NcuTest, ProfileArgvFollowsTheCheckedRecipe) {
  NcuProfileOptions o;
  o.ncu = "/opt/ncu";
  o.kernel_regex = "^GemmKernel$";
  o.report_base = "/w/profile/report";
  o.log_file = "/w/profile/ncu.log";
  const std::vector<std::string> argv =
      NcuProfileArgv(o, {"/bin/variant", "--stage", "profile"});
  const std::string joined = absl::StrJoin(argv, " ");
  EXPECT_EQ(argv.front(), "/opt/ncu");
  for (const char* want :
       {"--clock-control none", "--cache-control all", "--replay-mode kernel",
        "--kernel-name-base function", "-k regex:^GemmKernel$", "-s 3", "-c 1",
        "--section SpeedOfLight", "--section MemoryWorkloadAnalysis",
        "-f -o /w/profile/report", "--log-file /w/profile/ncu.log",
        "--target-processes all"}) {
    EXPECT_TRUE(absl::StrContains(joined, want))
        << want << " missing from " << joined;
  }
  // The program comes last, untouched.
  ASSERT_GE(argv.size(), 3u);
  EXPECT_EQ((std::vector<std::string>(argv.end() - 3, argv.end())),
            (std::vector<std::string>{"/bin/variant", "--stage", "profile"}));
  // --metrics: the 41 checked names, full stall names, no Hopper trap.
  auto it = std::find(argv.begin(), argv.end(), "--metrics");
  ASSERT_NE(it, argv.end());
  std::vector<std::string> metrics = absl::StrSplit(*(it + 1), ',');
  EXPECT_EQ(metrics.size(), 41u);
  EXPECT_EQ(metrics, DefaultNcuMetrics());
  for (const std::string& m : metrics) {
    EXPECT_FALSE(absl::StrContains(m, "{")) << m;
    EXPECT_FALSE(absl::StrContains(m, "gmma_cycles_active"))
        << m;  // does not exist on sm_90
  }
  EXPECT_TRUE(absl::StrContains(
      *(it + 1),
      "smsp__average_warps_issue_stalled_gmma_per_issue_active.ratio"));
  // Without a regex there is no -k (the profile stage launches only the
  // candidate, so -s/-c count its launches).
  o.kernel_regex.clear();
  const std::vector<std::string> plain = NcuProfileArgv(o, {"/bin/variant"});
  EXPECT_EQ(std::find(plain.begin(), plain.end(), "-k"), plain.end());
}

TEST(NcuTest, ExportArgvPinsBaseUnits) {
  EXPECT_EQ(
      NcuExportArgv("ncu", "/r.ncu-rep", "raw"),
      (std::vector<std::string>{"ncu", "-i", "/r.ncu-rep", "--csv", "--page",
                                "raw", "--print-units", "base", "--print-fp"}));
  const std::vector<std::string> d =
      NcuExportArgv("ncu", "/r.ncu-rep", "details");
  EXPECT_EQ(
      absl::StrJoin(d, " "),
      "ncu -i /r.ncu-rep --csv --page details --print-units base --print-fp "
      "--print-details all --print-metric-name label-name");
}

// The raw-page example of cuda-backend.md §1.2 (an H200 copy kernel),
// preceded by ncu's own lines as a live run prints them.
constexpr char kRawSample[] =
    "\xEF\xBB\xBF==PROF== Connected to process 759 (bench)\r\n"
    "\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel "
    "Name\",\"Context\","
    "\"Stream\",\"Block Size\",\"Grid "
    "Size\",\"Device\",\"CC\",\"dram__bytes_read.sum\","
    "\"gpu__time_duration.sum\",\"launch__grid_size\",\"sm__cycles_elapsed.avg."
    "per_second\"\r\n"
    "\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"byte\",\"ns\","
    "\"\",\"hz\"\r\n"
    "\"0\",\"759\",\"bench\",\"127.0.0.1\",\"copy_f4(const float4 *, float4 *, "
    "unsigned long)\","
    "\"1\",\"7\",\"(512, 1, 1)\",\"(1056, 1, "
    "1)\",\"0\",\"9.0\",\"1,073,747,456.00\","
    "\"534,304.00\",\"1,056.00\",\"1,983,372,449.64\"\r\n"
    "==PROF== Disconnected from process 759\r\n";

TEST(NcuTest, RawPageRecordsParseWithTheAnalyzerReader) {
  const std::string records = NcuCsvRecords(kRawSample);
  absl::StatusOr<CsvTable> t = ParseCsv(records, "raw.csv");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->rows.size(), 2u);  // units row + one kernel
  const auto dur = t->Column({"gpu__time_duration.sum"});
  ASSERT_TRUE(dur.has_value());
  EXPECT_EQ(t->Cell(0, dur), "ns");
  EXPECT_DOUBLE_EQ(t->Number(1, dur).value_or(0), 534304.0);
  EXPECT_EQ(t->Cell(1, t->Column({"Kernel Name"})),
            "copy_f4(const float4 *, float4 *, unsigned long)");
}

TEST(NcuTest, PublicFixturesParseAfterCleanUp) {
  const std::string dir =
      std::string(TUNEFARM_SHARED_DIR) + "/fixtures/ncu/public";
  if (!fs::is_directory(dir)) GTEST_SKIP() << "no ncu fixtures at " << dir;
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (!absl::EndsWith(name, ".csv") && !absl::EndsWith(name, ".log"))
      continue;
    ++files;
    absl::StatusOr<std::string> text = ReadFile(e.path().string());
    ASSERT_TRUE(text.ok()) << text.status();
    const std::string records = NcuCsvRecords(*text);
    absl::StatusOr<CsvTable> t = ParseCsv(records, name);
    ASSERT_TRUE(t.ok()) << name << ": " << t.status();
    EXPECT_GE(t->rows.size(), 1u) << name;
    EXPECT_TRUE(t->Column({"Kernel Name"}).has_value()) << name;
    // Details page: every metric row has a Metric Name and a value, or is a
    // rule row (empty metric, a rule name).
    const auto metric = t->Column({"Metric Name"});
    const auto rule = t->Column({"Rule Name"});
    if (metric) {
      for (size_t r = 0; r < t->rows.size(); ++r) {
        EXPECT_TRUE(!t->Cell(r, metric).empty() ||
                    (rule && !t->Cell(r, rule).empty()))
            << name << " row " << r;
      }
    }
  }
  EXPECT_GE(files, 4);
}

TEST(CudaFlagsTest, ArchPlaceholderIsFilled) {
  EXPECT_EQ(
      ExpandCudaFlags({"-O3", "-arch={arch}", "-std=c++17",
                       "-gencode=arch={virtual_arch},code={arch}"},
                      "sm_90a"),
      (std::vector<std::string>{"-O3", "-arch=sm_90a", "-std=c++17",
                                "-gencode=arch=compute_90a,code=sm_90a"}));
  EXPECT_EQ(
      ExpandCudaFlags({"-gencode=arch={virtual_arch},code={arch}"}, "sm_80"),
      (std::vector<std::string>{"-gencode=arch=compute_80,code=sm_80"}));
}

TEST(ShippedManifestsTest, GemmAndSoftmaxDeclareTheCudaBackend) {
  for (const std::string name : {"gemm", "softmax"}) {
    absl::StatusOr<v1::OperatorManifest> op =
        LoadOperatorManifest(SourceDir() + "/ops/" + name);
    ASSERT_TRUE(op.ok()) << op.status();
    auto it = op->backends().find("cuda");
    ASSERT_NE(it, op->backends().end()) << name;
    EXPECT_EQ(it->second.compiler(), "nvcc");
    ASSERT_EQ(it->second.sources_size(), 1);
    EXPECT_EQ(it->second.sources(0), "cuda/" + name + ".cu");
    EXPECT_TRUE(fs::exists(op->package_dir() + "/" + it->second.sources(0)));
    const std::vector<std::string> flags(it->second.flags().begin(),
                                         it->second.flags().end());
    EXPECT_NE(std::find(flags.begin(), flags.end(),
                        "-gencode=arch={virtual_arch},code={arch}"),
              flags.end());
    int cuda_params = 0;
    for (const v1::ParameterDomain& p : op->parameters()) {
      for (const std::string& b : p.backends()) cuda_params += b == "cuda";
    }
    EXPECT_GE(cuda_params, 4) << name;
  }
}

// ----- the board's flow with the stand-in tool
// --------------------------------

class FakeCudaBoardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = MakeTempDir("cuda-board-test").value();
    pkg_ = root_ + "/ops/fakeop";
    ASSERT_TRUE(MakeDirs(pkg_ + "/cuda").ok());
    ASSERT_TRUE(MakeDirs(root_ + "/ops/common").ok());
    ASSERT_TRUE(WriteFileAtomic(pkg_ + "/cuda/fake.cu",
                                "// compiled by the fake nvcc\n")
                    .ok());
    ASSERT_TRUE(
        WriteFileAtomic(root_ + "/ops/common/cuda_harness.cuh", "// harness\n")
            .ok());
    setenv("FAKE_NVCC_LOG", (root_ + "/nvcc.argv").c_str(), 1);
    setenv("FAKE_NCU_LOG", (root_ + "/ncu.argv").c_str(), 1);
    unsetenv("FAKE_NCU_FAIL");

    op_.set_name("fakeop");
    op_.set_package_dir(pkg_);
    op_.mutable_tolerances()->set_rtol(1e-5);
    op_.mutable_tolerances()->set_atol(1e-6);
    v1::BackendEntry& e = (*op_.mutable_backends())["cuda"];
    e.add_sources("cuda/fake.cu");
    e.set_compiler(FakeTool());
    e.add_flags("-O3");
    e.add_flags("-arch={arch}");

    gpu_ = ParseNvidiaSmiGpus(kSmiSample).value()[1];
    options_.agent_id = "agent-t";
    options_.work_root = root_ + "/work";
    options_.cache_dir = root_ + "/cache";
    options_.ncu = FakeTool();
  }
  void TearDown() override { (void)RemoveAll(root_); }

  v1::WorkItem Work(const std::string& mode, int64_t round) {
    v1::WorkItem w;
    w.set_sweep_id("sw-1");
    w.set_round_id(round);
    w.set_epoch(1);
    *w.mutable_operator_() = op_;
    w.mutable_workload()->set_name("tiny");
    w.mutable_workload()->set_dtype("fp32");
    (*w.mutable_workload()->mutable_dims())["n"] = 64;
    v1::ParamValue v;
    v.set_string_value(mode);
    (*w.mutable_params())["mode"] = v;
    w.mutable_measurement()->set_warmup(2);
    w.mutable_measurement()->set_samples(5);
    w.set_seed(7);
    return w;
  }

  Evaluation Eval(const std::string& mode, int64_t round = 1) {
    std::unique_ptr<Board> board =
        NewCudaBoard(options_, gpu_, *LookupGpuSpec(gpu_.name));
    std::atomic<bool> cancel{false};
    absl::StatusOr<Evaluation> e = board->Evaluate(Work(mode, round), cancel);
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? *std::move(e) : Evaluation{};
  }

  std::string RunDir(int64_t round) const {
    return absl::StrCat(options_.work_root, "/cuda1/sw-1/round_", round,
                        "/epoch_1");
  }

  std::string root_, pkg_;
  v1::OperatorManifest op_;
  GpuInfo gpu_;
  CudaBoardOptions options_;
};

TEST_F(FakeCudaBoardTest, InfoDescribesTheGpu) {
  std::unique_ptr<Board> board =
      NewCudaBoard(options_, gpu_, *LookupGpuSpec(gpu_.name));
  const v1::BoardInfo& info = board->info();
  EXPECT_EQ(info.board_id(), "agent-t/cuda1");
  EXPECT_EQ(info.kind(), "cuda");
  EXPECT_EQ(info.chip(), "H200");
  EXPECT_FALSE(info.simulated());
  EXPECT_EQ(board->info().capabilities().extra().at("nvcc_arch"), "sm_90a");
  EXPECT_TRUE(
      absl::StrContains(info.health_detail(), "gpu 1 NVIDIA H200: 29.0 C"))
      << info.health_detail();
  EXPECT_NEAR(info.capabilities().peak_tflops(), 66.9, 0.1);
}

TEST_F(FakeCudaBoardTest, OkVariantRunsEveryStageOnItsGpu) {
  Evaluation e = Eval("ok");
  ASSERT_EQ(e.result.outcome(), v1::OUTCOME_OK) << e.result.detail();
  EXPECT_TRUE(e.result.precision().passed());
  EXPECT_EQ(e.result.measurement().samples(), 5);
  EXPECT_EQ(e.result.measurement().warmup(), 2);
  EXPECT_FALSE(e.result.measurement().simulated());
  EXPECT_GT(e.result.measurement().median_us(), 99.0);
  EXPECT_TRUE(absl::StrContains(e.result.measurement().policy(), "L2 flushed"));
  EXPECT_TRUE(
      absl::StrContains(e.result.measurement().policy(), "device=\"fake\""));

  // nvcc argv: the generated header, the harness include dir, "{arch}" filled.
  const std::string nvcc = ReadFile(root_ + "/nvcc.argv").value();
  EXPECT_TRUE(absl::StrContains(nvcc, "-include\n")) << nvcc;
  EXPECT_TRUE(absl::StrContains(nvcc, "-arch=sm_90a\n")) << nvcc;
  EXPECT_TRUE(absl::StrContains(nvcc, "/ops/common\n")) << nvcc;
  EXPECT_TRUE(absl::StrContains(nvcc, pkg_ + "/cuda/fake.cu\n")) << nvcc;

  // Isolation: the stage saw only its GPU, by UUID, in PCI order.
  const std::string env = ReadFile(RunDir(1) + "/run/env.txt").value();
  EXPECT_TRUE(absl::StrContains(env, "CUDA_VISIBLE_DEVICES=" + gpu_.uuid))
      << env;
  EXPECT_TRUE(absl::StrContains(env, "CUDA_DEVICE_ORDER=PCI_BUS_ID")) << env;

  // Profile: ncu ran with the recipe and both exports are in the bundle.
  const std::string ncu = ReadFile(root_ + "/ncu.argv").value();
  EXPECT_TRUE(absl::StrContains(ncu, "--clock-control\nnone\n")) << ncu;
  EXPECT_TRUE(absl::StrContains(ncu, "--stage\nprofile\n")) << ncu;
  ASSERT_TRUE(e.bundle.has_value());
  EXPECT_EQ(e.bundle->profiler(), "ncu");
  EXPECT_EQ(e.bundle->board_kind(), "cuda");
  std::vector<std::string> paths;
  for (const auto& f : e.bundle->files()) paths.push_back(f.path());
  EXPECT_NE(std::find(paths.begin(), paths.end(), "ncu/raw.csv"), paths.end());
  EXPECT_NE(std::find(paths.begin(), paths.end(), "ncu/details.csv"),
            paths.end());
  EXPECT_NE(std::find(paths.begin(), paths.end(), "timing_note.txt"),
            paths.end());
  EXPECT_EQ(std::find(paths.begin(), paths.end(), "ncu_unavailable.txt"),
            paths.end());

  // Same variant again: the build comes from the cache.
  Evaluation again = Eval("ok", 2);
  ASSERT_EQ(again.result.outcome(), v1::OUTCOME_OK);
  EXPECT_TRUE(absl::StrContains(again.result.detail(), "build cache hit"))
      << again.result.detail();
}

// The reference depends on the operator's build inputs, the workload and
// the seed, never on the variant: it is computed once and reused from the
// board's cache (it costs seconds per round on a large workload), and a
// wrong variant still fails against the cached one.
TEST_F(FakeCudaBoardTest, ReferenceIsComputedOncePerWorkloadAndSeed) {
  auto reference_entries = [&] {
    int n = 0;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(
             options_.cache_dir + "/reference", ec)) {
      n += std::filesystem::is_regular_file(e.path() / "reference.bin") ? 1 : 0;
    }
    return n;
  };
  Evaluation first = Eval("ok", 1);
  ASSERT_EQ(first.result.outcome(), v1::OUTCOME_OK) << first.result.detail();
  EXPECT_TRUE(std::filesystem::exists(RunDir(1) + "/reference/reference.bin"));
  EXPECT_EQ(reference_entries(), 1);

  Evaluation other = Eval("other_variant", 2);
  ASSERT_EQ(other.result.outcome(), v1::OUTCOME_OK) << other.result.detail();
  EXPECT_TRUE(other.result.precision().passed());
  EXPECT_FALSE(
      std::filesystem::exists(RunDir(2) + "/reference"));  // not run again
  EXPECT_EQ(reference_entries(), 1);

  Evaluation wrong = Eval("unwritten", 3);
  EXPECT_EQ(wrong.result.outcome(), v1::OUTCOME_PRECISION_FAILED)
      << wrong.result.detail();
  EXPECT_FALSE(std::filesystem::exists(RunDir(3) + "/reference"));

  // Another seed is other inputs: its own reference.
  std::unique_ptr<Board> board =
      NewCudaBoard(options_, gpu_, *LookupGpuSpec(gpu_.name));
  std::atomic<bool> cancel{false};
  v1::WorkItem w = Work("ok", 4);
  w.set_seed(8);
  absl::StatusOr<Evaluation> reseeded = board->Evaluate(w, cancel);
  ASSERT_TRUE(reseeded.ok()) << reseeded.status();
  EXPECT_EQ(reseeded->result.outcome(), v1::OUTCOME_OK)
      << reseeded->result.detail();
  EXPECT_TRUE(std::filesystem::exists(RunDir(4) + "/reference/reference.bin"));
  EXPECT_EQ(reference_entries(), 2);
}

TEST_F(FakeCudaBoardTest, AbRunsTheParentBinaryAlternatelyInTheSameLease) {
  v1::WorkItem w = Work("ok", 3);
  w.set_has_reference(true);
  w.set_reference_round(1);
  v1::ParamValue parent_mode;
  parent_mode.set_string_value("ok_parent");
  (*w.mutable_reference_params())["mode"] = parent_mode;
  std::unique_ptr<Board> board =
      NewCudaBoard(options_, gpu_, *LookupGpuSpec(gpu_.name));
  std::atomic<bool> cancel{false};
  absl::StatusOr<Evaluation> e = board->Evaluate(w, cancel);
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_EQ(e->result.outcome(), v1::OUTCOME_OK) << e->result.detail();
  const v1::Measurement& m = e->result.measurement();
  ASSERT_TRUE(m.paired()) << m.policy();
  EXPECT_EQ(m.reference_round(), 1);
  EXPECT_GE(m.pairs(), 6);
  EXPECT_EQ(m.reference().samples(), m.samples());
  EXPECT_FALSE(m.simulated());
  // The stand-in times both variants alike: no gain, and the bound says so.
  EXPECT_NEAR(m.gain(), 0, 1e-9);
  EXPECT_LE(m.gain_lower(), 0);
  EXPECT_TRUE(absl::StrContains(m.policy(), "A/B")) << m.policy();
  EXPECT_TRUE(absl::StrContains(m.policy(), "L2 flushed")) << m.policy();
  EXPECT_TRUE(absl::StrContains(m.policy(), "device=\"fake\"")) << m.policy();
  // The parent is its own build (its params compiled in), run from its own
  // folder with its params, on the same GPU.
  const std::string parent = RunDir(3) + "/parent";
  EXPECT_TRUE(absl::StrContains(ReadFile(parent + "/params.json").value(),
                                "ok_parent"));
  const std::string env = ReadFile(parent + "/run_1/env.txt").value();
  EXPECT_TRUE(absl::StrContains(env, "CUDA_VISIBLE_DEVICES=" + gpu_.uuid))
      << env;
  EXPECT_TRUE(ReadFile(RunDir(3) + "/run_1/timing_us.txt").ok());

  // A parent that no longer builds: the candidate is timed alone, saying why.
  parent_mode.set_string_value("build_error");
  (*w.mutable_reference_params())["mode"] = parent_mode;
  w.set_round_id(4);
  e = board->Evaluate(w, cancel);
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_EQ(e->result.outcome(), v1::OUTCOME_OK) << e->result.detail();
  EXPECT_FALSE(e->result.measurement().paired());
  EXPECT_TRUE(absl::StrContains(e->result.measurement().policy(),
                                "parent variant did not build here"))
      << e->result.measurement().policy();
}

TEST_F(FakeCudaBoardTest, CompileErrorIsBuildFailedWithTheMessage) {
  Evaluation e = Eval("build_error");
  EXPECT_EQ(e.result.outcome(), v1::OUTCOME_BUILD_FAILED);
  EXPECT_TRUE(
      absl::StrContains(e.result.detail(), "exceed the CUDA limit of 1024"))
      << e.result.detail();
  EXPECT_TRUE(absl::StrContains(e.result.detail(), "sm_90a"))
      << e.result.detail();
}

TEST_F(FakeCudaBoardTest, VariantTheWorkloadCannotUseIsBuildFailed) {
  Evaluation e = Eval("bad_workload");
  EXPECT_EQ(e.result.outcome(), v1::OUTCOME_BUILD_FAILED);
  EXPECT_TRUE(absl::StrContains(e.result.detail(), "not a multiple of block_m"))
      << e.result.detail();
}

TEST_F(FakeCudaBoardTest, CrashIsRunCrashedWithTheSignal) {
  Evaluation e = Eval("crash");
  EXPECT_EQ(e.result.outcome(), v1::OUTCOME_RUN_CRASHED);
  EXPECT_TRUE(absl::StrContains(e.result.detail(), "SIGSEGV"))
      << e.result.detail();
}

TEST_F(FakeCudaBoardTest, UnwrittenOutputNeverPasses) {
  Evaluation e = Eval("unwritten");
  EXPECT_EQ(e.result.outcome(), v1::OUTCOME_PRECISION_FAILED);
  EXPECT_EQ(e.result.precision().nan_count(), 32);
}

TEST_F(FakeCudaBoardTest, FailingNcuIsAnEvidenceGapNotAFailedVariant) {
  setenv("FAKE_NCU_FAIL", "1", 1);
  Evaluation e = Eval("ok");
  unsetenv("FAKE_NCU_FAIL");
  ASSERT_EQ(e.result.outcome(), v1::OUTCOME_OK) << e.result.detail();
  EXPECT_TRUE(absl::StrContains(e.result.detail(), "no profile"))
      << e.result.detail();
  ASSERT_TRUE(e.bundle.has_value());
  bool gap = false;
  for (const auto& f : e.bundle->files()) {
    if (f.path() == "ncu_unavailable.txt") {
      gap = true;
      EXPECT_TRUE(absl::StrContains(f.content(), "LibraryNotLoaded"))
          << f.content();
    }
  }
  EXPECT_TRUE(gap);
}

TEST_F(FakeCudaBoardTest, MissingNcuIsAnEvidenceGap) {
  options_.ncu = root_ + "/no-such-ncu";
  options_.profile = false;
  Evaluation e = Eval("ok");
  ASSERT_EQ(e.result.outcome(), v1::OUTCOME_OK) << e.result.detail();
  ASSERT_TRUE(e.bundle.has_value());
  bool gap = false;
  for (const auto& f : e.bundle->files())
    gap |= f.path() == "ncu_unavailable.txt";
  EXPECT_TRUE(gap);
}

TEST_F(FakeCudaBoardTest, PrefetchedBuildIsACacheHit) {
  std::unique_ptr<Board> board =
      NewCudaBoard(options_, gpu_, *LookupGpuSpec(gpu_.name));
  std::atomic<bool> cancel{false};
  ASSERT_TRUE(board->Prefetch(Work("ok", 3), cancel).ok());
  // Evaluate finds the build in the cache: the variant builds once.
  absl::StatusOr<Evaluation> e = board->Evaluate(Work("ok", 3), cancel);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->result.outcome(), v1::OUTCOME_OK) << e->result.detail();
  EXPECT_TRUE(absl::StrContains(e->result.detail(), "build cache hit"))
      << e->result.detail();
  int entries = 0;
  for (const auto& d : fs::directory_iterator(options_.cache_dir))
    entries += d.is_directory();
  EXPECT_GE(entries, 1);
}

// The persistent runner: the variant is built as a shared object (the fake
// nvcc writes cuda_fake_variant for -shared) and every stage but ncu's runs
// in one runner process, started once for several rounds (A/B included)
// with the GPU's isolation environment; ncu profiles it through
// `tunefarm-variant-runner --exec`.
TEST_F(FakeCudaBoardTest, RunnerServesEveryRoundFromOneProcess) {
  options_.runner_binary = RunnerBin();
  std::unique_ptr<Board> board =
      NewCudaBoard(options_, gpu_, *LookupGpuSpec(gpu_.name));
  std::atomic<bool> cancel{false};
  const int64_t starts0 = TotalVariantRunnerStarts();
  for (int round = 1; round <= 3; ++round) {
    v1::WorkItem w = Work("ok", round);
    if (round == 3) {
      w.set_has_reference(true);
      w.set_reference_round(2);
      v1::ParamValue v;
      v.set_string_value("parent");
      (*w.mutable_reference_params())["mode"] = v;
    }
    absl::StatusOr<Evaluation> e = board->Evaluate(w, cancel);
    ASSERT_TRUE(e.ok()) << e.status();
    ASSERT_EQ(e->result.outcome(), v1::OUTCOME_OK) << e->result.detail();
    EXPECT_TRUE(e->result.precision().passed());
    EXPECT_EQ(e->result.runner_starts(), round == 1 ? 1 : 0);
    EXPECT_TRUE(absl::StrContains(e->result.measurement().policy(),
                                  "in the board's persistent runner"))
        << e->result.measurement().policy();
    if (round == 3) {
      EXPECT_TRUE(e->result.measurement().paired());
    }
  }
  EXPECT_EQ(TotalVariantRunnerStarts() - starts0, 1);
  const std::string nvcc = ReadFile(root_ + "/nvcc.argv").value();
  EXPECT_TRUE(absl::StrContains(nvcc, "-shared\n")) << nvcc;
  EXPECT_TRUE(absl::StrContains(nvcc, "-Dmain=tf_variant_main\n")) << nvcc;
  const std::string env = ReadFile(RunDir(1) + "/run/env.txt").value();
  EXPECT_TRUE(absl::StrContains(env, "CUDA_VISIBLE_DEVICES=" + gpu_.uuid))
      << env;
  EXPECT_TRUE(absl::StrContains(env, "runner_run_stages=1\n")) << env;
  // The runner's state slots outlive a stage and a variant: round 3's
  // candidate (a build of its own) sees every run stage before it, its
  // parent's A/B blocks included.
  const std::string env3 = ReadFile(RunDir(3) + "/run/env.txt").value();
  std::string count;
  for (absl::string_view line : absl::StrSplit(env3, '\n')) {
    if (absl::ConsumePrefix(&line, "runner_run_stages="))
      count = std::string(line);
  }
  int runs = 0;
  ASSERT_TRUE(absl::SimpleAtoi(count, &runs)) << env3;
  EXPECT_GT(runs, 2) << env3;
  const std::string ncu = ReadFile(root_ + "/ncu.argv").value();
  EXPECT_TRUE(absl::StrContains(ncu, RunnerBin() + "\n--exec\n")) << ncu;
}

// A variant that crashes the runner is RUN_CRASHED with the signal, as in
// the per-process mode; the next round gets a fresh runner and passes.
TEST_F(FakeCudaBoardTest, CrashInTheRunnerIsTypedAndTheRunnerRestarts) {
  options_.runner_binary = RunnerBin();
  std::unique_ptr<Board> board =
      NewCudaBoard(options_, gpu_, *LookupGpuSpec(gpu_.name));
  std::atomic<bool> cancel{false};
  absl::StatusOr<Evaluation> crash = board->Evaluate(Work("crash", 1), cancel);
  ASSERT_TRUE(crash.ok()) << crash.status();
  EXPECT_EQ(crash->result.outcome(), v1::OUTCOME_RUN_CRASHED)
      << crash->result.detail();
  EXPECT_TRUE(absl::StrContains(crash->result.detail(), "SIGSEGV"))
      << crash->result.detail();
  absl::StatusOr<Evaluation> ok = board->Evaluate(Work("ok", 2), cancel);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->result.outcome(), v1::OUTCOME_OK) << ok->result.detail();
  EXPECT_EQ(ok->result.runner_starts(), 1);
}

TEST_F(FakeCudaBoardTest, DiscoveryMakesOneBoardPerGpu) {
  options_.nvidia_smi = FakeTool();
  absl::StatusOr<std::vector<std::unique_ptr<Board>>> boards =
      DiscoverCudaBoards(options_);
  ASSERT_TRUE(boards.ok()) << boards.status();
  ASSERT_EQ(boards->size(), 2u);
  EXPECT_EQ((*boards)[0]->info().board_id(), "agent-t/cuda0");
  EXPECT_EQ((*boards)[1]->info().board_id(), "agent-t/cuda1");

  options_.gpu_indices = {1};
  boards = DiscoverCudaBoards(options_);
  ASSERT_TRUE(boards.ok()) << boards.status();
  ASSERT_EQ(boards->size(), 1u);
  EXPECT_EQ((*boards)[0]->info().board_id(), "agent-t/cuda1");

  options_.gpu_indices = {5};
  boards = DiscoverCudaBoards(options_);
  ASSERT_FALSE(boards.ok());
  EXPECT_TRUE(
      absl::StrContains(boards.status().message(), "no GPU with index 5"))
      << boards.status();

  options_.nvidia_smi = root_ + "/no-such-nvidia-smi";
  boards = DiscoverCudaBoards(options_);
  EXPECT_TRUE(absl::IsNotFound(boards.status())) << boards.status();
}

// ----- on a real GPU
// ------------------------------------------------------------

class RealGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::vector<GpuInfo>> gpus = QueryGpus();
    if (!gpus.ok())
      GTEST_SKIP() << "no NVIDIA GPU here: " << gpus.status().message();
    if (gpus->empty()) GTEST_SKIP() << "nvidia-smi lists no GPU";
    root_ = MakeTempDir("cuda-real").value();
    options_.agent_id = "agent-gpu";
    options_.work_root = root_ + "/work";
    options_.cache_dir = root_ + "/cache";
    options_.gpu_indices = {(*gpus)[0].index};
    options_.runner_binary = RunnerBin();
    absl::StatusOr<std::vector<std::unique_ptr<Board>>> boards =
        DiscoverCudaBoards(options_);
    ASSERT_TRUE(boards.ok()) << boards.status();
    board_ = std::move((*boards)[0]);
  }
  void TearDown() override {
    if (!root_.empty()) (void)RemoveAll(root_);
  }

  v1::WorkItem Work(const std::string& op_name,
                    std::map<std::string, int64_t> dims,
                    std::map<std::string, int64_t> overrides) {
    absl::StatusOr<v1::OperatorManifest> op =
        LoadOperatorManifest(SourceDir() + "/ops/" + op_name);
    EXPECT_TRUE(op.ok()) << op.status();
    v1::WorkItem w;
    w.set_sweep_id("gpu-test");
    w.set_round_id(++round_);
    w.set_epoch(1);
    if (!op.ok()) return w;
    *w.mutable_operator_() = *op;
    w.mutable_workload()->set_name("test");
    w.mutable_workload()->set_dtype("fp32");
    for (const auto& [k, v] : dims)
      (*w.mutable_workload()->mutable_dims())[k] = v;
    for (const v1::ParameterDomain& p : op->parameters()) {
      const bool cuda = p.backends().empty() ||
                        std::find(p.backends().begin(), p.backends().end(),
                                  "cuda") != p.backends().end();
      if (cuda) (*w.mutable_params())[p.name()] = p.default_value();
    }
    for (const auto& [k, v] : overrides) (*w.mutable_params())[k] = IntParam(v);
    w.mutable_measurement()->set_warmup(3);
    w.mutable_measurement()->set_samples(10);
    w.set_seed(11);
    return w;
  }

  std::string root_;
  CudaBoardOptions options_;
  std::unique_ptr<Board> board_;
  int64_t round_ = 0;
};

TEST_F(RealGpuTest, GemmDefaultVariantPassesAndIsTimed) {
  std::atomic<bool> cancel{false};
  absl::StatusOr<Evaluation> e = board_->Evaluate(
      Work("gemm", {{"m", 1024}, {"n", 1024}, {"k", 1024}}, {}), cancel);
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_EQ(e->result.outcome(), v1::OUTCOME_OK) << e->result.detail();
  EXPECT_TRUE(e->result.precision().passed());
  EXPECT_EQ(e->result.precision().nan_count(), 0);
  EXPECT_GT(e->result.measurement().median_us(), 1.0);
  EXPECT_FALSE(e->result.measurement().simulated());
  ASSERT_TRUE(e->bundle.has_value());
  for (const auto& f : e->bundle->files()) {
    if (f.path() != "ncu/raw.csv") continue;
    absl::StatusOr<CsvTable> t =
        ParseCsv(NcuCsvRecords(f.content()), "raw.csv");
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_TRUE(t->Column({"gpu__time_duration.sum"}).has_value());
    EXPECT_TRUE(absl::StrContains(
        std::string(t->Cell(t->rows.size() - 1, t->Column({"Kernel Name"}))),
        "GemmKernel"));
  }
}

// On the GPU: variants loaded into one runner (one CUDA context) pass and
// are timed like the per-process ones; the runner starts once for both.
TEST_F(RealGpuTest, RunnerAndProcessModesAgreeAndTheRunnerIsReused) {
  std::atomic<bool> cancel{false};
  const std::map<std::string, int64_t> dims = {
      {"m", 1024}, {"n", 1024}, {"k", 1024}};
  const int64_t starts0 = TotalVariantRunnerStarts();
  double runner_us = 0;
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<Evaluation> e = board_->Evaluate(
        Work("gemm", dims, {{"vec_width", i == 0 ? 1 : 4}}), cancel);
    ASSERT_TRUE(e.ok()) << e.status();
    ASSERT_EQ(e->result.outcome(), v1::OUTCOME_OK) << e->result.detail();
    EXPECT_TRUE(e->result.precision().passed());
    EXPECT_TRUE(absl::StrContains(e->result.measurement().policy(),
                                  "persistent runner"));
    if (i == 0) runner_us = e->result.measurement().median_us();
  }
  EXPECT_EQ(TotalVariantRunnerStarts() - starts0, 1);
  v1::WorkItem w = Work("gemm", dims, {{"vec_width", 1}});
  w.mutable_measurement()->set_isolation(v1::ISOLATION_PROCESS);
  absl::StatusOr<Evaluation> p = board_->Evaluate(w, cancel);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->result.outcome(), v1::OUTCOME_OK) << p->result.detail();
  EXPECT_TRUE(p->result.precision().passed());
  EXPECT_TRUE(absl::StrContains(p->result.measurement().policy(),
                                "one process per stage"));
  // The same kernel, timed the same way: the medians agree within 20%.
  EXPECT_NEAR(p->result.measurement().median_us(), runner_us, 0.2 * runner_us);
}

// On the GPU: in an A/B round the runner's device stays warm between
// blocks, so a block of a variant timed before in the runner skips the
// untimed first launch (the harness says so in its timing note), and the
// round still passes and pairs.
TEST_F(RealGpuTest, WarmRunnerBlocksSkipTheUntimedFirstLaunch) {
  std::atomic<bool> cancel{false};
  v1::WorkItem w =
      Work("gemm", {{"m", 1024}, {"n", 1024}, {"k", 1024}}, {{"vec_width", 4}});
  w.set_has_reference(true);
  w.set_reference_round(1);
  w.mutable_reference_params()->insert(w.params().begin(), w.params().end());
  (*w.mutable_reference_params())["vec_width"] = IntParam(1);
  absl::StatusOr<Evaluation> e = board_->Evaluate(w, cancel);
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_EQ(e->result.outcome(), v1::OUTCOME_OK) << e->result.detail();
  ASSERT_TRUE(e->result.measurement().paired())
      << e->result.measurement().policy();
  ASSERT_GE(e->result.measurement().pairs(), 2);
  int skipped = 0, notes = 0;
  for (const auto& entry :
       std::filesystem::recursive_directory_iterator(options_.work_root)) {
    if (entry.path().filename() != "timing_note.txt") continue;
    ++notes;
    const std::string note = ReadFile(entry.path().string()).value();
    if (absl::StrContains(note, "first_launch=skipped")) {
      ++skipped;
      EXPECT_TRUE(absl::StrContains(note, "warm_start=yes")) << note;
    }
  }
  EXPECT_GE(notes, 3);
  EXPECT_GE(skipped, 1) << notes << " timing notes, none skipped";
}

TEST_F(RealGpuTest, GemmVariantOverThreadLimitFailsTheBuild) {
  std::atomic<bool> cancel{false};
  // 256/4 x 256/4 = 4096 threads per block.
  absl::StatusOr<Evaluation> e =
      board_->Evaluate(Work("gemm", {{"m", 1024}, {"n", 1024}, {"k", 1024}},
                            {{"block_m", 256},
                             {"block_n", 256},
                             {"thread_m", 4},
                             {"thread_n", 4}}),
                       cancel);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->result.outcome(), v1::OUTCOME_BUILD_FAILED)
      << e->result.detail();
  EXPECT_TRUE(absl::StrContains(e->result.detail(), "1024"))
      << e->result.detail();
}

TEST_F(RealGpuTest, SoftmaxDefaultVariantPasses) {
  std::atomic<bool> cancel{false};
  absl::StatusOr<Evaluation> e = board_->Evaluate(
      Work("softmax", {{"rows", 1024}, {"cols", 4096}}, {}), cancel);
  ASSERT_TRUE(e.ok()) << e.status();
  ASSERT_EQ(e->result.outcome(), v1::OUTCOME_OK) << e->result.detail();
  EXPECT_TRUE(e->result.precision().passed());
  EXPECT_GT(e->result.measurement().median_us(), 0.5);
}

}  // namespace
}  // namespace tunefarm
