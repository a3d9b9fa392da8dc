// Read-side queries of the user service, answered from the Store alone
// (acknowledged state), so they never wait for the control thread.
// Thread-safe as the Store is.
#ifndef TUNEFARM_COORDINATOR_QUERIES_H_
#define TUNEFARM_COORDINATOR_QUERIES_H_

#include "absl/status/statusor.h"
#include "storage/store.h"
#include "tunefarm/v1/farm.pb.h"

namespace tunefarm {

// Page sizes of the list RPCs (farm.proto): `limit` 0 takes the default,
// more than kMaxPageSize is clamped, a negative one is INVALID_ARGUMENT. A
// page also stops once it holds kMaxPageBytes (but always has one record),
// well under the gRPC message limit (common/grpc_client.h), and under
// gRPC's default 4 MiB for clients that keep it.
inline constexpr int kMaxPageSize = 1000;
inline constexpr size_t kMaxPageBytes = size_t{2} << 20;
absl::StatusOr<int> PageSize(int limit, int default_size);

absl::StatusOr<v1::ListSweepsResponse> QueryListSweeps(
    Store& store, const v1::ListSweepsRequest& request);
absl::StatusOr<v1::ListRoundsResponse> QueryListRounds(
    Store& store, const v1::ListRoundsRequest& request);
absl::StatusOr<v1::GetReportResponse> QueryReport(
    Store& store, const v1::GetReportRequest& request);

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_QUERIES_H_
