#include "coordinator/health_checker.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "coordinator/lease_id.h"

namespace tunefarm {

HealthChecker::HealthChecker(const OperatorCatalog* catalog,
                             HealthCheckerOptions options)
    : catalog_(catalog), options_(std::move(options)) {}

bool HealthChecker::Due(const v1::BoardInfo& board, bool check_due,
                        absl::Time next_check, absl::Time now) const {
  if (!Checks(board.kind()) || board.state() == v1::BOARD_STATE_DRAINING) {
    return false;
  }
  return check_due || now >= next_check;
}

absl::Status HealthChecker::Work(const v1::BoardInfo& board, int64_t check,
                                 absl::Time expires, v1::WorkItem* work) const {
  const HealthCheck& golden = options_.checks.at(board.kind());
  auto op = catalog_->Find(golden.spec.operator_name());
  if (!op.ok()) {
    return absl::Status(
        op.status().code(),
        absl::StrCat(golden.source, ": ", op.status().message()));
  }
  work->set_lease_id(HealthLeaseId{board.board_id(), check}.ToString());
  work->set_epoch(check);
  *work->mutable_operator_() = ProjectManifest(**op, board.kind());
  *work->mutable_workload() = golden.spec.workload();
  *work->mutable_params() = golden.spec.baseline_params();
  *work->mutable_measurement() = golden.spec.measurement();
  work->set_lease_expires_unix_ms(absl::ToUnixMillis(expires));
  work->set_lease_duration_ms(
      absl::ToInt64Milliseconds(options_.lease_duration));
  work->set_seed(static_cast<uint64_t>(check));
  work->set_health_check(true);
  return absl::OkStatus();
}

HealthVerdict HealthChecker::Judge(const std::string& kind,
                                   const v1::RoundResult* result,
                                   const std::string& detail) const {
  const HealthCheck& golden = options_.checks.at(kind);
  HealthVerdict verdict;
  verdict.why = detail;
  if (result != nullptr && result->outcome() != v1::OUTCOME_OK) {
    verdict.why = absl::StrCat(v1::Outcome_Name(result->outcome()), ": ",
                               result->detail());
  } else if (result != nullptr) {
    const double median = result->measurement().median_us();
    verdict.passed = median >= golden.min_us && median <= golden.max_us;
    verdict.why = absl::StrFormat(
        "%.1f µs %s [%.1f, %.1f] µs%s", median,
        verdict.passed ? "in" : "outside", golden.min_us, golden.max_us,
        result->measurement().simulated() ? " [simulated]" : "");
  }
  return verdict;
}

absl::Time HealthChecker::NextCheck(absl::Time now, bool passed) const {
  if (!passed) return now + options_.retry_interval;
  return options_.interval > absl::ZeroDuration() ? now + options_.interval
                                                  : absl::InfiniteFuture();
}

std::string HealthChecker::FailedDetail(const std::string& kind,
                                        const std::string& why) const {
  return absl::StrCat("health check failed (", options_.checks.at(kind).source,
                      "): ", why, "; re-checked in ",
                      absl::FormatDuration(options_.retry_interval));
}

}  // namespace tunefarm
