// Clock: the seam for time. Domain code never reads the system clock
// directly, so tests drive leases, heartbeats and time limits with
// FakeClock and never sleep.
#ifndef TUNEFARM_COMMON_CLOCK_H_
#define TUNEFARM_COMMON_CLOCK_H_

#include <cstdint>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tunefarm {

// A source of the current time. Implementations are thread-safe.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
  int64_t NowUnixMs() const { return absl::ToUnixMillis(Now()); }
};

// The process-wide real clock. Never destroyed.
Clock& SystemClock();

// A clock that moves only when told to. Thread-safe.
class FakeClock : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'800'000'000))
      : now_(start) {}
  absl::Time Now() const override;
  void Advance(absl::Duration d);
  void Set(absl::Time t);

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tunefarm

#endif  // TUNEFARM_COMMON_CLOCK_H_
