// Early-return helpers for absl::Status / absl::StatusOr. This abseil
// (20220623) has no status_macros.h of its own.
#ifndef TUNEFARM_COMMON_STATUS_MACROS_H_
#define TUNEFARM_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define TF_STATUS_CONCAT_INNER_(a, b) a##b
#define TF_STATUS_CONCAT_(a, b) TF_STATUS_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function when `expr` is not OK.
#define TF_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::absl::Status tf_status_ = (expr);      \
    if (!tf_status_.ok()) return tf_status_; \
  } while (0)

// `lhs` = value of the StatusOr `rexpr`, or returns its status.
#define TF_ASSIGN_OR_RETURN(lhs, rexpr)                                     \
  TF_ASSIGN_OR_RETURN_IMPL_(TF_STATUS_CONCAT_(tf_statusor_, __LINE__), lhs, \
                            rexpr)
#define TF_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                              \
  if (!statusor.ok()) return statusor.status();         \
  lhs = std::move(statusor).value()

#endif  // TUNEFARM_COMMON_STATUS_MACROS_H_
