#include "agent/manifest_cache.h"

#include "absl/strings/str_cat.h"

namespace tunefarm {

void OperatorManifestCache::AddHeld(v1::LeaseWorkRequest* request) const {
  request->clear_held_operator_digests();
  absl::MutexLock lock(&mu_);
  for (const auto& [digest, manifest] : by_digest_) {
    request->add_held_operator_digests(digest);
  }
}

absl::Status OperatorManifestCache::Complete(v1::WorkItem* work) {
  return Resolve(work, /*fill=*/true);
}

absl::Status OperatorManifestCache::Admit(v1::WorkItem* work) {
  return Resolve(work, /*fill=*/false);
}

absl::Status OperatorManifestCache::Resolve(v1::WorkItem* work, bool fill) {
  const std::string& digest = work->operator_digest();
  if (digest.empty()) return absl::OkStatus();  // e.g. a health check's
  absl::MutexLock lock(&mu_);
  if (work->has_operator_()) {
    if (by_digest_.size() < kMaxManifests) {
      by_digest_.try_emplace(digest, work->operator_());
    }
    return absl::OkStatus();
  }
  auto it = by_digest_.find(digest);
  if (it == by_digest_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("lease ", work->lease_id(),
                     ": the coordinator left out operator "
                     "manifest ",
                     digest, ", which this agent does not hold"));
  }
  if (fill) *work->mutable_operator_() = it->second;
  return absl::OkStatus();
}

int OperatorManifestCache::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(by_digest_.size());
}

}  // namespace tunefarm
