// Conversions between absl::Status and grpc::Status: the one seam where our
// canonical codes cross the wire. Pure functions, thread-safe.
#ifndef TUNEFARM_COMMON_GRPC_STATUS_H_
#define TUNEFARM_COMMON_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace tunefarm {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace tunefarm

#endif  // TUNEFARM_COMMON_GRPC_STATUS_H_
