// Nsight Compute for the cuda board: the argv of the profile run and of the
// CSV exports, per shared/reference/cuda-backend.md §0, and the clean-up of
// ncu's console CSV into plain RFC-4180 records.
//
// The recipe: one ncu run per candidate, `--clock-control none` (the lent
// machines' clocks must not be touched), `--cache-control all`, kernel
// replay, the candidate kernel picked by an anchored regex on its function
// name after 3 warm-up launches (`-s 3 -c 1`), explicit sections plus the
// metrics below, into a report file; then two exports of that report
// (`--page raw` and `--page details`) with `--print-units base --print-fp`
// so units are stable. Timings never come from this run.
//
// Pure functions over strings; thread-safe.
#ifndef TUNEFARM_AGENT_NCU_H_
#define TUNEFARM_AGENT_NCU_H_

#include <string>
#include <string_view>
#include <vector>

namespace tunefarm {

struct NcuProfileOptions {
  std::string ncu = "ncu";  // a path, or a name looked up in PATH
  // Anchored regex on the kernel's function name, e.g. "^GemmKernel$".
  std::string kernel_regex;
  int launch_skip = 3;
  int launch_count = 1;
  // Report path without ".ncu-rep" (ncu appends it); and ncu's own log.
  std::string report_base;
  std::string log_file;
  std::vector<std::string> sections;  // empty = DefaultNcuSections()
  std::vector<std::string> metrics;   // empty = DefaultNcuMetrics()
};

// SpeedOfLight, LaunchStats, Occupancy, WarpStateStats, SchedulerStats,
// ComputeWorkloadAnalysis, MemoryWorkloadAnalysis.
const std::vector<std::string>& DefaultNcuSections();

// The 41 metrics checked against `ncu --query-metrics-mode all` on an H200
// (cuda-backend.md §0), stall reasons spelled out in full.
const std::vector<std::string>& DefaultNcuMetrics();

// ncu <flags> <program_argv...>.
std::vector<std::string> NcuProfileArgv(
    const NcuProfileOptions& options,
    const std::vector<std::string>& program_argv);

// ncu -i <report> --csv --page <page> --print-units base --print-fp
// (details also gets --print-details all --print-metric-name label-name).
// `page` is "raw" or "details".
std::vector<std::string> NcuExportArgv(const std::string& ncu,
                                       const std::string& report_path,
                                       const std::string& page);

// The CSV records of ncu console output: drops a UTF-8 BOM, CRs, and every
// line that is not a record (==PROF==, ==WARNING==, program output: a
// record starts with `"` and holds `","`), and the trailing comma ncu puts
// after the value of a details-page metric row; rows shorter than the header
// (metric rows of a details page that also has rule columns) are padded
// with empty cells. The result parses with analyzer/csv.h.
std::string NcuCsvRecords(std::string_view console_text);

}  // namespace tunefarm

#endif  // TUNEFARM_AGENT_NCU_H_
