#include "common/clock.h"

#include "absl/time/clock.h"

namespace tunefarm {
namespace {

class RealClock : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};

}  // namespace

Clock& SystemClock() {
  static RealClock* clock = new RealClock();
  return *clock;
}

absl::Time FakeClock::Now() const {
  absl::MutexLock lock(&mu_);
  return now_;
}

void FakeClock::Advance(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  now_ += d;
}

void FakeClock::Set(absl::Time t) {
  absl::MutexLock lock(&mu_);
  now_ = t;
}

}  // namespace tunefarm
