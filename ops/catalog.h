// The operator catalog: loads operator packages (a folder holding an
// `operator.yaml` manifest) into v1::OperatorManifest records, and checks
// kernel parameter sets against a manifest's parameter space.
//
// Manifest schema (every key other than these is rejected, so typos surface):
//
//   name: sim_matmul                 # [a-z][a-z0-9_]*, required
//   description: ...                 # optional
//   parameters:                      # required, at least one
//     - name: tile_m                 # [a-z][a-z0-9_]*, unique
//       values: [16, 32, 64]         # ints, doubles, strings or bools; one
//                                    # type per parameter (ints mixed with
//                                    # doubles read as doubles); distinct
//       default: 32                  # required, one of values
//       stage: tiling                # tiling | pipeline | in_core; default
//                                    # tiling
//       description: ...             # optional
//       backends: [cpu]              # optional: board kinds it applies to
//                                    # (each must be declared below); absent
//                                    # = every backend. See ProjectManifest.
//   constraints:                     # optional: expressions over the
//     - "block_m * block_n <= 65536" # parameters that every proposed
//                                    # configuration satisfies
//                                    # (ops/constraints.h: the language)
//   workloads:                       # optional (a sweep may inline one)
//     - {name: square_2k, dtype: fp16, dims: {m: 2048, n: 2048, k: 2048}}
//   tolerances: {rtol: 0.01, atol: 0.001}   # required, finite, >= 0
//   backends:                        # required, keyed by board kind
//     sim: {command: ["{bin}/tunefarm-sim-matmul"]}   # sim|cpu|cuda|ascend
//     cpu:                           # or: compiled per variant
//       sources: [cpu/gemm.cc]       # relative to the package, no ".."
//       compiler: c++                # optional (the board's default)
//       flags: [-O3, -march=native]  # optional
//     replay: {}                     # a measured space answers (replay
//                                    # boards, agent/replay_board.h)
//   (a backend has exactly one of command and sources, except replay, which
//   has neither; compiler and flags only with sources)
//
// Errors are INVALID_ARGUMENT and name the file and the field path, e.g.
// "ops/x/operator.yaml: parameters[2].default: 512 is not one of values
// [16, 32, 64]"; YAML syntax errors carry the line and column.
//
// Thread-safety: the free functions are pure. An OperatorCatalog is immutable
// after loading (Add is for setup only), so concurrent const use is safe; the
// pointers Find returns live as long as the catalog.
#ifndef TUNEFARM_OPS_CATALOG_H_
#define TUNEFARM_OPS_CATALOG_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/params.h"
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

// The manifest file name inside a package folder.
inline constexpr char kManifestFileName[] = "operator.yaml";

// The board kinds a backend may be declared for, in the order used to pick a
// sweep's default board kind.
const std::vector<std::string>& KnownBoardKinds();

// Parses manifest text. `source_name` prefixes every error (usually the file
// path). package_dir is left empty.
absl::StatusOr<v1::OperatorManifest> ParseOperatorManifest(
    std::string_view yaml, std::string_view source_name);

// Reads `<package_dir>/operator.yaml` and sets package_dir and source_hash
// (sha256 of operator.yaml and the backends' source files).
absl::StatusOr<v1::OperatorManifest> LoadOperatorManifest(
    const std::string& package_dir);

// Checks a workload's name and dtype ([a-z][a-z0-9_]*) and its dims (at least
// one, names [a-z][a-z0-9_]*, values 1..2^40); errors name `path`.<field>.
absl::Status ValidateWorkload(const v1::Workload& w, std::string_view path);

// Every parameter at its default value.
ParamMap DefaultParams(const v1::OperatorManifest& op);

// OK when `params` sets every manifest parameter to a value of its domain and
// nothing else; otherwise INVALID_ARGUMENT naming the parameter and value.
absl::Status ValidateParams(const v1::OperatorManifest& op,
                            const ParamMap& params);

// The number of configurations (product of domain sizes), saturating at
// UINT64_MAX.
uint64_t SpaceSize(const v1::OperatorManifest& op);

// The parameter domain called `name`, or nullptr.
const v1::ParameterDomain* FindParameter(const v1::OperatorManifest& op,
                                         std::string_view name);

// The manifest as a sweep on `board_kind` sees it: only the parameters whose
// `backends` is empty or names that kind (everything else unchanged).
// Defaults, validation and search spaces of a sweep use the projection.
v1::OperatorManifest ProjectManifest(const v1::OperatorManifest& op,
                                     std::string_view board_kind);

// The operators a farm knows, by name.
class OperatorCatalog {
 public:
  OperatorCatalog() = default;

  // Each root is either a package (holds operator.yaml) or a folder of
  // packages (each subfolder holding operator.yaml; other subfolders are
  // skipped). A missing root, a bad manifest, or two packages with the same
  // operator name are errors.
  static absl::StatusOr<OperatorCatalog> LoadFromDirs(
      const std::vector<std::string>& roots);

  // NOT_FOUND: "unknown operator 'x'; known: a, b".
  absl::StatusOr<const v1::OperatorManifest*> Find(std::string_view name) const;

  // Sorted.
  std::vector<std::string> Names() const;

  // Adds or replaces a manifest (tests and embedders).
  void Add(v1::OperatorManifest op);

 private:
  std::map<std::string, v1::OperatorManifest, std::less<>> ops_;
};

}  // namespace tunefarm

#endif  // TUNEFARM_OPS_CATALOG_H_
