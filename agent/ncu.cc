#include "agent/ncu.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace tunefarm {

const std::vector<std::string>& DefaultNcuSections() {
  static const auto* kSections = new std::vector<std::string>{
      "SpeedOfLight",          "LaunchStats",    "Occupancy",
      "WarpStateStats",        "SchedulerStats", "ComputeWorkloadAnalysis",
      "MemoryWorkloadAnalysis"};
  return *kSections;
}

const std::vector<std::string>& DefaultNcuMetrics() {
  static const auto* kMetrics = [] {
    auto* m = new std::vector<std::string>{
        "gpu__time_duration.sum",
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
        "dram__bytes_read.sum",
        "dram__bytes_write.sum",
        "dram__bytes.sum.per_second",
        "lts__throughput.avg.pct_of_peak_sustained_elapsed",
        "l1tex__throughput.avg.pct_of_peak_sustained_elapsed",
        "lts__t_sector_hit_rate.pct",
        "l1tex__t_sector_hit_rate.pct",
        "sm__warps_active.avg.pct_of_peak_sustained_active",
        "sm__cycles_elapsed.avg.per_second",
        "dram__cycles_elapsed.avg.per_second",
        "smsp__issue_active.avg.pct_of_peak_sustained_active",
        "smsp__warps_eligible.avg.per_cycle_active",
        "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_"
        "active",
        "sm__inst_executed_pipe_tensor_op_gmma.sum",
        "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
        "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active",
        "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active",
        "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",
        "smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",
        "smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
        "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum",
    };
    for (const char* stall :
         {"long_scoreboard", "short_scoreboard", "wait", "barrier",
          "mio_throttle", "lg_throttle", "math_pipe_throttle", "not_selected",
          "selected", "dispatch_stall", "no_instruction", "membar", "gmma"}) {
      m->push_back(absl::StrCat("smsp__average_warps_issue_stalled_", stall,
                                "_per_issue_active.ratio"));
    }
    m->push_back("smsp__average_warp_latency_per_inst_issued.ratio");
    return m;
  }();
  return *kMetrics;
}

std::vector<std::string> NcuProfileArgv(
    const NcuProfileOptions& options,
    const std::vector<std::string>& program_argv) {
  std::vector<std::string> argv = {
      options.ncu, "--target-processes", "all",      "--clock-control",
      "none",      "--cache-control",    "all",      "--replay-mode",
      "kernel",    "--kernel-name-base", "function",
  };
  if (!options.kernel_regex.empty()) {
    argv.push_back("-k");
    argv.push_back(absl::StrCat("regex:", options.kernel_regex));
  }
  for (std::string a :
       {std::string("-s"), absl::StrCat(options.launch_skip), std::string("-c"),
        absl::StrCat(options.launch_count)}) {
    argv.push_back(std::move(a));
  }
  for (const std::string& s :
       options.sections.empty() ? DefaultNcuSections() : options.sections) {
    argv.push_back("--section");
    argv.push_back(s);
  }
  argv.push_back("--metrics");
  argv.push_back(absl::StrJoin(
      options.metrics.empty() ? DefaultNcuMetrics() : options.metrics, ","));
  argv.push_back("-f");
  argv.push_back("-o");
  argv.push_back(options.report_base);
  if (!options.log_file.empty()) {
    argv.push_back("--log-file");
    argv.push_back(options.log_file);
  }
  argv.insert(argv.end(), program_argv.begin(), program_argv.end());
  return argv;
}

std::vector<std::string> NcuExportArgv(const std::string& ncu,
                                       const std::string& report_path,
                                       const std::string& page) {
  std::vector<std::string> argv = {ncu,         "-i", report_path,     "--csv",
                                   "--page",    page, "--print-units", "base",
                                   "--print-fp"};
  if (page == "details") {
    for (const char* a :
         {"--print-details", "all", "--print-metric-name", "label-name"}) {
      argv.push_back(a);
    }
  }
  return argv;
}

namespace {

// Fields in one CSV record line (quotes doubled inside quoted fields).
int CountFields(absl::string_view line) {
  int fields = 1;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '"') {
      if (quoted && i + 1 < line.size() && line[i + 1] == '"') {
        ++i;
      } else {
        quoted = !quoted;
      }
    } else if (c == ',' && !quoted) {
      ++fields;
    }
  }
  return fields;
}

}  // namespace

std::string NcuCsvRecords(std::string_view console) {
  absl::string_view console_text(console.data(), console.size());
  if (absl::StartsWith(console_text, "\xEF\xBB\xBF"))
    console_text.remove_prefix(3);
  std::string out;
  int header_fields = 0;
  for (absl::string_view line : absl::StrSplit(console_text, '\n')) {
    absl::ConsumeSuffix(&line, "\r");
    if (!absl::StartsWith(line, "\"") || !absl::StrContains(line, "\",\""))
      continue;
    // Every ncu field is quoted, so a line ending in `",` has one empty
    // unquoted field too many (details-page metric rows).
    if (absl::EndsWith(line, "\",")) line.remove_suffix(1);
    absl::StrAppend(&out, line);
    const int fields = CountFields(line);
    if (header_fields == 0) {
      header_fields = fields;
    } else {
      // Metric rows of a details page with rules stop before the five rule
      // columns: give them empty cells.
      for (int i = fields; i < header_fields; ++i)
        absl::StrAppend(&out, ",\"\"");
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

}  // namespace tunefarm
