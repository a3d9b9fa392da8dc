// `tunefarm export SWEEP... [--out DIR] [--merge DB.json...]`: writes the
// tuning database of finished sweeps (tuning_db/database.h) as
// DIR/tuning_db.json with its C++ header and Python module, merging into
// the database already in DIR and any --merge files by the merge rule, and
// appends every change to DIR/merge.log (docs/tuning-db.md).
//
// One CLI invocation, one thread.
#ifndef TUNEFARM_CLI_EXPORT_COMMAND_H_
#define TUNEFARM_CLI_EXPORT_COMMAND_H_

#include <string>
#include <vector>

#include "cli/farm_client.h"

namespace tunefarm {

struct ExportOptions {
  std::vector<std::string> sweeps;
  std::string out_dir = "tuning-db";
  std::vector<std::string> merge_files;  // other exports to merge in
  // Where the operators' packages are, for their manifest defaults (the
  // lookup fallback); the shipped ops/ by default.
  std::vector<std::string> ops_dirs;
};

// The exit code (cli/farm_client.h). With no sweeps, only --merge files
// are combined and no coordinator is contacted.
int RunExport(FarmClient& client, const ExportOptions& options);

// Where `tunefarm export` writes the JSON in `out_dir`.
std::string TuningDbJsonPath(const std::string& out_dir);

}  // namespace tunefarm

#endif  // TUNEFARM_CLI_EXPORT_COMMAND_H_
