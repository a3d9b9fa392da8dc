// ClassifyAscendFailure: what a failed Triton-Ascend / PyPTO / CANN child
// process said, as a typed fault the Ascend board maps to an outcome.
//
// Recognised (in this order, first match wins):
//   * UB overflow: the BiSheng compiler's "ub overflow, requires <R> bits
//     while <A> bits available!" (real text, triton-ascend docs); requested
//     and available are reported in bytes (bits / 8).
//   * grid limit: triton-ascend's launcher "coreDim=<N> can't be greater
//     than UINT16_MAX" (the grid product is over 65535).
//   * device error: the card or its driver failed, not the variant: ACL
//     runtime codes 507053 (device memory error), 507054 (HBM multi-bit ECC),
//     507899 (driver internal error), 107022 (device task abort), or the
//     words "device hang", "heartbeat lost", "set device failed",
//     "device not found" / "device is unavailable".
//   * compile failure: MLIRCompilationError / triton.compiler.errors /
//     "Failed to run BishengHIR pipeline" / CompilationError.
// Anything else is kUnknown (the board reports RUN_CRASHED with the text).
//
// Pure functions; thread-safe.
#ifndef TUNEFARM_AGENT_ASCEND_ERRORS_H_
#define TUNEFARM_AGENT_ASCEND_ERRORS_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace tunefarm {

enum class AscendFault {
  kUnknown,
  kCompile,
  kUbOverflow,
  kGridLimit,
  kDevice,
};

struct AscendFailure {
  AscendFault fault = AscendFault::kUnknown;
  std::string summary;   // one line, e.g. "UB overflow: requires 384032 B ..."
  std::string evidence;  // the matched line of the message
  int64_t requested_bytes = 0;  // kUbOverflow
  int64_t available_bytes = 0;  // kUbOverflow
  int64_t core_dim = 0;         // kGridLimit
  int64_t acl_code = 0;         // kDevice, when a numeric code matched
};

AscendFailure ClassifyAscendFailure(absl::string_view message);

const char* AscendFaultName(AscendFault f);

}  // namespace tunefarm

#endif  // TUNEFARM_AGENT_ASCEND_ERRORS_H_
