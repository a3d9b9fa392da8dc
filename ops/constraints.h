// Parameter constraints: boolean expressions over an operator's parameters
// (like Kernel Tuner's restrictions) that every configuration a strategy
// proposes must satisfy, e.g. "block_m / thread_m * (block_n / thread_n) <=
// 1024". They live in the manifest (`constraints:`, a list of strings) and
// are checked before a candidate is proposed, so a known-impossible
// configuration never costs a build.
//
// The language is a small, safe subset of Python expressions (what Kernel
// Tuner users already write): numbers, 'strings' or "strings", True/False,
// parameter names, + - * / // % **, unary - and +, comparisons == != < <= >
// >= (chained, as in Python: 32 <= a*b <= 1024), and / or / not (also && ||
// !), parentheses, and the functions min, max, abs. Numbers are doubles
// (integers are exact to 2^53); / is true division, // floor division, %
// takes the sign of the divisor (Python's rules). Strings compare only with
// == and !=. Nothing is looked up outside the parameters: no calls beyond
// the three functions, no attributes, no side effects. Parsing is bounded
// (kMaxConstraintChars characters, kMaxConstraintDepth nesting,
// kMaxConstraintNodes nodes), and so is evaluation (a tree walk over at
// most that many nodes).
//
// Evaluation errors (division by zero, a string where a number is needed, a
// parameter missing from the configuration) make the constraint false, and
// Check names the constraint and the error.
//
// Thread-safety: a compiled ConstraintSet is immutable; const methods are
// safe from any thread.
#ifndef TUNEFARM_OPS_CONSTRAINTS_H_
#define TUNEFARM_OPS_CONSTRAINTS_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/params.h"
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

inline constexpr size_t kMaxConstraintChars = 4096;
inline constexpr int kMaxConstraintDepth = 64;
inline constexpr int kMaxConstraintNodes = 1024;
inline constexpr int kMaxConstraints = 256;

struct ConstraintExpr;  // the parsed tree (constraints.cc)

class ConstraintSet {
 public:
  ConstraintSet();
  ~ConstraintSet();
  ConstraintSet(ConstraintSet&&) noexcept;
  ConstraintSet& operator=(ConstraintSet&&) noexcept;

  // Parses `exprs`. INVALID_ARGUMENT "constraints[i]: <what>, at column c
  // of '<text>'" for a syntax error, an unknown name (when `known` is not
  // empty, every name must be one of them), or a limit exceeded.
  static absl::StatusOr<ConstraintSet> Compile(
      const std::vector<std::string>& exprs,
      const std::vector<std::string>& known = {});

  // The operator's constraints (OperatorManifest.constraints) over its
  // parameters.
  static absl::StatusOr<ConstraintSet> ForManifest(
      const v1::OperatorManifest& op);

  bool empty() const { return exprs_.empty(); }
  size_t size() const { return exprs_.size(); }
  const std::vector<std::string>& texts() const { return texts_; }

  // True when every constraint holds for `params`.
  bool Feasible(const ParamMap& params) const;

  // The parameters the constraints name, distinct and sorted: slot i is
  // names()[i]. A caller that keeps configurations as positions resolves
  // each name once and then checks by slot, building no ParamMap.
  const std::vector<std::string>& names() const { return names_; }
  // Feasible for the configuration whose value of names()[i] is values[i]
  // (nullptr, or a slot past the end: not set, as a name missing from a
  // ParamMap).
  bool FeasibleBySlot(absl::Span<const v1::ParamValue* const> values) const;

  // OK, or FAILED_PRECONDITION naming the first constraint that does not
  // hold ("violates constraint 'a*b <= 1024'") or cannot be evaluated
  // ("constraint 'a % b == 0': division by zero").
  absl::Status Check(const ParamMap& params) const;

 private:
  std::vector<std::string> texts_;
  std::vector<std::string> names_;
  std::vector<std::unique_ptr<ConstraintExpr>> exprs_;
};

// The names an expression refers to (parameters), sorted, distinct; for
// dropping constraints on parameters a projection removed.
absl::StatusOr<std::vector<std::string>> ConstraintNames(std::string_view expr);

// `expr` with every parameter name replaced by rename(name), the rest of
// the text as written. Only parameter references change: function names,
// True/False and the text of strings are not names. INVALID_ARGUMENT when
// `expr` does not parse.
absl::StatusOr<std::string> RenameConstraintParameters(
    std::string_view expr,
    const std::function<std::string(std::string_view)>& rename);

}  // namespace tunefarm

#endif  // TUNEFARM_OPS_CONSTRAINTS_H_
