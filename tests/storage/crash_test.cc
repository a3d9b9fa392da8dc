// Durability under kill -9: a real child process (storage_crash_writer)
// commits round+event WriteSets and acknowledges each on stdout; the test
// SIGKILLs it mid-write, reopens the database and checks that every
// acknowledged commit is present and intact, and that no commit is half
// applied.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "common/files.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "storage/rocksdb_store.h"
#include "storage/store.h"
#include "tests/storage/crash_record.h"

extern char** environ;

namespace tunefarm {
namespace {

using google::protobuf::util::MessageDifferencer;

// Reads newline-terminated numbers from `fd`, waiting at most `timeout_ms`
// for each chunk. Stops at EOF, on timeout, or once at least `want` numbers
// are in (want < 0: read to EOF); one read may bring in more than `want`.
void ReadAcks(int fd, int want, int timeout_ms, std::string& partial,
              std::vector<int64_t>& acks) {
  char buf[4096];
  while (want < 0 || static_cast<int>(acks.size()) < want) {
    pollfd p{fd, POLLIN, 0};
    int ready = ::poll(&p, 1, timeout_ms);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return;  // timeout: the caller's size check reports it
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // EOF
    partial.append(buf, static_cast<size_t>(n));
    size_t nl;
    while ((nl = partial.find('\n')) != std::string::npos) {
      acks.push_back(std::stoll(partial.substr(0, nl)));
      partial.erase(0, nl + 1);
    }
  }
}

TEST(StorageCrashTest, AcknowledgedCommitsSurviveSigkill) {
  absl::StatusOr<std::string> dir = MakeTempDir("storage_crash_test_");
  ASSERT_TRUE(dir.ok()) << dir.status();
  const std::string db_path = *dir + "/db";

  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0) << std::strerror(errno);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  std::string exe = STORAGE_CRASH_WRITER;
  std::vector<char*> argv = {exe.data(), const_cast<char*>(db_path.c_str()),
                             nullptr};
  pid_t pid = -1;
  int rc =
      ::posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  ASSERT_EQ(rc, 0) << "posix_spawn " << exe << ": " << std::strerror(rc);
  // Should an assertion end the test early, the writer must not outlive it.
  bool reaped = false;
  struct Reaper {
    pid_t pid;
    bool& reaped;
    ~Reaper() {
      if (!reaped) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
    }
  } reaper{pid, reaped};

  std::string partial;
  std::vector<int64_t> acks;
  ReadAcks(fds[0], 20, 20000, partial, acks);
  ASSERT_GE(acks.size(), 20u) << "writer acknowledged too few commits";

  // While the child holds the database, another process cannot open it.
  {
    absl::StatusOr<std::unique_ptr<Store>> second = OpenRocksDbStore(db_path);
    ASSERT_FALSE(second.ok());
    EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition)
        << second.status();
    EXPECT_NE(second.status().message().find("lock"), std::string::npos)
        << second.status();
  }

  ReadAcks(fds[0], 300, 20000, partial, acks);
  ASSERT_GE(acks.size(), 300u) << "writer acknowledged too few commits";
  ASSERT_EQ(::kill(pid, SIGKILL), 0) << std::strerror(errno);
  int wstatus = 0;
  ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
  reaped = true;
  ASSERT_TRUE(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL)
      << "writer was not killed mid-write (status " << wstatus << ")";
  // Acknowledgements still in the pipe were given before the kill, too.
  ReadAcks(fds[0], -1, 5000, partial, acks);
  ::close(fds[0]);

  for (size_t i = 0; i < acks.size(); ++i) {
    ASSERT_EQ(acks[i], static_cast<int64_t>(i) + 1) << "acks out of order";
  }
  const int64_t last_ack = acks.back();

  absl::StatusOr<std::unique_ptr<Store>> store = OpenRocksDbStore(db_path);
  ASSERT_TRUE(store.ok()) << store.status();

  for (int64_t i = 1; i <= last_ack; ++i) {
    absl::StatusOr<v1::Round> round = (*store)->GetRound(kCrashSweepId, i);
    ASSERT_TRUE(round.ok())
        << "acknowledged round " << i << ": " << round.status();
    ASSERT_TRUE(MessageDifferencer::Equals(*round, CrashRound(i)))
        << "round " << i << " differs";
  }

  absl::StatusOr<std::vector<v1::Round>> rounds =
      (*store)->ListRounds(kCrashSweepId);
  ASSERT_TRUE(rounds.ok()) << rounds.status();
  absl::StatusOr<std::vector<v1::SweepEvent>> events =
      (*store)->ReadEvents(kCrashSweepId, 1, 0);
  ASSERT_TRUE(events.ok()) << events.status();
  // Nothing half-written: the rounds are 1..n (n >= last ack, since the
  // killed commit may or may not have landed), each with its own event.
  std::printf("acknowledged %lld commits before SIGKILL; %zu on disk\n",
              static_cast<long long>(last_ack), rounds->size());
  ASSERT_GE(static_cast<int64_t>(rounds->size()), last_ack);
  ASSERT_EQ(rounds->size(), events->size()) << "a commit was applied partially";
  for (size_t k = 0; k < rounds->size(); ++k) {
    const int64_t i = static_cast<int64_t>(k) + 1;
    EXPECT_EQ((*rounds)[k].round_id(), i);
    EXPECT_TRUE(MessageDifferencer::Equals((*rounds)[k], CrashRound(i)))
        << "round " << i << " differs";
    EXPECT_TRUE(MessageDifferencer::Equals((*events)[k], CrashEvent(i)))
        << "event " << i << " differs";
  }
  // The chain is intact end to end.
  absl::StatusOr<std::vector<int64_t>> ancestors =
      (*store)->Ancestors(kCrashSweepId, last_ack);
  ASSERT_TRUE(ancestors.ok()) << ancestors.status();
  EXPECT_EQ(static_cast<int64_t>(ancestors->size()), last_ack - 1);

  store->reset();
  EXPECT_TRUE(RemoveAll(*dir).ok());
}

}  // namespace
}  // namespace tunefarm
