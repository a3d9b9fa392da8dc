#include "coordinator/service.h"

#include "common/grpc_status.h"
#include "coordinator/queries.h"

namespace tunefarm {
namespace {

// Copies a StatusOr's value into the reply, or returns its status.
template <typename T>
grpc::Status Reply(absl::StatusOr<T> result, T* response) {
  if (!result.ok()) return ToGrpcStatus(result.status());
  *response = std::move(*result);
  return grpc::Status::OK;
}

}  // namespace

void EventNotifier::Notify() {
  absl::MutexLock lock(&mu_);
  ++version_;
}

uint64_t EventNotifier::Wait(uint64_t seen, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto changed = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return version_ != seen || shutdown_;
  };
  mu_.AwaitWithTimeout(absl::Condition(&changed), timeout);
  return version_;
}

uint64_t EventNotifier::version() {
  absl::MutexLock lock(&mu_);
  return version_;
}

void EventNotifier::Shutdown() {
  absl::MutexLock lock(&mu_);
  shutdown_ = true;
}

bool EventNotifier::shutting_down() {
  absl::MutexLock lock(&mu_);
  return shutdown_;
}

grpc::Status FarmService::SubmitSweep(grpc::ServerContext*,
                                      const v1::SubmitSweepRequest* request,
                                      v1::SubmitSweepResponse* response) {
  return Reply(loop_->Call([&] { return coordinator_->SubmitSweep(*request); }),
               response);
}

grpc::Status FarmService::GetSweep(grpc::ServerContext*,
                                   const v1::GetSweepRequest* request,
                                   v1::Sweep* response) {
  return Reply(store_->GetSweep(request->sweep_id()), response);
}

grpc::Status FarmService::ListSweeps(grpc::ServerContext*,
                                     const v1::ListSweepsRequest* request,
                                     v1::ListSweepsResponse* response) {
  return Reply(QueryListSweeps(*store_, *request), response);
}

grpc::Status FarmService::WatchSweep(
    grpc::ServerContext* context, const v1::WatchSweepRequest* request,
    grpc::ServerWriter<v1::SweepEvent>* writer) {
  absl::StatusOr<v1::Sweep> sweep = store_->GetSweep(request->sweep_id());
  if (!sweep.ok()) return ToGrpcStatus(sweep.status());
  int64_t next = std::max<int64_t>(1, request->from_seq());
  while (!context->IsCancelled() && !notifier_->shutting_down()) {
    // Read the version before the store so no event slips between them.
    const uint64_t seen = notifier_->version();
    auto events = store_->ReadEvents(request->sweep_id(), next, 256);
    if (!events.ok()) return ToGrpcStatus(events.status());
    for (const v1::SweepEvent& ev : *events) {
      if (!writer->Write(ev)) return grpc::Status::OK;  // client went away
      next = ev.seq() + 1;
      if (ev.kind() == v1::EVENT_KIND_FINISHED) {
        // Diagnoses can still arrive after the end; a watcher that wants
        // them asks again with from_seq.
        return grpc::Status::OK;
      }
    }
    if (events->size() < 256) notifier_->Wait(seen, absl::Milliseconds(500));
  }
  return grpc::Status::OK;
}

grpc::Status FarmService::CancelSweep(grpc::ServerContext*,
                                      const v1::CancelSweepRequest* request,
                                      v1::Sweep* response) {
  return Reply(loop_->Call([&] { return coordinator_->CancelSweep(*request); }),
               response);
}

grpc::Status FarmService::GetReport(grpc::ServerContext*,
                                    const v1::GetReportRequest* request,
                                    v1::GetReportResponse* response) {
  return Reply(QueryReport(*store_, *request), response);
}

grpc::Status FarmService::ListBoards(grpc::ServerContext*,
                                     const v1::ListBoardsRequest* request,
                                     v1::ListBoardsResponse* response) {
  std::vector<v1::BoardInfo> boards = loop_->Call(
      [&] { return coordinator_->ListBoards(request->selector()); });
  for (auto& b : boards) *response->add_boards() = std::move(b);
  return grpc::Status::OK;
}

grpc::Status FarmService::ListRounds(grpc::ServerContext*,
                                     const v1::ListRoundsRequest* request,
                                     v1::ListRoundsResponse* response) {
  return Reply(QueryListRounds(*store_, *request), response);
}

grpc::Status AgentGrpcService::RegisterAgent(
    grpc::ServerContext*, const v1::RegisterAgentRequest* request,
    v1::RegisterAgentResponse* response) {
  return Reply(
      loop_->Call([&] { return coordinator_->RegisterAgent(*request); }),
      response);
}

grpc::Status AgentGrpcService::Heartbeat(grpc::ServerContext*,
                                         const v1::HeartbeatRequest* request,
                                         v1::HeartbeatResponse* response) {
  return Reply(loop_->Call([&] { return coordinator_->Heartbeat(*request); }),
               response);
}

grpc::Status AgentGrpcService::LeaseWork(grpc::ServerContext*,
                                         const v1::LeaseWorkRequest* request,
                                         v1::LeaseWorkResponse* response) {
  return Reply(loop_->Call([&] { return coordinator_->LeaseWork(*request); }),
               response);
}

grpc::Status AgentGrpcService::RenewLease(grpc::ServerContext*,
                                          const v1::RenewLeaseRequest* request,
                                          v1::RenewLeaseResponse* response) {
  return Reply(loop_->Call([&] { return coordinator_->RenewLease(*request); }),
               response);
}

grpc::Status AgentGrpcService::ReportResult(
    grpc::ServerContext*, const v1::ReportResultRequest* request,
    v1::ReportResultResponse* response) {
  return Reply(
      loop_->Call([&] { return coordinator_->ReportResult(*request); }),
      response);
}

}  // namespace tunefarm
