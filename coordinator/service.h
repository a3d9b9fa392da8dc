// The gRPC plumbing of the coordinator (the Ray split): FarmService and
// AgentGrpcService translate requests into calls on the Coordinator, run on
// the control loop, and translate absl::Status into gRPC status. Reads that
// need only acknowledged state go to the Store directly; WatchSweep replays
// stored events and then waits on the EventNotifier.
//
// Both services are thread-safe (gRPC calls them from its thread pool). The
// Coordinator, ControlLoop, Store and EventNotifier must outlive them.
#ifndef TUNEFARM_COORDINATOR_SERVICE_H_
#define TUNEFARM_COORDINATOR_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/control_loop.h"
#include "coordinator/coordinator.h"
#include "storage/store.h"
#include "tunefarm/v1/agent.grpc.pb.h"
#include "tunefarm/v1/farm.grpc.pb.h"

namespace tunefarm {

// Wakes watchers when any sweep records new events. Thread-safe.
class EventNotifier {
 public:
  void Notify();
  // Waits until the version differs from `seen` or `timeout` passes;
  // returns the current version.
  uint64_t Wait(uint64_t seen, absl::Duration timeout);
  uint64_t version();
  // Wakes every waiter for good (shutdown).
  void Shutdown();
  bool shutting_down();

 private:
  absl::Mutex mu_;
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
};

class FarmService final : public v1::TuneFarm::Service {
 public:
  FarmService(Coordinator* coordinator, ControlLoop* loop, Store* store,
              EventNotifier* notifier)
      : coordinator_(coordinator),
        loop_(loop),
        store_(store),
        notifier_(notifier) {}

  grpc::Status SubmitSweep(grpc::ServerContext* context,
                           const v1::SubmitSweepRequest* request,
                           v1::SubmitSweepResponse* response) override;
  grpc::Status GetSweep(grpc::ServerContext* context,
                        const v1::GetSweepRequest* request,
                        v1::Sweep* response) override;
  grpc::Status ListSweeps(grpc::ServerContext* context,
                          const v1::ListSweepsRequest* request,
                          v1::ListSweepsResponse* response) override;
  grpc::Status WatchSweep(grpc::ServerContext* context,
                          const v1::WatchSweepRequest* request,
                          grpc::ServerWriter<v1::SweepEvent>* writer) override;
  grpc::Status CancelSweep(grpc::ServerContext* context,
                           const v1::CancelSweepRequest* request,
                           v1::Sweep* response) override;
  grpc::Status GetReport(grpc::ServerContext* context,
                         const v1::GetReportRequest* request,
                         v1::GetReportResponse* response) override;
  grpc::Status ListBoards(grpc::ServerContext* context,
                          const v1::ListBoardsRequest* request,
                          v1::ListBoardsResponse* response) override;
  grpc::Status ListRounds(grpc::ServerContext* context,
                          const v1::ListRoundsRequest* request,
                          v1::ListRoundsResponse* response) override;

 private:
  Coordinator* coordinator_;
  ControlLoop* loop_;
  Store* store_;
  EventNotifier* notifier_;
};

class AgentGrpcService final : public v1::AgentService::Service {
 public:
  AgentGrpcService(Coordinator* coordinator, ControlLoop* loop)
      : coordinator_(coordinator), loop_(loop) {}

  grpc::Status RegisterAgent(grpc::ServerContext* context,
                             const v1::RegisterAgentRequest* request,
                             v1::RegisterAgentResponse* response) override;
  grpc::Status Heartbeat(grpc::ServerContext* context,
                         const v1::HeartbeatRequest* request,
                         v1::HeartbeatResponse* response) override;
  grpc::Status LeaseWork(grpc::ServerContext* context,
                         const v1::LeaseWorkRequest* request,
                         v1::LeaseWorkResponse* response) override;
  grpc::Status RenewLease(grpc::ServerContext* context,
                          const v1::RenewLeaseRequest* request,
                          v1::RenewLeaseResponse* response) override;
  grpc::Status ReportResult(grpc::ServerContext* context,
                            const v1::ReportResultRequest* request,
                            v1::ReportResultResponse* response) override;

 private:
  Coordinator* coordinator_;
  ControlLoop* loop_;
};

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_SERVICE_H_
