// Each profiler parser on the real fixtures, with values read from them, and
// on truncated / empty / garbage input.
#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "analyzer/profile.h"
#include "common/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tunefarm {
namespace {

using ::testing::HasSubstr;

std::string Fixture(const std::string& rel) {
  absl::StatusOr<std::string> t =
      ReadFile(std::string(TUNEFARM_SHARED_DIR) + "/fixtures/" + rel);
  EXPECT_TRUE(t.ok()) << rel;
  return t.value_or("");
}

TEST(PyptoTest, SwimlaneRecomputesPerfAnalyzerMetrics) {
  std::string text =
      Fixture("ascend/pypto_swimlane_kaywang/merged_swimlane.timeline.json");
  absl::StatusOr<PyptoSummary> s = ParsePyptoSwimlane(text, "merged.json");
  ASSERT_TRUE(s.ok()) << s.status();
  // ascend-formats.md §1.3.6, recomputed independently from the same trace.
  EXPECT_EQ(s->cores.size(), 56u);
  EXPECT_EQ(s->real_tasks, 74);
  EXPECT_EQ(s->fake_tasks, 39);
  EXPECT_NEAR(s->avg_utilization_pct, 38.3, 0.05);
  EXPECT_NEAR(s->aic_utilization_pct, 28.8, 0.05);
  EXPECT_NEAR(s->aiv_utilization_pct, 45.5, 0.05);
  EXPECT_NEAR(s->avg_bubble_pct, 10.07, 0.005);
  EXPECT_NEAR(s->load_balance_pct, 60.3, 0.05);
  EXPECT_NEAR(s->execution_us, 43.06, 0.005);
  EXPECT_NEAR(s->max_aic_wait_predecessor_us, 28.6, 0.05);
  EXPECT_NEAR(s->whole_trace_utilization_pct, 16.5, 0.05);
}

TEST(PyptoTest, BubbleLogAsTheWriterWritesIt) {
  const char* log =
      "Top 10 tasks in waiting schedule\n"
      "    Task:1, label:0-1-2-3-4(x), wait: 1.5\n\n"
      "[AIC_1] Execute task num:2\n"
      "    Core Total Work Time: 10.0\n    Total Wait Time: 2.0\n"
      "    Wait Schedule Time: 1.0\n    Wait Predecessor Time: 1.0\n"
      "[AIC_2] Execute task num:1, Fake Task: 1\n"
      "    Core Total Work Time: 10.0\n    Total Wait Time: 6.0\n"
      "    Wait Schedule Time: 0.0\n    Wait Predecessor Time: 6.0\n"
      "[AIV_25] Execute task num:1\n"
      "    Core Total Work Time: 4.0\n    Total Wait Time: 0.0\n"
      "    Wait Schedule Time: 0.0\n    Wait Predecessor Time: 0.0\n";
  absl::StatusOr<PyptoSummary> s = ParseBubbleAnalysisLog(log, "b.log");
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->cores.size(), 3u);
  // util: AIC_1 8/10, AIC_2 4/10, AIV 4/4 -> (80+40+100)/3.
  EXPECT_NEAR(s->avg_utilization_pct, 220.0 / 3, 1e-9);
  // bubble AIC_1: 1/(8+1).
  EXPECT_NEAR(s->aic_bubble_pct, (100.0 / 9) / 2, 1e-9);
  // AIC AicoreTime 8 and 4: mean 6, population sd 2 -> 1 - 1/3.
  EXPECT_NEAR(s->load_balance_pct, 100 * (1 - 2.0 / 6), 1e-9);
  EXPECT_FALSE(ParseBubbleAnalysisLog("", "b.log").ok());
  EXPECT_THAT(ParseBubbleAnalysisLog("[AIC_1] Execute task num:2\n", "b.log")
                  .status()
                  .message(),
              HasSubstr("truncated"));
}

TEST(NcuTest, DetailsPageWithRulesAndProgramOutput) {
  absl::StatusOr<NcuReport> r = ParseNcuCsv(
      Fixture("ncu/public/superbenchmark__cublaslt_ncu.log"), "sb.log");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->page, "details");
  ASSERT_EQ(r->kernels.size(), 1u);
  const NcuKernel& k = r->kernels[0];
  EXPECT_EQ(k.cc, "10.0");
  EXPECT_EQ(k.block_size, "(384, 1, 1)");
  const NcuMetric* dur = k.Find({"Duration"});
  ASSERT_NE(dur, nullptr);
  EXPECT_DOUBLE_EQ(dur->value, 406.24);  // 406240 ns -> us
  EXPECT_EQ(dur->unit, "us");
  EXPECT_DOUBLE_EQ(k.Find({"Compute (SM) Throughput"})->value, 23.59);
  EXPECT_DOUBLE_EQ(k.Find({"Memory Throughput"})->value, 21.68);
  bool sol = false;
  for (const NcuRule& rule : k.rules) sol = sol || rule.name == "SOLBottleneck";
  EXPECT_TRUE(sol);
  EXPECT_GE(r->skipped_lines, 3);
}

TEST(NcuTest, BomCrlfThousandsSeparators) {
  absl::StatusOr<NcuReport> r = ParseNcuCsv(
      Fixture("ncu/public/olajide-gpu-roofline-profiler__saxpy.csv"), "s.csv");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->kernels.size(), 1u);
  const NcuKernel& k = r->kernels[0];
  EXPECT_DOUBLE_EQ(k.Find({"dram__bytes_op_read.sum"})->value, 134221568);
  EXPECT_DOUBLE_EQ(k.Find({"gpu__time_duration.sum"})->value, 292.928);
  EXPECT_DOUBLE_EQ(
      k.Find({"sm__throughput.avg.pct_of_peak_sustained_elapsed"})->value,
      22.30);
}

TEST(NcuTest, RawPageWithUnitsRow) {
  const char* raw =
      "\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel Name\","
      "\"Context\",\"Stream\",\"Block Size\",\"Grid Size\",\"Device\",\"CC\","
      "\"dram__bytes_read.sum\",\"gpu__time_duration.sum\"\n"
      "\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"Gbyte\","
      "\"us\"\n"
      "\"0\",\"759\",\"bench\",\"h\",\"copy_f4\",\"1\",\"7\",\"(512, 1, 1)\","
      "\"(1056, 1, 1)\",\"0\",\"9.0\",\"1.07\",\"534.30\"\n";
  absl::StatusOr<NcuReport> r = ParseNcuCsv(raw, "raw.csv");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->page, "raw");
  EXPECT_DOUBLE_EQ(r->kernels[0].Find({"dram__bytes_read.sum"})->value, 1.07e9);
  EXPECT_DOUBLE_EQ(r->kernels[0].Find({"gpu__time_duration.sum"})->value,
                   534.3);
}

TEST(TraceTest, MsprofTimelineAndTorchTraceView) {
  absl::StatusOr<TraceSummary> m = ParseChromeTrace(
      Fixture("ascend/helix_msprof_real/mindstudio_profiler_output/"
              "msprof_20260511093035.json"),
      "msprof.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->format, "msprof");
  EXPECT_DOUBLE_EQ(m->aicore_freq_mhz, 1800);
  EXPECT_GT(m->device_tasks, 0);
  EXPECT_GT(m->device.window_us, m->device.busy_us);
  absl::StatusOr<TraceSummary> t = ParseChromeTrace(
      Fixture(
          "ascend/helix_torch_npu_real/ASCEND_PROFILER_OUTPUT/trace_view.json"),
      "trace_view.json");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->format, "torch_npu");
  ASSERT_EQ(t->by_name.count("matmul_kernel"), 1u);
  EXPECT_EQ(t->by_name.at("matmul_kernel").n, 10);
  EXPECT_NEAR(t->by_name.at("matmul_kernel").sum, 888.42, 1e-6);
  EXPECT_GT(t->launches, 0);
}

TEST(TraceTest, KinetoCorrelationJoin) {
  const char* k =
      R"({"schemaVersion":1,"deviceProperties":[{"name":"NVIDIA H200"}],
    "traceEvents":[
    {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":100.0,"dur":6.0,"args":{"correlation":7}},
    {"ph":"X","cat":"kernel","name":"k1","pid":0,"tid":7,"ts":108.0,"dur":2.0,"args":{"correlation":7}},
    {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":120.0,"dur":5.0,"args":{"correlation":8}},
    {"ph":"X","cat":"kernel","name":"k1","pid":0,"tid":7,"ts":130.0,"dur":10.0,"args":{"correlation":8}}]})";
  absl::StatusOr<TraceSummary> t = ParseChromeTrace(k, "trace.json");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->format, "kineto");
  EXPECT_EQ(t->device_name, "NVIDIA H200");
  EXPECT_EQ(t->launches, 2);
  EXPECT_EQ(t->short_kernels, 1);  // 2 us kernel after a 6 us launch
  EXPECT_DOUBLE_EQ(t->device.window_us, 32);
  EXPECT_DOUBLE_EQ(t->device.busy_us, 12);
  EXPECT_EQ(t->device.gaps, 1);
  EXPECT_DOUBLE_EQ(t->device.max_gap_us, 20);
}

TEST(TablesTest, EveryAscendTableFixtureParses) {
  struct Case {
    const char* rel;
    const char* kind;
  };
  const Case cases[] = {
      {"ascend/helix_msprof_real/mindstudio_profiler_output/"
       "api_statistic_20260511093035.csv",
       "api"},
      {"ascend/helix_msprof_real/mindstudio_profiler_output/"
       "task_time_20260511093035.csv",
       "task_time"},
      {"ascend/helix_torch_npu_real/ASCEND_PROFILER_OUTPUT/"
       "operator_details.csv",
       "opd"},
      {"ascend/helix_torch_npu_real/ASCEND_PROFILER_OUTPUT/step_trace_time.csv",
       "step"},
      {"ascend/msinsight_torch_npu_level1/ASCEND_PROFILER_OUTPUT/l2_cache.csv",
       "l2"},
      {"ascend/msinsight_torch_npu_level1/profiler_info_0.json", "info"},
  };
  for (const Case& c : cases) {
    std::string text = Fixture(c.rel);
    std::string kind = c.kind;
    absl::Status st;
    if (kind == "api") {
      auto r = ParseApiStatistic(text, c.rel);
      st = r.status();
      if (r.ok()) {
        EXPECT_EQ(r->rows.size(), 22u);
      }
    } else if (kind == "task_time") {
      auto r = ParseTaskTime(text, c.rel);
      st = r.status();
      if (r.ok()) EXPECT_EQ(r->by_kernel.count("matmul_kernel"), 1u);
    } else if (kind == "opd") {
      auto r = ParseOperatorDetails(text, c.rel);
      st = r.status();
      if (r.ok()) EXPECT_EQ(r->rows, 30);
    } else if (kind == "step") {
      auto r = ParseStepTrace(text, c.rel);
      st = r.status();
      if (r.ok()) {
        EXPECT_EQ(r->steps, 10);
      }
    } else if (kind == "l2") {
      auto r = ParseL2Cache(text, c.rel);
      st = r.status();
      if (r.ok()) EXPECT_GT(r->victim_rate.n, 0);
    } else {
      auto r = ParseProfilerInfo(text, c.rel);
      st = r.status();
      if (r.ok()) EXPECT_EQ(r->aic_metrics, "ACL_AICORE_PIPE_UTILIZATION");
    }
    EXPECT_TRUE(st.ok()) << c.rel << ": " << st;
  }
  // Metric groups from the headers.
  auto arith = ParseTaskTable(
      Fixture("ascend/msprof_analyze_arithmetic/kernel_details.csv"), "a.csv");
  ASSERT_TRUE(arith.ok()) << arith.status();
  EXPECT_EQ(arith->metric_group, "ArithmeticUtilization");
  auto l0 = ParseTaskTable(
      Fixture("ascend/msinsight_memoryl0/op_summary_1.csv"), "l0.csv");
  ASSERT_TRUE(l0.ok()) << l0.status();
  EXPECT_EQ(l0->metric_group, "MemoryL0");
  auto lvl0 =
      ParseTaskTable(Fixture("ascend/msinsight_torch_npu_level0/"
                             "ASCEND_PROFILER_OUTPUT/kernel_details.csv"),
                     "k.csv");
  ASSERT_TRUE(lvl0.ok()) << lvl0.status();
  EXPECT_EQ(lvl0->metric_group, "None");
  EXPECT_EQ(lvl0->rows_used, 191);
  auto pipe =
      ParseTaskTable(Fixture("ascend/helix_torch_npu_real/"
                             "ASCEND_PROFILER_OUTPUT/kernel_details.csv"),
                     "kd.csv");
  ASSERT_TRUE(pipe.ok());
  // cube_utilization(%) 95.479 is kept as a fraction (occupancy).
  EXPECT_NEAR(pipe->ops[0].metrics.at("cube_utilization(%)").max, 0.96, 0.01);
}

TEST(RobustnessTest, EmptyTruncatedGarbageGiveClearErrors) {
  EXPECT_THAT(ParseTaskTable("", "e.csv").status().message(),
              HasSubstr("e.csv: empty file"));
  EXPECT_THAT(ParseChromeTrace("[{\"ph\":\"X\"", "t.json").status().message(),
              HasSubstr("t.json: not valid JSON"));
  EXPECT_THAT(ParseNcuCsv("garbage\n", "n.csv").status().message(),
              HasSubstr("no Nsight Compute CSV header"));
  EXPECT_THAT(ParsePyptoSwimlane("{}", "p.json").status().message(),
              HasSubstr("p.json"));
  // Reordered columns still parse by name.
  auto r = ParseTaskTable("Task Duration(us),Op Name\n2.5,k\n1,j\n", "r.csv");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->ops[0].name, "k");
  // Truncated mid-row: the last row is ragged and reported, not fatal.
  auto t = ParseTaskTable("Op Name,Task Duration(us),Block Dim\nk,1,2\nk,3",
                          "t.csv");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->ragged.size(), 1u);
}

// A large task table is read in blocks on several threads. Whatever the
// thread count, the result must be what one thread reads, bit for bit.
void ExpectSameTable(const TaskTable& a, const TaskTable& b) {
  EXPECT_EQ(a.rows_used, b.rows_used);
  EXPECT_EQ(a.rows_skipped, b.rows_skipped);
  EXPECT_EQ(a.ragged, b.ragged);
  EXPECT_EQ(a.total_us, b.total_us);
  EXPECT_EQ(a.total_wait_us, b.total_wait_us);
  EXPECT_EQ(a.timeline.intervals, b.timeline.intervals);
  EXPECT_EQ(a.timeline.gaps, b.timeline.gaps);
  EXPECT_EQ(a.timeline.busy_us, b.timeline.busy_us);
  ASSERT_EQ(a.ops.size(), b.ops.size());
  for (size_t i = 0; i < a.ops.size(); ++i) {
    const OpAggregate& x = a.ops[i];
    const OpAggregate& y = b.ops[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.type, y.type);
    EXPECT_EQ(x.core, y.core);
    EXPECT_EQ(x.count, y.count) << x.name;
    EXPECT_EQ(x.total_us, y.total_us) << x.name;
    EXPECT_EQ(x.max_block_dim, y.max_block_dim) << x.name;
    EXPECT_EQ(x.wait_us, y.wait_us) << x.name;
    ASSERT_EQ(x.metrics.size(), y.metrics.size()) << x.name;
    for (const auto& [col, st] : x.metrics) {
      auto it = y.metrics.find(col);
      ASSERT_NE(it, y.metrics.end()) << col;
      EXPECT_EQ(st.n, it->second.n) << x.name << " " << col;
      EXPECT_EQ(st.min, it->second.min) << x.name << " " << col;
      EXPECT_EQ(st.max, it->second.max) << x.name << " " << col;
      EXPECT_EQ(st.sum, it->second.sum) << x.name << " " << col;
    }
  }
}

ParseOptions Threads(int n) {
  ParseOptions o;
  o.threads = n;
  o.block_bytes = 512;  // cut even a small table in many places
  return o;
}

TEST(TaskTableThreadsTest, RangesOfTheRealKernelDetailsMatchOneThread) {
  // The real torch_npu table (HCCL rows, quoted shape cells, N/A cells),
  // repeated, with two truncated rows and a blank line among them.
  std::string fixture =
      Fixture("ascend/msprof_analyze_arithmetic/kernel_details.csv");
  size_t nl = fixture.find('\n');
  std::string text = fixture.substr(0, nl + 1);
  std::string body = fixture.substr(nl + 1);
  for (int i = 0; i < 4; ++i) {
    text += body;
    if (i == 1) text += "trunc_op,1.0\n\n";
  }
  text += "last_trunc,2\n";
  absl::StatusOr<TaskTable> one =
      ParseTaskTable(text, "kernel_details.csv", Threads(1));
  ASSERT_TRUE(one.ok()) << one.status();
  ASSERT_EQ(one->ragged.size(), 2u);
  EXPECT_GT(one->rows_used, 2000);
  for (int threads : {2, 3, 7, 16}) {
    SCOPED_TRACE(threads);
    absl::StatusOr<TaskTable> many =
        ParseTaskTable(text, "kernel_details.csv", Threads(threads));
    ASSERT_TRUE(many.ok()) << many.status();
    ExpectSameTable(*one, *many);
  }
  // Read as one block (the default block size is larger than this table),
  // only the order of additions differs.
  absl::StatusOr<TaskTable> whole = ParseTaskTable(text, "kernel_details.csv");
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->rows_used, one->rows_used);
  EXPECT_EQ(whole->ragged, one->ragged);
  EXPECT_NEAR(whole->total_us, one->total_us, 1e-9 * one->total_us);
  ASSERT_EQ(whole->ops.size(), one->ops.size());
  for (const OpAggregate& op : whole->ops) {
    auto same =
        std::find_if(one->ops.begin(), one->ops.end(),
                     [&](const OpAggregate& o) { return o.name == op.name; });
    ASSERT_NE(same, one->ops.end()) << op.name;
    EXPECT_EQ(same->count, op.count) << op.name;
    EXPECT_NEAR(same->total_us, op.total_us, 1e-9 * op.total_us) << op.name;
  }
  // Line numbers in the ragged-row messages are the file's, not a block's.
  size_t trunc = text.find("trunc_op,1.0");
  int line = 1 + static_cast<int>(
                     std::count(text.begin(), text.begin() + trunc, '\n'));
  EXPECT_THAT(one->ragged[0],
              HasSubstr(absl::StrCat(":", line, ": row has 2")));
}

TEST(TaskTableThreadsTest, CutsInsideMultiLineQuotedCellsAreCaught) {
  // Most line ends here are inside quoted cells, so most cuts land inside
  // one: those ranges do not meet, and the table is read again whole.
  std::string text = "Op Name,Task Duration(us),Note,Block Dim\n";
  int64_t rows = 0;
  double total = 0;
  for (int i = 0; i < 400; ++i) {
    std::string note = "\"";
    for (int k = 0; k < 1 + i % 9; ++k)
      absl::StrAppend(&note, "line ", k, "\n");
    absl::StrAppend(&note, "a \"\"quoted\"\" part\n,with comma\"");
    absl::StrAppend(&text, "op", i % 5, ",", i % 13 + 0.5, ",", note, ",",
                    i % 17, "\n");
    total += i % 13 + 0.5;
    ++rows;
  }
  absl::StatusOr<TaskTable> one = ParseTaskTable(text, "q.csv", Threads(1));
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->rows_used, rows);
  EXPECT_DOUBLE_EQ(one->total_us, total);
  EXPECT_TRUE(one->ragged.empty());
  for (int threads : {2, 5, 16}) {
    SCOPED_TRACE(threads);
    absl::StatusOr<TaskTable> many =
        ParseTaskTable(text, "q.csv", Threads(threads));
    ASSERT_TRUE(many.ok()) << many.status();
    ExpectSameTable(*one, *many);
  }
}

TEST(TaskTableThreadsTest, AMalformedTableFailsTheSameOnAnyThreadCount) {
  std::string text = "Op Name,Task Duration(us)\n";
  for (int i = 0; i < 300; ++i)
    absl::StrAppend(&text, "k", i % 3, ",", i, "\n");
  absl::StrAppend(&text, "\"never closed,1\n");
  for (int i = 0; i < 50; ++i) absl::StrAppend(&text, "k,", i, "\n");
  absl::StatusOr<TaskTable> one = ParseTaskTable(text, "bad.csv", Threads(1));
  ASSERT_FALSE(one.ok());
  EXPECT_THAT(one.status().message(),
              HasSubstr("bad.csv:302: unterminated quoted cell"));
  for (int threads : {2, 4, 16}) {
    absl::StatusOr<TaskTable> many =
        ParseTaskTable(text, "bad.csv", Threads(threads));
    ASSERT_FALSE(many.ok()) << threads;
    EXPECT_EQ(many.status(), one.status()) << threads;
  }
}

}  // namespace
}  // namespace tunefarm
