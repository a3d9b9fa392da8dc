#include "agent/process_runner.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/files.h"

extern char** environ;

namespace tunefarm {
namespace {

constexpr size_t kStderrTailBytes = 4096;

// Where the child reports a failure before exec: which step, and errno.
enum ChildStep : int { kStepChdir = 1, kStepExec = 2, kStepDup = 3 };

// Resolves argv[0] against PATH in the parent, because execvp may allocate
// and is not async-signal-safe after fork in a multi-threaded program.
std::string ResolveExecutable(const std::string& name) {
  std::string found = FindExecutable(name);
  return found.empty() ? name : found;  // else exec fails and is reported
}

std::vector<std::string> BuildEnvironment(
    const std::vector<std::pair<std::string, std::string>>& extra) {
  std::map<std::string, std::string> vars;
  std::vector<std::string> order;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string kv(*e);
    size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    std::string key = kv.substr(0, eq);
    if (vars.emplace(key, kv.substr(eq + 1)).second) order.push_back(key);
  }
  for (const auto& [k, v] : extra) {
    if (vars.find(k) == vars.end()) order.push_back(k);
    vars[k] = v;
  }
  std::vector<std::string> out;
  out.reserve(order.size());
  for (const std::string& k : order)
    out.push_back(absl::StrCat(k, "=", vars[k]));
  return out;
}

absl::StatusOr<int> OpenOutput(const std::string& path) {
  const char* p = path.empty() ? "/dev/null" : path.c_str();
  int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot open output file ", p, ": ", strerror(errno)));
  }
  return fd;
}

std::string ReadTail(const std::string& path, size_t max_bytes) {
  if (path.empty()) return "";
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  struct stat st;
  std::string out;
  if (fstat(fd, &st) == 0 && st.st_size > 0) {
    off_t start = st.st_size > static_cast<off_t>(max_bytes)
                      ? st.st_size - static_cast<off_t>(max_bytes)
                      : 0;
    out.resize(static_cast<size_t>(st.st_size - start));
    ssize_t n = pread(fd, out.data(), out.size(), start);
    out.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  close(fd);
  return out;
}

void NapFor(absl::Duration d) {
  struct timespec ts = absl::ToTimespec(d);
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

// Writes the failed step and errno to the error pipe and exits. Only
// async-signal-safe calls.
[[noreturn]] void ChildFail(int err_fd, int step) {
  int msg[2] = {step, errno};
  ssize_t ignored = write(err_fd, msg, sizeof(msg));
  (void)ignored;
  _exit(127);
}

}  // namespace

std::vector<std::string> ChildEnvironment(
    const std::vector<std::pair<std::string, std::string>>& extra) {
  return BuildEnvironment(extra);
}

std::string ReadFileTail(const std::string& path, size_t max_bytes) {
  return ReadTail(path, max_bytes);
}

std::string SignalName(int sig) {
  switch (sig) {
    case SIGHUP:
      return "SIGHUP";
    case SIGINT:
      return "SIGINT";
    case SIGQUIT:
      return "SIGQUIT";
    case SIGILL:
      return "SIGILL";
    case SIGTRAP:
      return "SIGTRAP";
    case SIGABRT:
      return "SIGABRT";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGKILL:
      return "SIGKILL";
    case SIGSEGV:
      return "SIGSEGV";
    case SIGPIPE:
      return "SIGPIPE";
    case SIGALRM:
      return "SIGALRM";
    case SIGTERM:
      return "SIGTERM";
    case SIGXCPU:
      return "SIGXCPU";
    case SIGXFSZ:
      return "SIGXFSZ";
    case SIGSYS:
      return "SIGSYS";
    default:
      return absl::StrCat("signal ", sig);
  }
}

absl::StatusOr<ProcessResult> RunProcess(const ProcessSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty()) {
    return absl::InvalidArgumentError("RunProcess: empty argv");
  }
  // Everything the child needs, allocated before fork.
  const std::string exe = ResolveExecutable(spec.argv[0]);
  std::vector<char*> argv;
  argv.reserve(spec.argv.size() + 1);
  for (const std::string& a : spec.argv)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const std::vector<std::string> env_strings = BuildEnvironment(spec.env);
  std::vector<char*> envp;
  envp.reserve(env_strings.size() + 1);
  for (const std::string& e : env_strings)
    envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const char* cwd = spec.cwd.empty() ? nullptr : spec.cwd.c_str();

  absl::StatusOr<int> out_fd = OpenOutput(spec.stdout_path);
  if (!out_fd.ok()) return out_fd.status();
  absl::StatusOr<int> err_fd = OpenOutput(spec.stderr_path);
  if (!err_fd.ok()) {
    close(*out_fd);
    return err_fd.status();
  }
  int in_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int report[2];
  if (in_fd < 0 || pipe2(report, O_CLOEXEC) != 0) {
    int e = errno;
    close(*out_fd);
    close(*err_fd);
    if (in_fd >= 0) close(in_fd);
    return absl::InternalError(absl::StrCat("RunProcess: ", strerror(e)));
  }

  const absl::Time start = absl::Now();
  pid_t pid = fork();
  if (pid < 0) {
    int e = errno;
    close(*out_fd);
    close(*err_fd);
    close(in_fd);
    close(report[0]);
    close(report[1]);
    return absl::ResourceExhaustedError(
        absl::StrCat("fork for ", spec.argv[0], " failed: ", strerror(e)));
  }
  if (pid == 0) {
    // Child: async-signal-safe calls only.
    setpgid(0, 0);
    // A variant must not outlive an agent killed with SIGKILL (it would keep
    // the board busy); the forking thread lives until the variant ends.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    sigset_t all;
    sigemptyset(&all);
    sigprocmask(SIG_SETMASK, &all, nullptr);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    for (int s : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD}) {
      sigaction(s, &dfl, nullptr);
    }
    if (dup2(in_fd, 0) < 0 || dup2(*out_fd, 1) < 0 || dup2(*err_fd, 2) < 0) {
      ChildFail(report[1], kStepDup);
    }
    if (cwd != nullptr && chdir(cwd) != 0) ChildFail(report[1], kStepChdir);
    execve(exe.c_str(), argv.data(), envp.data());
    ChildFail(report[1], kStepExec);
  }
  // Parent. Set the group here too, so a kill right after fork cannot miss.
  setpgid(pid, pid);
  close(*out_fd);
  close(*err_fd);
  close(in_fd);
  close(report[1]);
  int msg[2] = {0, 0};
  ssize_t got;
  do {
    got = read(report[0], msg, sizeof(msg));
  } while (got < 0 && errno == EINTR);
  close(report[0]);
  if (got == static_cast<ssize_t>(sizeof(msg))) {
    // The child failed before exec; reap it and report.
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    const char* what = msg[0] == kStepChdir ? "chdir to " : "exec ";
    std::string target = msg[0] == kStepChdir ? spec.cwd : spec.argv[0];
    absl::StatusCode code = msg[1] == ENOENT
                                ? absl::StatusCode::kNotFound
                                : absl::StatusCode::kFailedPrecondition;
    return absl::Status(
        code, absl::StrCat("cannot start ", spec.argv[0], ": ", what, target,
                           ": ", strerror(msg[1])));
  }

  ProcessResult result;
  const absl::Time deadline = start + spec.timeout;
  absl::Duration nap = absl::Milliseconds(1);
  int status = 0;
  bool killed = false;
  while (true) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) {
      return absl::InternalError(
          absl::StrCat("waitpid for ", spec.argv[0], ": ", strerror(errno)));
    }
    if (!killed) {
      if (spec.cancel != nullptr && spec.cancel->load()) {
        result.cancelled = true;
      } else if (absl::Now() >= deadline) {
        result.timed_out = true;
      }
      if (result.cancelled || result.timed_out) {
        kill(-pid, SIGKILL);
        killed = true;
        nap = absl::Milliseconds(1);
        continue;
      }
    }
    NapFor(nap);
    nap = std::min(nap * 2, absl::Milliseconds(10));
  }
  result.wall = absl::Now() - start;
  // Anything the child left behind in its group (background jobs) goes too.
  kill(-pid, SIGKILL);
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.term_signal = WTERMSIG(status);
  }
  result.stderr_tail = ReadTail(spec.stderr_path, kStderrTailBytes);
  return result;
}

}  // namespace tunefarm
