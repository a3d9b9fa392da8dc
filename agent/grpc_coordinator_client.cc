#include "agent/grpc_coordinator_client.h"

#include <chrono>

#include "agent/manifest_cache.h"
#include "common/grpc_status.h"
#include "grpcpp/grpcpp.h"
#include "tunefarm/v1/agent.grpc.pb.h"

namespace tunefarm {
namespace {

class GrpcCoordinatorClient : public CoordinatorClient {
 public:
  GrpcCoordinatorClient(std::shared_ptr<grpc::Channel> channel,
                        ClientSecurity security, absl::Duration timeout)
      : stub_(v1::AgentService::NewStub(std::move(channel))),
        security_(std::move(security)),
        timeout_(timeout) {}

  absl::StatusOr<v1::RegisterAgentResponse> RegisterAgent(
      const v1::RegisterAgentRequest& request) override {
    return Call(&v1::AgentService::Stub::RegisterAgent, request);
  }
  absl::StatusOr<v1::HeartbeatResponse> Heartbeat(
      const v1::HeartbeatRequest& request) override {
    return Call(&v1::AgentService::Stub::Heartbeat, request);
  }
  // Names the manifests this agent holds, and puts a left-out one back.
  absl::StatusOr<v1::LeaseWorkResponse> LeaseWork(
      const v1::LeaseWorkRequest& request) override {
    v1::LeaseWorkRequest named = request;
    manifests_.AddHeld(&named);
    absl::StatusOr<v1::LeaseWorkResponse> response =
        Call(&v1::AgentService::Stub::LeaseWork, named);
    if (response.ok() && response->granted()) {
      if (absl::Status st = manifests_.Complete(response->mutable_work());
          !st.ok()) {
        return st;
      }
    }
    return response;
  }
  absl::StatusOr<v1::RenewLeaseResponse> RenewLease(
      const v1::RenewLeaseRequest& request) override {
    return Call(&v1::AgentService::Stub::RenewLease, request);
  }
  absl::StatusOr<v1::ReportResultResponse> ReportResult(
      const v1::ReportResultRequest& request) override {
    return Call(&v1::AgentService::Stub::ReportResult, request);
  }

 private:
  template <typename Req, typename Resp>
  absl::StatusOr<Resp> Call(grpc::Status (v1::AgentService::Stub::*method)(
                                grpc::ClientContext*, const Req&, Resp*),
                            const Req& request) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         absl::ToChronoMilliseconds(timeout_));
    AddCredentials(&context, security_);
    Resp response;
    grpc::Status st = (stub_.get()->*method)(&context, request, &response);
    if (!st.ok()) return FromGrpcStatus(st);
    return response;
  }

  std::unique_ptr<v1::AgentService::Stub> stub_;
  OperatorManifestCache manifests_;
  ClientSecurity security_;
  absl::Duration timeout_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CoordinatorClient>> NewGrpcCoordinatorClient(
    const std::string& target, const ClientSecurity& security,
    absl::Duration rpc_timeout) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      MakeChannel(target, security);
  if (!channel.ok()) return channel.status();
  return std::unique_ptr<CoordinatorClient>(
      new GrpcCoordinatorClient(std::move(*channel), security, rpc_timeout));
}

}  // namespace tunefarm
