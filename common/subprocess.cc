#include "common/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/files.h"

namespace tunefarm {

absl::StatusOr<std::unique_ptr<Subprocess>> Subprocess::Start(
    const std::vector<std::string>& argv, const std::string& log_path) {
  if (argv.empty()) return absl::InvalidArgumentError("empty argv");
  if (::access(argv[0].c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat("not an executable: ", argv[0],
                                            ": ", std::strerror(errno)));
  }
  // Everything the child needs is prepared before fork: only
  // async-signal-safe calls happen between fork and exec.
  std::vector<char*> cargv;
  cargv.reserve(argv.size() + 1);
  for (const auto& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  int log_fd = -1;
  if (!log_path.empty()) {
    log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
                    0644);
    if (log_fd < 0) {
      return absl::UnavailableError(absl::StrCat("cannot open log ", log_path,
                                                 ": ", std::strerror(errno)));
    }
  }
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    if (log_fd >= 0) ::close(log_fd);
    return absl::ResourceExhaustedError(
        absl::StrCat("fork: ", std::strerror(err)));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    if (log_fd >= 0) {
      ::dup2(log_fd, STDOUT_FILENO);
      ::dup2(log_fd, STDERR_FILENO);
    }
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also from the parent, to win the race with Signal
  if (log_fd >= 0) ::close(log_fd);
  return std::unique_ptr<Subprocess>(new Subprocess(pid));
}

Subprocess::~Subprocess() {
  if (!exited_) {
    Signal(SIGKILL);
    Wait(absl::Seconds(5));
  }
}

void Subprocess::Signal(int sig) {
  if (exited_) return;
  ::kill(-pid_, sig);
  ::kill(pid_, sig);
}

std::optional<int> Subprocess::Wait(absl::Duration timeout) {
  if (exited_) return wait_status_;
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_ || (r < 0 && errno == ECHILD)) {
      exited_ = true;
      wait_status_ = status;
      return status;
    }
    if (absl::Now() >= deadline) return std::nullopt;
    absl::SleepFor(absl::Milliseconds(10));
  }
}

int Subprocess::Stop(absl::Duration grace) {
  Signal(SIGTERM);
  if (auto s = Wait(grace)) return *s;
  Signal(SIGKILL);
  return Wait(absl::Seconds(10)).value_or(-1);
}

absl::StatusOr<std::string> WaitForFile(const std::string& path,
                                        absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    auto content = ReadFile(path);
    if (content.ok() && !absl::StripAsciiWhitespace(*content).empty()) {
      return std::string(absl::StripAsciiWhitespace(*content));
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("timed out waiting for ", path));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

}  // namespace tunefarm
