// The analyzer's format-neutral profile model, and the parsers that fill it.
//
// Each profiler format has its own parser file (msprof.cc, torch_npu.cc,
// pypto.cc, ncu.cc, trace_json.cc for Chrome-trace timelines: msprof JSON,
// torch_npu trace_view.json, kineto). A parser reads one file's text and
// returns a plain struct below, or INVALID_ARGUMENT naming the file and what
// is wrong (missing column, bad quoting, not JSON, no data rows). Parsers
// never throw (nlohmann exceptions are caught at the seam) and never crash
// on truncated, reordered, empty or garbage input; the fuzz targets in
// fuzz/ hold them to that.
//
// Units are normalised at parse time: times in microseconds, ratios as
// fractions 0..1 (`cube_utilization(%)` is divided by 100 and kept apart as
// occupancy, see ascend-formats.md §0.2), ncu values in base units
// (ns -> us for durations). Columns are matched by name with aliases.
//
// ReadProfile classifies a set of files (path + text) by name and content
// and runs the right parser on each, collecting failures as gaps. All
// functions are pure and thread-safe; the structs are plain values.
#ifndef TUNEFARM_ANALYZER_PROFILE_H_
#define TUNEFARM_ANALYZER_PROFILE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tunefarm {

// Running min / max / mean of one numeric column, and its mean weighted by
// each row's weight (task tables weight by the row's duration: a 1 us
// launch must not count as much as a 7 ms one).
struct Stat {
  double sum = 0;
  double min = 0;
  double max = 0;
  int64_t n = 0;
  double wsum = 0;  // sum of value x weight
  double wt = 0;    // sum of weights
  void Add(double v, double w = 1) {
    if (n == 0 || v < min) min = v;
    if (n == 0 || v > max) max = v;
    sum += v;
    ++n;
    wsum += v * w;
    wt += w;
  }
  double mean() const { return n == 0 ? 0 : sum / static_cast<double>(n); }
  // The weighted mean; the plain mean when no row had a positive weight.
  double weighted_mean() const { return wt > 0 ? wsum / wt : mean(); }
};

// Busy / idle over a set of [start, end) intervals (device tasks).
struct IntervalSummary {
  double window_us = 0;  // last end - first start
  double busy_us = 0;    // length of the union
  int64_t gaps = 0;      // spaces between merged intervals
  double max_gap_us = 0;
  int64_t overlaps = 0;  // intervals starting before the previous ended
  int64_t intervals = 0;
  double idle_ratio() const {
    return window_us > 0 ? (window_us - busy_us) / window_us : 0;
  }
};
// Sorts and merges; `starts` / `ends` are parallel (µs).
IntervalSummary SummarizeIntervals(std::vector<std::pair<double, double>> iv);
// The same over integer nanoseconds (absolute Ascend time stamps, which a
// double cannot hold to the ns); the summary is in µs.
IntervalSummary SummarizeIntervalsNs(
    std::vector<std::pair<int64_t, int64_t>> iv);

// One op (grouped by name) of a per-task table, with one slice per core
// type it ran on (a MatMulV3 may launch on AI_CORE and MIX_AIC).
struct OpAggregate {
  std::string name;
  std::string type;
  // The core type; "A+B" when the launches ran on more than one (the
  // slices in by_core then hold each apart).
  std::string core;
  double total_us = 0;
  int64_t count = 0;
  double max_block_dim = 0;
  double max_mix_block_dim = 0;
  double wait_us = 0;
  // Per-core execution time and cycle counters, summed over rows
  // (aicore_time(us) / aiv_time(us), aic_total_cycles / aiv_total_cycles);
  // has_* say whether the table had the column at all.
  double aicore_time_us = 0, aiv_time_us = 0;
  double aic_cycles = 0, aiv_cycles = 0;
  bool has_aic_time = false, has_aiv_time = false, has_aic_cycles = false,
       has_aiv_cycles = false;
  // Metric columns (ratios, bandwidths, fops...) as written in the header,
  // already normalised (cube_utilization is a fraction). Each row is
  // weighted by its duration (Stat::weighted_mean).
  std::map<std::string, Stat> metrics;
  // One entry per core type (same fields, by_core empty), largest total
  // first. Always at least one entry after ParseTaskTable.
  std::vector<OpAggregate> by_core;
};

// Per-type roll-up of a table's ops: graph-mode names (Conv2D1..Conv2D4,
// trans_TransData_12) are one op type spread over many names.
struct TypeRollup {
  std::string type;
  double total_us = 0;
  int64_t count = 0;
  int64_t names = 0;  // distinct op names folded in
  std::string core;   // as OpAggregate::core
};
// The type an op rolls up to: its type column when the table has a real one,
// else its name with graph-mode decorations dropped (a trans_ prefix, a
// trailing number or _number).
std::string RollupType(const OpAggregate& op);

// msprof op_summary or torch_npu kernel_details.
struct TaskTable {
  std::string file;
  std::string format;  // msprof | torch_npu
  std::string kind;    // op_summary | kernel_details
  // PipeUtilization | ArithmeticUtilization | Memory | MemoryL0 | MemoryUB |
  // L2Cache | ResourceConflictRatio | MemoryAccess | None (level0/l0).
  std::string metric_group;
  std::string name_col, type_col, duration_col, wait_col, block_col;
  std::vector<OpAggregate> ops;     // largest total first
  std::vector<TypeRollup> by_type;  // largest total first
  double total_us = 0;
  double total_wait_us = 0;
  int64_t rows_used = 0;
  int64_t rows_skipped = 0;         // no numeric duration
  std::vector<std::string> ragged;  // "file:line: ..." per dropped row
  IntervalSummary timeline;         // from the start / duration columns
  // Memory-access volume (MemoryAccess group: *_read/write_main_memory
  // _datas(KB)) over all rows, KB; 0 when the columns are absent.
  double main_memory_kb = 0;
};
// How the large tables are read.
struct ParseOptions {
  // A task table is read in blocks of about this many bytes, cut at line
  // ends, and the blocks are added up in file order. The cuts depend only
  // on the text, so the result is the same bit for bit on any number of
  // threads. Tests lower it to cut small tables in many places.
  size_t block_bytes = size_t{4} << 20;
  // Threads reading blocks: 0 = the machine's cores (at most 16).
  int threads = 0;
};

absl::StatusOr<TaskTable> ParseTaskTable(std::string_view text,
                                         std::string_view file,
                                         const ParseOptions& options = {});
// A collective-communication op (HCCL): core / task type HCCL or
// COMMUNICATION, or an hcom_* / *hccl* name. Its time is waiting on the
// network, not the kernel under tuning, so hotspots list it apart.
bool IsCommunicationOp(const OpAggregate& op);

struct OpStatRow {
  std::string type, core;
  int64_t count = 0;
  double total_us = 0, avg_us = 0, max_us = 0, ratio_pct = 0;
};
struct OpStatistic {
  std::string file;
  // One row per OP Type, summed over its core types (core "A+B" when it
  // ran on several), largest total first.
  std::vector<OpStatRow> rows;
  std::vector<OpStatRow> by_core;  // the rows as written, largest first
  double total_us = 0;
};
absl::StatusOr<OpStatistic> ParseOpStatistic(std::string_view text,
                                             std::string_view file);

struct ApiRow {
  std::string name, level;
  double time_us = 0, avg_us = 0;
  int64_t count = 0;
};
struct ApiStatistic {
  std::string file;
  std::vector<ApiRow> rows;  // largest time first
  double total_us = 0;
};
absl::StatusOr<ApiStatistic> ParseApiStatistic(std::string_view text,
                                               std::string_view file);
// Helix profile-report's host-launch flag (launch, memcpy, synchronize,
// binary, stream in the API name).
bool IsLaunchRelatedApi(std::string_view name);

// msprof task_time: per-kernel launch gaps (Helix's task timeline).
struct TaskTime {
  std::string file;
  int64_t rows = 0;
  int64_t kernel_rows = 0;                // kernel_name != N/A
  IntervalSummary timeline;               // over kernel rows
  std::map<std::string, Stat> by_kernel;  // task_time(us) per kernel_name
};
absl::StatusOr<TaskTime> ParseTaskTime(std::string_view text,
                                       std::string_view file);

// torch_npu step_trace_time, summed over steps (µs).
struct StepTrace {
  std::string file;
  int64_t steps = 0;
  double computing_us = 0, free_us = 0, bubble_us = 0, stage_us = 0,
         comm_not_overlapped_us = 0, preparing_us = 0;
};
absl::StatusOr<StepTrace> ParseStepTrace(std::string_view text,
                                         std::string_view file);

// torch_npu operator_details: host vs device time per framework op.
struct OperatorDetails {
  std::string file;
  int64_t rows = 0;
  double host_self_us = 0, device_self_us = 0;
  std::string top_host_op;
  double top_host_op_us = 0;
};
absl::StatusOr<OperatorDetails> ParseOperatorDetails(std::string_view text,
                                                     std::string_view file);

// torch_npu l2_cache.csv.
struct L2Cache {
  std::string file;
  Stat hit_rate, victim_rate;
  int64_t rows = 0;
};
absl::StatusOr<L2Cache> ParseL2Cache(std::string_view text,
                                     std::string_view file);

// A Chrome-trace timeline: msprof_*.json, trace_view.json, kineto.
struct TraceSummary {
  std::string file;
  std::string format;  // msprof | torch_npu | kineto | pypto
  int64_t events = 0;
  int64_t device_tasks = 0;
  IntervalSummary device;               // device task intervals
  std::map<std::string, Stat> by_name;  // device task durations per name
  // Device task name -> its args "Task Type" (AI_CORE, AI_CPU, HCCL...),
  // the first seen.
  std::map<std::string, std::string> core_of;
  // Launch path: kineto cuda_runtime/driver joined on correlation; Ascend
  // CANN / Enqueue joined by flow events where present.
  int64_t launches = 0;
  int64_t short_kernels = 0;  // kernel.dur < launch call dur
  // Kernel start minus the end of its launch call; negative when the kernel
  // started before the call returned (counted in negative_launch_delays).
  double median_launch_delay_us = 0;
  int64_t negative_launch_delays = 0;
  double aicore_freq_mhz = 0;  // AI Core Freq counter, last seen
  std::string device_name;     // kineto deviceProperties[0].name
};
absl::StatusOr<TraceSummary> ParseChromeTrace(std::string_view text,
                                              std::string_view file);

// PyPTO per-core numbers, as bubble_analysis.log writes them (µs).
struct PyptoCore {
  std::string name;  // AIC_1, AIV_25
  bool aic = false;
  int64_t tasks = 0;
  double work_us = 0;           // Core Total Work Time
  double wait_us = 0;           // Total Wait Time
  double wait_schedule_us = 0;  // bubble
  double wait_predecessor_us = 0;
};
// The perf-analyzer's aggregates (ascend-formats.md §1.3.3), percentages.
struct PyptoSummary {
  std::string file;
  std::string source;  // bubble_analysis.log | merged_swimlane.json
  std::vector<PyptoCore> cores;
  double avg_utilization_pct = 0, aic_utilization_pct = 0,
         aiv_utilization_pct = 0;
  double avg_bubble_pct = 0, aic_bubble_pct = 0, aiv_bubble_pct = 0;
  double load_balance_pct = 100;
  double execution_us = 0;  // max Core Total Work Time
  double max_aic_wait_predecessor_us = 0;
  // draw_swim_lane's "AICore Utilization": Σ busy / (lanes × span); only
  // from the swim lane.
  double whole_trace_utilization_pct = 0;
  int64_t real_tasks = 0, fake_tasks = 0;
  // Real task durations per op: "leafHash:<n>" (the leaf function, from
  // args.event-hint) where the swim lane names it, else the task label.
  std::map<std::string, Stat> by_name;
  // by_name key -> the first task label seen for it (for display).
  std::map<std::string, std::string> label_of;
};
absl::StatusOr<PyptoSummary> ParseBubbleAnalysisLog(std::string_view text,
                                                    std::string_view file);
absl::StatusOr<PyptoSummary> ParsePyptoSwimlane(std::string_view text,
                                                std::string_view file);
// Fills the aggregates from `cores` (shared by both PyPTO parsers).
void ComputePyptoAggregates(PyptoSummary& s);

// Nsight Compute CSV (raw or details page).
struct NcuMetric {
  double value = 0;  // base units; durations converted to µs
  std::string unit;  // after normalisation ("us", "byte", "%", ...)
  std::string text;  // the cell as written
  bool numeric = false;
};
struct NcuRule {
  std::string section, name, type, description, speedup_type;
  double speedup = 0;
};
struct NcuKernel {
  std::string id, name, device, cc, block_size, grid_size;
  std::map<std::string, NcuMetric> metrics;  // by metric name / label
  std::vector<NcuRule> rules;
  // Looks up the first present of `names`.
  const NcuMetric* Find(std::initializer_list<std::string_view> names) const;
};
struct NcuReport {
  std::string file;
  std::string page;  // raw | details
  std::vector<NcuKernel> kernels;
  int64_t skipped_lines = 0;  // ==PROF== and program output
};
absl::StatusOr<NcuReport> ParseNcuCsv(std::string_view text,
                                      std::string_view file);

// `msprof op` (single-operator profiling): an OPPROF_* folder with
// OpBasicInfo.csv (one row per kernel) and one CSV per metric group
// (PipeUtilization, ArithmeticUtilization, Memory, MemoryL0, MemoryUB,
// L2Cache, ResourceConflictRatio) with one row per block and sub-block
// (block_id, sub_block_id cube0 / vector0 / vector1; NA where a column does
// not apply to the sub-block).
struct OpProfBasic {
  std::string file;
  std::string op_name, op_type;  // op_type: mix | cube | vector
  double duration_us = 0;
  double block_dim = 0, mix_block_dim = 0;
  double current_freq_mhz = 0, rated_freq_mhz = 0;
  int64_t kernels = 0;  // rows; the first is read
};
absl::StatusOr<OpProfBasic> ParseOpBasicInfo(std::string_view text,
                                             std::string_view file);
struct OpProfGroup {
  std::string file;
  std::string group;  // the file's stem, e.g. PipeUtilization
  int64_t rows = 0;
  // Every numeric column over the rows. aic_* columns are weighted by the
  // row's aic_time(us), aiv_* by its aiv_time(us), others by 1.
  std::map<std::string, Stat> columns;
  // Per-block time: the cube sub-block's aic_time(us) and the vector
  // sub-blocks' aiv_time(us), one value per row that has it.
  Stat cube_block_us, vector_block_us;
};
absl::StatusOr<OpProfGroup> ParseOpProfGroup(std::string_view text,
                                             std::string_view file);
struct OpProf {
  OpProfBasic basic;
  std::map<std::string, OpProfGroup> groups;  // by group name
};

// torch_npu profiler_info_*.json: the metric group and level.
struct ProfilerInfo {
  std::string file, aic_metrics, level, torch_npu_version;
};
absl::StatusOr<ProfilerInfo> ParseProfilerInfo(std::string_view text,
                                               std::string_view file);

// The cpu board's PROF_cpu/ folder: counters.csv ("counter,value" rows,
// counts over `runs` timed runs), run_facts.csv (operator, workload,
// median_us, flops, bytes, ...), or counters_unavailable.txt (why the
// kernel refused perf_event_open; read as an evidence gap, not parsed).
struct CpuCounters {
  std::string file;
  std::map<std::string, double> values;  // cycles, instructions, runs, ...
};
absl::StatusOr<CpuCounters> ParseCpuCounters(std::string_view text,
                                             std::string_view file);
struct CpuRunFacts {
  std::string file, op, workload;
  std::map<std::string, double> numbers;  // median_us, flops, bytes, dim_*
};
absl::StatusOr<CpuRunFacts> ParseCpuRunFacts(std::string_view text,
                                             std::string_view file);

struct InputFile {
  std::string path;
  std::string_view content;
};

struct ProfileGap {
  std::string file;
  std::string format;
  std::string reason;
};

// Everything read from one profile folder / bundle. Optional members hold
// the chosen (newest / preferred) file of each kind.
struct ProfileData {
  std::vector<std::string> formats;  // in the order first seen
  std::optional<TaskTable> tasks;
  std::optional<OpStatistic> op_statistic;
  std::optional<ApiStatistic> api_statistic;
  std::optional<TaskTime> task_time;
  std::optional<StepTrace> step_trace;
  std::optional<OperatorDetails> operator_details;
  std::optional<L2Cache> l2_cache;
  std::optional<TraceSummary> trace;
  std::optional<PyptoSummary> pypto;
  std::optional<NcuReport> ncu;
  std::optional<ProfilerInfo> profiler_info;
  std::optional<CpuCounters> cpu_counters;
  std::optional<CpuRunFacts> cpu_facts;
  std::optional<OpProf> opprof;
  std::vector<ProfileGap> gaps;
  std::vector<std::string> ignored;  // files recognised as no format
  int64_t files_read = 0;
  // Parse errors per format (for worker metrics).
  std::map<std::string, int64_t> errors_by_format;
};

// What a file is, from its name (and, for .csv / .json / .log without a
// telling name, a peek at its content). Empty when it is none we read.
struct FileKind {
  std::string format;  // msprof | torch_npu | pypto | ncu | kineto | perf
  std::string kind;    // op_summary, kernel_details, trace, swimlane, ...
};
FileKind ClassifyFile(std::string_view path, std::string_view content);

ProfileData ReadProfile(const std::vector<InputFile>& files,
                        const ParseOptions& options = {});

}  // namespace tunefarm

#endif  // TUNEFARM_ANALYZER_PROFILE_H_
