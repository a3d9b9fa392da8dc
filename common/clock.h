// Clock: the seam for time. Domain code never reads the system clock or
// sleeps directly, so tests drive leases, heartbeats, retries and time limits
// with FakeClock: simulated time that moves only when the test says so, and
// wakes whoever sleeps on it when it reaches their deadline.
#ifndef TUNEFARM_COMMON_CLOCK_H_
#define TUNEFARM_COMMON_CLOCK_H_

#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tunefarm {

// A source of the current time that threads can sleep on. Implementations
// are thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
  int64_t NowUnixMs() const { return absl::ToUnixMillis(Now()); }

  // Blocks until Now() >= deadline, or until `*stop` (when not null) is
  // true; returns true when it returned because of `stop`. `stop` is a plain
  // flag (signal handlers set the agents' flags), so it is checked at least
  // every kStopCheck of real time, and at once whenever the clock moves.
  virtual bool SleepUntil(absl::Time deadline,
                          const std::atomic<bool>* stop = nullptr) = 0;
  bool SleepFor(absl::Duration d, const std::atomic<bool>* stop = nullptr) {
    return SleepUntil(Now() + d, stop);
  }

  static constexpr absl::Duration kStopCheck = absl::Milliseconds(20);
};

// The process-wide real clock. Never destroyed.
Clock& SystemClock();

// Simulated time: it moves only by Advance or Set, which wake every sleeper
// whose deadline has come. Tests wait until the code under test sleeps
// (WaitForSleepers) before they advance time or check that nothing
// happened, instead of sleeping real time. Thread-safe.
class FakeClock : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'800'000'000))
      : now_(start) {}
  absl::Time Now() const override;
  bool SleepUntil(absl::Time deadline,
                  const std::atomic<bool>* stop = nullptr) override;
  void Advance(absl::Duration d);
  void Set(absl::Time t);

  // Threads sleeping now on a deadline still ahead of Now().
  int sleepers() const;
  // Waits (real time, at most `timeout`) until at least `n` threads sleep on
  // a deadline ahead of Now(): everything they do before their next wake-up
  // is done. False on timeout.
  bool WaitForSleepers(int n, absl::Duration timeout = absl::Seconds(30));

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
  // Deadlines of the threads in SleepUntil (a multiset: equal ones repeat).
  std::vector<absl::Time> sleeping_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tunefarm

#endif  // TUNEFARM_COMMON_CLOCK_H_
