// The tuning database: the best configuration found for each (operator,
// backend, device, dtype, workload dims), with its measured time and where
// it came from, exported from finished sweeps (`tunefarm export`) and read
// back for warm starts (`baseline: {from_db: PATH}`). The JSON format, the
// merge rule and the lookup rule are documented in docs/tuning-db.md; the
// generated C++ header and Python module (tuning_db/codegen.h) implement the
// same lookup rule.
//
// Plain values and pure functions; thread-safe.
#ifndef TUNEFARM_TUNING_DB_DATABASE_H_
#define TUNEFARM_TUNING_DB_DATABASE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

inline constexpr char kTuningDbFormat[] = "tunefarm.tuning_db";
inline constexpr int kTuningDbVersion = 1;

// One tuned configuration.
struct TunedEntry {
  // The key.
  std::string op;       // operator name
  std::string backend;  // board kind: cpu, cuda, ascend, sim, replay
  std::string device;   // the board's chip ("" when the board was unknown)
  std::string dtype;
  std::map<std::string, int64_t> dims;
  // The value.
  std::string workload;   // the workload's name, informative
  nlohmann::json params;  // {name: int | double | string | bool}
  double time_us = 0;     // median
  double p20_us = 0;      // the interval the median came with
  double p80_us = 0;
  int samples = 0;
  double baseline_us = 0;  // the sweep's baseline on the same board kind
  bool simulated = false;  // a model's numbers (sim boards)
  bool replayed = false;   // replayed from a measured space (replay boards)
  // Provenance.
  std::string sweep_id;
  int64_t round = 0;
  std::string board;
  int64_t date_unix_ms = 0;  // when the round finished
  std::string source_hash;   // the operator package's, at submission

  // "op/backend/device/dtype/k=..,m=.." : entries with equal keys merge.
  std::string Key() const;
};

// The manifest default of an operator on a backend: what lookups return
// when the database has no entry for the shape's operator, backend, device,
// dtype and dim names.
struct OperatorDefault {
  std::string op;
  std::string backend;
  nlohmann::json params;
  std::string source_hash;
  int64_t date_unix_ms = 0;  // when it was exported
};

struct TuningDb {
  std::vector<TunedEntry> entries;  // sorted by Key()
  std::vector<OperatorDefault> defaults;
};

// The database entry for a sweep's best round. `boards` give the chip of the
// round's board (when absent, spec.boards.chip, else ""). FAILED_PRECONDITION
// when the sweep has no passing best round, or when its closing check's lower
// bound did not show the best faster than the baseline.
absl::StatusOr<TunedEntry> EntryFromSweep(
    const v1::Sweep& sweep, const std::vector<v1::Round>& rounds,
    const std::vector<v1::BoardInfo>& boards);

// Every entry a sweep gives: its best round's, or for a multi-workload
// sweep (SweepSpec.workloads) each workload's best round's (with that
// workload's dims and baseline), skipping workloads without a passing one.
// FAILED_PRECONDITION when there is none.
absl::StatusOr<std::vector<TunedEntry>> EntriesFromSweep(
    const v1::Sweep& sweep, const std::vector<v1::Round>& rounds,
    const std::vector<v1::BoardInfo>& boards);

nlohmann::json TuningDbToJson(const TuningDb& db);
std::string TuningDbText(const TuningDb& db);  // pretty JSON, newline-ended
// INVALID_ARGUMENT naming `source` and the bad field (wrong format name, a
// newer version, a missing or mistyped field).
absl::StatusOr<TuningDb> ParseTuningDb(absl::string_view text,
                                       absl::string_view source);
absl::StatusOr<TuningDb> LoadTuningDb(const std::string& path);

// Merges `from` into `into` by the merge rule (docs/tuning-db.md): a new
// key is added; for a key already there the incoming entry replaces it when
// the operator's source hash differs and the incoming one is newer, or the
// sources agree and it is faster (or as fast and newer). Every addition and
// replacement, and every incoming entry that lost, is appended to `log` as
// one line in words.
void MergeTuningDb(TuningDb* into, const TuningDb& from,
                   std::vector<std::string>* log);

// Adds or replaces an operator default (the newer export wins).
void SetDefault(TuningDb* db, OperatorDefault def);

// The lookup rule shared by the generated code and warm starts.
struct Lookup {
  enum class Source { kExact, kNearest, kDefault, kNone };
  Source source = Source::kNone;
  const TunedEntry* entry = nullptr;     // kExact, kNearest
  const OperatorDefault* def = nullptr;  // kDefault
  double distance = 0;                   // kNearest: sum |ln(a/b)|
};
// Candidates: entries of `op` on `backend` with `dtype`, the same dim names,
// and `device` ("" = any device). The exact dims win; otherwise the one with
// the smallest sum over dims of |ln(dim / entry dim)|, ties to the faster
// then the lower key; without candidates, the default of (op, backend); else
// kNone.
Lookup LookupConfig(const TuningDb& db, absl::string_view op,
                    absl::string_view backend, absl::string_view device,
                    absl::string_view dtype,
                    const std::map<std::string, int64_t>& dims);
const char* LookupSourceName(Lookup::Source s);  // exact|nearest|default|none

// "m=512,n=512,k=512" style text of dims (sorted by name).
std::string DimsText(const std::map<std::string, int64_t>& dims);

}  // namespace tunefarm

#endif  // TUNEFARM_TUNING_DB_DATABASE_H_
