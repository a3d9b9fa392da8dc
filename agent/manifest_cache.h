// OperatorManifestCache: the operator manifests an agent has received, by
// WorkItem.operator_digest, so that a lease for an operator the agent
// already holds can come without its manifest (most of a work item's
// bytes). It lists the digests it holds in each LeaseWorkRequest and puts
// the manifest back into a work item that came without one; the boards
// always see whole work items.
//
// At most kMaxManifests manifests are kept and none is ever evicted: a
// digest once listed can always be resolved, even when several lease calls
// are in flight. Past the bound, new operators simply keep coming with their
// manifests.
//
// Owned by the agent's coordinator client; thread-safe (the boards' lease
// calls run on their own threads).
#ifndef TUNEFARM_AGENT_MANIFEST_CACHE_H_
#define TUNEFARM_AGENT_MANIFEST_CACHE_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "tunefarm/v1/agent.pb.h"
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

class OperatorManifestCache {
 public:
  // The coordinator reads as many (LeaseTable::kMaxHeldManifests).
  static constexpr int kMaxManifests = 64;

  // Sets request->held_operator_digests to the digests held.
  void AddHeld(v1::LeaseWorkRequest* request) const;

  // Keeps the manifest `work` carries under its digest (while below the
  // bound), or fills in the one it left out. FAILED_PRECONDITION, naming the
  // lease and the digest, when it left out one this cache does not hold;
  // `work` is then unchanged.
  absl::Status Complete(v1::WorkItem* work);

  // As Complete, but a work item that came without its manifest stays
  // without it: for a caller that never reads the manifest (the simulated
  // boards of coordinator_bench), saving a copy of it on every lease.
  absl::Status Admit(v1::WorkItem* work);

  int size() const;

 private:
  // Complete (`fill`) or Admit.
  absl::Status Resolve(v1::WorkItem* work, bool fill);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, v1::OperatorManifest> by_digest_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace tunefarm

#endif  // TUNEFARM_AGENT_MANIFEST_CACHE_H_
