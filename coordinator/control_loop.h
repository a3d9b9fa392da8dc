// ControlLoop: the coordinator's one control thread. gRPC and ZeroMQ threads
// hand closures to it (Call) and wait for their result; it also runs a tick
// function periodically. Everything the Coordinator owns is touched only on
// this thread.
//
// Thread-safe: Call may be used from any thread, except the loop thread
// itself.
#ifndef TUNEFARM_COORDINATOR_CONTROL_LOOP_H_
#define TUNEFARM_COORDINATOR_CONTROL_LOOP_H_

#include <deque>
#include <functional>
#include <future>
#include <thread>
#include <type_traits>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace tunefarm {

class ControlLoop {
 public:
  ControlLoop(absl::Duration tick_interval, std::function<void()> on_tick)
      : tick_interval_(tick_interval), on_tick_(std::move(on_tick)) {}
  ~ControlLoop() { Stop(); }

  void Start() {
    thread_ = std::thread([this] { Loop(); });
  }
  // Runs what is queued, then stops the thread. Idempotent.
  void Stop() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    if (thread_.joinable()) thread_.join();
  }

  // Runs `fn` on the loop thread and returns its result.
  template <typename F>
  auto Call(F&& fn) -> std::invoke_result_t<F> {
    using R = std::invoke_result_t<F>;
    std::packaged_task<R()> task(std::forward<F>(fn));
    std::future<R> result = task.get_future();
    {
      absl::MutexLock lock(&mu_);
      queue_.emplace_back([&task] { task(); });
    }
    return result.get();
  }

 private:
  void Loop() {
    absl::Time next_tick = absl::Now() + tick_interval_;
    while (true) {
      std::deque<std::function<void()>> batch;
      {
        absl::MutexLock lock(&mu_);
        auto ready = [this] { return !queue_.empty() || stopping_; };
        mu_.AwaitWithDeadline(absl::Condition(&ready), next_tick);
        batch.swap(queue_);
        if (batch.empty() && stopping_) return;
      }
      for (auto& fn : batch) fn();
      if (absl::Now() >= next_tick) {
        on_tick_();
        next_tick = absl::Now() + tick_interval_;
      }
    }
  }

  const absl::Duration tick_interval_;
  std::function<void()> on_tick_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_CONTROL_LOOP_H_
