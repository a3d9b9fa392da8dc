// ControlLoop: the coordinator's one control thread. gRPC and ZeroMQ threads
// hand closures to it (Call, CallBatched, Post) and wait for their result;
// it also runs a tick function periodically. Everything the Coordinator
// owns is touched only on this thread.
//
// Group commit: closures handed in with CallBatched or Post that are queued
// together run as one batch between the hooks' begin() and commit() (the
// Coordinator stages every mutation of the batch into one WriteSet and syncs
// once), and their results are handed back only after commit() returns.
// When it fails, every absl::Status / absl::StatusOr result of the batch is
// replaced by its error, so nothing is acknowledged that is not durable. A
// batch holds at most `max_batch` closures and waits at most
// `max_batch_wait` for more after its first (zero: it takes what is queued
// and does not wait). Call runs its closure alone, in a batch of its own.
//
// Thread-safe: Call, CallBatched and Post may be used from any thread
// except the loop thread itself.
#ifndef TUNEFARM_COORDINATOR_CONTROL_LOOP_H_
#define TUNEFARM_COORDINATOR_CONTROL_LOOP_H_

#include <deque>
#include <functional>
#include <future>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tunefarm {

namespace control_loop_internal {
template <typename T>
struct IsStatusOr : std::false_type {};
template <typename T>
struct IsStatusOr<absl::StatusOr<T>> : std::true_type {};
}  // namespace control_loop_internal

// Around each batch, on the loop thread. Unset: closures just run.
struct ControlLoopBatchHooks {
  std::function<void()> begin;
  std::function<absl::Status()> commit;
};

struct ControlLoopOptions {
  int max_batch = 512;
  absl::Duration max_batch_wait = absl::ZeroDuration();
};

class ControlLoop {
 public:
  using BatchHooks = ControlLoopBatchHooks;
  using Options = ControlLoopOptions;

  ControlLoop(absl::Duration tick_interval, std::function<void()> on_tick,
              BatchHooks hooks = {}, Options options = {})
      : tick_interval_(tick_interval),
        on_tick_(std::move(on_tick)),
        hooks_(std::move(hooks)),
        options_(options) {}
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

  // Runs `fn` on the loop thread, alone in its batch, and returns its
  // result (replaced by the commit's error when that fails).
  template <typename F>
  auto Call(F&& fn) -> std::invoke_result_t<F> {
    return CallImpl(std::forward<F>(fn), /*batched=*/false);
  }
  // The same, sharing a batch with the other batched closures queued with
  // it (agents' calls: many small mutations).
  template <typename F>
  auto CallBatched(F&& fn) -> std::invoke_result_t<F> {
    return CallImpl(std::forward<F>(fn), /*batched=*/true);
  }
  // Runs `fn` on the loop thread in a shared batch and hands its result to
  // `done` there, after the batch committed; does not wait. `done` must be
  // quick (it runs on the loop thread).
  template <typename F, typename D>
  void Post(F&& fn, D&& done) {
    using R = std::invoke_result_t<F>;
    auto result = std::make_shared<std::optional<R>>();
    Item item;
    item.batched = true;
    item.run = [result, fn = std::forward<F>(fn)]() mutable {
      result->emplace(fn());
    };
    item.finish = [result, done = std::forward<D>(done)](
                      const absl::Status& batch) mutable {
      Override(**result, batch);
      done(std::move(**result));
    };
    Enqueue(std::move(item));
  }

 private:
  struct Item {
    bool batched = false;
    std::function<void()> run;
    std::function<void(const absl::Status&)> finish;
  };

  template <typename R>
  static void Override(R& result, const absl::Status& batch) {
    if (batch.ok()) return;
    if constexpr (std::is_same_v<R, absl::Status> ||
                  control_loop_internal::IsStatusOr<R>::value) {
      result = batch;
    }
  }

  template <typename F>
  auto CallImpl(F&& fn, bool batched) -> std::invoke_result_t<F> {
    using R = std::invoke_result_t<F>;
    std::optional<R> result;
    std::promise<void> finished;
    std::future<void> wait = finished.get_future();
    Item item;
    item.batched = batched;
    item.run = [&] { result.emplace(fn()); };
    item.finish = [&](const absl::Status& batch) {
      Override(*result, batch);
      finished.set_value();
    };
    Enqueue(std::move(item));
    wait.get();
    return std::move(*result);
  }

  void Enqueue(Item item) {
    absl::MutexLock lock(&mu_);
    queue_.push_back(std::move(item));
  }

  // Up to max_batch queued batched items, or one unbatched one.
  std::vector<Item> TakeBatch() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<Item> batch;
    if (queue_.empty()) return batch;
    if (!queue_.front().batched) {
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
      return batch;
    }
    while (!queue_.empty() && queue_.front().batched &&
           static_cast<int>(batch.size()) < options_.max_batch) {
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    return batch;
  }

  void RunBatch(std::vector<Item>& batch) {
    if (hooks_.begin) hooks_.begin();
    for (Item& item : batch) item.run();
    const absl::Status committed =
        hooks_.commit ? hooks_.commit() : absl::OkStatus();
    for (Item& item : batch) item.finish(committed);
  }

  void Loop() {
    absl::Time next_tick = absl::Now() + tick_interval_;
    while (true) {
      std::vector<Item> batch;
      {
        absl::MutexLock lock(&mu_);
        auto ready = [this] { return !queue_.empty() || stopping_; };
        mu_.AwaitWithDeadline(absl::Condition(&ready), next_tick);
        if (options_.max_batch_wait > absl::ZeroDuration() && !queue_.empty() &&
            queue_.front().batched && !stopping_) {
          // Let more requests join this batch, up to the bound.
          auto full = [this] {
            return static_cast<int>(queue_.size()) >= options_.max_batch ||
                   stopping_;
          };
          mu_.AwaitWithTimeout(absl::Condition(&full), options_.max_batch_wait);
        }
        batch = TakeBatch();
        if (batch.empty() && stopping_) return;
      }
      if (!batch.empty()) RunBatch(batch);
      if (absl::Now() >= next_tick) {
        on_tick_();
        next_tick = absl::Now() + tick_interval_;
      }
    }
  }

  const absl::Duration tick_interval_;
  std::function<void()> on_tick_;
  BatchHooks hooks_;
  const Options options_;
  absl::Mutex mu_;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_CONTROL_LOOP_H_
