// Board health checks in the LAVA style: each board kind may have a golden,
// a known operator + workload + parameters whose output must pass the
// operator's precision check and whose median time must fall in a known
// range. The coordinator runs it on a board when the board joins, every
// health-check interval, and after the board faulted (BOARD_LOST); a failed
// check quarantines the board until a re-check passes or an admin re-admits
// it. Health checks are board events, never sweep rounds.
//
// A golden is a small YAML file per board kind (ops/health/<kind>.yaml ships
// the measured ones; operators add their own):
//
//   kind: sim                   # default: the file name without .yaml
//   operator: sim_matmul        # in the catalog, with a backend for `kind`
//   workload: square_2k         # as in a sweep spec
//   baseline: {tile_m: 64}      # parameters: overrides of the defaults
//   measurement: {warmup: 2, samples: 10}
//   expect_us: {min: 900, max: 1300}   # median time range, µs
//
// Pure parsing over an immutable catalog; thread-safe.
#ifndef TUNEFARM_COORDINATOR_HEALTH_H_
#define TUNEFARM_COORDINATOR_HEALTH_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "ops/catalog.h"
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

struct HealthCheck {
  std::string kind;
  std::string source;  // the file it came from
  // operator_name, workload (resolved), baseline_params (defaults merged),
  // measurement: what the board runs. Validated like a sweep spec.
  v1::SweepSpec spec;
  double min_us = 0;
  double max_us = 0;
};

// Errors are INVALID_ARGUMENT naming `source` and the field.
absl::StatusOr<HealthCheck> ParseHealthCheck(absl::string_view yaml,
                                             absl::string_view source,
                                             absl::string_view default_kind,
                                             const OperatorCatalog& catalog);

// Every <kind>.yaml in `dir`, by kind. NOT_FOUND when `dir` is missing.
absl::StatusOr<std::map<std::string, HealthCheck>> LoadHealthChecks(
    const std::string& dir, const OperatorCatalog& catalog);

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_HEALTH_H_
