#include "agent/grpc_coordinator_client.h"

#include <chrono>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/agent_session.h"
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
                        ClientSecurity security, absl::Duration timeout,
                        bool session)
      : stub_(v1::AgentService::NewStub(std::move(channel))),
        security_(std::move(security)),
        timeout_(timeout) {
    if (session) {
      session_ =
          std::make_unique<AgentSession>(stub_.get(), security_, timeout_);
    }
  }

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
        Over(&v1::AgentService::Stub::LeaseWork, named);
    if (response.ok()) TF_RETURN_IF_ERROR(CompleteLease(&*response));
    return response;
  }
  absl::StatusOr<v1::RenewLeaseResponse> RenewLease(
      const v1::RenewLeaseRequest& request) override {
    return Over(&v1::AgentService::Stub::RenewLease, request);
  }
  // As LeaseWork for the next lease a report asks for.
  absl::StatusOr<v1::ReportResultResponse> ReportResult(
      const v1::ReportResultRequest& request) override {
    if (!request.has_next_lease()) {
      return Over(&v1::AgentService::Stub::ReportResult, request);
    }
    v1::ReportResultRequest named = request;
    manifests_.AddHeld(named.mutable_next_lease());
    absl::StatusOr<v1::ReportResultResponse> response =
        Over(&v1::AgentService::Stub::ReportResult, named);
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

  // Lease traffic: on the session when the coordinator serves one, else
  // the unary `method`.
  template <typename Req, typename Resp>
  absl::StatusOr<Resp> Over(grpc::Status (v1::AgentService::Stub::*method)(
                                grpc::ClientContext*, const Req&, Resp*),
                            const Req& request) {
    if (session_ != nullptr && !session_->unary_only()) {
      v1::AgentCall call;
      *Mutable<Req>(&call) = request;
      absl::StatusOr<v1::AgentReply> reply = session_->Call(std::move(call));
      if (reply.ok()) return Take<Resp>(*reply);
      if (!session_->unary_only()) return reply.status();
    }
    return Call(method, request);
  }

  template <typename Req>
  static Req* Mutable(v1::AgentCall* call) {
    if constexpr (std::is_same_v<Req, v1::LeaseWorkRequest>) {
      return call->mutable_lease_work();
    } else if constexpr (std::is_same_v<Req, v1::RenewLeaseRequest>) {
      return call->mutable_renew_lease();
    } else {
      static_assert(std::is_same_v<Req, v1::ReportResultRequest>);
      return call->mutable_report_result();
    }
  }

  // The reply's response of kind Resp; INTERNAL when it carries another.
  template <typename Resp>
  static absl::StatusOr<Resp> Take(v1::AgentReply& reply) {
    Resp* response = nullptr;
    if constexpr (std::is_same_v<Resp, v1::LeaseWorkResponse>) {
      if (reply.has_lease_work()) response = reply.mutable_lease_work();
    } else if constexpr (std::is_same_v<Resp, v1::RenewLeaseResponse>) {
      if (reply.has_renew_lease()) response = reply.mutable_renew_lease();
    } else {
      static_assert(std::is_same_v<Resp, v1::ReportResultResponse>);
      if (reply.has_report_result()) response = reply.mutable_report_result();
    }
    if (response == nullptr) {
      return absl::InternalError(
          absl::StrCat("agent session reply ", reply.call_id(),
                       " does not answer the call's kind (",
                       Resp::descriptor()->name(), ")"));
    }
    return std::move(*response);
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
  std::unique_ptr<AgentSession> session_;  // null: unary calls only
};

}  // namespace

absl::StatusOr<std::unique_ptr<CoordinatorClient>> NewGrpcCoordinatorClient(
    const std::string& target, const ClientSecurity& security,
    absl::Duration rpc_timeout, bool session) {
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      MakeChannel(target, security);
  if (!channel.ok()) return channel.status();
  return std::unique_ptr<CoordinatorClient>(new GrpcCoordinatorClient(
      std::move(*channel), security, rpc_timeout, session));
}

}  // namespace tunefarm
