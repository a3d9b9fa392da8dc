#include "coordinator/sweep_book.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/digest.h"
#include "common/status_macros.h"
#include "coordinator/decider.h"
#include "coordinator/placement.h"
#include "coordinator/spec.h"
#include "coordinator/staging.h"
#include "coordinator/strategy.h"
#include "coordinator/workloads.h"
#include "google/protobuf/util/message_differencer.h"
#include "spdlog/spdlog.h"

namespace tunefarm {
namespace {

bool IsFinal(v1::SweepState state) {
  return state == v1::SWEEP_STATE_SUCCEEDED ||
         state == v1::SWEEP_STATE_FAILED || state == v1::SWEEP_STATE_CANCELLED;
}

}  // namespace

absl::StatusOr<SweepBook::Submission> SweepBook::Submit(
    Txn& txn, const v1::SubmitSweepRequest& request, const Principal& caller) {
  v1::SweepSpec spec = request.spec();
  if (!request.spec_yaml().empty()) {
    TF_ASSIGN_OR_RETURN(spec, ParseSweepSpec(request.spec_yaml()));
  }
  TF_ASSIGN_OR_RETURN(spec, ValidateSweepSpec(std::move(spec), *catalog_));
  if (!caller.CanAccessTeam(spec.team())) {
    return absl::PermissionDeniedError(absl::StrCat(
        caller.name, " may not submit sweeps for team '", spec.team(), "'"));
  }
  if (request.idempotency_key().size() > 128) {
    return absl::InvalidArgumentError(
        "idempotency_key: longer than 128 characters");
  }
  const std::string idem_key =
      request.idempotency_key().empty()
          ? ""
          : IdempotencyKey(spec.team(), request.idempotency_key());
  if (!idem_key.empty()) {
    TF_ASSIGN_OR_RETURN(auto existing_id, parts_.store->GetMeta(idem_key));
    if (existing_id.has_value()) {
      TF_ASSIGN_OR_RETURN(v1::Sweep existing,
                          parts_.store->GetSweep(*existing_id));
      if (!google::protobuf::util::MessageDifferencer::Equals(existing.spec(),
                                                              spec)) {
        return absl::AlreadyExistsError(absl::StrCat(
            "idempotency_key '", request.idempotency_key(),
            "' was used for sweep ", *existing_id, " with a different spec"));
      }
      Submission found;
      found.existing = std::move(existing);
      return found;
    }
  }

  const v1::TeamQuota& quota = parts_.placement->QuotaOf(spec.team());
  if (quota.max_active_sweeps() > 0) {
    const int active = ActiveOf(spec.team());
    if (active >= quota.max_active_sweeps()) {
      return absl::ResourceExhaustedError(
          absl::StrCat("team '", spec.team(), "' already has ", active,
                       " queued or running sweeps, its quota is ",
                       quota.max_active_sweeps()));
    }
  }

  // A full disk refuses new work (the answer to an idempotent retry above
  // is only a read).
  TF_RETURN_IF_ERROR(parts_.store->Writable());

  Clock* clock = parts_.clock;
  v1::Sweep sweep;
  sweep.set_sweep_id(NextId());
  *sweep.mutable_spec() = spec;
  sweep.set_state(v1::SWEEP_STATE_QUEUED);
  sweep.set_submitted_unix_ms(clock->NowUnixMs());
  sweep.set_best_round(-1);
  sweep.set_next_round_id(WorkloadCount(spec));
  for (const v1::Workload& workload : spec.workloads()) {
    v1::WorkloadProgress* w = sweep.add_workload_progress();
    w->set_workload(workload.name());
    w->set_best_round(-1);
  }
  sweep.set_idempotency_key(request.idempotency_key());
  sweep.set_simulated(spec.boards().kind() == "sim");
  TF_ASSIGN_OR_RETURN(SweepRuntime * s, Load(sweep));
  txn.undo.push_back([this, id = sweep.sweep_id()] { Erase(id); });

  // One baseline round per workload (round i measures workload i).
  for (int i = 0; i < WorkloadCount(spec); ++i) {
    v1::Round baseline;
    baseline.set_sweep_id(sweep.sweep_id());
    baseline.set_round_id(i);
    baseline.set_parent_round(-1);
    *baseline.mutable_params() = spec.baseline_params();
    baseline.set_stage("baseline");
    baseline.set_state(v1::ROUND_STATE_QUEUED);
    baseline.set_created_unix_ms(clock->NowUnixMs());
    if (IsMultiWorkload(spec)) {
      baseline.set_workload(spec.workloads(i).name());
      baseline.set_workload_index(i);
    }
    s->rounds.push_back(baseline);
    txn.writes.PutRound(baseline);
  }
  txn.writes.PutMeta(kNextSweepKey, StoredNextNumber());
  if (!idem_key.empty()) txn.writes.PutMeta(idem_key, sweep.sweep_id());
  parts_.staging->AddEvent(
      txn, *s, v1::EVENT_KIND_SUBMITTED,
      absl::StrCat("sweep ", sweep.sweep_id(), " submitted by team ",
                   spec.team(), ": ", spec.operator_name(), " on ",
                   absl::StrJoin(WorkloadNames(spec), ", "), ", strategy ",
                   spec.strategy().name()),
      nullptr);
  Submission staged;
  staged.staged = s;
  return staged;
}

absl::StatusOr<v1::Sweep> SweepBook::Cancel(
    Txn& txn, const v1::CancelSweepRequest& request, const Principal& caller) {
  SweepRuntime* s = Find(request.sweep_id());
  if (s != nullptr && !caller.CanAccessTeam(s->sweep.spec().team())) {
    return SweepNotFound(request.sweep_id());
  }
  if (s == nullptr) {
    TF_ASSIGN_OR_RETURN(v1::Sweep sweep,
                        parts_.store->GetSweep(request.sweep_id()));
    if (!caller.CanAccessTeam(sweep.spec().team())) {
      return SweepNotFound(request.sweep_id());
    }
    return absl::FailedPreconditionError(
        absl::StrCat("sweep ", sweep.sweep_id(), " has already ended (",
                     v1::SweepState_Name(sweep.state()), ")"));
  }
  parts_.decider->Finish(
      txn, *s, v1::SWEEP_STATE_CANCELLED, v1::TERMINATION_CANCELLED,
      request.reason().empty() ? "cancelled by the user"
                               : absl::StrCat("cancelled: ", request.reason()));
  return s->sweep;
}

absl::Status SweepBook::Recover(Txn& txn, absl::Time grace_until) {
  Store* store = parts_.store;
  TF_ASSIGN_OR_RETURN(auto next, store->GetMeta(kNextSweepKey));
  TF_RETURN_IF_ERROR(LoadNextNumber(next));
  TF_ASSIGN_OR_RETURN(std::vector<v1::Sweep> sweeps, store->ListSweeps());
  for (const v1::Sweep& sweep : sweeps) {
    if (IsFinal(sweep.state())) continue;
    auto rt = Load(sweep);
    if (!rt.ok()) {
      // The operator may have been removed: fail this sweep the normal way
      // (rounds closed, FINISHED event for watchers), keep the rest.
      spdlog::error("cannot resume {}: {}", sweep.sweep_id(),
                    rt.status().ToString());
      TF_ASSIGN_OR_RETURN(std::vector<v1::Round> rounds,
                          store->ListRounds(sweep.sweep_id()));
      SweepRuntime* f = AddUnrunnable(sweep, std::move(rounds));
      parts_.decider->Finish(txn, *f, v1::SWEEP_STATE_FAILED,
                             v1::TERMINATION_UNSPECIFIED,
                             absl::StrCat("cannot resume after a restart: ",
                                          rt.status().message()));
      continue;
    }
    SweepRuntime& s = **rt;
    TF_ASSIGN_OR_RETURN(std::vector<v1::Round> rounds,
                        store->ListRounds(sweep.sweep_id()));
    // Give the agents that hold leases time to reconnect and report.
    TF_RETURN_IF_ERROR(Resume(s, std::move(rounds), grace_until));
    spdlog::info("resumed sweep {} ({} rounds)", sweep.sweep_id(),
                 s.rounds.size());
  }
  return absl::OkStatus();
}

absl::Status SweepBook::LoadNextNumber(
    const std::optional<std::string>& stored) {
  if (stored.has_value() && !absl::SimpleAtoi(*stored, &next_number_)) {
    return absl::DataLossError(
        absl::StrCat("meta ", kNextSweepKey, " is not a number: ", *stored));
  }
  return absl::OkStatus();
}

std::string SweepBook::NextId() const {
  return absl::StrFormat("sw-%06d", next_number_);
}

std::string SweepBook::StoredNextNumber() const {
  return absl::StrCat(next_number_ + 1);
}

std::string SweepBook::IdempotencyKey(const std::string& team,
                                      const std::string& key) {
  return absl::StrCat("idempotency/", team, "/", key);
}

SweepRuntime* SweepBook::Find(const std::string& sweep_id) {
  auto it = sweeps_.find(sweep_id);
  return it == sweeps_.end() ? nullptr : it->second.get();
}

v1::Round* SweepBook::FirstQueued(SweepRuntime& s) {
  // Rounds leave QUEUED in any order, so the hint only moves up past rounds
  // that are not queued.
  while (s.queued_from < s.rounds.size() &&
         s.rounds[s.queued_from].state() != v1::ROUND_STATE_QUEUED) {
    ++s.queued_from;
  }
  return s.queued_from < s.rounds.size() ? &s.rounds[s.queued_from] : nullptr;
}

int64_t SweepBook::CandidatesInFlight(const SweepRuntime& s) {
  // Rounds are cancelled only when the search or the sweep ends, and every
  // candidate result recorded counts in rounds_finished.
  const int64_t candidates = static_cast<int64_t>(s.rounds.size()) - 1;
  return std::max<int64_t>(0, candidates - s.sweep.rounds_finished());
}

void SweepBook::Retire(const std::string& sweep_id) {
  auto it = sweeps_.find(sweep_id);
  if (it == sweeps_.end()) return;
  retired_rounds_ += static_cast<int64_t>(it->second->rounds.size());
  retired_.push_back(std::move(it->second));
  sweeps_.erase(it);
}

int64_t SweepBook::FreeRetired(int64_t max_rounds) {
  while (!retired_.empty() && max_rounds > 0) {
    std::vector<v1::Round>& rounds = retired_.back()->rounds;
    const int64_t n =
        std::min<int64_t>(max_rounds, static_cast<int64_t>(rounds.size()));
    rounds.resize(rounds.size() - static_cast<size_t>(n));
    max_rounds -= n;
    retired_rounds_ -= n;
    if (rounds.empty()) retired_.pop_back();
  }
  return retired_rounds_;
}

int SweepBook::ActiveOf(const std::string& team) const {
  int active = 0;
  for (const auto& [id, s] : sweeps_) {
    active += s->sweep.spec().team() == team ? 1 : 0;
  }
  return active;
}

absl::StatusOr<SweepRuntime*> SweepBook::Load(const v1::Sweep& sweep) {
  auto rt = std::make_unique<SweepRuntime>();
  rt->sweep = sweep;
  TF_ASSIGN_OR_RETURN(const v1::OperatorManifest* op,
                      catalog_->Find(sweep.spec().operator_name()));
  rt->projected = ProjectManifest(*op, sweep.spec().boards().kind());
  rt->op = &rt->projected;
  rt->op_digest = MessageDigest(rt->projected);
  TF_ASSIGN_OR_RETURN(rt->strategy, NewStrategy(sweep.spec(), *rt->op));
  if (sweep.spec().objective() == v1::WORKLOAD_OBJECTIVE_PER_WORKLOAD) {
    for (int i = 0; i < sweep.spec().workloads_size(); ++i) {
      TF_ASSIGN_OR_RETURN(rt->workload_strategies.emplace_back(),
                          NewStrategy(sweep.spec(), *rt->op));
    }
  }
  SweepRuntime* raw = rt.get();
  sweeps_[sweep.sweep_id()] = std::move(rt);
  return raw;
}

SweepRuntime* SweepBook::AddUnrunnable(const v1::Sweep& sweep,
                                       std::vector<v1::Round> rounds) {
  auto rt = std::make_unique<SweepRuntime>();
  rt->sweep = sweep;
  rt->rounds = std::move(rounds);
  SweepRuntime* raw = rt.get();
  sweeps_[sweep.sweep_id()] = std::move(rt);
  return raw;
}

absl::Status SweepBook::Resume(SweepRuntime& s, std::vector<v1::Round> rounds,
                               absl::Time grace_until) {
  s.rounds = std::move(rounds);
  const int64_t grace = absl::ToUnixMillis(grace_until);
  for (size_t i = 0; i < s.rounds.size(); ++i) {
    if (s.rounds[i].round_id() != static_cast<int64_t>(i)) {
      return absl::DataLossError(
          absl::StrCat("sweep ", s.sweep.sweep_id(),
                       ": round ids are not contiguous at ", i));
    }
    v1::Round& r = s.rounds[i];
    if (r.state() == v1::ROUND_STATE_LEASED) {
      s.leased.insert(r.round_id());
      r.mutable_lease()->set_expires_unix_ms(
          std::max(r.lease().expires_unix_ms(), grace));
    }
  }
  return absl::OkStatus();
}

}  // namespace tunefarm
