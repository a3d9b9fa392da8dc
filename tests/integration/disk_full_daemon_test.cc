// The tunefarm-coordinator daemon (a real process) on a data disk that runs
// full (a small tmpfs; mounting needs root, else the test skips saying so).
// Started on a full disk it neither aborts nor exits: it says "data disk
// full" and waits, and serves as soon as space returns. Filled again while
// it runs, it refuses a submission with RESOURCE_EXHAUSTED "data disk full
// (...)", keeps serving reads, and takes submissions again once space is
// back, without a restart. It stops cleanly (exit 0) on SIGTERM.
#include <signal.h>
#include <sys/wait.h>

#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/files.h"
#include "common/grpc_client.h"
#include "common/grpc_status.h"
#include "common/subprocess.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/storage/small_disk.h"
#include "tunefarm/v1/farm.grpc.pb.h"

namespace tunefarm {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kDisk = 48 << 20;
constexpr int kReserveMb = 8;
constexpr uint64_t kReserve = uint64_t{kReserveMb} << 20;

constexpr char kSpec[] =
    "name: full\nteam: qa\noperator: sim_matmul\ngoal: {speedup: 100}\n"
    "strategy: grid\nbudget: {max_rounds: 3}\nmin_gain: 0.02\n"
    "boards: {kind: sim}\n";

// Polls `log` until it holds `text`, up to `timeout`.
bool LogShows(const std::string& log, const std::string& text,
              absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (absl::Now() < end) {
    absl::StatusOr<std::string> content = ReadFile(log);
    if (content.ok() && absl::StrContains(*content, text)) return true;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return false;
}

absl::StatusOr<v1::SubmitSweepResponse> Submit(v1::TuneFarm::Stub& stub,
                                               const std::string& key) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  v1::SubmitSweepRequest request;
  request.set_spec_yaml(kSpec);
  request.set_idempotency_key(key);
  v1::SubmitSweepResponse response;
  grpc::Status st = stub.SubmitSweep(&ctx, request, &response);
  if (!st.ok()) return FromGrpcStatus(st);
  return response;
}

absl::StatusOr<v1::Sweep> Get(v1::TuneFarm::Stub& stub, const std::string& id) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  v1::GetSweepRequest request;
  request.set_sweep_id(id);
  v1::Sweep sweep;
  grpc::Status st = stub.GetSweep(&ctx, request, &sweep);
  if (!st.ok()) return FromGrpcStatus(st);
  return sweep;
}

TEST(DiskFullDaemonTest, WaitsForSpaceRefusesWorkWhileFullAndNeverAborts) {
  SmallDisk disk;
  if (absl::Status st = disk.Mount(kDisk); !st.ok()) {
    GTEST_SKIP() << st.message();
  }
  absl::StatusOr<std::string> outside = MakeTempDir("disk_full_daemon");
  ASSERT_TRUE(outside.ok()) << outside.status();
  const std::string log = *outside + "/coordinator.log";
  const std::string port_file = *outside + "/port";
  ASSERT_TRUE(disk.FillLeaving(kReserve / 2).ok());

  absl::StatusOr<std::unique_ptr<Subprocess>> coordinator = Subprocess::Start(
      {std::string(TUNEFARM_BINARY_DIR) + "/bin/tunefarm-coordinator",
       "--data_dir=" + disk.dir() + "/data", "--listen=127.0.0.1:0",
       "--port_file=" + port_file, "--metrics_address=127.0.0.1:0",
       "--ops_dir=" + std::string(TUNEFARM_SOURCE_DIR) + "/ops",
       absl::StrCat("--min_free_mb=", kReserveMb)},
      log);
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  Subprocess& daemon = **coordinator;

  // Full at start: it says so and waits, alive, not listening.
  EXPECT_TRUE(LogShows(log, "data disk full (", absl::Seconds(30)))
      << "no 'data disk full' in " << log;
  EXPECT_FALSE(daemon.Wait(absl::Seconds(1)).has_value())
      << "the coordinator exited on a full disk";
  EXPECT_FALSE(ReadFile(port_file).ok()) << "it listened without a store";

  // Space returns: it opens the store and serves, with no restart.
  disk.Unfill();
  absl::StatusOr<std::string> port = WaitForFile(port_file, absl::Seconds(30));
  ASSERT_TRUE(port.ok()) << port.status();
  std::unique_ptr<v1::TuneFarm::Stub> stub = v1::TuneFarm::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", *port),
                          grpc::InsecureChannelCredentials()));
  absl::StatusOr<v1::SubmitSweepResponse> first = Submit(*stub, "first");
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string id = first->sweep().sweep_id();

  // Full while running: work is refused with a clear message, reads go on.
  ASSERT_TRUE(disk.FillLeaving(kReserve / 2).ok());
  absl::StatusOr<v1::SubmitSweepResponse> refused = Submit(*stub, "second");
  ASSERT_FALSE(refused.ok()) << "a submission was accepted on a full disk";
  EXPECT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("data disk full ("));
  absl::StatusOr<v1::Sweep> read = Get(*stub, id);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->sweep_id(), id);

  // Space returns again: submissions are taken, once.
  disk.Unfill();
  absl::StatusOr<v1::SubmitSweepResponse> second = Submit(*stub, "second");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(second->existing()) << "the refused submission was recorded";
  EXPECT_NE(second->sweep().sweep_id(), id);

  EXPECT_FALSE(daemon.Wait(absl::ZeroDuration()).has_value())
      << "the coordinator died";
  const int status = daemon.Stop(absl::Seconds(10));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "wait status " << status
      << " (a signal: " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0)
      << "); log " << log;
  (void)RemoveAll(*outside);
}

}  // namespace
}  // namespace tunefarm
