// SweepBook: the coordinator's queued and running sweeps, in submission
// order, and what is done to them as a whole: submitting one (validation,
// permission, the team's quota, the idempotent-retry lookup, the baselines
// and the SUBMITTED event), cancelling one, and recovering them all from
// the store after a restart (resuming each from its stored rounds with
// lease grace; one whose operator is gone is ended FAILED). It numbers
// sweeps, builds a sweep's runtime from its record (the operator as the
// sweep's board kind sees it, its strategies), and names the meta keys of
// sweep numbering and idempotency.
//
// Its calls stage into the caller's Txn (through Staging, and the Decider
// for a sweep's end) and never commit: the Coordinator owns the
// transaction, commits it, and only then moves the numbering on (Advance).
// The Coordinator's undo erases a sweep added by a call that did not
// commit.
//
// Owned by the Coordinator; used only on the control loop thread (not
// thread-safe). The catalog and the parts in SweepBook::Parts must outlive
// it; the parts may be built after it (they point into it), since it uses
// them only in its calls.
#ifndef TUNEFARM_COORDINATOR_SWEEP_BOOK_H_
#define TUNEFARM_COORDINATOR_SWEEP_BOOK_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/auth.h"
#include "coordinator/core_state.h"
#include "ops/catalog.h"
#include "storage/store.h"
#include "tunefarm/v1/farm.pb.h"

namespace tunefarm {

class Decider;
class Placement;
class Staging;

class SweepBook {
 public:
  using Sweeps = std::map<std::string, std::unique_ptr<SweepRuntime>>;
  // Meta key of the next sweep number.
  static constexpr char kNextSweepKey[] = "next_sweep_number";

  // What its calls work through (the Coordinator's).
  struct Parts {
    Store* store = nullptr;  // reads: idempotency, recovery, ended sweeps
    Clock* clock = nullptr;
    Staging* staging = nullptr;
    const Placement* placement = nullptr;  // team quotas
    Decider* decider = nullptr;            // ending a sweep
  };

  SweepBook(const OperatorCatalog* catalog, Parts parts)
      : catalog_(catalog), parts_(parts) {}

  // --- the calls ----------------------------------------------------------
  // What Submit staged, or found.
  struct Submission {
    // The new sweep, its baselines and its SUBMITTED event, staged; null
    // when `existing` is set.
    SweepRuntime* staged = nullptr;
    // An idempotent retry: the sweep its key already names, with nothing
    // staged.
    std::optional<v1::Sweep> existing;
  };
  // Stages a new sweep from `request` (its spec, or spec_yaml parsed), one
  // baseline round per workload, the next number and the idempotency key.
  // `caller` must belong to the spec's team (or be an admin):
  // PERMISSION_DENIED otherwise; RESOURCE_EXHAUSTED past the team's quota
  // of active sweeps, or while the store cannot write (Store::Writable);
  // ALREADY_EXISTS for a key used with a different spec. Once the caller
  // committed the transaction it calls Advance.
  absl::StatusOr<Submission> Submit(Txn& txn,
                                    const v1::SubmitSweepRequest& request,
                                    const Principal& caller);
  // Stages the end of a queued or running sweep, CANCELLED; answers its
  // record as it will be stored. NOT_FOUND for a sweep the caller may not
  // see (as for one that does not exist), FAILED_PRECONDITION for one that
  // has already ended.
  absl::StatusOr<v1::Sweep> Cancel(Txn& txn,
                                   const v1::CancelSweepRequest& request,
                                   const Principal& caller);
  // Loads the next number and every queued or running sweep from the store
  // and resumes it; a recovered lease runs at least until `grace_until`
  // (Resume). A sweep that cannot run (its operator is gone) is ended
  // FAILED in `txn`, the normal way (rounds closed, FINISHED event for
  // watchers). Call once, on an empty book.
  absl::Status Recover(Txn& txn, absl::Time grace_until);

  // --- numbering and idempotency ------------------------------------------
  // Takes the stored next number (the meta value under kNextSweepKey, when
  // present): DATA_LOSS when it is not a number.
  absl::Status LoadNextNumber(const std::optional<std::string>& stored);
  int64_t next_number() const { return next_number_; }
  // The id the next submitted sweep gets ("sw-000042").
  std::string NextId() const;
  // What a submission stores under kNextSweepKey, and, once it committed,
  // moving on to the next number.
  std::string StoredNextNumber() const;
  void Advance() { ++next_number_; }
  // Meta key that maps a team's idempotency key to its sweep's id.
  static std::string IdempotencyKey(const std::string& team,
                                    const std::string& key);

  // --- the sweeps ---------------------------------------------------------
  SweepRuntime* Find(const std::string& sweep_id);
  Sweeps& sweeps() { return sweeps_; }
  const Sweeps& sweeps() const { return sweeps_; }
  int size() const { return static_cast<int>(sweeps_.size()); }
  // Sweeps of `team` queued or running.
  int ActiveOf(const std::string& team) const;
  // Builds `sweep`'s runtime and adds it (no rounds yet): an error when its
  // operator is not in the catalog or its strategy cannot be made.
  absl::StatusOr<SweepRuntime*> Load(const v1::Sweep& sweep);
  // Adds a sweep that cannot run (Load failed) with its stored rounds, so
  // that it can be ended the normal way.
  SweepRuntime* AddUnrunnable(const v1::Sweep& sweep,
                              std::vector<v1::Round> rounds);
  void Erase(const std::string& sweep_id) { sweeps_.erase(sweep_id); }
  // Takes an ended sweep out of the book, to be freed a slice at a time by
  // FreeRetired: freeing a 10,000-round sweep at once takes tens of
  // milliseconds, and every call queued on the loop would wait for it.
  void Retire(const std::string& sweep_id);
  // Frees up to `max_rounds` rounds of retired sweeps (a sweep's strategy
  // and record with its last round). Returns the rounds still to free.
  int64_t FreeRetired(int64_t max_rounds);

  // The lowest queued round of `s`, or null (moves s.queued_from up).
  static v1::Round* FirstQueued(SweepRuntime& s);
  // Candidates leased or queued, not yet recorded.
  static int64_t CandidatesInFlight(const SweepRuntime& s);

  // Gives `s` its stored rounds after a restart: DATA_LOSS when their ids
  // are not 0, 1, 2, ...; a leased round's lease runs at least until
  // `grace_until`, so the agent that holds it can reconnect and report.
  static absl::Status Resume(SweepRuntime& s, std::vector<v1::Round> rounds,
                             absl::Time grace_until);

 private:
  const OperatorCatalog* catalog_;
  const Parts parts_;
  Sweeps sweeps_;
  std::vector<std::unique_ptr<SweepRuntime>> retired_;
  int64_t retired_rounds_ = 0;
  int64_t next_number_ = 1;
};

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_SWEEP_BOOK_H_
