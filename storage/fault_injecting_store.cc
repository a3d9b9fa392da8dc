#include "storage/fault_injecting_store.h"

namespace tunefarm {

void FaultInjectingStore::FailNthCommit(int n, absl::Status error) {
  absl::MutexLock lock(&mu_);
  fail_nth_ = n;
  error_ = std::move(error);
}

void FaultInjectingStore::FailCommitsAfter(int ok_commits, absl::Status error) {
  absl::MutexLock lock(&mu_);
  ok_before_failing_ = ok_commits;
  error_ = std::move(error);
}

void FaultInjectingStore::SetCommitDelay(absl::Duration delay) {
  absl::MutexLock lock(&mu_);
  delay_ = delay;
}

void FaultInjectingStore::SetWritable(absl::Status status) {
  absl::MutexLock lock(&mu_);
  writable_ = std::move(status);
}

void FaultInjectingStore::Heal() {
  absl::MutexLock lock(&mu_);
  fail_nth_ = 0;
  ok_before_failing_ = -1;
  writable_ = absl::OkStatus();
}

int64_t FaultInjectingStore::commits() const {
  absl::MutexLock lock(&mu_);
  return commits_;
}

int64_t FaultInjectingStore::failed_commits() const {
  absl::MutexLock lock(&mu_);
  return failed_;
}

absl::Status FaultInjectingStore::Writable() {
  absl::MutexLock lock(&mu_);
  return writable_;
}

absl::Status FaultInjectingStore::Commit(const WriteSet& writes) {
  absl::Duration delay;
  {
    absl::MutexLock lock(&mu_);
    delay = delay_;
  }
  // A slow disk is slow to fail too.
  if (delay > absl::ZeroDuration()) absl::SleepFor(delay);
  {
    absl::MutexLock lock(&mu_);
    bool fail = false;
    if (fail_nth_ > 0 && --fail_nth_ == 0) fail = true;
    if (ok_before_failing_ == 0) {
      fail = true;
    } else if (ok_before_failing_ > 0 && !fail) {
      --ok_before_failing_;
    }
    if (fail) {
      ++failed_;
      return error_;
    }
  }
  absl::Status st = base_->Commit(writes);
  if (st.ok()) {
    absl::MutexLock lock(&mu_);
    ++commits_;
  }
  return st;
}

}  // namespace tunefarm
