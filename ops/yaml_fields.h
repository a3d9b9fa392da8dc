// Typed, path-aware field access over a parsed YAML document, shared by the
// operator manifest loader (ops/catalog) and the sweep spec parser
// (coordinator/spec). Every error is INVALID_ARGUMENT and reads
// "<field path>: <what is wrong>", e.g. "budget.max_rounds: expected an
// integer, got 'ten'", so a user can find the field without a line number.
//
// yaml-cpp throws; these helpers are the seam: ParseYamlDocument catches its
// exceptions, and the getters only touch nodes whose type they checked first.
// Callers still wrap their traversal in a try/catch of YAML::Exception, as a
// last line of defence. Pure functions; thread-safe.
#ifndef TUNEFARM_OPS_YAML_FIELDS_H_
#define TUNEFARM_OPS_YAML_FIELDS_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tunefarm/v1/types.pb.h"
#include "yaml-cpp/yaml.h"

namespace tunefarm::yamlf {

// Documents larger than this are refused before parsing (hostile input).
inline constexpr size_t kMaxDocumentBytes = 1 << 20;
// Bound on any single string field (names, descriptions, labels ...).
inline constexpr size_t kMaxStringBytes = 4096;

// "<path>: <message>" as INVALID_ARGUMENT.
absl::Status FieldError(absl::string_view path, absl::string_view message);

// "a.b" / "a[3]" — how field paths are spelled in errors.
std::string Child(absl::string_view path, absl::string_view key);
std::string Index(absl::string_view path, size_t i);

// Parses exactly one YAML document. Syntax errors read
// "YAML syntax error at line L, column C: <reason>" (1-based); an empty
// document or more than one document is an error too.
absl::StatusOr<YAML::Node> ParseYamlDocument(absl::string_view yaml);

// "a map", "a list", "'ten'", "nothing" — for "expected X, got Y" messages.
std::string Describe(const YAML::Node& node);

// Checks that `node` is a map whose keys are plain scalars, all distinct and
// all in `allowed` ("unknown key 'x'; known: a, b"). A typo must never be
// silently ignored.
absl::Status CheckMap(const YAML::Node& node, absl::string_view path,
                      std::initializer_list<absl::string_view> allowed);
// Like CheckMap, without a key whitelist (user-named keys: labels, dims ...).
absl::Status CheckOpenMap(const YAML::Node& node, absl::string_view path);

// The child `key` of map `node`; an undefined node when absent.
YAML::Node Get(const YAML::Node& node, absl::string_view key);
// True when `key` is present and not null.
bool Has(const YAML::Node& node, absl::string_view key);

// Scalars. Each rejects non-scalars with "expected X, got Y".
absl::StatusOr<std::string> GetString(const YAML::Node& node,
                                      absl::string_view path);
absl::StatusOr<int64_t> GetInt(const YAML::Node& node, absl::string_view path);
// Finite numbers only: .nan / .inf are refused.
absl::StatusOr<double> GetDouble(const YAML::Node& node,
                                 absl::string_view path);
absl::StatusOr<bool> GetBool(const YAML::Node& node, absl::string_view path);
// An integer within [lo, hi]: "... must be between lo and hi, got v".
absl::StatusOr<int64_t> GetIntInRange(const YAML::Node& node,
                                      absl::string_view path, int64_t lo,
                                      int64_t hi);

// A kernel parameter value: quoted scalars are strings; plain scalars are
// bools (true/false), integers, finite doubles, or else strings.
absl::StatusOr<v1::ParamValue> GetParamValue(const YAML::Node& node,
                                             absl::string_view path);
// The same typing rule applied to scalar text.
v1::ParamValue ParamValueFromScalar(absl::string_view text, bool quoted);

// Text checks shared by the loaders. Each returns a FieldError naming `path`.
// No control characters (newline and tab allowed only when asked), at most
// `max_len` bytes.
absl::Status CheckText(absl::string_view path, absl::string_view value,
                       size_t max_len = kMaxStringBytes,
                       bool allow_newlines = false);
// [a-z][a-z0-9_]*, at most 64 bytes: identifiers that become JSON keys and
// file names.
absl::Status CheckIdentifier(absl::string_view path, absl::string_view value);

}  // namespace tunefarm::yamlf

#endif  // TUNEFARM_OPS_YAML_FIELDS_H_
