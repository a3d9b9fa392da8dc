#include "agent/variant_runner.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/files.h"
#include "common/logging.h"

namespace tunefarm {
namespace {

constexpr size_t kStderrTailBytes = 4096;
constexpr char kRunnerName[] = "tunefarm-variant-runner";

std::atomic<int64_t> g_total_starts{0};

}  // namespace

int64_t TotalVariantRunnerStarts() { return g_total_starts.load(); }

std::string FindVariantRunnerBinary() {
  const std::string beside = ExecutableDir() + "/" + kRunnerName;
  if (access(beside.c_str(), X_OK) == 0) return beside;
  return FindExecutable(kRunnerName);
}

std::string FindPyVariantRunner() {
  const std::string beside = ExecutableDir() + "/tunefarm-py-runner.py";
  return access(beside.c_str(), R_OK) == 0 ? beside : "";
}

VariantRunner::VariantRunner(VariantRunnerOptions options)
    : options_(std::move(options)) {}

VariantRunner::~VariantRunner() {
  absl::MutexLock lock(&mu_);
  KillLocked();
}

void VariantRunner::Recycle() {
  absl::MutexLock lock(&mu_);
  KillLocked();
}

int VariantRunner::KillLocked() {
  int status = 0;
  if (pid_ > 0) {
    kill(-pid_, SIGKILL);
    kill(pid_, SIGKILL);
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (fd_ >= 0) close(fd_);
  pid_ = -1;
  fd_ = -1;
  loaded_.clear();
  return status;
}

int VariantRunner::ReapLocked() {
  int status = 0;
  if (pid_ > 0) {
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    kill(-pid_, SIGKILL);  // anything the variant left in its group
  }
  if (fd_ >= 0) close(fd_);
  pid_ = -1;
  fd_ = -1;
  loaded_.clear();
  return status;
}

absl::Status VariantRunner::StartLocked(
    const std::vector<std::pair<std::string, std::string>>& env) {
  if (options_.runner_binary.empty()) {
    return absl::FailedPreconditionError(
        "variant runner: no tunefarm-variant-runner binary configured");
  }
  // Everything the child needs, allocated before fork.
  const std::string exe = options_.runner_binary;
  std::vector<char*> argv = {const_cast<char*>(exe.c_str())};
  for (const std::string& a : options_.runner_args) {
    argv.push_back(const_cast<char*>(a.c_str()));
  }
  argv.push_back(nullptr);
  const std::vector<std::string> env_strings = ChildEnvironment(env);
  std::vector<char*> envp;
  for (const std::string& e : env_strings)
    envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    return absl::InternalError(
        absl::StrCat("variant runner: socketpair: ", strerror(errno)));
  }
  const int log_fd =
      open(options_.log_path.empty() ? "/dev/null" : options_.log_path.c_str(),
           O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  const int in_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int report[2] = {-1, -1};
  if (log_fd < 0 || in_fd < 0 || pipe2(report, O_CLOEXEC) != 0) {
    const int e = errno;
    for (int fd : {sv[0], sv[1], log_fd, in_fd, report[0], report[1]}) {
      if (fd >= 0) close(fd);
    }
    return absl::InternalError(absl::StrCat(
        "variant runner: cannot open ", options_.log_path, ": ", strerror(e)));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    const int e = errno;
    for (int fd : {sv[0], sv[1], log_fd, in_fd, report[0], report[1]})
      close(fd);
    return absl::ResourceExhaustedError(
        absl::StrCat("variant runner: fork: ", strerror(e)));
  }
  if (pid == 0) {
    // Child: async-signal-safe calls only.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(0);
    sigset_t all;
    sigemptyset(&all);
    sigprocmask(SIG_SETMASK, &all, nullptr);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    for (int s : {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD}) {
      sigaction(s, &dfl, nullptr);
    }
    if (dup2(in_fd, 0) < 0 || dup2(log_fd, 1) < 0 || dup2(log_fd, 2) < 0 ||
        dup2(sv[1], 3) < 0) {
      int e = errno;
      ssize_t ignored = write(report[1], &e, sizeof(e));
      (void)ignored;
      _exit(127);
    }
    execve(exe.c_str(), argv.data(), envp.data());
    int e = errno;
    ssize_t ignored = write(report[1], &e, sizeof(e));
    (void)ignored;
    _exit(127);
  }
  setpgid(pid, pid);
  close(sv[1]);
  close(log_fd);
  close(in_fd);
  close(report[1]);
  int err = 0;
  ssize_t got;
  do {
    got = read(report[0], &err, sizeof(err));
  } while (got < 0 && errno == EINTR);
  close(report[0]);
  if (got == static_cast<ssize_t>(sizeof(err))) {
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    close(sv[0]);
    return absl::FailedPreconditionError(absl::StrCat(
        "variant runner: cannot start ", exe, ": ", strerror(err)));
  }
  pid_ = pid;
  fd_ = sv[0];
  env_ = env;
  loaded_.clear();
  const int64_t n = ++starts_;
  const int64_t total = ++g_total_starts;
  spdlog::info(
      "{}: variant runner started (pid {}, start {} of this board, {} "
      "in this process)",
      options_.name, pid, n, total);
  return absl::OkStatus();
}

absl::StatusOr<ProcessResult> VariantRunner::Run(const ProcessSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty()) {
    return absl::InvalidArgumentError("VariantRunner: empty argv");
  }
  const std::string& lib = spec.argv[0];
  absl::MutexLock lock(&mu_);
  if (pid_ > 0 && (env_ != spec.env || (!loaded_.contains(lib) &&
                                        static_cast<int>(loaded_.size()) >=
                                            options_.recycle_after))) {
    spdlog::info("{}: recycling the variant runner ({} variants loaded)",
                 options_.name, loaded_.size());
    KillLocked();
  }
  if (pid_ <= 0) {
    absl::Status st = StartLocked(spec.env);
    if (!st.ok()) return st;
  }
  std::vector<std::string> request = {lib, spec.cwd, spec.stdout_path,
                                      spec.stderr_path};
  for (const std::string& a : spec.argv) request.push_back(a);

  ProcessResult result;
  const absl::Time start = absl::Now();
  auto died = [&](int status) {
    if (WIFEXITED(status)) {
      result.exit_code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
      result.term_signal = WTERMSIG(status);
    }
  };
  auto finish = [&]() -> absl::StatusOr<ProcessResult> {
    result.wall = absl::Now() - start;
    result.stderr_tail = ReadFileTail(spec.stderr_path, kStderrTailBytes);
    return result;
  };
  if (!runner_wire::WriteFrame(fd_, request)) {
    died(ReapLocked());
    return finish();
  }
  loaded_.insert(lib);
  const absl::Time deadline = start + spec.timeout;
  while (true) {
    struct pollfd p = {fd_, POLLIN, 0};
    const int r = poll(&p, 1, 10);
    if (r < 0 && errno != EINTR) {
      return absl::InternalError(
          absl::StrCat("variant runner: poll: ", strerror(errno)));
    }
    if (r > 0) break;
    if (spec.cancel != nullptr && spec.cancel->load()) {
      result.cancelled = true;
    } else if (absl::Now() >= deadline) {
      result.timed_out = true;
    }
    if (result.cancelled || result.timed_out) {
      died(KillLocked());
      return finish();
    }
  }
  std::vector<std::string> reply;
  if (!runner_wire::ReadFrame(fd_, &reply) || reply.size() != 2) {
    // The variant took the runner down (or it exited from inside).
    died(ReapLocked());
    return finish();
  }
  if (reply[0] == "error") {
    // Like an exec failure: the runner stays usable.
    loaded_.erase(lib);
    return absl::FailedPreconditionError(reply[1]);
  }
  int code = 0;
  if (reply[0] != "exit" || !absl::SimpleAtoi(reply[1], &code)) {
    KillLocked();
    return absl::InternalError("variant runner: malformed reply");
  }
  result.exit_code = code;
  return finish();
}

}  // namespace tunefarm
