// CoordinatorClient: the agent's view of the coordinator's AgentService,
// as an interface so the agent's loop can be driven by a fake in tests and
// by gRPC in production (agent/grpc_coordinator_client.h). Implementations
// are thread-safe.
#ifndef TUNEFARM_AGENT_COORDINATOR_CLIENT_H_
#define TUNEFARM_AGENT_COORDINATOR_CLIENT_H_

#include "absl/status/statusor.h"
#include "tunefarm/v1/agent.pb.h"

namespace tunefarm {

class CoordinatorClient {
 public:
  virtual ~CoordinatorClient() = default;
  virtual absl::StatusOr<v1::RegisterAgentResponse> RegisterAgent(
      const v1::RegisterAgentRequest& request) = 0;
  virtual absl::StatusOr<v1::HeartbeatResponse> Heartbeat(
      const v1::HeartbeatRequest& request) = 0;
  virtual absl::StatusOr<v1::LeaseWorkResponse> LeaseWork(
      const v1::LeaseWorkRequest& request) = 0;
  virtual absl::StatusOr<v1::RenewLeaseResponse> RenewLease(
      const v1::RenewLeaseRequest& request) = 0;
  virtual absl::StatusOr<v1::ReportResultResponse> ReportResult(
      const v1::ReportResultRequest& request) = 0;
};

}  // namespace tunefarm

#endif  // TUNEFARM_AGENT_COORDINATOR_CLIENT_H_
