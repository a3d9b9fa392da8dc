#include "agent/grpc_coordinator_client.h"

#include <chrono>

#include "agent/manifest_cache.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "grpcpp/grpcpp.h"
#include "spdlog/spdlog.h"
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
    if (response.ok()) TF_RETURN_IF_ERROR(CompleteLease(&*response));
    return response;
  }
  absl::StatusOr<v1::RenewLeaseResponse> RenewLease(
      const v1::RenewLeaseRequest& request) override {
    return Call(&v1::AgentService::Stub::RenewLease, request);
  }
  // As LeaseWork for the next lease a report asks for.
  absl::StatusOr<v1::ReportResultResponse> ReportResult(
      const v1::ReportResultRequest& request) override {
    if (!request.has_next_lease()) {
      return Call(&v1::AgentService::Stub::ReportResult, request);
    }
    v1::ReportResultRequest named = request;
    manifests_.AddHeld(named.mutable_next_lease());
    absl::StatusOr<v1::ReportResultResponse> response =
        Call(&v1::AgentService::Stub::ReportResult, named);
    if (response.ok()) {
      // The answer is the result's: a next lease that cannot be completed
      // is dropped, and the board's next plain lease requeues its round.
      if (absl::Status st = CompleteLease(response->mutable_next_lease());
          !st.ok()) {
        spdlog::warn("next lease of {} dropped: {}", request.board_id(),
                     st.ToString());
        response->clear_next_lease();
      }
    }
    return response;
  }

 private:
  absl::Status CompleteLease(v1::LeaseWorkResponse* lease) {
    if (!lease->granted()) return absl::OkStatus();
    return manifests_.Complete(lease->mutable_work());
  }

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
