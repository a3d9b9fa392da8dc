// The gRPC CoordinatorClient: the agent's calls to the coordinator's
// AgentService over a channel (TLS and token as ClientSecurity says). Only
// the agent executable and tests wire it in; the agent core sees the
// CoordinatorClient interface alone. Its lease calls name the operator
// manifests it holds and complete the work items that come without one
// (agent/manifest_cache.h), so the boards always get whole work items.
// Thread-safe.
#ifndef TUNEFARM_AGENT_GRPC_COORDINATOR_CLIENT_H_
#define TUNEFARM_AGENT_GRPC_COORDINATOR_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/coordinator_client.h"
#include "common/grpc_client.h"

namespace tunefarm {

// Dials `target` ("host:port") with `security` (TLS, agent token); every
// call has `rpc_timeout` as deadline.
absl::StatusOr<std::unique_ptr<CoordinatorClient>> NewGrpcCoordinatorClient(
    const std::string& target, const ClientSecurity& security,
    absl::Duration rpc_timeout);

}  // namespace tunefarm

#endif  // TUNEFARM_AGENT_GRPC_COORDINATOR_CLIENT_H_
