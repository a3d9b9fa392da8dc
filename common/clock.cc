#include "common/clock.h"

#include <algorithm>
#include <vector>

#include "absl/time/clock.h"

namespace tunefarm {
namespace {

class RealClock : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  bool SleepUntil(absl::Time deadline, const std::atomic<bool>* stop) override {
    if (stop == nullptr) {
      absl::SleepFor(deadline - absl::Now());
      return false;
    }
    while (!stop->load()) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) return false;
      absl::SleepFor(std::min(kStopCheck, left));
    }
    return true;
  }
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

bool FakeClock::SleepUntil(absl::Time deadline, const std::atomic<bool>* stop) {
  absl::MutexLock lock(&mu_);
  sleeping_.push_back(deadline);
  auto woken = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return now_ >= deadline || (stop != nullptr && stop->load());
  };
  // Advance and Set release mu_, which re-evaluates the condition; a stop
  // flag set meanwhile is seen within kStopCheck.
  while (!mu_.AwaitWithTimeout(absl::Condition(&woken), kStopCheck)) {
  }
  sleeping_.erase(std::find(sleeping_.begin(), sleeping_.end(), deadline));
  return now_ < deadline;
}

void FakeClock::Advance(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  now_ += d;
}

void FakeClock::Set(absl::Time t) {
  absl::MutexLock lock(&mu_);
  now_ = t;
}

int FakeClock::sleepers() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(
      std::count_if(sleeping_.begin(), sleeping_.end(),
                    [&](absl::Time t) { return t > now_; }));
}

bool FakeClock::WaitForSleepers(int n, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto enough = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return std::count_if(sleeping_.begin(), sleeping_.end(),
                         [&](absl::Time t) { return t > now_; }) >= n;
  };
  return mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
}

}  // namespace tunefarm
