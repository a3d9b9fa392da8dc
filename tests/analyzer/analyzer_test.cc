#include "analyzer/analyzer.h"

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/files.h"
#include "common/params.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/analyzer/test_bundles.h"

namespace tunefarm {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::tunefarm::testing::AddFixtureFiles;
using ::tunefarm::testing::FixtureDir;
using ::tunefarm::testing::MsprofRealBundle;
using ::tunefarm::testing::TorchNpuRealBundle;

// op_statistic read independently of analyzer/csv (its cells hold no
// quotes): OP Type -> {column -> cell}.
std::map<std::string, std::map<std::string, std::string>> ReadOpStatistic(
    const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  EXPECT_TRUE(text.ok()) << text.status();
  std::vector<std::string> lines =
      absl::StrSplit(text.value_or(""), '\n', absl::SkipEmpty());
  std::vector<std::string> header = absl::StrSplit(lines.at(0), ',');
  std::map<std::string, std::map<std::string, std::string>> out;
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string> cells = absl::StrSplit(lines[i], ',');
    std::map<std::string, std::string> row;
    for (size_t c = 0; c < header.size() && c < cells.size(); ++c) {
      row[header[c]] = cells[c];
    }
    out[row["OP Type"]] = row;
  }
  return out;
}

TEST(AnalyzeTest, MsprofRealHotspotMatchesOpStatistic) {
  v1::ProfileBundle bundle = MsprofRealBundle();
  // The round's parameters name block_dim: moves on it are named (a
  // parameter the round lacks is said in words only).
  (*bundle.mutable_params())["block_dim"] = IntParam(4);
  v1::Diagnosis d = Analyze(bundle);

  auto stat =
      ReadOpStatistic(FixtureDir("helix_msprof_real/mindstudio_profiler_output/"
                                 "op_statistic_20260511093035.csv"));
  ASSERT_EQ(stat.count("matmul_kernel"), 1u);
  const double want_total = std::stod(stat["matmul_kernel"]["Total Time(us)"]);
  EXPECT_DOUBLE_EQ(want_total, 30.144);  // as read in the fixture
  double all_types = 0;
  for (auto& [type, row] : stat) all_types += std::stod(row["Total Time(us)"]);

  ASSERT_EQ(d.hotspots_size(), 3);
  const v1::Hotspot& h = d.hotspots(0);
  EXPECT_EQ(h.op_name(), "matmul_kernel");
  EXPECT_EQ(h.op_type(), "matmul_kernel");
  EXPECT_EQ(h.core_type(), "AI_CORE");
  EXPECT_NEAR(h.duration_us(), want_total, 1e-9);
  EXPECT_EQ(h.count(), std::stoi(stat["matmul_kernel"]["Count"]));
  EXPECT_NEAR(d.total_device_us(), all_types, 1e-9);
  EXPECT_NEAR(100 * h.share(), std::stod(stat["matmul_kernel"]["Ratio(%)"]),
              1e-3);
  // The others follow, largest first, named by their launch name.
  EXPECT_EQ(d.hotspots(1).op_type(), "Cast");
  EXPECT_EQ(d.hotspots(1).op_name(), "aclnnInplaceNormal_CastAiCore_Cast");
  EXPECT_NEAR(d.hotspots(1).duration_us(),
              std::stod(stat["Cast"]["Total Time(us)"]), 1e-9);
  EXPECT_EQ(d.hotspots(2).op_type(), "DSARandomNormal");
  EXPECT_EQ(d.hotspots(2).core_type(), "DSA_SQE");

  // Tiny 32x32 matmul: aic_mac_ratio about 0.015, aic_mte2_ratio about 0.42 —
  // no pipe is busy, the time is latency; and 4 blocks on 24 cube cores.
  EXPECT_EQ(d.bound(), "latency");
  ASSERT_GE(d.suggestions_size(), 1);  // high severity first
  EXPECT_EQ(d.suggestions(0).parameter(), "block_dim");
  EXPECT_EQ(d.suggestions(0).direction(), "raise");
  EXPECT_EQ(d.suggestions(0).value().int_value(), 24);
  EXPECT_THAT(d.suggestions(0).evidence(), HasSubstr("Block Dim=4"));
  EXPECT_THAT(d.suggestions(0).evidence(), HasSubstr("op_summary_"));
  // The one gap: the msprof timeline's launches all start before their
  // launch call returns (median delay negative), explained.
  ASSERT_EQ(d.evidence_gaps_size(), 1);
  EXPECT_THAT(d.evidence_gaps(0).reason(),
              HasSubstr("median launch delay is negative"));

  EXPECT_EQ(d.bundle_id(), "bundle-msprof");
  EXPECT_EQ(d.sweep_id(), "sweep-1");
  EXPECT_EQ(d.round_id(), 3);
  EXPECT_EQ(d.epoch(), 7);
  EXPECT_FALSE(d.simulated());

  const std::string& md = d.perf_analysis_md();
  EXPECT_THAT(md, HasSubstr("# Round Performance Analysis"));
  EXPECT_THAT(md, HasSubstr("## Executive Summary"));
  EXPECT_THAT(md, HasSubstr("## Profile Signals"));
  EXPECT_THAT(md, HasSubstr("### Hotspots"));
  EXPECT_THAT(md, HasSubstr("## Evidence Gaps"));
  EXPECT_THAT(md, HasSubstr("`matmul_kernel`"));
  EXPECT_THAT(md, HasSubstr("30.144 us"));
  EXPECT_THAT(md, HasSubstr("74.2 %"));
  EXPECT_THAT(md, HasSubstr("PROF_000001_20260511093035/"
                            "mindstudio_profiler_output/"
                            "op_summary_20260511093035.csv"));
  EXPECT_THAT(md, HasSubstr("Task Duration(us)"));
  EXPECT_THAT(md, HasSubstr("op_statistic_20260511093035.csv"));  // cross-check
  EXPECT_THAT(md, HasSubstr("board `agent-a/npu0` (ascend, Ascend910B2)"));
  EXPECT_THAT(md, ::testing::Not(HasSubstr("(simulated)")));
}

TEST(AnalyzeTest, TorchNpuRealIsMemoryBound) {
  v1::ProfileBundle bundle = TorchNpuRealBundle();
  (*bundle.mutable_params())["buffer_count"] = IntParam(2);
  v1::Diagnosis d = Analyze(bundle);

  auto stat = ReadOpStatistic(FixtureDir(
      "helix_torch_npu_real/ASCEND_PROFILER_OUTPUT/op_statistic.csv"));
  ASSERT_EQ(d.hotspots_size(), 1);
  const v1::Hotspot& h = d.hotspots(0);
  EXPECT_EQ(h.op_name(), "matmul_kernel");
  EXPECT_NEAR(h.duration_us(),
              std::stod(stat["matmul_kernel"]["Total Time(us)"]), 1e-6);
  EXPECT_EQ(h.count(), std::stoi(stat["matmul_kernel"]["Count"]));
  EXPECT_DOUBLE_EQ(h.share(), 1.0);
  EXPECT_EQ(h.core_type(), "AI_CORE");  // from "Accelerator Core"

  // aic_mte2_ratio about 0.909 against aic_mac_ratio about 0.073.
  EXPECT_EQ(d.bound(), "memory");
  ASSERT_GE(d.suggestions_size(), 1);
  EXPECT_EQ(d.suggestions(0).parameter(), "buffer_count");
  EXPECT_EQ(d.suggestions(0).direction(), "raise");
  EXPECT_EQ(d.suggestions(0).value().int_value(), 4);
  EXPECT_THAT(d.suggestions(0).evidence(), HasSubstr("aic_mte2_ratio=0.9"));
  EXPECT_THAT(d.suggestions(0).evidence(), HasSubstr("aic_mac_ratio=0.07"));
  EXPECT_THAT(d.suggestions(0).evidence(), HasSubstr("kernel_details.csv"));
  // Block Dim 256 on 24 cores: no under-fill, but 256 % 24 = 16 leaves
  // a partial last wave (msprof-analyze BlockDimChecker): set 240.
  for (const v1::Suggestion& s : d.suggestions()) {
    if (s.parameter() != "block_dim") continue;
    EXPECT_EQ(s.direction(), "set");
    EXPECT_EQ(s.value().int_value(), 240);
  }
  EXPECT_EQ(d.operator_type(), "cube");
  EXPECT_THAT(d.perf_analysis_md(), HasSubstr("Duration(us)"));
  EXPECT_THAT(d.perf_analysis_md(), HasSubstr("### Pipeline Ratios"));
}

TEST(AnalyzeTest, KernelDetailsPreferredOverOpSummary) {
  // torch_npu writes a PROF_*/ op_summary too; kernel_details wins.
  v1::ProfileBundle bundle = TorchNpuRealBundle();
  AddFixtureFiles("helix_msprof_real", "PROF_1/", bundle);
  v1::Diagnosis d = Analyze(bundle);
  ASSERT_GE(d.hotspots_size(), 1);
  EXPECT_EQ(d.hotspots(0).count(), 10);  // the torch table, not msprof's 5
}

TEST(AnalyzeTest, CrlfKernelDetailsWithHcclTasks) {
  // msinsight Level1: CRLF lines, no Device_id; values read from the file.
  // Its four hcom_allReduce ops (105991.876 us of the 114865.613 us) are
  // communication: listed apart, not as compute hotspots.
  v1::ProfileBundle bundle;
  AddFixtureFiles("msinsight_torch_npu_level1", "rank0_ascend_pt/", bundle);
  v1::Diagnosis d = Analyze(bundle);
  ASSERT_GE(d.hotspots_size(), 2);
  EXPECT_EQ(d.hotspots(0).op_name(),
            "aclnnForeachAddListV2_ForeachAddListV2_ForeachAddList");
  EXPECT_EQ(d.hotspots(0).core_type(), "AI_VECTOR_CORE");
  EXPECT_NEAR(d.hotspots(0).duration_us(), 1959.079, 1e-6);
  EXPECT_NEAR(d.total_device_us(), 114865.613 - 105991.876, 1e-3);
  EXPECT_NEAR(d.hotspots(0).share(), 1959.079 / 8873.737, 1e-6);
  EXPECT_EQ(d.hotspots_size(), kMaxHotspots);
  for (int i = 0; i < d.hotspots_size(); ++i) {
    EXPECT_THAT(d.hotspots(i).op_name(), ::testing::Not(HasSubstr("hcom")));
    if (i > 0) {
      EXPECT_GE(d.hotspots(i - 1).duration_us(), d.hotspots(i).duration_us());
    }
  }
  EXPECT_THAT(d.perf_analysis_md(),
              HasSubstr("Communication (HCCL) ops, 105991.876 us, excluded"));
  EXPECT_THAT(d.perf_analysis_md(),
              HasSubstr("- `hcom_allReduce__586_0_1` (HCCL): 79089.520 us"));
}

TEST(AnalyzeTest, UbOverflowInBuildLogLowersTheLargestTile) {
  v1::ProfileBundle bundle = MsprofRealBundle();
  (*bundle.mutable_params())["tile_m"] = IntParam(64);
  (*bundle.mutable_params())["tile_n"] = IntParam(256);
  v1::ProfileFile* log = bundle.add_files();
  log->set_path("build/build.log");
  log->set_content(
      "compiling kernel.cpp\n"
      "error: UB overflow: req 262400 > 196608 (tile buffers)\n");
  v1::Diagnosis d = Analyze(bundle);
  const v1::Suggestion* ub = nullptr;
  for (const v1::Suggestion& s : d.suggestions()) {
    if (absl::StartsWith(s.rule(), "mem.ub_overflow")) ub = &s;
  }
  ASSERT_NE(ub, nullptr) << d.perf_analysis_md();
  EXPECT_EQ(d.suggestions(0).rule(), ub->rule());  // high severity first
  EXPECT_EQ(ub->parameter(), "tile_n");
  EXPECT_EQ(ub->direction(), "lower");
  EXPECT_EQ(ub->value().int_value(), 128);  // halved: 196608/262400 > 0.5
  EXPECT_THAT(ub->evidence(), HasSubstr("`build/build.log`"));
  EXPECT_THAT(ub->evidence(), HasSubstr("262400"));
  EXPECT_THAT(ub->evidence(), HasSubstr("196608"));
  EXPECT_THAT(d.perf_analysis_md(), HasSubstr("mem.ub_overflow"));

  // The KB form, and no move without an overflow.
  log->set_content("[ERROR] ub overflow, req ~390KB > 192KB\n");
  d = Analyze(bundle);
  bool fired = false;
  for (const v1::Bottleneck& b : d.bottlenecks()) {
    if (b.rule() == "mem.ub_overflow") {
      fired = true;
      EXPECT_THAT(b.evidence(), HasSubstr("399360"));
    }
  }
  EXPECT_TRUE(fired);
  log->set_content("UB usage: req 1000 > 0? no, fits\n");
  d = Analyze(bundle);
  for (const v1::Bottleneck& b : d.bottlenecks()) {
    EXPECT_NE(b.rule(), "mem.ub_overflow");
  }
}

TEST(AnalyzeTest, PyptoHotspotsGroupedByLeafHash) {
  v1::ProfileBundle bundle;
  absl::StatusOr<std::string> text = ReadFile(
      FixtureDir("pypto_swimlane_kaywang/merged_swimlane.timeline.json"));
  ASSERT_TRUE(text.ok()) << text.status();
  v1::ProfileFile* f = bundle.add_files();
  f->set_path("merged_swimlane.json");
  f->set_content(*text);
  v1::Diagnosis d = Analyze(bundle);
  ASSERT_GE(d.hotspots_size(), 2);
  int64_t tasks = 0;
  for (const v1::Hotspot& h : d.hotspots()) {
    EXPECT_TRUE(absl::StartsWith(h.op_name(), "leafHash:")) << h.op_name();
    EXPECT_THAT(h.op_type(), HasSubstr("e.g. task "));
    tasks += h.count();
  }
  // Leaf functions run as many tasks each: fewer groups than tasks.
  EXPECT_GT(tasks, d.hotspots_size());
  EXPECT_GT(d.hotspots(0).count(), 1);
}

TEST(AnalyzeTest, CorruptOpSummaryBecomesAGapNamingIt) {
  v1::ProfileBundle bundle;
  bundle.set_bundle_id("b-corrupt");
  v1::ProfileFile* f = bundle.add_files();
  f->set_path("PROF_9/mindstudio_profiler_output/op_summary_1.csv");
  f->set_content("Op Name,Task Duration(us)\nk,1.0\n\"k,2.0\n");
  v1::Diagnosis d = Analyze(bundle);
  EXPECT_EQ(d.hotspots_size(), 0);
  EXPECT_EQ(d.bound(), "unknown");
  ASSERT_GE(d.evidence_gaps_size(), 1);
  EXPECT_EQ(d.evidence_gaps(0).file(), f->path());
  EXPECT_THAT(d.evidence_gaps(0).reason(), HasSubstr("op_summary_1.csv:3"));
  EXPECT_THAT(d.evidence_gaps(0).reason(), HasSubstr("unterminated"));
  EXPECT_THAT(d.perf_analysis_md(), HasSubstr(f->path()));
}

TEST(AnalyzeTest, RaggedRowIsAGapAndTheRestCounts) {
  v1::ProfileBundle bundle;
  v1::ProfileFile* f = bundle.add_files();
  f->set_path("op_summary_2.csv");
  f->set_content("Op Name,Task Duration(us)\nk,1.5\nk,2.0,extra\nj,1\n");
  v1::Diagnosis d = Analyze(bundle);
  ASSERT_EQ(d.hotspots_size(), 2);
  EXPECT_EQ(d.hotspots(0).op_name(), "k");
  EXPECT_DOUBLE_EQ(d.hotspots(0).duration_us(), 1.5);
  EXPECT_DOUBLE_EQ(d.total_device_us(), 2.5);
  bool named = false;
  for (const v1::EvidenceGap& g : d.evidence_gaps()) {
    named =
        named || (g.file() == "op_summary_2.csv" &&
                  g.reason().find("op_summary_2.csv:3") != std::string::npos);
  }
  EXPECT_TRUE(named) << d.DebugString();
}

TEST(AnalyzeTest, RealRaggedMemoryL0KernelDetails) {
  // msinsight MemoryL0: no pipe ratios, one truncated row (line 17).
  v1::ProfileBundle bundle;
  AddFixtureFiles("msinsight_memoryl0/ASCEND_PROFILER_OUTPUT", "p/", bundle);
  v1::Diagnosis d = Analyze(bundle);
  ASSERT_GE(d.hotspots_size(), 1);
  EXPECT_EQ(d.hotspots(0).op_type(), "FlashAttentionScore");
  EXPECT_EQ(d.bound(), "unknown");
  std::string reasons;
  for (const v1::EvidenceGap& g : d.evidence_gaps()) {
    absl::StrAppend(&reasons, g.file(), ": ", g.reason(), "\n");
  }
  EXPECT_THAT(reasons, HasSubstr("kernel_details.csv:17"));
  EXPECT_THAT(reasons, HasSubstr("no pipe ratios"));
}

TEST(AnalyzeTest, BinaryGarbageAndMissingColumnsNeverCrash) {
  v1::ProfileBundle bundle;
  v1::ProfileFile* bin = bundle.add_files();
  bin->set_path("kernel_details.csv");
  std::string junk;
  for (int i = 0; i < 4096; ++i) junk.push_back(static_cast<char>(i * 131));
  bin->set_content(junk);
  v1::ProfileFile* nocol = bundle.add_files();
  nocol->set_path("x/op_summary_2.csv");
  nocol->set_content("Op Name,Something\nk,1\n");
  v1::Diagnosis d = Analyze(bundle);
  EXPECT_EQ(d.hotspots_size(), 0);
  ASSERT_EQ(d.evidence_gaps_size(), 3);  // + "no hotspot"
  EXPECT_EQ(d.evidence_gaps(0).file(), "kernel_details.csv");
  EXPECT_EQ(d.evidence_gaps(1).file(), "x/op_summary_2.csv");
  EXPECT_THAT(d.evidence_gaps(1).reason(), HasSubstr("Task Duration(us)"));
}

TEST(AnalyzeTest, OpStatisticAloneStillGivesHotspots) {
  v1::ProfileBundle bundle;
  bundle.set_simulated(true);
  AddFixtureFiles("helix_msprof_real/mindstudio_profiler_output", "out/",
                  bundle);
  // Keep only op_statistic.
  v1::ProfileBundle only;
  only.set_simulated(true);
  for (const v1::ProfileFile& f : bundle.files()) {
    if (f.path().find("op_statistic") != std::string::npos) {
      *only.add_files() = f;
    }
  }
  ASSERT_EQ(only.files_size(), 1);
  v1::Diagnosis d = Analyze(only);
  ASSERT_EQ(d.hotspots_size(), 3);
  EXPECT_EQ(d.hotspots(0).op_name(), "matmul_kernel");
  EXPECT_DOUBLE_EQ(d.hotspots(0).duration_us(), 30.144);
  EXPECT_EQ(d.hotspots(0).count(), 5);
  EXPECT_EQ(d.bound(), "unknown");
  ASSERT_EQ(d.evidence_gaps_size(), 1);
  EXPECT_THAT(d.evidence_gaps(0).reason(), HasSubstr("no pipe ratios"));
  EXPECT_TRUE(d.simulated());
  EXPECT_THAT(d.perf_analysis_md(), HasSubstr("(simulated)"));
}

TEST(AnalyzeTest, EmptyBundleIsAGap) {
  v1::ProfileBundle bundle;
  bundle.set_bundle_id("empty");
  bundle.set_sweep_id("s");
  bundle.set_round_id(4);
  bundle.set_epoch(1);
  v1::Diagnosis d = Analyze(bundle);
  EXPECT_EQ(d.bundle_id(), "empty");
  EXPECT_EQ(d.round_id(), 4);
  EXPECT_EQ(d.hotspots_size(), 0);
  EXPECT_EQ(d.total_device_us(), 0);
  EXPECT_EQ(d.bound(), "unknown");
  ASSERT_EQ(d.evidence_gaps_size(), 1);
  EXPECT_THAT(d.evidence_gaps(0).reason(),
              HasSubstr("no profiler file recognised among 0 file(s)"));
  EXPECT_THAT(d.perf_analysis_md(), HasSubstr("# Round Performance Analysis"));
  EXPECT_THAT(d.perf_analysis_md(), HasSubstr("no profiler file recognised"));
}

// The cpu board's PROF_cpu/ folder as ops/common/harness.h writes it.
v1::ProfileBundle CpuBundle(bool counters) {
  v1::ProfileBundle b;
  b.set_bundle_id("cpu-1");
  b.set_profiler("perf");
  b.set_board_kind("cpu");
  auto add = [&](const std::string& path, const std::string& content) {
    v1::ProfileFile* f = b.add_files();
    f->set_path(path);
    f->set_content(content);
  };
  add("PROF_cpu/run_facts.csv",
      "operator,gemm\nworkload,square256\ndim_m,256\npinned_cpus,2\n"
      "median_us,812.500000\nflops,33554432.000000\nbytes,786432.000000\n");
  if (counters) {
    add("PROF_cpu/counters.csv",
        "counter,value\ncycles,40000000\ninstructions,90000000\n"
        "cache_references,2000000\ncache_misses,500000\n"
        "llc_read_misses,unavailable\nruns,10\n");
  } else {
    add("PROF_cpu/counters_unavailable.txt",
        "counters unavailable: perf_event_open(cycles): No such file or "
        "directory\n");
  }
  add("stdout.txt", "gemm: profile ok\n");
  return b;
}

TEST(AnalyzeTest, CpuProfileWithoutCountersIsAnEvidenceGapNotAParseError) {
  v1::Diagnosis d = Analyze(CpuBundle(false), nullptr);
  ASSERT_EQ(d.hotspots_size(), 1);
  EXPECT_EQ(d.hotspots(0).op_name(), "gemm");
  EXPECT_DOUBLE_EQ(d.hotspots(0).duration_us(), 812.5);
  EXPECT_EQ(d.hotspots(0).source_file(), "PROF_cpu/run_facts.csv");
  bool gap = false;
  for (const v1::EvidenceGap& g : d.evidence_gaps()) {
    EXPECT_THAT(g.reason(), Not(HasSubstr("no profiler file recognised")));
    if (g.file() == "PROF_cpu/counters_unavailable.txt") {
      gap = true;
      EXPECT_THAT(g.reason(), HasSubstr("counters unavailable: "
                                        "perf_event_open(cycles)"));
    }
  }
  EXPECT_TRUE(gap) << d.perf_analysis_md();
  EXPECT_TRUE(ParseErrorsByFormat(d).empty());
  EXPECT_THAT(d.perf_analysis_md(), HasSubstr("counters unavailable"));
}

TEST(AnalyzeTest, CpuCountersBecomeRatesOfTheTimedRuns) {
  v1::Diagnosis d = Analyze(CpuBundle(true), nullptr);
  std::map<std::string, double> rates;
  for (const v1::PipelineRatio& r : d.pipeline_ratios()) {
    EXPECT_EQ(r.file(), "PROF_cpu/counters.csv");
    rates[r.column()] = r.mean();
  }
  EXPECT_DOUBLE_EQ(rates["instructions/cycles"], 2.25);
  EXPECT_DOUBLE_EQ(rates["cache_misses/cache_references"], 0.25);
  EXPECT_FALSE(rates.count("llc_read_misses/instructions"));  // unavailable
  for (const v1::EvidenceGap& g : d.evidence_gaps()) {
    EXPECT_THAT(g.reason(), Not(HasSubstr("counters unavailable")));
  }
}

TEST(AnalyzeTest, CorruptCpuCountersNameTheLine) {
  v1::ProfileBundle b = CpuBundle(true);
  b.mutable_files(1)->set_content("counter,value\ncycles,12,13\n");
  v1::Diagnosis d = Analyze(b, nullptr);
  bool named = false;
  for (const v1::EvidenceGap& g : d.evidence_gaps()) {
    named = named || absl::StrContains(g.reason(), "counters.csv:2");
  }
  EXPECT_TRUE(named) << d.perf_analysis_md();
  EXPECT_EQ(ParseErrorsByFormat(d)["perf"], 1);
}

}  // namespace
}  // namespace tunefarm
