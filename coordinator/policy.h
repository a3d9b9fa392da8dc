// The operator's team policy file: fair-share weights and quotas per team,
// and boards reserved for a team. Pure parsing; thread-safe.
//
//   default: {weight: 1, max_boards: 0, max_active_sweeps: 10}
//   teams:
//     vision: {weight: 3, max_boards: 8, max_active_sweeps: 4}
//     speech: {weight: 1}
//   reservations:
//     - {board: rack1/npu0, team: vision, reason: "release qualification"}
//     - {labels: {pool: a100}, team: speech}
//
// Zero limits mean unlimited. Errors name the file and the field.
#ifndef TUNEFARM_COORDINATOR_POLICY_H_
#define TUNEFARM_COORDINATOR_POLICY_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tunefarm/v1/farm.pb.h"
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

struct TeamPolicy {
  v1::TeamQuota default_quota;
  std::map<std::string, v1::TeamQuota> teams;
  std::vector<v1::BoardReservation> reservations;  // from_policy set
};

absl::StatusOr<TeamPolicy> ParseTeamPolicy(absl::string_view yaml,
                                           absl::string_view source);
absl::StatusOr<TeamPolicy> LoadTeamPolicy(const std::string& path);

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_POLICY_H_
