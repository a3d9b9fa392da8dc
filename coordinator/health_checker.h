// HealthChecker: the rules of board health checks (the goldens themselves
// are parsed by coordinator/health.h). It answers which boards must run
// their golden before any sweep work, builds the work that runs a golden as
// a board's n-th check (its lease a HealthLeaseId), judges the result, and
// says when the next check is due. A board's check state (due flag, next
// check, running lease) stays in the Coordinator's board records: the
// Coordinator applies these answers inside its transaction.
//
// Owned by the Coordinator; used only on the control loop thread. It holds
// no mutable state (const methods over its options and the catalog).
#ifndef TUNEFARM_COORDINATOR_HEALTH_CHECKER_H_
#define TUNEFARM_COORDINATOR_HEALTH_CHECKER_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "coordinator/health.h"
#include "ops/catalog.h"
#include "tunefarm/v1/agent.pb.h"
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

struct HealthCheckerOptions {
  // Goldens by board kind; kinds without one are never checked.
  std::map<std::string, HealthCheck> checks;
  // A healthy board is checked again this long after it passed (zero:
  // never periodically); a failed one is re-checked after retry_interval.
  absl::Duration interval = absl::Hours(1);
  absl::Duration retry_interval = absl::Minutes(5);
  absl::Duration lease_duration = absl::Seconds(30);
};

// What a health check's result (or its absence) says about the board.
struct HealthVerdict {
  bool passed = false;
  std::string why;  // "1570.3 µs in [1400.0, 1750.0] µs", an outcome, ...
};

class HealthChecker {
 public:
  // `catalog` must outlive this object.
  HealthChecker(const OperatorCatalog* catalog, HealthCheckerOptions options);

  // Whether boards of `kind` have a golden.
  bool Checks(const std::string& kind) const {
    return options_.checks.contains(kind);
  }
  // The golden of `kind` (Checks must hold).
  const HealthCheck& Golden(const std::string& kind) const {
    return options_.checks.at(kind);
  }
  // Whether `board` must run its golden before any sweep work: its kind has
  // one, it is not draining, and a check is pending (`check_due`) or
  // `next_check` has come.
  bool Due(const v1::BoardInfo& board, bool check_due, absl::Time next_check,
           absl::Time now) const;
  // Fills `work` with `board`'s golden as its `check`-th check, its lease
  // expiring at `expires`. An error (naming the golden's file) and `work`
  // untouched when the golden's operator is not in the catalog. The kind
  // must have a golden (Checks).
  absl::Status Work(const v1::BoardInfo& board, int64_t check,
                    absl::Time expires, v1::WorkItem* work) const;
  // The verdict on a check of a `kind` board: `result` null when none came
  // (`detail` says why). It passes when the result is OK and its median
  // lies in the golden's range.
  HealthVerdict Judge(const std::string& kind, const v1::RoundResult* result,
                      const std::string& detail) const;
  // When the next check is due after one that passed (or an admin's
  // re-admission) or failed at `now`.
  absl::Time NextCheck(absl::Time now, bool passed) const;
  // The board's health detail after a failed check.
  std::string FailedDetail(const std::string& kind,
                           const std::string& why) const;

 private:
  const OperatorCatalog* catalog_;
  HealthCheckerOptions options_;
};

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_HEALTH_CHECKER_H_
