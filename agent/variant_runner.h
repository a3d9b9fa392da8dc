// VariantRunner: a board's persistent runner, a long-lived child process
// (tunefarm-variant-runner, agent/variant_runner_main.cc) that loads each
// variant, built as a shared object, and runs its stages in-process, so a
// timed block costs a function call instead of a process start (and, on a
// GPU, a device context and its buffers).
//
// Run() has RunProcess's contract (agent/process_runner.h) with argv[0] the
// variant's shared object (for the Python runner, tunefarm-py-runner, the
// program's .py file): the stage's argv, cwd, stdout/stderr files,
// timeout and cancel behave the same, and so do the results: the stage's
// exit code; the runner killed by a signal while it ran the stage →
// term_signal (the variant crashed it); past the timeout or cancelled → the
// runner's process group is SIGKILLed and timed_out/cancelled is set. A
// runner that died or was killed is started afresh by the next Run. The
// runner is its own process group and dies with the thread that started it
// (PR_SET_PDEATHSIG) or when its control socket closes, so no runner
// outlives its agent.
//
// Recycling: a runner that has loaded `recycle_after` distinct variants is
// replaced before it loads another (bounds what leaked memory or state a
// variant leaves behind); Recycle() replaces it at once (the board calls it
// after a variant that failed in it). Run with a different `env` than the
// running runner's restarts it with the new environment.
//
// starts() counts the runner processes this object started;
// TotalVariantRunnerStarts() counts those of the whole process (logged at
// each start, and what tests and bench/round_cost read).
//
// Thread-safety: every method may be called from any thread; Run calls are
// serialised (one stage at a time). The destructor kills the runner.
#ifndef TUNEFARM_AGENT_VARIANT_RUNNER_H_
#define TUNEFARM_AGENT_VARIANT_RUNNER_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "agent/process_runner.h"

namespace tunefarm {

struct VariantRunnerOptions {
  std::string runner_binary;  // tunefarm-variant-runner (a path)
  // Arguments after the binary: the Python runner is an interpreter given
  // agent/py_variant_runner.py.
  std::vector<std::string> runner_args;
  int recycle_after = 32;  // distinct variants one runner may load
  std::string name;        // for the log ("<board id>")
  // The runner's own stdout/stderr (its diagnostics between stages); "" =
  // /dev/null.
  std::string log_path;
};

class VariantRunner {
 public:
  explicit VariantRunner(VariantRunnerOptions options);
  ~VariantRunner();
  VariantRunner(const VariantRunner&) = delete;
  VariantRunner& operator=(const VariantRunner&) = delete;

  // RunProcess for a stage of the shared object spec.argv[0]. Non-OK when
  // the runner cannot be started (the board's fault), or NOT_FOUND /
  // FAILED_PRECONDITION naming the shared object when it cannot be loaded
  // or lacks the entry point (like an exec failure).
  absl::StatusOr<ProcessResult> Run(const ProcessSpec& spec);

  // Kills the runner now; the next Run starts a fresh one.
  void Recycle();

  int64_t starts() const { return starts_.load(); }

 private:
  absl::Status StartLocked(
      const std::vector<std::pair<std::string, std::string>>& env)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // SIGKILLs the runner's group and reaps it; returns its wait status.
  int KillLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reaps a runner that is exiting on its own; returns its wait status.
  int ReapLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const VariantRunnerOptions options_;
  std::atomic<int64_t> starts_{0};
  absl::Mutex mu_;
  pid_t pid_ ABSL_GUARDED_BY(mu_) = -1;
  int fd_ ABSL_GUARDED_BY(mu_) = -1;  // control socket
  std::vector<std::pair<std::string, std::string>> env_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> loaded_ ABSL_GUARDED_BY(mu_);
};

// Runner processes started by every VariantRunner of this process.
int64_t TotalVariantRunnerStarts();

// tunefarm-variant-runner beside this executable, else in PATH; "" when
// neither exists (boards then fall back to one process per stage).
std::string FindVariantRunnerBinary();

// tunefarm-py-runner.py (agent/py_variant_runner.py) beside this executable;
// "" when absent.
std::string FindPyVariantRunner();

// The wire format between VariantRunner and the runner (also used by
// agent/variant_runner_main.cc). A request is a frame of strings: the
// shared object, cwd, stdout path, stderr path, then the argv. A reply is a
// frame of strings: the kind ("exit" with the code as the second string, or
// "error" with a message), so both ends parse with the same code.
namespace runner_wire {
// Writes one frame (u32 count, then u32 length + bytes per string). False
// when the peer is gone.
bool WriteFrame(int fd, const std::vector<std::string>& parts);
// Reads one frame. False on EOF or a malformed frame.
bool ReadFrame(int fd, std::vector<std::string>* parts);
}  // namespace runner_wire

}  // namespace tunefarm

#endif  // TUNEFARM_AGENT_VARIANT_RUNNER_H_
