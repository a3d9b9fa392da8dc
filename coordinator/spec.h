// Sweep specs: parsing the YAML a team submits into a v1::SweepSpec, and
// checking a spec (from YAML or straight from gRPC) against the operator
// catalog. Both name the first bad field by its path, e.g.
// "budget.max_rounds: expected an integer, got 'ten'", and never guess: an
// unknown key, a wrong type or an out-of-range value is an error.
//
// YAML schema (examples/sim_matmul.yaml is a complete one):
//
//   name: sim-matmul-demo     # required, [A-Za-z0-9][A-Za-z0-9._-]{0,63}
//   team: demo                # required, same charset
//   operator: sim_matmul      # required, in the catalog
//   workload: square_2k       # a workload of the operator, or inline
//                             # {name:, dtype:, dims: {m: .., ...}};
//                             # default: the operator's first workload
//   workloads: [a, {name: b, dtype: fp32, dims: {..}}]   # instead of
//                             # workload: several (coordinator/workloads.h)
//   objective: per_workload   # or {name: one_config, weights: {a: 1, b: 2}}
//   goal: {speedup: 3.0, target_us: 40}   # at least one; speedup > 1,
//                                         # target_us > 0
//   strategy: {name: random, seed: 7, options: {}}   # grid | random |
//                                                    # guided | hybrid | tpe;
//                                                    # or `strategy: grid`
//   budget: {max_rounds: 60, time_limit: 30m, max_rounds_without_gain: 20}
//   min_gain: 0.02            # fraction in [0, 1)
//   boards: {kind: sim, chip: Ascend910B-sim, labels: {pool: demo}}
//   measurement: {warmup: 5, samples: 30, flush_cache: true, mode: ab,
//                 target_rel_spread: 0.01, max_samples: 120, confidence: 0.95,
//                 isolation: runner}       # runner (default) | process
//   baseline: {tile_m: 32}    # overrides of the operator's defaults;
//                             # from_db: PATH starts from a tuning database
//                             # (tuning_db/warm_start.h)
//   priority: 0               # -100..100
//
// Defaults and the proto3 "zero means unset" rule: fields for which zero is
// a legal value (min_gain 0.02, measurement.warmup 5, measurement.flush_cache
// true, strategy.seed 1) are defaulted by ParseSweepSpec, which sees whether
// the key was written; ValidateSweepSpec cannot tell 0 from unset there and
// keeps the 0. Fields for which zero is illegal (strategy.name random,
// budget.max_rounds 50, budget.time_limit 12h,
// budget.max_rounds_without_gain 20, measurement.samples 30,
// measurement.mode ab, measurement.target_rel_spread 0.01,
// measurement.max_samples 4 × samples, measurement.confidence 0.95, boards.kind
// the operator's first backend in sim, cpu, cuda, ascend order, workload the
// operator's first) are defaulted by ValidateSweepSpec; an explicit zero in
// YAML is rejected by ParseSweepSpec rather than silently replaced.
//
// Pure functions; thread-safe.
#ifndef TUNEFARM_COORDINATOR_SPEC_H_
#define TUNEFARM_COORDINATOR_SPEC_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "ops/catalog.h"
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

// Bounds every spec must respect (hostile values are refused, not clamped).
inline constexpr int32_t kMaxRoundsLimit = 100000;
inline constexpr int64_t kMaxTimeLimitS = 7 * 24 * 3600;
inline constexpr int32_t kMinSamples = 3;
inline constexpr int32_t kMaxSamples = 10000;
inline constexpr int32_t kMaxWarmup = 1000;
inline constexpr int32_t kMaxTimedSamples = 40000;  // measurement.max_samples
inline constexpr int32_t kMaxPriority = 100;
// A warm start's database as sent with the spec (baseline.from_db).
inline constexpr size_t kMaxBaselineDbBytes = 4 << 20;

// Parses YAML into a SweepSpec (types, unknown keys and explicit values'
// ranges are checked here; catalog-dependent checks are left to
// ValidateSweepSpec). INVALID_ARGUMENT naming the field path.
// Input limits (docs/security.md): the document is UTF-8 and at most
// yamlf::kMaxDocumentBytes (1 MiB); at most kMaxSpecYamlAliases aliases,
// kMaxSpecYamlDepth levels of nesting and kMaxSpecYamlNodes nodes once
// aliases are expanded. INVALID_ARGUMENT saying which.
inline constexpr int kMaxSpecYamlDepth = 32;
inline constexpr int64_t kMaxSpecYamlNodes = 100000;
inline constexpr size_t kMaxSpecYamlAliases = 64;
absl::StatusOr<v1::SweepSpec> ParseSweepSpec(std::string_view yaml);

// Checks the spec against the catalog and fills defaults; the first bad
// field is named (INVALID_ARGUMENT). Returns the completed spec: the
// workload resolved to the operator's full entry, and baseline_params the
// operator's defaults merged with the spec's overrides.
absl::StatusOr<v1::SweepSpec> ValidateSweepSpec(v1::SweepSpec spec,
                                                const OperatorCatalog& catalog);

// "90s", "30m", "12h", "7d", combinations ("1h30m") or integer seconds.
// Errors do not name a field; callers prefix the path.
absl::StatusOr<int64_t> ParseDurationSeconds(std::string_view text);

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_SPEC_H_
