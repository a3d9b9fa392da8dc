// Subprocess: a long-running child process started without a shell (the
// local farm's coordinator, agents and analyzer; tests' processes). Unlike
// agent/process_runner.h, which runs a variant to completion under a
// timeout, a Subprocess is started and left running until killed.
//
// Owned by one thread; the destructor kills (SIGKILL) and reaps a child that
// is still running.
#ifndef TUNEFARM_COMMON_SUBPROCESS_H_
#define TUNEFARM_COMMON_SUBPROCESS_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tunefarm {

class Subprocess {
 public:
  // Starts argv[0] (a path; PATH is not searched) with argv, stdout and
  // stderr appended to `log_path` ("" inherits the parent's). The child gets
  // its own process group and dies with the parent (PR_SET_PDEATHSIG).
  static absl::StatusOr<std::unique_ptr<Subprocess>> Start(
      const std::vector<std::string>& argv, const std::string& log_path);
  ~Subprocess();
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  pid_t pid() const { return pid_; }
  // Sends `sig` to the child's process group.
  void Signal(int sig);
  // Waits up to `timeout` for the child to exit; its wait status, or
  // nullopt while it still runs.
  std::optional<int> Wait(absl::Duration timeout);
  // SIGTERM, then SIGKILL after `grace`; returns the wait status.
  int Stop(absl::Duration grace);
  bool running() const { return !exited_; }

 private:
  explicit Subprocess(pid_t pid) : pid_(pid) {}
  pid_t pid_;
  bool exited_ = false;
  int wait_status_ = 0;
};

// Waits until `path` exists and is non-empty, up to `timeout`; its content
// with surrounding whitespace removed. DEADLINE_EXCEEDED names the file.
absl::StatusOr<std::string> WaitForFile(const std::string& path,
                                        absl::Duration timeout);

}  // namespace tunefarm

#endif  // TUNEFARM_COMMON_SUBPROCESS_H_
