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
// Pipelined commit (hooks.seal set): the loop does not wait for a batch's
// sync before running the next one. seal() ends the batch and returns its
// writes; a writer thread makes them durable (SealedBatch::Write) while the
// loop runs the next batch of closures, which see the first one's effects
// in memory. Batches are written one at a time, in order. The loop runs
// queued closures a few at a time into the open batch and, between those
// runs, settles the written batch as soon as its write ends
// (SealedBatch::Settle, on the loop thread), hands its results back, and
// gives the open batch to the writer: the writer is never idle while calls
// wait, a batch lasts about one sync, and an answer never waits behind a
// long run of other calls. When a write fails, the batch run on top of it
// is settled with the same error first (newest first: its changes to
// memory are undone) and never written, then the failed one; every result
// of both gets the error. Unbatched calls (Call) and ticks run only once
// nothing is open or in flight.
//
// Thread-safe: Call, CallBatched and Post may be used from any thread
// except the loop thread itself.
#ifndef TUNEFARM_COORDINATOR_CONTROL_LOOP_H_
#define TUNEFARM_COORDINATOR_CONTROL_LOOP_H_

#include <deque>
#include <functional>
#include <future>
#include <memory>
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

// A batch sealed for a pipelined commit (ControlLoopBatchHooks::seal).
class SealedBatch {
 public:
  virtual ~SealedBatch() = default;
  // On the loop's writer thread: makes the batch durable; the error is what
  // every call of the batch is answered with.
  virtual absl::Status Write() = 0;
  // On the loop thread, once, in batch order (batches failed together are
  // settled newest first): `written` OK applies what waited for durability;
  // an error undoes the batch's changes to memory.
  virtual void Settle(const absl::Status& written) = 0;
};

// Around each batch, on the loop thread. Unset: closures just run. With
// `seal` set the commit is pipelined and `commit` is not used.
struct ControlLoopBatchHooks {
  std::function<void()> begin;
  std::function<absl::Status()> commit;
  std::function<std::unique_ptr<SealedBatch>()> seal;
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
    if (hooks_.seal) writer_ = std::thread([this] { WriterLoop(); });
    thread_ = std::thread([this] { Loop(); });
  }
  // Runs what is queued, then stops the threads. Idempotent.
  void Stop() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    if (thread_.joinable()) thread_.join();
    {
      absl::MutexLock lock(&mu_);
      writer_stop_ = true;
    }
    if (writer_.joinable()) writer_.join();
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

  // Runs `batch` and commits it before returning (nothing in flight).
  void RunBatch(std::vector<Item>& batch) {
    if (hooks_.begin) hooks_.begin();
    for (Item& item : batch) item.run();
    absl::Status committed;
    if (hooks_.seal) {
      std::unique_ptr<SealedBatch> sealed = hooks_.seal();
      committed = sealed->Write();
      sealed->Settle(committed);
    } else if (hooks_.commit) {
      committed = hooks_.commit();
    }
    for (Item& item : batch) item.finish(committed);
  }

  // Pipelined: runs up to kRunChunk queued batched closures into the open
  // batch, then (when the write in flight ended, or none is in flight)
  // settles the batch in flight and hands the open one to the writer. While
  // a write is in flight the open batch keeps taking calls, up to
  // max_batch.
  void RunPipelinedChunk() {
    if (run_from_ == 0 && hooks_.begin) hooks_.begin();
    for (size_t i = run_from_; i < open_.size(); ++i) open_[i].run();
    run_from_ = open_.size();
    bool written = false;
    {
      absl::MutexLock lock(&mu_);
      written = written_;
    }
    const bool full = static_cast<int>(open_.size()) >= options_.max_batch;
    if (in_flight_.has_value() && !written && !full) return;
    SealOpen();
  }

  // Seals the open batch; once the batch in flight (if any) is written and
  // settled, hands it to the writer.
  void SealOpen() {
    InFlight next{hooks_.seal(), std::move(open_)};
    // The last settled batch's vector: its memory is reused.
    open_ = std::move(spare_items_);
    open_.clear();
    run_from_ = 0;
    if (in_flight_.has_value()) {
      const absl::Status written = WaitWritten();
      if (!written.ok()) {
        // Built on a batch that is not durable: undone first, never written.
        next.sealed->Settle(written);
        for (Item& item : next.items) item.finish(written);
        SettleInFlight(written);
        return;
      }
      SettleInFlight(written);
    }
    in_flight_ = std::move(next);
    absl::MutexLock lock(&mu_);
    to_write_ = in_flight_->sealed.get();
  }

  // Waits for the batch in flight (if any) to be written and settles it.
  void Drain() {
    if (in_flight_.has_value()) SettleInFlight(WaitWritten());
  }

  // Seals, writes and settles everything open or in flight.
  void Flush() {
    if (!open_.empty()) SealOpen();
    Drain();
  }

  absl::Status WaitWritten() {
    absl::MutexLock lock(&mu_);
    auto written = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return written_; };
    mu_.Await(absl::Condition(&written));
    written_ = false;
    return write_status_;
  }

  void SettleInFlight(const absl::Status& written) {
    InFlight done = std::move(*in_flight_);
    in_flight_.reset();
    done.sealed->Settle(written);
    for (Item& item : done.items) item.finish(written);
    done.items.clear();
    spare_items_ = std::move(done.items);
  }

  void WriterLoop() {
    absl::MutexLock lock(&mu_);
    while (true) {
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return to_write_ != nullptr || writer_stop_;
      };
      mu_.Await(absl::Condition(&ready));
      if (to_write_ == nullptr) return;  // stopping, nothing to write
      SealedBatch* batch = to_write_;
      to_write_ = nullptr;
      mu_.Unlock();
      absl::Status st = batch->Write();
      mu_.Lock();
      write_status_ = std::move(st);
      written_ = true;  // wakes the loop (its wait looks at written_)
    }
  }

  void Loop() {
    absl::Time next_tick = absl::Now() + tick_interval_;
    while (true) {
      bool stopping = false;
      bool settle = false;
      bool one_batch = false;
      {
        absl::MutexLock lock(&mu_);
        // A batch in flight wakes the loop when written, to hand its
        // results back (and give the open batch to the writer) without
        // waiting for more calls.
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return !queue_.empty() || stopping_ || written_;
        };
        mu_.AwaitWithDeadline(absl::Condition(&ready), next_tick);
        const bool batched = !queue_.empty() && queue_.front().batched;
        if (batched && open_.empty() &&
            options_.max_batch_wait > absl::ZeroDuration() && !stopping_) {
          // Let more requests join this batch, up to the bound.
          auto full = [this] {
            return static_cast<int>(queue_.size()) >= options_.max_batch ||
                   stopping_;
          };
          mu_.AwaitWithTimeout(absl::Condition(&full), options_.max_batch_wait);
        }
        if (queue_.empty() && written_) {
          settle = true;
        } else if (batched && hooks_.seal) {
          TakeInto(open_,
                   std::min(kRunChunk, options_.max_batch -
                                           static_cast<int>(open_.size())));
        } else if (!queue_.empty()) {
          one_batch = true;  // unbatched, or not pipelined
        } else {
          stopping = stopping_;
        }
      }
      if (settle) {
        // The write in flight ended and nothing waits: answer it, and
        // write what the open batch holds.
        if (!open_.empty()) {
          SealOpen();
        } else {
          Drain();
        }
      } else if (run_from_ < open_.size()) {
        RunPipelinedChunk();
      } else if (one_batch) {
        std::vector<Item> batch;
        {
          absl::MutexLock lock(&mu_);
          batch = TakeBatch();
        }
        if (!batch.empty()) {
          Flush();
          RunBatch(batch);
        }
      } else if (stopping) {
        Flush();
        return;
      }
      if (absl::Now() >= next_tick) {
        Flush();
        on_tick_();
        next_tick = absl::Now() + tick_interval_;
      }
    }
  }

  // Moves up to `n` queued batched items to the end of `into`.
  void TakeInto(std::vector<Item>& into, int n)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (n-- > 0 && !queue_.empty() && queue_.front().batched) {
      into.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
  }

  struct InFlight {
    std::unique_ptr<SealedBatch> sealed;
    std::vector<Item> items;
  };

  const absl::Duration tick_interval_;
  std::function<void()> on_tick_;
  BatchHooks hooks_;
  const Options options_;
  absl::Mutex mu_;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Closures run a few at a time into the open batch: between two runs the
  // loop can answer a batch whose write ended.
  static constexpr int kRunChunk = 16;
  // The open batch: its closures up to run_from_ have run (loop thread
  // only; pipelined).
  std::vector<Item> open_;
  size_t run_from_ = 0;
  std::vector<Item> spare_items_;
  // The batch being written (loop thread only).
  std::optional<InFlight> in_flight_;
  // Between the loop thread and the writer.
  SealedBatch* to_write_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool written_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status write_status_ ABSL_GUARDED_BY(mu_);
  bool writer_stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
  std::thread writer_;
};

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_CONTROL_LOOP_H_
