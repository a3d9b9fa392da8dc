// Measured search spaces: files in which every configuration of a real
// kernel was timed on a real GPU by someone else (Kernel Tuner cache files,
// the autotuning community's T4 result format, KTT tuning output; see
// /work/shared/fixtures/spaces/PROVENANCE.md). A Space holds the parameters
// with their value domains and, for every configuration in the file, its
// recorded time or its recorded failure. Configurations absent from a file
// broke the kernel's constraints and were never run.
//
// Formats (detected from the content, gzip detected from the magic bytes):
//   Kernel Tuner cache  {"tune_params": {p: [values]}, "tune_params_keys",
//                        "cache": {"v1,v2,..": {p: v, "time": ms |
//                        "…Failed…"}}} domains from tune_params; times in ms.
//   T4 results          {"schema_version", "metadata": {"timeunit"},
//                        "results": [{"configuration": {..}, "invalidity":
//                        "correct"|"compile"|"runtime"|..., "measurements":
//                        [{"name": "time", "value": ..}]}]}; domains are the
//                        values seen, sorted.
//   KTT TuningOutput    {"Metadata": {"Device", "TimeUnit"}, "Results":
//                        [{"Configuration": [{"Name", "Value"}], "Status",
//                        "TotalDuration"}]}; domains are the values seen.
// Every time is converted to microseconds.
//
// Thread-safety: the functions are pure; a loaded Space is immutable and
// safe to share between threads.
#ifndef TUNEFARM_OPS_SPACES_SPACE_FILE_H_
#define TUNEFARM_OPS_SPACES_SPACE_FILE_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/params.h"
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

struct SpaceParameter {
  std::string name;
  std::vector<v1::ParamValue> values;  // the domain, in the file's order
};

// How a recorded configuration ended.
enum class SpaceOutcome { kOk, kCompileFailed, kRuntimeFailed };

struct SpaceConfig {
  ParamMap params;
  SpaceOutcome outcome = SpaceOutcome::kOk;
  double time_us = 0;              // the recorded objective when kOk
  std::vector<double> samples_us;  // the individual runs, when recorded
  std::string failure;             // the file's failure text otherwise
};

struct Space {
  std::string file;    // the path it was loaded from (or the source name)
  std::string format;  // "kernel_tuner" | "t4" | "ktt"
  std::string tool;  // who measured it, in words ("Kernel Tuner", "KTT 2.1.0")
  std::string kernel;  // kernel name when the file has one
  std::string device;  // GPU name when the file has one ("" otherwise)
  std::vector<SpaceParameter> parameters;          // file order
  std::vector<SpaceConfig> configs;                // file order
  absl::flat_hash_map<std::string, size_t> index;  // ParamsKey -> configs
  size_t ok_count = 0;
  int64_t best_index = -1;  // fastest kOk configuration, -1 if none
  double best_us = 0;

  // The recorded configuration, or nullptr when it is not in the space.
  const SpaceConfig* Find(const ParamMap& params) const;
  // The product of the domain sizes (the space before constraints).
  double CartesianSize() const;
};

// Parses file content (plain or gzip). `source_name` names the input in
// errors and becomes Space::file.
absl::StatusOr<Space> ParseSpace(absl::string_view content,
                                 absl::string_view source_name);

// Reads and parses a space file.
absl::StatusOr<Space> LoadSpaceFile(const std::string& path);

// The guided strategy's stage a measured-space parameter is put in, from
// its name (these files carry no stages): block / tile / work-group shapes
// -> "tiling"; unrolling, strides, staging through shared or constant memory,
// padding, caching, iterations -> "pipeline"; everything else (vector
// widths, methods, data layout, precision) -> "in_core".
std::string StageForSpaceParameter(absl::string_view name);

// An operator manifest for a space: one parameter per space parameter (its
// domain sorted ascending when every value is a number, so that "one step
// up" means a larger value), stage from StageForSpaceParameter, default =
// the file's first configuration (first kOk one when the first failed).
// Constraints: KnownSpaceConstraints. Its one backend is `replay` (run only
// by replay boards) and its one workload is {name: recorded, dtype:
// recorded, dims: {configs: N}}: the files record no problem size.
v1::OperatorManifest ManifestFromSpace(const Space& space);

// The constraints of the kernel families in PROVENANCE.md (GEMM,
// convolution, dedispersion, Coulomb 3D; pnpoly has none), recognised by
// their parameter names; empty for a space of another kernel.
std::vector<std::string> KnownSpaceConstraints(const Space& space);

// A space parameter's name as the catalog accepts it ([a-z][a-z0-9_]*):
// lower case, other characters '_', "p_" before a leading non-letter
// ("MWG" -> "mwg"). The replay board maps such names back.
std::string ManifestParameterName(absl::string_view space_name);

// ManifestFromSpace as operator.yaml text (ops/catalog.h schema), so that a
// coordinator can load the space's operator like any package; parameter
// names through ManifestParameterName (two that map to one name make the
// text an invalid manifest: "duplicate parameter").
// `name` replaces the manifest's name when not empty (a space whose kernel
// shares a shipped operator's name).
std::string SpaceManifestYaml(const Space& space, const std::string& name = "");

}  // namespace tunefarm

#endif  // TUNEFARM_OPS_SPACES_SPACE_FILE_H_
