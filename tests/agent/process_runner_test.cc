#include "agent/process_runner.h"

#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "common/files.h"
#include "gtest/gtest.h"

namespace tunefarm {
namespace {

class ProcessRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> dir = MakeTempDir("process_runner_test");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = *dir;
  }
  void TearDown() override { ASSERT_TRUE(RemoveAll(dir_).ok()); }

  std::string Read(const std::string& name) {
    absl::StatusOr<std::string> s = ReadFile(dir_ + "/" + name);
    return s.ok() ? *s : "<missing>";
  }
  bool Exists(const std::string& name) {
    struct stat st;
    return stat((dir_ + "/" + name).c_str(), &st) == 0;
  }

  std::string dir_;
};

// A pid is gone when /proc has no entry for it or it is a zombie waiting for
// its (re)parent.
bool ProcessGone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return true;
  std::string line;
  std::getline(stat, line);
  size_t paren = line.rfind(')');
  return paren == std::string::npos || paren + 2 >= line.size() ||
         line[paren + 2] == 'Z' || line[paren + 2] == 'X';
}

TEST_F(ProcessRunnerTest, ReportsExitCode) {
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", "echo out; echo err >&2; exit 3"};
  spec.stdout_path = dir_ + "/out";
  spec.stderr_path = dir_ + "/err";
  absl::StatusOr<ProcessResult> r = RunProcess(spec);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->term_signal, 0);
  EXPECT_FALSE(r->timed_out);
  EXPECT_FALSE(r->cancelled);
  EXPECT_EQ(Read("out"), "out\n");
  EXPECT_EQ(r->stderr_tail, "err\n");
}

TEST_F(ProcessRunnerTest, ReportsSignal) {
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", "kill -SEGV $$"};
  absl::StatusOr<ProcessResult> r = RunProcess(spec);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->term_signal, SIGSEGV);
  EXPECT_EQ(r->exit_code, -1);
  EXPECT_EQ(SignalName(r->term_signal), "SIGSEGV");
}

TEST_F(ProcessRunnerTest, TimeoutKillsWholeProcessGroup) {
  ProcessSpec spec;
  // The background sleep is a grandchild; it must die with the group.
  spec.argv = {"/bin/sh", "-c",
               "sleep 30 & echo $! > " + dir_ + "/bg.pid; sleep 30"};
  spec.timeout = absl::Milliseconds(300);
  const absl::Time start = absl::Now();
  absl::StatusOr<ProcessResult> r = RunProcess(spec);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->term_signal, SIGKILL);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_GE(r->wall, absl::Milliseconds(300));
  int bg = 0;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(Read("bg.pid")), &bg))
      << Read("bg.pid");
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    gone = ProcessGone(bg);
    if (!gone) absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_TRUE(gone) << "grandchild " << bg << " survived the timeout";
}

TEST_F(ProcessRunnerTest, CancelKillsTheProcess) {
  std::atomic<bool> cancel{false};
  ProcessSpec spec;
  spec.argv = {"/bin/sleep", "30"};
  spec.cancel = &cancel;
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(100));
    cancel = true;
  });
  const absl::Time start = absl::Now();
  absl::StatusOr<ProcessResult> r = RunProcess(spec);
  canceller.join();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->cancelled);
  EXPECT_FALSE(r->timed_out);
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST_F(ProcessRunnerTest, ExecFailureNamesTheProgram) {
  ProcessSpec spec;
  spec.argv = {dir_ + "/no-such-program", "x"};
  absl::StatusOr<ProcessResult> r = RunProcess(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find(dir_ + "/no-such-program"),
            std::string::npos)
      << r.status();

  // Present but not executable.
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/not-exec", "#!/bin/sh\n").ok());
  spec.argv = {dir_ + "/not-exec"};
  r = RunProcess(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not-exec"), std::string::npos)
      << r.status();

  spec.argv = {};
  EXPECT_FALSE(RunProcess(spec).ok());
}

TEST_F(ProcessRunnerTest, ArgumentsArePassedLiterally) {
  ProcessSpec spec;
  const std::string marker = dir_ + "/pwned";
  spec.argv = {"printf",
               "%s\\n",
               "; rm -rf /",
               "$(touch " + marker + ")",
               "`touch " + marker + "`",
               "a b",
               "*",
               "'\""};
  spec.stdout_path = dir_ + "/out";
  absl::StatusOr<ProcessResult> r = RunProcess(spec);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 0);
  EXPECT_EQ(Read("out"), "; rm -rf /\n$(touch " + marker + ")\n`touch " +
                             marker + "`\na b\n*\n'\"\n");
  EXPECT_FALSE(Exists("pwned"));
}

TEST_F(ProcessRunnerTest, EnvironmentAndWorkingDirectory) {
  ProcessSpec spec;
  spec.argv = {"/bin/sh", "-c", "echo \"$TUNEFARM_TEST_VAR\"; pwd"};
  spec.env = {{"TUNEFARM_TEST_VAR", "hello world"}};
  spec.cwd = dir_;
  spec.stdout_path = dir_ + "/out";
  absl::StatusOr<ProcessResult> r = RunProcess(spec);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(Read("out"), "hello world\n" + dir_ + "\n");

  spec.cwd = dir_ + "/missing-dir";
  r = RunProcess(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("missing-dir"), std::string::npos);
}

TEST_F(ProcessRunnerTest, StderrTailIsBounded) {
  ProcessSpec spec;
  spec.argv = {
      "/bin/sh", "-c",
      "i=0; while [ $i -lt 2000 ]; do echo 0123456789 >&2; i=$((i+1)); "
      "done; echo LAST >&2; exit 1"};
  spec.stderr_path = dir_ + "/err";
  absl::StatusOr<ProcessResult> r = RunProcess(spec);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->exit_code, 1);
  EXPECT_LE(r->stderr_tail.size(), 4096u);
  EXPECT_GT(r->stderr_tail.size(), 4000u);
  EXPECT_EQ(r->stderr_tail.substr(r->stderr_tail.size() - 5), "LAST\n");
}

TEST_F(ProcessRunnerTest, UnopenableOutputFileIsAnError) {
  ProcessSpec spec;
  spec.argv = {"/bin/true"};
  spec.stdout_path = dir_ + "/no/such/dir/out";
  absl::StatusOr<ProcessResult> r = RunProcess(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no/such/dir/out"), std::string::npos);
}

TEST_F(ProcessRunnerTest, ManyThreadsAtOnce) {
  constexpr int kThreads = 8;
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ProcessSpec spec;
      spec.argv = {"/bin/sh", "-c", "exit " + std::to_string(t)};
      absl::StatusOr<ProcessResult> r = RunProcess(spec);
      if (r.ok() && r->exit_code == t) ++ok;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), kThreads);
}

}  // namespace
}  // namespace tunefarm
