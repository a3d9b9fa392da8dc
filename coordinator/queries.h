// Read-side queries of the user service, answered from the Store alone
// (acknowledged state), so they never wait for the control thread.
// Thread-safe as the Store is.
#ifndef TUNEFARM_COORDINATOR_QUERIES_H_
#define TUNEFARM_COORDINATOR_QUERIES_H_

#include "absl/status/statusor.h"
#include "storage/store.h"
#include "tunefarm/v1/farm.pb.h"

namespace tunefarm {

absl::StatusOr<v1::ListSweepsResponse> QueryListSweeps(
    Store& store, const v1::ListSweepsRequest& request);
absl::StatusOr<v1::ListRoundsResponse> QueryListRounds(
    Store& store, const v1::ListRoundsRequest& request);
absl::StatusOr<v1::GetReportResponse> QueryReport(
    Store& store, const v1::GetReportRequest& request);

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_QUERIES_H_
