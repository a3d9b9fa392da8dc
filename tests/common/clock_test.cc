// Clock: FakeClock's simulated time wakes sleepers when it reaches their
// deadline (and not before), a stop flag wakes them at once, and tests can
// wait until threads sleep on it.
#include "common/clock.h"

#include <atomic>
#include <thread>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace tunefarm {
namespace {

TEST(FakeClockTest, SleeperWakesOnlyWhenTimeReachesItsDeadline) {
  FakeClock clock;
  const absl::Time start = clock.Now();
  std::atomic<bool> woke{false};
  std::atomic<bool> stopped{true};
  std::thread sleeper([&] {
    stopped = clock.SleepFor(absl::Seconds(10));
    woke = true;
  });
  ASSERT_TRUE(clock.WaitForSleepers(1));
  clock.Advance(absl::Seconds(9));
  // Still asleep: its deadline is 1 s of simulated time away.
  ASSERT_TRUE(clock.WaitForSleepers(1));
  EXPECT_FALSE(woke.load());
  EXPECT_EQ(clock.sleepers(), 1);
  clock.Advance(absl::Seconds(1));
  sleeper.join();
  EXPECT_TRUE(woke.load());
  EXPECT_FALSE(stopped.load());
  EXPECT_EQ(clock.sleepers(), 0);
  EXPECT_EQ(clock.Now(), start + absl::Seconds(10));
}

TEST(FakeClockTest, SetPastTheDeadlineWakesEverySleeper) {
  FakeClock clock;
  std::thread a([&] { clock.SleepFor(absl::Seconds(1)); });
  std::thread b([&] { clock.SleepFor(absl::Hours(1)); });
  ASSERT_TRUE(clock.WaitForSleepers(2));
  clock.Set(clock.Now() + absl::Hours(2));
  a.join();
  b.join();
  EXPECT_EQ(clock.sleepers(), 0);
}

TEST(FakeClockTest, StopFlagWakesASleeperWithoutMovingTime) {
  FakeClock clock;
  const absl::Time start = clock.Now();
  std::atomic<bool> stop{false};
  std::atomic<bool> stopped{false};
  std::thread sleeper([&] { stopped = clock.SleepFor(absl::Hours(1), &stop); });
  ASSERT_TRUE(clock.WaitForSleepers(1));
  stop = true;
  sleeper.join();
  EXPECT_TRUE(stopped.load());
  EXPECT_EQ(clock.Now(), start);
  // Already stopped: returns at once.
  EXPECT_TRUE(clock.SleepFor(absl::Hours(1), &stop));
}

TEST(FakeClockTest, WaitForSleepersTimesOutWhenNobodySleeps) {
  FakeClock clock;
  EXPECT_FALSE(clock.WaitForSleepers(1, absl::Milliseconds(10)));
  // A deadline already reached does not sleep at all.
  EXPECT_FALSE(clock.SleepFor(absl::ZeroDuration()));
}

TEST(SystemClockTest, SleepsRealTimeAndStopsEarly) {
  Clock& clock = SystemClock();
  const absl::Time t0 = absl::Now();
  EXPECT_FALSE(clock.SleepFor(absl::Milliseconds(30)));
  EXPECT_GE(absl::Now() - t0, absl::Milliseconds(30));
  std::atomic<bool> stop{true};
  const absl::Time t1 = absl::Now();
  EXPECT_TRUE(clock.SleepFor(absl::Hours(1), &stop));
  EXPECT_LT(absl::Now() - t1, absl::Seconds(1));
}

}  // namespace
}  // namespace tunefarm
