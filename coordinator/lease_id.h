// Lease ids: what names a lease on the wire (WorkItem.lease_id, renewals,
// results, heartbeats) and in the coordinator's memory. Two kinds, never
// confused: a sweep round's lease, "<sweep>/<round>/<epoch>" (LeaseId), and
// a board's health check, "health:<board>:<check>" (HealthLeaseId), which
// is a board event and never a sweep's lease.
//
// Value types; thread-compatible. The text forms are stored (rounds'
// leases) and held by agents across coordinator restarts: they must not
// change.
#ifndef TUNEFARM_COORDINATOR_LEASE_ID_H_
#define TUNEFARM_COORDINATOR_LEASE_ID_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace tunefarm {

// The lease of one attempt (epoch) at one round of a sweep.
struct LeaseId {
  std::string sweep_id;
  int64_t round_id = 0;
  int64_t epoch = 0;

  // "sw-000001/7/2" → {sw-000001, 7, 2}; nullopt for anything else (a
  // health check's lease included).
  static std::optional<LeaseId> Parse(absl::string_view text);
  std::string ToString() const;

  friend bool operator==(const LeaseId&, const LeaseId&) = default;
};

// The lease of a board's `check`-th health check.
struct HealthLeaseId {
  std::string board_id;
  int64_t check = 0;

  // Whether `text` is of the health-check kind (well formed or not): such
  // a text is never looked up as a sweep's lease.
  static bool IsHealthLease(absl::string_view text);
  // "health:a1/b0:3" → {a1/b0, 3}; nullopt for anything else.
  static std::optional<HealthLeaseId> Parse(absl::string_view text);
  std::string ToString() const;

  friend bool operator==(const HealthLeaseId&, const HealthLeaseId&) = default;
};

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_LEASE_ID_H_
