// FaultInjectingStore: a Store that forwards to another one and fails or
// slows its commits on cue, for tests of what the coordinator does when the
// disk refuses a write (leveldb's fault-injection Env, for the Store). A
// failed commit writes nothing to the store underneath. Reads always pass
// through.
//
// Ownership: borrows `base`, which must outlive it. Thread-safety:
// thread-safe; the cues may be changed while other threads commit.
#ifndef TUNEFARM_STORAGE_FAULT_INJECTING_STORE_H_
#define TUNEFARM_STORAGE_FAULT_INJECTING_STORE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "storage/store.h"

namespace tunefarm {

class FaultInjectingStore : public Store {
 public:
  explicit FaultInjectingStore(Store* base) : base_(base) {}

  // The n-th commit attempt from now (1 = the next) fails with `error`;
  // the others pass.
  void FailNthCommit(int n, absl::Status error = InjectedError());
  // After `ok_commits` more commits succeed, every commit fails with `error`
  // until Heal (0: from the next one on).
  void FailCommitsAfter(int ok_commits, absl::Status error = InjectedError());
  // Every commit sleeps this long first (zero: none).
  void SetCommitDelay(absl::Duration delay);
  // What Writable() answers (OK by default), as a store that watches its
  // disk would.
  void SetWritable(absl::Status status);
  // Clears every failure cue (the delay stays).
  void Heal();

  int64_t commits() const;         // commits that reached the base store
  int64_t failed_commits() const;  // commits refused here

  static absl::Status InjectedError() {
    return absl::UnavailableError("injected commit failure");
  }

  absl::Status Commit(const WriteSet& writes) override;
  absl::Status Writable() override;
  absl::StatusOr<v1::Sweep> GetSweep(const std::string& sweep_id) override {
    return base_->GetSweep(sweep_id);
  }
  absl::StatusOr<std::vector<v1::Sweep>> ListSweeps() override {
    return base_->ListSweeps();
  }
  absl::StatusOr<v1::Round> GetRound(const std::string& sweep_id,
                                     int64_t round_id) override {
    return base_->GetRound(sweep_id, round_id);
  }
  absl::StatusOr<std::vector<v1::Round>> ListRounds(
      const std::string& sweep_id) override {
    return base_->ListRounds(sweep_id);
  }
  absl::StatusOr<std::vector<v1::Round>> ListRoundsFrom(
      const std::string& sweep_id, int64_t from_round_id, int limit) override {
    return base_->ListRoundsFrom(sweep_id, from_round_id, limit);
  }
  absl::StatusOr<std::vector<v1::SweepEvent>> ReadEvents(
      const std::string& sweep_id, int64_t from_seq, int limit) override {
    return base_->ReadEvents(sweep_id, from_seq, limit);
  }
  absl::StatusOr<std::vector<v1::BoardInfo>> ListBoards() override {
    return base_->ListBoards();
  }
  absl::StatusOr<std::vector<v1::Measurement>> ListMeasurements(
      const std::string& sweep_id, int64_t round_id) override {
    return base_->ListMeasurements(sweep_id, round_id);
  }
  absl::StatusOr<std::optional<std::string>> GetMeta(
      const std::string& key) override {
    return base_->GetMeta(key);
  }

 private:
  Store* const base_;
  mutable absl::Mutex mu_;
  int64_t fail_nth_ ABSL_GUARDED_BY(mu_) = 0;            // 0: no cue
  int64_t ok_before_failing_ ABSL_GUARDED_BY(mu_) = -1;  // -1: no cue
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  absl::Duration delay_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  absl::Status writable_ ABSL_GUARDED_BY(mu_);
  int64_t commits_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t failed_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace tunefarm

#endif  // TUNEFARM_STORAGE_FAULT_INJECTING_STORE_H_
