// Deployable forms of a tuning database (tuning_db/database.h): a C++17
// header and a Python 3 module, each holding the database's entries and
// defaults and a lookup from a shape to its parameters that follows
// LookupConfig's rule (exact dims, else nearest by the sum of |ln| ratios
// among the same operator, backend, device, dtype and dim names, else the
// operator's default on the backend). docs/tuning-db.md shows their use.
//
// Pure functions; thread-safe.
#ifndef TUNEFARM_TUNING_DB_CODEGEN_H_
#define TUNEFARM_TUNING_DB_CODEGEN_H_

#include <string>

#include "absl/status/status.h"
#include "tuning_db/database.h"

namespace tunefarm {

// The header: namespace tunefarm_tuned with Lookup(op, backend, device,
// dtype, dims, &config), header-only, no dependencies beyond the standard
// library.
std::string GenerateCppHeader(const TuningDb& db);

// The module: lookup(op, backend, device, dtype, dims) -> dict or None;
// standard library only.
std::string GeneratePythonModule(const TuningDb& db);

// Writes tuning_db.json, tuning_db.h and tuning_db.py into `dir` (created
// when missing), each atomically.
absl::Status WriteTuningDbFiles(const TuningDb& db, const std::string& dir);

}  // namespace tunefarm

#endif  // TUNEFARM_TUNING_DB_CODEGEN_H_
