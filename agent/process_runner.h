// RunProcess: runs one child process (a kernel build, run or profile step)
// with a timeout and a cancel flag, the way every board backend needs it.
//
// The argv is exec'd directly, never through a shell, so nothing in it is
// interpreted. The child gets its own process group; on timeout or cancel the
// whole group (the child and anything it spawned) is SIGKILLed and the child
// is reaped. The caller owns the spec; the runner owns nothing after it
// returns. Thread-safe: safe to call from several threads at once (all memory
// is allocated before fork; only async-signal-safe calls run between fork and
// exec).
#ifndef TUNEFARM_AGENT_PROCESS_RUNNER_H_
#define TUNEFARM_AGENT_PROCESS_RUNNER_H_

#include <atomic>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tunefarm {

struct ProcessSpec {
  std::vector<std::string>
      argv;         // argv[0]: a path, or a name looked up in PATH
  std::string cwd;  // "" = inherit
  // Added to (or overriding in) the inherited environment.
  std::vector<std::pair<std::string, std::string>> env;
  // Files the child's output goes to ("" = /dev/null); truncated first.
  std::string stdout_path, stderr_path;
  absl::Duration timeout = absl::Minutes(5);
  // When it becomes true, the process group is killed. May be null.
  const std::atomic<bool>* cancel = nullptr;
};

struct ProcessResult {
  int exit_code = -1;   // -1 when killed by a signal
  int term_signal = 0;  // the signal that ended the child, 0 if it exited
  bool timed_out = false;
  bool cancelled = false;
  absl::Duration wall;
  std::string stderr_tail;  // the last ~4 KiB of stderr_path
};

// Runs `spec` to completion (or timeout / cancel). Non-OK only when the
// process could not be started: bad spec, unopenable output file, or exec
// failure (the error names argv[0]).
absl::StatusOr<ProcessResult> RunProcess(const ProcessSpec& spec);

// "SIGSEGV" for 11 etc.; "signal N" for unknown numbers.
std::string SignalName(int sig);

// Helpers shared with VariantRunner (agent/variant_runner.h).
// The inherited environment with `extra` added or overriding, as KEY=VALUE.
std::vector<std::string> ChildEnvironment(
    const std::vector<std::pair<std::string, std::string>>& extra);
// The last `max_bytes` of the file at `path` ("" when unreadable).
std::string ReadFileTail(const std::string& path, size_t max_bytes);

}  // namespace tunefarm

#endif  // TUNEFARM_AGENT_PROCESS_RUNNER_H_
