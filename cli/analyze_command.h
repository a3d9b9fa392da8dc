// `tunefarm analyze PROFILE_DIR [--parent DIR] [--out DIR] [--output json]`:
// the analyzer offline, without a farm. Reads every regular file under
// PROFILE_DIR (or PROFILE_DIR itself when it is a file), runs Analyze, and
// writes perf-analysis.md and diagnosis.json to --out (default:
// PROFILE_DIR, or the file's folder). Prints the markdown, or the JSON with
// --output json, to stdout. The JSON prints every primitive field (zeros
// included) and 64-bit counts as numbers (MessageToJsonAlways).
//
// Exit codes: 0 analysed; 2 nothing readable (no recognised profiler file,
// or none parsed) with the reasons on stderr; 1 an I/O error (unreadable
// input, unwritable --out). With --output json a failure also prints
// {"error": {"exit_code", "message", "evidence_gaps"}} on stdout.
// Thread-compatible; writes only under --out.
#ifndef TUNEFARM_CLI_ANALYZE_COMMAND_H_
#define TUNEFARM_CLI_ANALYZE_COMMAND_H_

#include <string>

namespace tunefarm {

struct AnalyzeOptions {
  std::string profile_dir;
  std::string parent_dir;       // empty: no parent comparison
  std::string out_dir;          // empty: next to the profile
  std::string output = "text";  // text | json
  std::string chip;             // optional: enables the chip's roofline / cores
};

int RunAnalyze(const AnalyzeOptions& options);

}  // namespace tunefarm

#endif  // TUNEFARM_CLI_ANALYZE_COMMAND_H_
