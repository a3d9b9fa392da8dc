#include "coordinator/coordinator.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/files.h"
#include "common/params.h"
#include "common/status_macros.h"
#include "coordinator/board_registry.h"
#include "coordinator/event_text.h"
#include "coordinator/health_checker.h"
#include "coordinator/keep_rule.h"
#include "coordinator/lease_id.h"
#include "coordinator/lease_table.h"
#include "coordinator/placement.h"
#include "coordinator/report.h"
#include "coordinator/saturation.h"
#include "coordinator/spec.h"
#include "coordinator/sweep_book.h"
#include "coordinator/workloads.h"
#include "spdlog/spdlog.h"
#include "storage/lineage.h"

namespace tunefarm {

namespace {

// Rounds of ended sweeps freed after each commit (SweepBook::Retire): about
// half a millisecond, so an ended sweep's memory goes back over a few
// hundred commits without stalling any of them.
constexpr int64_t kRoundsFreedPerCommit = 64;

}  // namespace

Coordinator::Coordinator(Store* store, const OperatorCatalog* catalog,
                         Clock* clock, CoordinatorOptions options,
                         FarmMetrics* metrics)
    : store_(store),
      catalog_(catalog),
      clock_(clock),
      options_(std::move(options)),
      metrics_(metrics),
      book_(catalog_, SweepBook::Parts{store_, clock_, &staging_, &placement_,
                                       &decider_}),
      registry_(BoardRegistry::Parts{&book_, &staging_, &leases_, &placement_,
                                     &health_, clock_, metrics_}),
      placement_(options_.default_quota, options_.team_quotas,
                 options_.reservations),
      health_(catalog_, HealthCheckerOptions{options_.health_checks,
                                             options_.health_check_interval,
                                             options_.health_retry_interval,
                                             options_.lease_duration}),
      staging_(&book_, &registry_, &placement_, clock_),
      leases_(&book_, &registry_, &staging_, clock_, options_.lease_duration,
              metrics_),
      decider_(&staging_, &leases_, clock_, options_.report_dir) {}

Coordinator::~Coordinator() = default;

std::string Coordinator::DescribeState() const {
  std::string out =
      absl::StrCat("next_sweep_number: ", book_.next_number(), "\n");
  for (const auto& [id, s] : book_.sweeps()) {
    absl::StrAppend(&out, "sweep ", id, (s->finished ? " finished" : ""), ": ",
                    s->sweep.ShortDebugString(), "\n");
    for (const v1::Round& r : s->rounds) {
      absl::StrAppend(&out, "  round ", r.ShortDebugString(), "\n");
    }
  }
  for (const auto& [id, b] : registry_.boards()) {
    absl::StrAppend(&out, "board ", id, ": lease '", b.lease_id, "' ahead '",
                    absl::StrJoin(b.prefetch_lease_ids, ","), "' readmit ",
                    b.readmit_pending, " check_due ", b.check_due,
                    " next_check ", absl::FormatTime(b.next_check),
                    " check_expires ", absl::FormatTime(b.check_expires),
                    " checks ", b.checks_run, " ", b.info.ShortDebugString(),
                    "\n");
  }
  for (const auto& [id, a] : registry_.agents()) {
    absl::StrAppend(&out, "agent ", id, ": last_seen ",
                    absl::FormatTime(a.last_seen), " boards ",
                    absl::StrJoin(a.board_ids, ","), "\n");
  }
  for (const auto& [team, secs] : placement_.recorded_seconds()) {
    absl::StrAppend(&out, "team ", team, ": ", secs, " board s\n");
  }
  for (const v1::BoardReservation& r : placement_.reservations()) {
    absl::StrAppend(&out, "reservation ", r.ShortDebugString(), "\n");
  }
  for (const auto& [team, q] : placement_.quotas()) {
    absl::StrAppend(&out, "quota ", q.ShortDebugString(), "\n");
  }
  return out;
}

absl::Status Coordinator::CheckViews() {
  for (const auto& [id, s] : book_.sweeps()) {
    if (!IsMultiWorkload(s->sweep.spec())) continue;
    if (absl::Status st = SyncedViews(*s).Check(s->sweep.spec(), s->rounds);
        !st.ok()) {
      return absl::InternalError(
          absl::StrCat("sweep ", id, ", ", st.message()));
    }
  }
  return absl::OkStatus();
}

SweepRuntime* Coordinator::FindSweep(const std::string& sweep_id) {
  return book_.Find(sweep_id);
}

absl::Status Coordinator::Recover() {
  TF_ASSIGN_OR_RETURN(auto reservations,
                      store_->GetMeta(Placement::kReservationsKey));
  TF_RETURN_IF_ERROR(placement_.LoadStored(reservations, std::nullopt));
  TF_ASSIGN_OR_RETURN(auto quotas, store_->GetMeta(Placement::kQuotasKey));
  TF_RETURN_IF_ERROR(placement_.LoadStored(std::nullopt, quotas));
  // Give the agents that hold leases time to reconnect and report.
  Txn txn;
  TF_RETURN_IF_ERROR(
      book_.Recover(txn, clock_->Now() + options_.lease_duration));
  TF_RETURN_IF_ERROR(Commit(txn));  // sweeps that cannot resume, ended
  TF_ASSIGN_OR_RETURN(std::vector<v1::BoardInfo> boards, store_->ListBoards());
  registry_.Recover(std::move(boards));
  PublishBoardMetrics();
  return absl::OkStatus();
}

void Coordinator::BeginBatch() {
  if (spare_batches_.empty()) {
    batch_ = std::make_unique<Txn>();
  } else {
    batch_ = std::move(spare_batches_.back());
    spare_batches_.pop_back();
  }
}

absl::Status Coordinator::CommitBatch() {
  if (batch_ == nullptr) return absl::OkStatus();
  std::unique_ptr<Txn> batch = std::move(batch_);
  absl::Status st = CommitNow(*batch);
  Recycle(std::move(batch));
  return st;
}

void Coordinator::Recycle(std::unique_ptr<Txn> txn) {
  // A batch's vectors grow to thousands of entries: keeping their memory
  // for the next batch spares the allocator a large free and a large
  // allocation per batch (glibc consolidates its free lists on each).
  if (spare_batches_.size() >= 2) return;
  txn->writes.Clear();
  txn->touched.clear();
  txn->undo.clear();
  txn->saved_sweeps.clear();
  txn->saved_boards.clear();
  txn->saved_rounds.clear();
  txn->saved_teams.clear();
  txn->saved_reservations = false;
  txn->after_commit.clear();
  spare_batches_.push_back(std::move(txn));
}

absl::Status Coordinator::Commit(Txn& txn) {
  // Staging marked each saved round when it was saved; a round changed
  // again after a strategy saw it, in this transaction, is marked here.
  for (const auto& [sweep_id, round_id] : txn.saved_rounds) {
    SweepRuntime* s = book_.Find(sweep_id);
    if (s != nullptr && IsMultiWorkload(s->sweep.spec())) {
      s->views.Changed(round_id);
    }
  }
  if (batch_ == nullptr) return CommitNow(txn);
  // Staged (moved, not copied): the batch writes each touched sweep's final
  // record once.
  batch_->writes.Append(std::move(txn.writes));
  batch_->touched.insert(txn.touched.begin(), txn.touched.end());
  batch_->undo.insert(batch_->undo.end(),
                      std::make_move_iterator(txn.undo.begin()),
                      std::make_move_iterator(txn.undo.end()));
  batch_->after_commit.insert(batch_->after_commit.end(),
                              std::make_move_iterator(txn.after_commit.begin()),
                              std::make_move_iterator(txn.after_commit.end()));
  txn = Txn();
  return absl::OkStatus();
}

absl::Status Coordinator::CommitNow(Txn& txn) {
  Sealed sealed = Seal(txn);
  absl::Status written = WriteTxn(txn);
  Settle(txn, sealed, written);
  return written;
}

Coordinator::Sealed Coordinator::Seal(Txn& txn) {
  Sealed sealed;
  // An ended sweep's report is on disk before its end is stored: whoever
  // sees the end (GetSweep and WatchSweep read the store) finds the report
  // where report_path says, and no crash between the two loses it. A report
  // that cannot be written is not promised: the record names none.
  for (SweepRuntime* s : txn.touched) {
    if (!s->finished || s->sweep.report_path().empty()) continue;
    if (WriteReport(s->sweep, s->rounds)) {
      sealed.reports.push_back(s->sweep.report_path());
    } else {
      s->sweep.clear_report_path();
    }
  }
  for (SweepRuntime* s : txn.touched) {
    txn.writes.PutSweep(s->sweep);
    sealed.touched.push_back(s->sweep.sweep_id());
  }
  // By id from here on: a sweep finished by an earlier batch may be gone
  // by the time this one settles.
  txn.touched.clear();
  return sealed;
}

absl::Status Coordinator::WriteTxn(const Txn& txn) {
  if (txn.writes.empty()) return absl::OkStatus();
  const absl::Time start = clock_->Now();
  absl::Status st = store_->Commit(txn.writes);
  if (metrics_ != nullptr) {
    metrics_->StoreCommitted(absl::ToDoubleSeconds(clock_->Now() - start),
                             txn.writes.size(), st.ok());
  }
  // A full disk keeps its own code (callers say RESOURCE_EXHAUSTED).
  if (st.ok() || absl::IsResourceExhausted(st)) return st;
  return absl::UnavailableError(
      absl::StrCat("could not record durably: ", st.message()));
}

void Coordinator::Settle(Txn& txn, const Sealed& sealed,
                         const absl::Status& written) {
  if (!written.ok()) {
    // Those sweeps have not ended: no report of an end that did not happen.
    for (const std::string& path : sealed.reports) {
      if (absl::Status removed = RemoveAll(path); !removed.ok()) {
        spdlog::error(
            "cannot remove the report {} of an end that was not "
            "stored: {}",
            path, removed.ToString());
      }
    }
    // Not durable, so not applied: memory goes back to what the store
    // holds, and the caller answers with an error (a retry starts afresh).
    for (auto it = txn.undo.rbegin(); it != txn.undo.rend(); ++it) (*it)();
    txn.undo.clear();
    const absl::Time now = clock_->Now();
    if (now - last_commit_error_log_ >= absl::Seconds(10)) {
      last_commit_error_log_ = now;
      spdlog::error("store commit failed, nothing applied: {}",
                    written.ToString());
    }
    return;
  }
  txn.undo.clear();
  for (auto& effect : txn.after_commit) effect();
  if (txn.writes.empty()) return;
  std::vector<std::string> done;
  for (const std::string& id : sealed.touched) {
    if (event_listener_) event_listener_(id);
    SweepRuntime* s = FindSweep(id);
    if (s != nullptr && s->finished) done.push_back(id);
  }
  for (const std::string& id : done) book_.Retire(id);
  book_.FreeRetired(kRoundsFreedPerCommit);
  if (metrics_ != nullptr) {
    int queued = 0;
    for (const auto& [id, s] : book_.sweeps()) {
      for (size_t i = s->queued_from; i < s->rounds.size(); ++i) {
        queued += s->rounds[i].state() == v1::ROUND_STATE_QUEUED ? 1 : 0;
      }
    }
    metrics_->SetQueueDepth(queued);
  }
}

class Coordinator::SealedTxn : public SealedBatch {
 public:
  SealedTxn(Coordinator* c, std::unique_ptr<Txn> txn, Sealed sealed)
      : c_(c), txn_(std::move(txn)), sealed_(std::move(sealed)) {}
  absl::Status Write() override { return c_->WriteTxn(*txn_); }
  void Settle(const absl::Status& written) override {
    c_->Settle(*txn_, sealed_, written);
    c_->Recycle(std::move(txn_));
  }

 private:
  Coordinator* const c_;
  std::unique_ptr<Txn> txn_;
  const Sealed sealed_;
};

std::unique_ptr<SealedBatch> Coordinator::SealBatch() {
  std::unique_ptr<Txn> batch =
      batch_ != nullptr ? std::move(batch_) : std::make_unique<Txn>();
  Sealed sealed = Seal(*batch);
  return std::make_unique<SealedTxn>(this, std::move(batch), std::move(sealed));
}

// --- user side ------------------------------------------------------------

absl::StatusOr<v1::SubmitSweepResponse> Coordinator::SubmitSweep(
    const v1::SubmitSweepRequest& request, const Principal& caller) {
  Txn txn;
  TF_ASSIGN_OR_RETURN(SweepBook::Submission submission,
                      book_.Submit(txn, request, caller));
  v1::SubmitSweepResponse response;
  if (submission.existing.has_value()) {
    *response.mutable_sweep() = std::move(*submission.existing);
    response.set_existing(true);
    return response;
  }
  TF_RETURN_IF_ERROR(Commit(txn));
  book_.Advance();
  const SweepRuntime& s = *submission.staged;
  spdlog::info("submitted {} ({} / {})", s.sweep.sweep_id(),
               s.sweep.spec().operator_name(), s.sweep.spec().name());
  *response.mutable_sweep() = s.sweep;
  return response;
}

absl::StatusOr<v1::Sweep> Coordinator::CancelSweep(
    const v1::CancelSweepRequest& request, const Principal& caller) {
  Txn txn;
  TF_ASSIGN_OR_RETURN(v1::Sweep cancelled, book_.Cancel(txn, request, caller));
  TF_RETURN_IF_ERROR(Commit(txn));
  return cancelled;
}

std::vector<v1::BoardInfo> Coordinator::ListBoards(
    const v1::BoardSelector& selector) {
  return registry_.List(selector);
}

// --- agent side -----------------------------------------------------------

absl::StatusOr<v1::RegisterAgentResponse> Coordinator::RegisterAgent(
    const v1::RegisterAgentRequest& request) {
  Txn txn;
  TF_RETURN_IF_ERROR(registry_.Register(txn, request));
  TF_RETURN_IF_ERROR(Commit(txn));
  BoardsChanged();
  spdlog::info("agent {} registered {} board(s) from {}", request.agent_id(),
               request.boards_size(), request.node());
  v1::RegisterAgentResponse response;
  response.set_heartbeat_interval_ms(
      absl::ToInt64Milliseconds(options_.heartbeat_interval));
  response.set_lease_duration_ms(
      absl::ToInt64Milliseconds(options_.lease_duration));
  return response;
}

absl::StatusOr<v1::HeartbeatResponse> Coordinator::Heartbeat(
    const v1::HeartbeatRequest& request) {
  v1::HeartbeatResponse response;
  Txn txn;
  TF_ASSIGN_OR_RETURN(const bool boards_changed,
                      registry_.Heartbeat(txn, request, &response));
  TF_RETURN_IF_ERROR(Commit(txn));
  if (boards_changed) BoardsChanged();
  return response;
}

v1::Round* Coordinator::NextRound(Txn& txn, SweepRuntime& s) {
  if (s.finished) return nullptr;
  if (IsMultiWorkload(s.sweep.spec())) return NextMultiWorkloadRound(txn, s);
  if (v1::Round* queued = SweepBook::FirstQueued(s); queued != nullptr) {
    return queued;
  }
  if (s.sweep.has_closing_check()) return nullptr;  // the search is over
  SearchHistory history{s.op, &s.sweep.spec(), &s.rounds, s.sweep.best_round(),
                        s.rewinds};
  NextCandidate next = ProposeNextCandidate(
      *s.strategy, history, s.sweep.spec().budget().max_rounds(),
      SweepBook::CandidatesInFlight(s));
  if (next.kind == NextCandidate::Kind::kExhausted) {
    decider_.EndSearch(txn, s, next.why.reason, std::move(next.why.detail));
    return s.finished ? nullptr : SweepBook::FirstQueued(s);  // the check
  }
  if (next.kind != NextCandidate::Kind::kPropose) return nullptr;
  v1::Round* round = staging_.AddRound(txn, s, std::move(next.candidate));
  s.sweep.set_candidates_proposed(s.sweep.candidates_proposed() + 1);
  return round;
}

absl::StatusOr<v1::LeaseWorkResponse> Coordinator::LeaseWork(
    const v1::LeaseWorkRequest& request) {
  TF_ASSIGN_OR_RETURN(
      BoardRuntime * caller_board,
      registry_.CallerBoard(request.agent_id(), request.board_id()));
  // A full disk refuses new work before anything changes.
  TF_RETURN_IF_ERROR(store_->Writable());
  BoardRuntime& board = *caller_board;
  Txn txn;
  staging_.SaveBoard(txn, request.board_id());
  v1::LeaseWorkResponse response;
  response.set_retry_after_ms(200);
  if (request.prefetch()) {
    // Leases ahead only behind a running one (an idle board takes plain
    // leases), as many as the agent says its builds need (bounded).
    leases_.PruneAhead(board);
    const size_t max_ahead = static_cast<size_t>(
        std::clamp(request.max_ahead(), 1, LeaseTable::kMaxLeasesAhead));
    if (board.info.state() != v1::BOARD_STATE_BUSY ||
        leases_.Live(board.lease_id) == nullptr ||
        board.prefetch_lease_ids.size() >= max_ahead) {
      response.set_retry_after_ms(1000);
      TF_RETURN_IF_ERROR(Commit(txn));
      return response;
    }
    GrantNextRound(txn, board, /*prefetch=*/true,
                   request.held_operator_digests(), &response);
    TF_RETURN_IF_ERROR(Commit(txn));
    BoardsChanged();
    return response;
  }
  // The agent asks for plain work, so the board runs neither its lease nor
  // the one it had ahead.
  std::vector<std::string> held = board.prefetch_lease_ids;
  held.push_back(board.lease_id);
  for (const std::string& id : held) {
    if (v1::Round* r = leases_.Live(id); r != nullptr) {
      if (SweepRuntime* s = FindSweep(r->sweep_id()); s != nullptr) {
        leases_.Requeue(
            txn, *s, *r,
            "the board asked for new work while holding this lease");
      }
    }
  }
  board.prefetch_lease_ids.clear();
  board.lease_id.clear();
  if (HealthCheckDue(board) &&
      GrantHealthCheck(board, response.mutable_work())) {
    response.set_granted(true);
    TF_RETURN_IF_ERROR(Commit(txn));
    BoardsChanged();
    return response;
  }
  if (board.info.state() == v1::BOARD_STATE_QUARANTINED ||
      board.info.state() == v1::BOARD_STATE_DRAINING) {
    response.set_retry_after_ms(1000);
    TF_RETURN_IF_ERROR(Commit(txn));
    return response;
  }
  board.info.set_state(v1::BOARD_STATE_IDLE);
  GrantNextRound(txn, board, /*prefetch=*/false,
                 request.held_operator_digests(), &response);
  TF_RETURN_IF_ERROR(Commit(txn));
  BoardsChanged();
  return response;
}

bool Coordinator::IdleBoardCouldTake(const BoardRuntime& self,
                                     const SweepRuntime& s) const {
  for (const auto& [id, other] : registry_.boards()) {
    if (&other == &self || !other.lease_id.empty() ||
        other.info.state() != v1::BOARD_STATE_IDLE) {
      continue;
    }
    if (BoardRegistry::Matches(other.info, s.sweep.spec().boards()) &&
        Placement::Allows(other.info, s.sweep.spec().team(),
                          s.sweep.spec().boards())) {
      return true;
    }
  }
  return false;
}

bool Coordinator::GrantNextRound(
    Txn& txn, BoardRuntime& board, bool prefetch,
    const google::protobuf::RepeatedPtrField<std::string>& held_manifests,
    v1::LeaseWorkResponse* response) {
  const std::vector<SweepRuntime*> order =
      placement_.FairShareOrder(book_.sweeps(), clock_->NowUnixMs());
  for (SweepRuntime* s : order) {
    if (!BoardRegistry::Matches(board.info, s->sweep.spec().boards()) ||
        !Placement::Allows(board.info, s->sweep.spec().team(),
                           s->sweep.spec().boards())) {
      continue;
    }
    // A lease ahead must not take work that an idle board could run now:
    // building ahead only pays when every fitting board is busy.
    if (prefetch && IdleBoardCouldTake(board, *s)) continue;
    const v1::TeamQuota& quota = placement_.QuotaOf(s->sweep.spec().team());
    if (quota.max_boards() > 0 &&
        Placement::BoardsInUse(s->sweep.spec().team(), book_.sweeps()) >=
            quota.max_boards()) {
      continue;
    }
    v1::Round* round = NextRound(txn, *s);
    if (round == nullptr) continue;
    leases_.Grant(txn, *s, *round, board, prefetch, held_manifests,
                  response->mutable_work());
    response->set_granted(true);
    return true;
  }
  return false;
}

absl::StatusOr<v1::RenewLeaseResponse> Coordinator::RenewLease(
    const v1::RenewLeaseRequest& request) {
  registry_.NoteSeen(request.agent_id());
  v1::RenewLeaseResponse response;
  if (HealthLeaseId::IsHealthLease(request.lease_id())) {
    for (auto& [id, b] : registry_.boards()) {
      if (b.lease_id != request.lease_id()) continue;
      b.check_expires = clock_->Now() + options_.lease_duration;
      response.set_valid(true);
      response.set_expires_unix_ms(absl::ToUnixMillis(b.check_expires));
    }
    return response;
  }
  const std::optional<LeaseId> id = LeaseId::Parse(request.lease_id());
  if (!id.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("lease_id: malformed '", request.lease_id(), "'"));
  }
  const std::optional<int64_t> expires =
      leases_.Renew(*id, request.lease_id(), request.epoch());
  if (!expires.has_value()) return response;  // valid=false
  response.set_valid(true);
  response.set_expires_unix_ms(*expires);
  return response;
}

absl::StatusOr<v1::ReportResultResponse> Coordinator::ReportResult(
    const v1::ReportResultRequest& request) {
  if (!request.has_next_lease()) return RecordResult(request);
  // Checked before the result is handled: a refused call changes nothing.
  v1::LeaseWorkRequest next = request.next_lease();
  auto the_reports = [](absl::string_view field, std::string* asked,
                        const std::string& own) {
    if (asked->empty()) *asked = own;
    if (*asked == own) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("next_lease.", field, " '", *asked,
                     "' is not the report's '", own, "'"));
  };
  TF_RETURN_IF_ERROR(
      the_reports("agent_id", next.mutable_agent_id(), request.agent_id()));
  TF_RETURN_IF_ERROR(
      the_reports("board_id", next.mutable_board_id(), request.board_id()));
  TF_ASSIGN_OR_RETURN(v1::ReportResultResponse response, RecordResult(request));
  TF_ASSIGN_OR_RETURN(*response.mutable_next_lease(), LeaseWork(next));
  return response;
}

absl::StatusOr<v1::ReportResultResponse> Coordinator::RecordResult(
    const v1::ReportResultRequest& request) {
  registry_.NoteSeen(request.agent_id());
  v1::ReportResultResponse response;
  if (request.result().outcome() == v1::OUTCOME_UNSPECIFIED) {
    return absl::InvalidArgumentError("result.outcome: must be set");
  }
  if (HealthLeaseId::IsHealthLease(request.lease_id())) {
    auto b = registry_.boards().find(request.board_id());
    if (b == registry_.boards().end() ||
        b->second.lease_id != request.lease_id()) {
      response.set_reason(
          absl::StrCat("stale health check ", request.lease_id()));
      return response;
    }
    Txn txn;
    RecordHealthCheck(txn, b->second, &request.result(), "");
    TF_RETURN_IF_ERROR(Commit(txn));
    BoardsChanged();
    response.set_accepted(true);
    return response;
  }
  SweepRuntime* s = FindSweep(request.sweep_id());
  if (s == nullptr) {
    // Finished (or unknown) sweep: a retry of a recorded result is still a
    // duplicate; anything else is discarded.
    auto round = store_->GetRound(request.sweep_id(), request.round_id());
    if (!round.ok()) return round.status();
    if (round->state() == v1::ROUND_STATE_DONE &&
        round->lease().epoch() == request.epoch()) {
      response.set_accepted(true);
      response.set_duplicate(true);
      return response;
    }
    response.set_reason(
        absl::StrCat("sweep ", request.sweep_id(), " has ended"));
    return response;
  }
  if (request.round_id() < 0 ||
      request.round_id() >= static_cast<int64_t>(s->rounds.size())) {
    return absl::NotFoundError(absl::StrCat("round ", request.round_id(),
                                            " of sweep ", request.sweep_id()));
  }
  v1::Round& round = s->rounds[request.round_id()];
  if (round.state() == v1::ROUND_STATE_DONE &&
      round.lease().epoch() == request.epoch()) {
    response.set_accepted(true);
    response.set_duplicate(true);
    return response;
  }
  if (round.state() != v1::ROUND_STATE_LEASED ||
      round.lease().epoch() != request.epoch() ||
      round.lease().lease_id() != request.lease_id()) {
    response.set_reason(absl::StrCat("stale lease ", request.lease_id(),
                                     ": round ", round.round_id(), " is ",
                                     v1::RoundState_Name(round.state()),
                                     " at epoch ", round.lease().epoch()));
    spdlog::info("discarded result: {}", response.reason());
    return response;
  }
  Txn txn;
  staging_.Touch(txn, *s);
  staging_.SaveRound(txn, *s, round);
  const absl::Time now = clock_->Now();
  const std::string outcome = v1::Outcome_Name(request.result().outcome());
  if (metrics_ != nullptr) {
    txn.after_commit.push_back(
        [this, outcome,
         held = absl::ToDoubleSeconds(
             now - absl::FromUnixMillis(round.lease().granted_unix_ms()))] {
          metrics_->RoundRecorded(outcome, held);
        });
  }
  if (request.result().outcome() == v1::OUTCOME_BOARD_LOST) {
    // The board's fault, not the variant's: run it again elsewhere, and
    // let the board prove itself on its golden before more work.
    if (auto b = registry_.boards().find(round.lease().board_id());
        b != registry_.boards().end()) {
      staging_.SaveBoard(txn, b->first);
      b->second.check_due = health_.Checks(b->second.info.kind());
    }
    leases_.Requeue(txn, *s, round,
                    absl::StrCat("board fault: ", request.result().detail()));
    TF_RETURN_IF_ERROR(Commit(txn));
    response.set_accepted(true);
    return response;
  }
  leases_.FreeBoard(txn, round.lease().board_id(), round.lease().lease_id());
  const double board_seconds = std::max(
      0.0, absl::ToDoubleSeconds(
               now - absl::FromUnixMillis(round.lease().granted_unix_ms())));
  staging_.SaveTeamSeconds(txn, s->sweep.spec().team());
  placement_.AddRecordedSeconds(s->sweep.spec().team(), board_seconds);
  if (auto b = registry_.boards().find(round.lease().board_id());
      b != registry_.boards().end()) {
    staging_.SaveBoard(txn, b->first);
    b->second.info.set_rounds_run(b->second.info.rounds_run() + 1);
    if (metrics_ != nullptr) {
      txn.after_commit.push_back([this, info = b->second.info, board_seconds] {
        metrics_->BoardBusy(info, board_seconds);
      });
    }
  }
  if (metrics_ != nullptr) {
    txn.after_commit.push_back(
        [this, team = s->sweep.spec().team(), outcome, board_seconds] {
          metrics_->TeamRound(team, outcome, board_seconds);
        });
  }
  *round.mutable_result() = request.result();
  round.set_board_id(round.lease().board_id());
  round.set_state(v1::ROUND_STATE_DONE);
  round.set_finished_unix_ms(absl::ToUnixMillis(now));
  if (request.result().measurement().simulated()) s->sweep.set_simulated(true);
  if (request.result().has_measurement() &&
      request.result().measurement().samples() > 0) {
    txn.writes.PutMeasurement(s->sweep.sweep_id(), round.round_id(),
                              request.epoch(), request.result().measurement());
  }
  if (IsMultiWorkload(s->sweep.spec())) {
    decider_.DecideMultiWorkload(txn, *s, round);
  } else {
    decider_.Decide(txn, *s, round);
  }
  txn.writes.PutRound(round);
  decider_.CheckTermination(txn, *s);
  TF_RETURN_IF_ERROR(Commit(txn));
  BoardsChanged();
  response.set_accepted(true);
  return response;
}

bool Coordinator::WriteReport(const v1::Sweep& sweep,
                              const std::vector<v1::Round>& rounds) {
  if (sweep.report_path().empty()) return false;
  absl::Status st = MakeDirs(options_.report_dir);
  if (st.ok()) {
    st = WriteFileAtomic(sweep.report_path(), RenderReport(sweep, rounds));
  }
  if (!st.ok()) {
    spdlog::error("cannot write report {}: {}", sweep.report_path(),
                  st.ToString());
  }
  return st.ok();
}

// --- analyzers --------------------------------------------------------------

absl::Status Coordinator::RecordDiagnosis(const v1::Diagnosis& diagnosis) {
  SweepRuntime* s = FindSweep(diagnosis.sweep_id());
  SweepRuntime finished;  // a sweep that has ended, loaded from the store
  if (s == nullptr) {
    TF_ASSIGN_OR_RETURN(finished.sweep, store_->GetSweep(diagnosis.sweep_id()));
    TF_ASSIGN_OR_RETURN(finished.rounds,
                        store_->ListRounds(diagnosis.sweep_id()));
    s = &finished;
  }
  if (diagnosis.round_id() < 0 ||
      diagnosis.round_id() >= static_cast<int64_t>(s->rounds.size())) {
    return absl::NotFoundError(absl::StrCat(
        "round ", diagnosis.round_id(), " of sweep ", diagnosis.sweep_id()));
  }
  v1::Round& round = s->rounds[diagnosis.round_id()];
  if (round.lease().epoch() != diagnosis.epoch()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "diagnosis for epoch ", diagnosis.epoch(), " of round ",
        round.round_id(), ", whose current epoch is ", round.lease().epoch()));
  }
  // Only the bundle of the result this round recorded, from the agent that
  // held this epoch's lease, can be diagnosed. Agents send a bundle only
  // once its report was answered, or after they died (then that epoch's
  // result never comes): a diagnosis before the result is refused for good.
  if (round.state() != v1::ROUND_STATE_DONE) {
    return absl::FailedPreconditionError(absl::StrCat(
        "round ", round.round_id(), " of sweep ", diagnosis.sweep_id(),
        " has no recorded result for epoch ", diagnosis.epoch()));
  }
  if (round.result().bundle_id() != diagnosis.bundle_id()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "diagnosis of bundle '", diagnosis.bundle_id(), "' for round ",
        round.round_id(), ", whose result names bundle '",
        round.result().bundle_id(), "'"));
  }
  // Analyzers deliver at least once (a bundle whose ack was lost is
  // analysed again): the first diagnosis of a round's epoch is the record.
  if (round.has_diagnosis() && round.diagnosis().epoch() == diagnosis.epoch()) {
    return absl::AlreadyExistsError(
        absl::StrCat("round ", round.round_id(), " of sweep ",
                     diagnosis.sweep_id(), " already has a diagnosis (bundle ",
                     round.diagnosis().bundle_id(), ")"));
  }
  Txn txn;
  if (s != &finished) staging_.SaveRound(txn, *s, round);
  *round.mutable_diagnosis() = diagnosis;
  txn.writes.PutRound(round);
  std::string msg = absl::StrCat("diagnosis of round ", round.round_id());
  if (!diagnosis.hotspots().empty()) {
    const v1::Hotspot& h = diagnosis.hotspots(0);
    absl::StrAppend(
        &msg, ": hotspot ", h.op_name(), " ", FormatUs(h.duration_us()),
        absl::StrFormat(" (%.0f%% of device time)", h.share() * 100),
        diagnosis.simulated() ? " [simulated]" : "");
  } else if (!diagnosis.evidence_gaps().empty()) {
    absl::StrAppend(&msg,
                    ": evidence gap: ", diagnosis.evidence_gaps(0).reason());
  }
  staging_.AddEvent(txn, *s, v1::EVENT_KIND_DIAGNOSIS, msg, &round);
  if (s != &finished) decider_.CheckTermination(txn, *s);  // saturation
  if (s == &finished) {
    txn.touched.erase(s);
    txn.writes.PutSweep(finished.sweep);
  }
  // Not durable, so not acked: the re-sent diagnosis is not taken for a
  // duplicate of this one (Commit undoes it).
  TF_RETURN_IF_ERROR(Commit(txn));
  if (metrics_ != nullptr) metrics_->DiagnosisRecorded();
  if (s == &finished) {
    if (event_listener_) event_listener_(finished.sweep.sweep_id());
    // The ended sweep's report, now with this diagnosis.
    (void)WriteReport(finished.sweep, finished.rounds);
  }
  return absl::OkStatus();
}

// --- time -------------------------------------------------------------------

absl::Status Coordinator::Tick() {
  const absl::Time now = clock_->Now();
  if (batch_ == nullptr) {
    // Nothing is staged, so memory is what the store holds and no undo can
    // bring a round back to LEASED: the ids of rounds no longer leased go.
    for (auto& [id, s] : book_.sweeps()) {
      for (auto it = s->leased.begin(); it != s->leased.end();) {
        const bool leased = *it < static_cast<int64_t>(s->rounds.size()) &&
                            s->rounds[*it].state() == v1::ROUND_STATE_LEASED;
        it = leased ? std::next(it) : s->leased.erase(it);
      }
    }
  }
  Txn txn;
  bool boards_changed =
      registry_.LoseSilentAgents(txn, now, options_.agent_timeout, liveness_);
  for (auto& [id, b] : registry_.boards()) {
    if (HealthLeaseId::IsHealthLease(b.lease_id) && b.check_expires < now) {
      RecordHealthCheck(txn, b, nullptr, "no result within the lease");
      boards_changed = true;
    }
  }
  for (auto& [id, s] : book_.sweeps()) {
    if (leases_.RequeueExpired(txn, *s, now)) boards_changed = true;
    decider_.CheckTermination(txn, *s);
  }
  TF_RETURN_IF_ERROR(Commit(txn));
  if (boards_changed || board_metrics_stale_) PublishBoardMetrics();
  return absl::OkStatus();
}

void Coordinator::PublishBoardMetrics() {
  board_metrics_stale_ = false;
  if (metrics_ == nullptr) return;
  metrics_->SetBoardsByState(registry_.CountByState());
  std::vector<v1::BoardInfo> moved;
  for (const auto& [id, b] : registry_.boards()) {
    auto [at, fresh] = published_boards_.try_emplace(id);
    PublishedBoard& p = at->second;
    if (!fresh && p.state == b.info.state() && p.node == b.info.node() &&
        p.chip == b.info.chip()) {
      continue;
    }
    p = {b.info.state(), b.info.node(), b.info.chip()};
    moved.push_back(b.info);
  }
  if (!moved.empty()) metrics_->SetBoardStates(moved);
}

// --- admin ------------------------------------------------------------------

absl::StatusOr<v1::BoardInfo> Coordinator::DrainBoard(
    const v1::BoardAdminRequest& request) {
  Txn txn;
  TF_ASSIGN_OR_RETURN(BoardRuntime * board, registry_.Drain(txn, request));
  TF_RETURN_IF_ERROR(Commit(txn));
  BoardsChanged();
  return board->info;
}

absl::StatusOr<v1::BoardInfo> Coordinator::AdmitBoard(
    const v1::BoardAdminRequest& request) {
  Txn txn;
  TF_ASSIGN_OR_RETURN(BoardRuntime * board, registry_.Admit(txn, request));
  TF_RETURN_IF_ERROR(Commit(txn));
  BoardsChanged();
  return board->info;
}

absl::StatusOr<v1::TeamQuota> Coordinator::SetTeamQuota(
    const v1::TeamQuota& quota) {
  TF_ASSIGN_OR_RETURN(std::string stored, placement_.StoredQuotasWith(quota));
  Txn txn;
  txn.writes.PutMeta(Placement::kQuotasKey, stored);
  TF_RETURN_IF_ERROR(Commit(txn));
  placement_.SetQuota(quota);
  return quota;
}

v1::ListTeamsResponse Coordinator::ListTeams(const std::string& team) {
  std::set<std::string> teams;
  for (const auto& [t, q] : placement_.quotas()) teams.insert(t);
  for (const auto& [id, s] : book_.sweeps()) {
    teams.insert(s->sweep.spec().team());
  }
  for (const auto& [t, secs] : placement_.recorded_seconds()) teams.insert(t);
  v1::ListTeamsResponse response;
  for (const std::string& t : teams) {
    if (!team.empty() && t != team) continue;
    v1::TeamUsage* u = response.add_teams();
    *u->mutable_quota() = placement_.QuotaOf(t);
    u->mutable_quota()->set_team(t);
    u->set_boards_in_use(Placement::BoardsInUse(t, book_.sweeps()));
    int active = 0;
    for (const auto& [id, s] : book_.sweeps()) {
      active += s->sweep.spec().team() == t ? 1 : 0;
    }
    u->set_active_sweeps(active);
    u->set_board_seconds(
        placement_.BoardSeconds(t, book_.sweeps(), clock_->NowUnixMs()));
  }
  return response;
}

// --- reservations -----------------------------------------------------------

absl::StatusOr<v1::ListReservationsResponse> Coordinator::SaveReservations(
    std::vector<v1::BoardReservation> reservations) {
  Txn txn;
  txn.writes.PutMeta(Placement::kReservationsKey,
                     Placement::StoredReservations(reservations));
  staging_.SaveReservationList(txn);
  placement_.SetReservations(std::move(reservations));
  registry_.RefreshReservations(txn);
  TF_RETURN_IF_ERROR(Commit(txn));
  v1::ListReservationsResponse response;
  for (const v1::BoardReservation& r : placement_.reservations()) {
    *response.add_reservations() = r;
  }
  return response;
}

absl::StatusOr<v1::ListReservationsResponse> Coordinator::ReserveBoards(
    const v1::BoardReservation& reservation) {
  TF_ASSIGN_OR_RETURN(std::vector<v1::BoardReservation> next,
                      placement_.With(reservation));
  spdlog::info("{} reserved for team {}",
               Placement::DescribeTarget(reservation), reservation.team());
  return SaveReservations(std::move(next));
}

absl::StatusOr<v1::ListReservationsResponse> Coordinator::UnreserveBoards(
    const v1::BoardReservation& reservation) {
  TF_ASSIGN_OR_RETURN(std::vector<v1::BoardReservation> next,
                      placement_.Without(reservation));
  spdlog::info("{} no longer reserved", Placement::DescribeTarget(reservation));
  return SaveReservations(std::move(next));
}

// --- health checks ----------------------------------------------------------

bool Coordinator::HealthCheckDue(const BoardRuntime& board) const {
  return health_.Due(board.info, board.check_due, board.next_check,
                     clock_->Now());
}

bool Coordinator::GrantHealthCheck(BoardRuntime& board, v1::WorkItem* work) {
  const int64_t check = board.checks_run + 1;
  const absl::Time expires = clock_->Now() + options_.lease_duration;
  if (absl::Status st = health_.Work(board.info, check, expires, work);
      !st.ok()) {
    spdlog::error("health check of {}: {}", board.info.board_id(),
                  st.ToString());
    return false;
  }
  board.checks_run = check;
  board.lease_id = work->lease_id();
  board.check_expires = expires;
  board.info.set_current_lease_id(board.lease_id);
  // A quarantined board stays so until its re-check passes.
  if (board.info.state() != v1::BOARD_STATE_QUARANTINED) {
    board.info.set_state(v1::BOARD_STATE_BUSY);
  }
  spdlog::info("health check {} on {} ({})", board.lease_id,
               board.info.board_id(), health_.Golden(board.info.kind()).source);
  return true;
}

void Coordinator::RecordHealthCheck(Txn& txn, BoardRuntime& board,
                                    const v1::RoundResult* result,
                                    const std::string& detail) {
  const absl::Time now = clock_->Now();
  staging_.SaveBoard(txn, board.info.board_id());
  const HealthVerdict verdict =
      health_.Judge(board.info.kind(), result, detail);
  const bool passed = verdict.passed;
  const std::string& why = verdict.why;
  board.lease_id.clear();
  board.info.clear_current_lease_id();
  board.check_due = false;
  board.check_expires = absl::InfiniteFuture();
  const bool was_quarantined =
      board.info.state() == v1::BOARD_STATE_QUARANTINED;
  if (passed) {
    if (board.info.state() != v1::BOARD_STATE_DRAINING) {
      board.info.set_state(v1::BOARD_STATE_IDLE);
    }
    board.next_check = health_.NextCheck(now, /*passed=*/true);
    board.info.set_health_detail(absl::StrCat("health check passed: ", why));
    spdlog::info("board {} passed its health check: {}", board.info.board_id(),
                 why);
  } else {
    board.info.set_state(v1::BOARD_STATE_QUARANTINED);
    board.next_check = health_.NextCheck(now, /*passed=*/false);
    board.info.set_health_detail(health_.FailedDetail(board.info.kind(), why));
    spdlog::warn("board {} failed its health check, quarantined: {}",
                 board.info.board_id(), why);
    if (!was_quarantined && metrics_ != nullptr) {
      txn.after_commit.push_back(
          [this, info = board.info] { metrics_->BoardQuarantined(info); });
    }
  }
  if (metrics_ != nullptr) {
    txn.after_commit.push_back([this, info = board.info, passed] {
      metrics_->HealthCheckRecorded(info, passed);
    });
  }
  txn.writes.PutBoard(board.info);
}

// --- multi-workload sweeps (coordinator/workloads.h) ------------------------

v1::Round* Coordinator::NextMultiWorkloadRound(Txn& txn, SweepRuntime& s) {
  if (v1::Round* queued = SweepBook::FirstQueued(s); queued != nullptr) {
    return queued;
  }
  if (s.sweep.spec().objective() == v1::WORKLOAD_OBJECTIVE_ONE_CONFIG) {
    return NextOneConfigRounds(txn, s);
  }
  return NextPerWorkloadRound(txn, s);
}

v1::Round* Coordinator::NextPerWorkloadRound(Txn& txn, SweepRuntime& s) {
  const v1::SweepSpec& spec = s.sweep.spec();
  const int n = spec.workloads_size();
  const WorkloadViews& views = SyncedViews(s);
  // Boards go to the open workload with the fewest rounds, then spec order.
  std::vector<int> order(n);
  for (int i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&views](int a, int b) {
    return views.Candidates(a) < views.Candidates(b);
  });
  for (int i : order) {
    SyncedViews(s);  // a workload finished below cancels its rounds
    const v1::WorkloadProgress& w = s.sweep.workload_progress(i);
    if (w.done() || w.best_round() < 0 ||
        views.Candidates(i) >= spec.budget().max_rounds()) {
      continue;
    }
    SearchHistory history{s.op, &spec, &views.Workload(i), w.best_round(),
                          s.rewinds};
    std::vector<Candidate> proposed =
        s.workload_strategies[i]->Propose(history, 1);
    if (proposed.empty()) {
      if (views.InFlight(i) == 0) {
        Exhaustion why = s.workload_strategies[i]->Exhausted(history);
        decider_.FinishWorkload(txn, s, i, why.reason, std::move(why.detail));
        if (s.finished) return nullptr;
      }
      continue;
    }
    v1::Round* round =
        staging_.AddRound(txn, s, std::move(proposed.front()), i);
    s.sweep.set_candidates_proposed(s.sweep.candidates_proposed() + 1);
    return round;
  }
  return nullptr;
}

v1::Round* Coordinator::NextOneConfigRounds(Txn& txn, SweepRuntime& s) {
  const v1::SweepSpec& spec = s.sweep.spec();
  const size_t n = static_cast<size_t>(spec.workloads_size());
  if (s.sweep.best_round() < 0) return nullptr;  // every baseline first
  const int64_t configs = static_cast<int64_t>(s.rounds.size() / n) - 1;
  if (configs >= spec.budget().max_rounds()) return nullptr;
  SearchHistory history{s.op, &spec, &SyncedViews(s).Configs(),
                        s.sweep.best_round(), s.rewinds};
  std::vector<Candidate> proposed = s.strategy->Propose(history, 1);
  if (proposed.empty()) {
    if (configs == s.sweep.rounds_finished()) {
      Exhaustion why = s.strategy->Exhausted(history);
      decider_.Finish(txn, s, v1::SWEEP_STATE_SUCCEEDED, why.reason,
                      std::move(why.detail));
    }
    return nullptr;
  }
  // The configuration's rounds, one per workload; each one's parent is
  // the parent configuration's round of the same workload.
  const size_t first = s.rounds.size();
  Candidate& c = proposed.front();
  const int64_t parent = c.parent_round;
  for (size_t i = 0; i < n; ++i) {
    c.parent_round = parent + static_cast<int64_t>(i);
    staging_.AddRound(txn, s, c, static_cast<int>(i));
  }
  s.sweep.set_candidates_proposed(s.sweep.candidates_proposed() + 1);
  return &s.rounds[first];
}

}  // namespace tunefarm
