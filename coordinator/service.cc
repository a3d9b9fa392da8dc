#include "coordinator/service.h"

#include <algorithm>
#include <deque>
#include <iterator>
#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
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

absl::StatusOr<Principal> Authenticate(const TokenTable* tokens,
                                       const grpc::ServerContextBase& context) {
  if (tokens == nullptr) return AnonymousAdmin();
  auto it = context.client_metadata().find("authorization");
  absl::string_view header;
  if (it != context.client_metadata().end()) {
    header = absl::string_view(it->second.data(), it->second.size());
  }
  return tokens->FromAuthorizationHeader(header);
}

absl::StatusOr<Principal> FarmService::Caller(
    grpc::ServerContextBase* context) const {
  absl::StatusOr<Principal> p = Authenticate(tokens_, *context);
  if (p.ok() && p->role == Role::kAgent) {
    return absl::PermissionDeniedError(
        absl::StrCat(p->name,
                     " is an agent: agents may not use the user "
                     "service"));
  }
  return p;
}

absl::StatusOr<v1::Sweep> FarmService::VisibleSweep(
    const Principal& caller, const std::string& sweep_id) const {
  absl::StatusOr<v1::Sweep> sweep = store_->GetSweep(sweep_id);
  if (!sweep.ok()) return sweep.status();
  if (!caller.CanAccessTeam(sweep->spec().team())) {
    return SweepNotFound(sweep_id);
  }
  return sweep;
}

#define TF_CALLER_OR_RETURN(caller, context)          \
  absl::StatusOr<Principal> caller = Caller(context); \
  if (!caller.ok()) return ToGrpcStatus(caller.status())

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

grpc::Status FarmService::SubmitSweep(grpc::ServerContext* context,
                                      const v1::SubmitSweepRequest* request,
                                      v1::SubmitSweepResponse* response) {
  TF_CALLER_OR_RETURN(caller, context);
  return Reply(
      loop_->Call([&] { return coordinator_->SubmitSweep(*request, *caller); }),
      response);
}

grpc::Status FarmService::GetSweep(grpc::ServerContext* context,
                                   const v1::GetSweepRequest* request,
                                   v1::Sweep* response) {
  TF_CALLER_OR_RETURN(caller, context);
  return Reply(VisibleSweep(*caller, request->sweep_id()), response);
}

grpc::Status FarmService::ListSweeps(grpc::ServerContext* context,
                                     const v1::ListSweepsRequest* request,
                                     v1::ListSweepsResponse* response) {
  TF_CALLER_OR_RETURN(caller, context);
  v1::ListSweepsRequest scoped = *request;
  if (!caller->is_admin()) {
    if (!scoped.team().empty() && scoped.team() != caller->team) {
      return ToGrpcStatus(absl::PermissionDeniedError(absl::StrCat(
          caller->name, " may not list team '", scoped.team(), "'s sweeps")));
    }
    scoped.set_team(caller->team);  // a team sees its own sweeps only
  }
  return Reply(QueryListSweeps(*store_, scoped), response);
}

// How often parked watch streams read the store again without a
// notification, and the hub checks that it should stop.
constexpr absl::Duration kWatchRecheck = absl::Milliseconds(500);

// Parked watch streams, and the one thread that wakes them when the
// notifier moves past the version they last read at. Thread-safe. Lock
// order: the hub's mutex, then a reactor's.
class FarmService::WatchHub {
 public:
  enum class Parking { kParked, kReadAgain, kFinish };

  explicit WatchHub(EventNotifier* notifier)
      : notifier_(notifier), thread_([this] { Run(); }) {}
  ~WatchHub() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    thread_.join();
  }

  // Parks `r`, which found nothing new in the store after the notifier
  // showed `seen`. kReadAgain when the notifier has moved since; kFinish
  // when `r` was cancelled or the service shuts down. Once kParked, `r`
  // belongs to the hub (or to Unpark's caller): the caller must not touch
  // it again.
  Parking Park(WatchReactor* r, uint64_t seen);
  // True when `r` was parked (and now belongs to the caller).
  bool Unpark(WatchReactor* r) {
    absl::MutexLock lock(&mu_);
    return parked_.erase(r) > 0;
  }

 private:
  void Run();

  EventNotifier* const notifier_;
  absl::Mutex mu_;
  std::map<WatchReactor*, uint64_t> parked_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// One WatchSweep stream: writes the stored events from `next` on, one at a
// time, and parks in the hub (no thread) once it has caught up. One path
// at a time drives it (the handler, then OnWriteDone or the hub's wake-up);
// OnCancel may come at any time. Finish is called exactly once; OnDone
// deletes the reactor.
class FarmService::WatchReactor
    : public grpc::ServerWriteReactor<v1::SweepEvent> {
 public:
  WatchReactor(WatchHub* hub, Store* store, EventNotifier* notifier,
               std::string sweep_id, int64_t next)
      : hub_(hub),
        store_(store),
        notifier_(notifier),
        sweep_id_(std::move(sweep_id)),
        next_(next) {}

  // Reads what the store holds from next_ and starts writing it, or parks
  // when there is nothing new; finishes on shutdown, cancel or error.
  void Pump() {
    while (!cancelled() && !notifier_->shutting_down()) {
      // The version before the read: an event stored after it moves it.
      const uint64_t seen = notifier_->version();
      absl::StatusOr<std::vector<v1::SweepEvent>> events =
          store_->ReadEvents(sweep_id_, next_, 256);
      if (!events.ok()) return FinishOnce(ToGrpcStatus(events.status()));
      if (!events->empty()) {
        pending_.assign(std::make_move_iterator(events->begin()),
                        std::make_move_iterator(events->end()));
        return WriteNext();
      }
      switch (hub_->Park(this, seen)) {
        case WatchHub::Parking::kParked:
          return;  // the hub or OnCancel has it now
        case WatchHub::Parking::kReadAgain:
          continue;
        case WatchHub::Parking::kFinish:
          return FinishOnce(grpc::Status::OK);
      }
    }
    FinishOnce(grpc::Status::OK);
  }

  bool cancelled() {
    absl::MutexLock lock(&mu_);
    return cancelled_;
  }

  void OnWriteDone(bool ok) override {
    if (!ok) return FinishOnce(grpc::Status::OK);  // the client went away
    next_ = current_.seq() + 1;
    if (current_.kind() == v1::EVENT_KIND_FINISHED) {
      // Diagnoses can still arrive after the end; a watcher that wants them
      // asks again with from_seq.
      return FinishOnce(grpc::Status::OK);
    }
    if (!pending_.empty() && !cancelled()) return WriteNext();
    Pump();
  }

  void OnCancel() override {
    {
      absl::MutexLock lock(&mu_);
      cancelled_ = true;
    }
    // Parked: nobody else will look at it, so finish it here. Otherwise the
    // write in flight or the pump in progress sees the cancel.
    if (hub_->Unpark(this)) FinishOnce(grpc::Status::OK);
  }

  void OnDone() override { delete this; }

 private:
  void WriteNext() {
    current_ = std::move(pending_.front());
    pending_.pop_front();
    StartWrite(&current_);
  }

  void FinishOnce(const grpc::Status& status) {
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      finished_ = true;
    }
    Finish(status);
  }

  WatchHub* const hub_;
  Store* const store_;
  EventNotifier* const notifier_;
  const std::string sweep_id_;
  // Only the path driving the stream touches these.
  int64_t next_;
  std::deque<v1::SweepEvent> pending_;
  v1::SweepEvent current_;  // being written
  absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

FarmService::WatchHub::Parking FarmService::WatchHub::Park(WatchReactor* r,
                                                           uint64_t seen) {
  absl::MutexLock lock(&mu_);
  if (notifier_->shutting_down() || r->cancelled()) return Parking::kFinish;
  if (notifier_->version() != seen) return Parking::kReadAgain;
  parked_[r] = seen;
  return Parking::kParked;
}

void FarmService::WatchHub::Run() {
  uint64_t last = notifier_->version();
  absl::Time last_sweep = absl::Now();
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
    }
    last = notifier_->Wait(last, kWatchRecheck);
    const bool shutting_down = notifier_->shutting_down();
    // Every kWatchRecheck each parked stream reads the store again, should
    // an event have been stored without a notification.
    const bool sweep = absl::Now() - last_sweep >= kWatchRecheck;
    if (sweep) last_sweep = absl::Now();
    std::vector<WatchReactor*> ready;
    {
      absl::MutexLock lock(&mu_);
      for (auto it = parked_.begin(); it != parked_.end();) {
        if (shutting_down || sweep || it->second != last) {
          ready.push_back(it->first);
          it = parked_.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (WatchReactor* r : ready) r->Pump();
    // Shutdown wakes Wait for good: pace the loop until stop_.
    if (shutting_down) absl::SleepFor(absl::Milliseconds(10));
  }
}

FarmService::FarmService(Coordinator* coordinator, ControlLoop* loop,
                         Store* store, EventNotifier* notifier,
                         const TokenTable* tokens)
    : coordinator_(coordinator),
      loop_(loop),
      store_(store),
      notifier_(notifier),
      tokens_(tokens),
      watches_(std::make_unique<WatchHub>(notifier)) {}

FarmService::~FarmService() = default;

namespace {

// A stream refused before its first event.
class RefusedWatch : public grpc::ServerWriteReactor<v1::SweepEvent> {
 public:
  explicit RefusedWatch(const absl::Status& status) {
    Finish(ToGrpcStatus(status));
  }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::ServerWriteReactor<v1::SweepEvent>* FarmService::WatchSweep(
    grpc::CallbackServerContext* context,
    const v1::WatchSweepRequest* request) {
  absl::StatusOr<Principal> caller = Caller(context);
  if (!caller.ok()) return new RefusedWatch(caller.status());
  absl::StatusOr<v1::Sweep> sweep = VisibleSweep(*caller, request->sweep_id());
  if (!sweep.ok()) return new RefusedWatch(sweep.status());
  auto* reactor =
      new WatchReactor(watches_.get(), store_, notifier_, request->sweep_id(),
                       std::max<int64_t>(1, request->from_seq()));
  reactor->Pump();
  return reactor;
}

grpc::Status FarmService::CancelSweep(grpc::ServerContext* context,
                                      const v1::CancelSweepRequest* request,
                                      v1::Sweep* response) {
  TF_CALLER_OR_RETURN(caller, context);
  return Reply(
      loop_->Call([&] { return coordinator_->CancelSweep(*request, *caller); }),
      response);
}

grpc::Status FarmService::GetReport(grpc::ServerContext* context,
                                    const v1::GetReportRequest* request,
                                    v1::GetReportResponse* response) {
  TF_CALLER_OR_RETURN(caller, context);
  if (auto s = VisibleSweep(*caller, request->sweep_id()); !s.ok()) {
    return ToGrpcStatus(s.status());
  }
  return Reply(QueryReport(*store_, *request), response);
}

grpc::Status FarmService::ListBoards(grpc::ServerContext* context,
                                     const v1::ListBoardsRequest* request,
                                     v1::ListBoardsResponse* response) {
  TF_CALLER_OR_RETURN(caller, context);
  absl::StatusOr<int> limit = PageSize(request->limit(), 500);
  if (!limit.ok()) return ToGrpcStatus(limit.status());
  // The token is the last board id of the page before (boards sort by id).
  const std::string& after = request->page_token();
  std::vector<v1::BoardInfo> boards = loop_->Call(
      [&] { return coordinator_->ListBoards(request->selector()); });
  size_t bytes = 0;
  for (auto& b : boards) {
    if (!after.empty() && b.board_id() <= after) continue;
    if (response->boards_size() >= *limit ||
        (response->boards_size() > 0 && bytes >= kMaxPageBytes)) {
      response->set_next_page_token(
          response->boards(response->boards_size() - 1).board_id());
      break;
    }
    // Which sweep a board runs is another team's business.
    if (!caller->is_admin()) b.clear_current_lease_id();
    bytes += b.ByteSizeLong();
    *response->add_boards() = std::move(b);
  }
  return grpc::Status::OK;
}

grpc::Status FarmService::ListRounds(grpc::ServerContext* context,
                                     const v1::ListRoundsRequest* request,
                                     v1::ListRoundsResponse* response) {
  TF_CALLER_OR_RETURN(caller, context);
  if (auto s = VisibleSweep(*caller, request->sweep_id()); !s.ok()) {
    return ToGrpcStatus(s.status());
  }
  return Reply(QueryListRounds(*store_, *request), response);
}

namespace {

absl::Status RequireAdmin(const Principal& caller, const char* what) {
  if (caller.is_admin()) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat(caller.name, " may not ", what, ": admins only"));
}

}  // namespace

grpc::Status FarmService::DrainBoard(grpc::ServerContext* context,
                                     const v1::BoardAdminRequest* request,
                                     v1::BoardInfo* response) {
  TF_CALLER_OR_RETURN(caller, context);
  if (auto st = RequireAdmin(*caller, "drain boards"); !st.ok()) {
    return ToGrpcStatus(st);
  }
  return Reply(loop_->Call([&] { return coordinator_->DrainBoard(*request); }),
               response);
}

grpc::Status FarmService::AdmitBoard(grpc::ServerContext* context,
                                     const v1::BoardAdminRequest* request,
                                     v1::BoardInfo* response) {
  TF_CALLER_OR_RETURN(caller, context);
  if (auto st = RequireAdmin(*caller, "re-admit boards"); !st.ok()) {
    return ToGrpcStatus(st);
  }
  return Reply(loop_->Call([&] { return coordinator_->AdmitBoard(*request); }),
               response);
}

grpc::Status FarmService::SetTeamQuota(grpc::ServerContext* context,
                                       const v1::SetTeamQuotaRequest* request,
                                       v1::TeamQuota* response) {
  TF_CALLER_OR_RETURN(caller, context);
  if (auto st = RequireAdmin(*caller, "change quotas"); !st.ok()) {
    return ToGrpcStatus(st);
  }
  return Reply(
      loop_->Call([&] { return coordinator_->SetTeamQuota(request->quota()); }),
      response);
}

grpc::Status FarmService::ListTeams(grpc::ServerContext* context,
                                    const v1::ListTeamsRequest* request,
                                    v1::ListTeamsResponse* response) {
  TF_CALLER_OR_RETURN(caller, context);
  absl::StatusOr<int> limit = PageSize(request->limit(), 100);
  if (!limit.ok()) return ToGrpcStatus(limit.status());
  const std::string team = caller->is_admin() ? "" : caller->team;
  v1::ListTeamsResponse all =
      loop_->Call([&] { return coordinator_->ListTeams(team); });
  // The token is the last team of the page before (teams sort by name).
  const std::string& after = request->page_token();
  for (v1::TeamUsage& u : *all.mutable_teams()) {
    if (!after.empty() && u.quota().team() <= after) continue;
    if (response->teams_size() >= *limit) {
      response->set_next_page_token(
          response->teams(response->teams_size() - 1).quota().team());
      break;
    }
    *response->add_teams() = std::move(u);
  }
  return grpc::Status::OK;
}

grpc::Status FarmService::ReserveBoards(
    grpc::ServerContext* context, const v1::ReserveBoardsRequest* request,
    v1::ListReservationsResponse* response) {
  TF_CALLER_OR_RETURN(caller, context);
  if (auto st = RequireAdmin(*caller, "reserve boards"); !st.ok()) {
    return ToGrpcStatus(st);
  }
  return Reply(loop_->Call([&] {
    return coordinator_->ReserveBoards(request->reservation());
  }),
               response);
}

grpc::Status FarmService::UnreserveBoards(
    grpc::ServerContext* context, const v1::ReserveBoardsRequest* request,
    v1::ListReservationsResponse* response) {
  TF_CALLER_OR_RETURN(caller, context);
  if (auto st = RequireAdmin(*caller, "lift reservations"); !st.ok()) {
    return ToGrpcStatus(st);
  }
  return Reply(loop_->Call([&] {
    return coordinator_->UnreserveBoards(request->reservation());
  }),
               response);
}

absl::Status AgentGrpcService::CheckAgent(
    const grpc::ServerContextBase& context) const {
  absl::StatusOr<Principal> p = Authenticate(tokens_, context);
  if (!p.ok()) return p.status();
  // An admin manages agents but is not one: a fake agent registered with
  // an admin token would run (and see) every team's variants.
  if (tokens_ != nullptr && p->role != Role::kAgent) {
    return absl::PermissionDeniedError(
        absl::StrCat(p->name,
                     " is not an agent: only agent credentials may use the "
                     "agent service"));
  }
  return absl::OkStatus();
}

template <typename Response, typename Run>
grpc::ServerUnaryReactor* AgentGrpcService::Serve(
    grpc::CallbackServerContext* context, const std::string& agent_id,
    Response* response, Run run) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status st = CheckAgent(*context); !st.ok()) {
    reactor->Finish(ToGrpcStatus(st));
    return reactor;
  }
  if (liveness_ != nullptr) liveness_->Heard(agent_id);
  // The request and response live until the reactor is finished.
  loop_->Post(std::move(run), [this, reactor,
                               response](absl::StatusOr<Response> result) {
    Reply([reactor, response, result = std::move(result)]() mutable {
      if (!result.ok()) {
        reactor->Finish(ToGrpcStatus(result.status()));
        return;
      }
      *response = std::move(*result);
      reactor->Finish(grpc::Status::OK);
    });
  });
  return reactor;
}

AgentGrpcService::AgentGrpcService(Coordinator* coordinator, ControlLoop* loop,
                                   const TokenTable* tokens,
                                   AgentLiveness* liveness)
    : coordinator_(coordinator),
      loop_(loop),
      tokens_(tokens),
      liveness_(liveness),
      reply_thread_([this] { ReplyLoop(); }) {}

AgentGrpcService::~AgentGrpcService() {
  {
    absl::MutexLock lock(&reply_mu_);
    reply_stop_ = true;
  }
  reply_thread_.join();
}

void AgentGrpcService::Reply(std::function<void()> finish) {
  absl::MutexLock lock(&reply_mu_);
  replies_.push_back(std::move(finish));
}

void AgentGrpcService::ReplyLoop() {
  std::deque<std::function<void()>> ready;
  while (true) {
    {
      absl::MutexLock lock(&reply_mu_);
      auto any = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(reply_mu_) {
        return !replies_.empty() || reply_stop_;
      };
      reply_mu_.Await(absl::Condition(&any));
      if (replies_.empty()) return;  // stopping, nothing left
      ready.swap(replies_);
    }
    for (auto& finish : ready) finish();
    ready.clear();
  }
}

grpc::ServerUnaryReactor* AgentGrpcService::RegisterAgent(
    grpc::CallbackServerContext* context,
    const v1::RegisterAgentRequest* request,
    v1::RegisterAgentResponse* response) {
  return Serve(context, request->agent_id(), response, [this, request] {
    return coordinator_->RegisterAgent(*request);
  });
}

grpc::ServerUnaryReactor* AgentGrpcService::Heartbeat(
    grpc::CallbackServerContext* context, const v1::HeartbeatRequest* request,
    v1::HeartbeatResponse* response) {
  return Serve(context, request->agent_id(), response,
               [this, request] { return coordinator_->Heartbeat(*request); });
}

grpc::ServerUnaryReactor* AgentGrpcService::LeaseWork(
    grpc::CallbackServerContext* context, const v1::LeaseWorkRequest* request,
    v1::LeaseWorkResponse* response) {
  return Serve(context, request->agent_id(), response,
               [this, request] { return coordinator_->LeaseWork(*request); });
}

grpc::ServerUnaryReactor* AgentGrpcService::RenewLease(
    grpc::CallbackServerContext* context, const v1::RenewLeaseRequest* request,
    v1::RenewLeaseResponse* response) {
  return Serve(context, request->agent_id(), response,
               [this, request] { return coordinator_->RenewLease(*request); });
}

grpc::ServerUnaryReactor* AgentGrpcService::ReportResult(
    grpc::CallbackServerContext* context,
    const v1::ReportResultRequest* request,
    v1::ReportResultResponse* response) {
  return Serve(context, request->agent_id(), response, [this, request] {
    return coordinator_->ReportResult(*request);
  });
}

}  // namespace tunefarm
