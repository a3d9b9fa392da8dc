// Warm starts: a sweep's baseline taken from a tuning database
// (`baseline: {from_db: PATH}` in a spec; docs/tuning-db.md). The client
// sends the database (filtered to the operator) with the spec; the
// coordinator resolves it here while validating the spec, once the
// workload, board kind and parameter space are settled.
//
// Pure functions; thread-safe.
#ifndef TUNEFARM_TUNING_DB_WARM_START_H_
#define TUNEFARM_TUNING_DB_WARM_START_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/params.h"
#include "tunefarm/v1/types.pb.h"
#include "tuning_db/database.h"

namespace tunefarm {

struct WarmStart {
  // The database's parameters that belong to the operator's space on the
  // board kind (the rest are named in `source`); empty when the database
  // had no entry (then the manifest default stands).
  ParamMap params;
  // Where the baseline comes from, in words, e.g. "tuning db db.json:
  // nearest entry gemm/cpu/EPYC/fp32/k=256,m=256,n=256 (distance 0.69),
  // sweep sw-000002 round 5, 812.30 µs". Recorded with the sweep.
  std::string source;
};

// Looks the sweep's shape up in `db` (LookupConfig with the chip, "" = any
// device) and keeps the entry's parameters that `op` (already projected on
// the board kind) accepts. A default-only or missing match gives no params.
WarmStart ResolveWarmStart(const TuningDb& db, absl::string_view db_name,
                           const v1::OperatorManifest& op,
                           absl::string_view board_kind, absl::string_view chip,
                           const v1::Workload& workload);

// The database text a client sends with a spec: only `op`'s entries and
// defaults, so that the spec stays small.
std::string TuningDbForOperator(const TuningDb& db, absl::string_view op);

}  // namespace tunefarm

#endif  // TUNEFARM_TUNING_DB_WARM_START_H_
