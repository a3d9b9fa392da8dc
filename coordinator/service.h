// The gRPC plumbing of the coordinator (the Ray split): FarmService and
// AgentGrpcService translate requests into calls on the Coordinator, run on
// the control loop, and translate absl::Status into gRPC status. Reads that
// need only acknowledged state go to the Store directly. WatchSweep is a
// callback-API stream (a ServerWriteReactor): it replays stored events, then
// parks without a thread until the EventNotifier moves; one thread per
// FarmService wakes the parked streams. The agent service is served by the
// callback API too: an agent call hands its work to the control loop and
// returns; once its batch is durable the loop hands the answer to the
// service's reply thread, which finishes the call. No gRPC thread waits on
// the loop, and the loop does not serialize answers.
//
// Every call is authenticated from its "authorization: Bearer" metadata
// against the TokenTable (null = authentication off, for local development)
// and authorised here: a team sees and acts on its own sweeps only, admins
// on all, agents only on the agent service.
//
// Both services are thread-safe (gRPC calls them from its thread pool). The
// Coordinator, ControlLoop, Store, EventNotifier and TokenTable must outlive
// them.
#ifndef TUNEFARM_COORDINATOR_SERVICE_H_
#define TUNEFARM_COORDINATOR_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/auth.h"
#include "coordinator/control_loop.h"
#include "coordinator/coordinator.h"
#include "coordinator/liveness.h"
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

// WatchSweep is served by the callback API, every other method by the
// synchronous one.
class FarmService final : public v1::TuneFarm::WithCallbackMethod_WatchSweep<
                              v1::TuneFarm::Service> {
 public:
  FarmService(Coordinator* coordinator, ControlLoop* loop, Store* store,
              EventNotifier* notifier, const TokenTable* tokens);
  // Stop the server first (every watch stream done), then destroy this.
  ~FarmService() override;

  grpc::Status SubmitSweep(grpc::ServerContext* context,
                           const v1::SubmitSweepRequest* request,
                           v1::SubmitSweepResponse* response) override;
  grpc::Status GetSweep(grpc::ServerContext* context,
                        const v1::GetSweepRequest* request,
                        v1::Sweep* response) override;
  grpc::Status ListSweeps(grpc::ServerContext* context,
                          const v1::ListSweepsRequest* request,
                          v1::ListSweepsResponse* response) override;
  grpc::ServerWriteReactor<v1::SweepEvent>* WatchSweep(
      grpc::CallbackServerContext* context,
      const v1::WatchSweepRequest* request) override;
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
  grpc::Status DrainBoard(grpc::ServerContext* context,
                          const v1::BoardAdminRequest* request,
                          v1::BoardInfo* response) override;
  grpc::Status AdmitBoard(grpc::ServerContext* context,
                          const v1::BoardAdminRequest* request,
                          v1::BoardInfo* response) override;
  grpc::Status SetTeamQuota(grpc::ServerContext* context,
                            const v1::SetTeamQuotaRequest* request,
                            v1::TeamQuota* response) override;
  grpc::Status ListTeams(grpc::ServerContext* context,
                         const v1::ListTeamsRequest* request,
                         v1::ListTeamsResponse* response) override;
  grpc::Status ReserveBoards(grpc::ServerContext* context,
                             const v1::ReserveBoardsRequest* request,
                             v1::ListReservationsResponse* response) override;
  grpc::Status UnreserveBoards(grpc::ServerContext* context,
                               const v1::ReserveBoardsRequest* request,
                               v1::ListReservationsResponse* response) override;

 private:
  class WatchReactor;
  class WatchHub;

  // The caller, or UNAUTHENTICATED; agents get PERMISSION_DENIED here.
  absl::StatusOr<Principal> Caller(grpc::ServerContextBase* context) const;
  // The sweep, if the caller may see it (PERMISSION_DENIED otherwise).
  absl::StatusOr<v1::Sweep> VisibleSweep(const Principal& caller,
                                         const std::string& sweep_id) const;

  Coordinator* coordinator_;
  ControlLoop* loop_;
  Store* store_;
  EventNotifier* notifier_;
  const TokenTable* tokens_;
  std::unique_ptr<WatchHub> watches_;
};

class AgentGrpcService final : public v1::AgentService::CallbackService {
 public:
  // `liveness` (may be null) hears of every authenticated agent call as it
  // arrives, before it waits for the control loop.
  AgentGrpcService(Coordinator* coordinator, ControlLoop* loop,
                   const TokenTable* tokens, AgentLiveness* liveness = nullptr);
  // Finishes the answers still queued, then stops the reply thread.
  ~AgentGrpcService() override;

  // Each posts its call to the loop (ControlLoop::Post, batched) and
  // returns at once; the answer is finished on the reply thread after the
  // batch is durable. The loop must run until the server has shut down.
  grpc::ServerUnaryReactor* RegisterAgent(
      grpc::CallbackServerContext* context,
      const v1::RegisterAgentRequest* request,
      v1::RegisterAgentResponse* response) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context,
                                      const v1::HeartbeatRequest* request,
                                      v1::HeartbeatResponse* response) override;
  grpc::ServerUnaryReactor* LeaseWork(grpc::CallbackServerContext* context,
                                      const v1::LeaseWorkRequest* request,
                                      v1::LeaseWorkResponse* response) override;
  grpc::ServerUnaryReactor* RenewLease(
      grpc::CallbackServerContext* context,
      const v1::RenewLeaseRequest* request,
      v1::RenewLeaseResponse* response) override;
  grpc::ServerUnaryReactor* ReportResult(
      grpc::CallbackServerContext* context,
      const v1::ReportResultRequest* request,
      v1::ReportResultResponse* response) override;

 private:
  // OK for agents and admins; UNAUTHENTICATED / PERMISSION_DENIED else.
  absl::Status CheckAgent(const grpc::ServerContextBase& context) const;

  // Authenticates the call, notes `agent_id` alive (any agent call is a
  // heartbeat), and posts `run` (returning absl::StatusOr<Response>) to
  // the loop; its result finishes the call.
  template <typename Response, typename Run>
  grpc::ServerUnaryReactor* Serve(grpc::CallbackServerContext* context,
                                  const std::string& agent_id,
                                  Response* response, Run run);

  // Queues `finish` for the reply thread (any thread).
  void Reply(std::function<void()> finish);
  void ReplyLoop();

  Coordinator* coordinator_;
  ControlLoop* loop_;
  const TokenTable* tokens_;
  AgentLiveness* liveness_;
  // Answers waiting to be finished. Finishing one (serializing it and
  // handing it to the transport) cost about a fifth of the loop thread's
  // time when the loop did it.
  absl::Mutex reply_mu_;
  std::deque<std::function<void()>> replies_ ABSL_GUARDED_BY(reply_mu_);
  bool reply_stop_ ABSL_GUARDED_BY(reply_mu_) = false;
  std::thread reply_thread_;
};

// The principal behind a call's metadata; AnonymousAdmin() when `tokens`
// is null (authentication off).
absl::StatusOr<Principal> Authenticate(const TokenTable* tokens,
                                       const grpc::ServerContextBase& context);

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_SERVICE_H_
