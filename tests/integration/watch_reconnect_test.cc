// `tunefarm watch` across a coordinator kill: the CLI (a real process)
// reconnects with backoff when the coordinator goes away, resumes after
// the last event it printed, and so prints every event of the sweep exactly
// once, in order, up to FINISHED; it exits 0.
#include <signal.h>
#include <sys/wait.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/files.h"
#include "common/subprocess.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/integration/farm_fixture.h"

namespace tunefarm {
namespace {

class WatchReconnectTest : public FarmFixture {};

// The events printed (JSON lines) in `log`, other lines skipped.
std::vector<v1::SweepEvent> PrintedEvents(const std::string& log) {
  std::vector<v1::SweepEvent> out;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (line.empty() || line.front() != '{') continue;
    v1::SweepEvent ev;
    if (google::protobuf::util::JsonStringToMessage(std::string(line), &ev)
            .ok()) {
      out.push_back(ev);
    }
  }
  return out;
}

TEST_F(WatchReconnectTest, PrintsEachEventOnceAcrossACoordinatorKill) {
  StartFarm(KillableFarm(/*agents=*/1, /*boards_per_agent=*/2));
  const std::string id = Submit(SimMatmulSpec("watched", "random", 5, 14));

  const std::string token_file = dir_ + "/admin.token";
  ASSERT_TRUE(WriteFileAtomic(token_file, farm_->admin_token()).ok());
  const std::string log = dir_ + "/watch.out";
  auto watch = Subprocess::Start(
      {std::string(kFarmBinDir) + "/tunefarm", "--coordinator",
       farm_->coordinator_address(), "--token_file", token_file, "--output",
       "json", "watch", id},
      log);
  ASSERT_TRUE(watch.ok()) << watch.status();

  // Some events printed, the sweep not over: kill -9 the coordinator.
  size_t before_kill = 0;
  for (int i = 0; i < 600 && before_kill < 6; ++i) {
    before_kill = PrintedEvents(ReadFile(log).value_or("")).size();
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_GE(before_kill, 6u);
  farm_->KillCoordinator(SIGKILL);
  absl::SleepFor(absl::Milliseconds(700));  // the CLI finds it gone
  absl::Status st = farm_->RestartCoordinator();
  ASSERT_TRUE(st.ok()) << st;
  Connect();

  auto status = (*watch)->Wait(absl::Seconds(120));
  ASSERT_TRUE(status.has_value()) << "watch did not end";
  const std::string out = ReadFile(log).value_or("");
  EXPECT_TRUE(WIFEXITED(*status) && WEXITSTATUS(*status) == 0) << out;
  EXPECT_NE(out.find("reconnecting"), std::string::npos)
      << "the CLI never lost the coordinator, so this proves nothing\n"
      << out;

  const std::vector<v1::SweepEvent> printed = PrintedEvents(out);
  ASSERT_FALSE(printed.empty());
  for (size_t i = 0; i < printed.size(); ++i) {
    ASSERT_EQ(printed[i].seq(), static_cast<int64_t>(i + 1))
        << "event printed twice, or missed\n"
        << out;
  }
  EXPECT_EQ(printed.back().kind(), v1::EVENT_KIND_FINISHED);
  const std::vector<v1::SweepEvent> stored = Events(id);
  ASSERT_GE(stored.size(), printed.size());
  for (size_t i = 0; i < printed.size(); ++i) {
    EXPECT_EQ(printed[i].kind(), stored[i].kind()) << "seq " << i + 1;
    EXPECT_EQ(printed[i].message(), stored[i].message()) << "seq " << i + 1;
  }
}

}  // namespace
}  // namespace tunefarm
