#include "coordinator/lease_table.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/event_text.h"
#include "coordinator/keep_rule.h"
#include "coordinator/workloads.h"
#include "spdlog/spdlog.h"

namespace tunefarm {

v1::Round* LeaseTable::Live(const std::string& lease_id) {
  if (lease_id.empty()) return nullptr;
  const std::optional<LeaseId> id = LeaseId::Parse(lease_id);
  if (!id.has_value()) return nullptr;
  SweepRuntime* s = book_->Find(id->sweep_id);
  if (s == nullptr || id->round_id < 0 ||
      id->round_id >= static_cast<int64_t>(s->rounds.size())) {
    return nullptr;
  }
  v1::Round& r = s->rounds[id->round_id];
  return r.state() == v1::ROUND_STATE_LEASED && r.lease().lease_id() == lease_id
             ? &r
             : nullptr;
}

void LeaseTable::Grant(
    Txn& txn, SweepRuntime& s, v1::Round& round, BoardRuntime& board,
    bool ahead, const google::protobuf::RepeatedPtrField<std::string>& held,
    v1::WorkItem* work) {
  const absl::Time now = clock_->Now();
  staging_->Touch(txn, s);
  staging_->SaveRound(txn, s, round);
  staging_->SaveBoard(txn, board.info.board_id());
  round.set_attempts(round.attempts() + 1);
  v1::Lease* lease = round.mutable_lease();
  lease->set_epoch(round.attempts());
  lease->set_lease_id(
      LeaseId{s.sweep.sweep_id(), round.round_id(), lease->epoch()}.ToString());
  lease->set_board_id(board.info.board_id());
  lease->set_agent_id(board.info.agent_id());
  lease->set_granted_unix_ms(absl::ToUnixMillis(now));
  lease->set_expires_unix_ms(absl::ToUnixMillis(now + lease_duration_));
  round.set_state(v1::ROUND_STATE_LEASED);
  s.leased.insert(round.round_id());
  if (ahead) {
    board.prefetch_lease_ids.push_back(lease->lease_id());
  } else {
    board.lease_id = lease->lease_id();
    board.info.set_current_lease_id(lease->lease_id());
    board.info.set_state(v1::BOARD_STATE_BUSY);
  }
  txn.writes.PutRound(round);

  if (s.sweep.state() == v1::SWEEP_STATE_QUEUED) {
    s.sweep.set_state(v1::SWEEP_STATE_RUNNING);
    s.sweep.set_started_unix_ms(absl::ToUnixMillis(now));
    staging_->AddEvent(txn, s, v1::EVENT_KIND_STARTED,
                       absl::StrCat("sweep ", s.sweep.sweep_id(), " started"),
                       nullptr);
  }
  staging_->AddEvent(
      txn, s, v1::EVENT_KIND_ROUND_LEASED,
      absl::StrCat(RoundAndChange(round), " on ", board.info.board_id(),
                   ", epoch ", lease->epoch(), ahead ? " (prefetched)" : ""),
      &round);
  if (metrics_ != nullptr) {
    txn.after_commit.push_back(
        [this, waited = absl::ToDoubleSeconds(
                   now - absl::FromUnixMillis(round.created_unix_ms()))] {
          metrics_->LeaseGranted(waited);
        });
  }

  work->set_lease_id(lease->lease_id());
  work->set_epoch(lease->epoch());
  work->set_sweep_id(s.sweep.sweep_id());
  work->set_round_id(round.round_id());
  // The manifest is most of a work item: an agent that holds it gets its
  // digest alone.
  work->set_operator_digest(s.op_digest);
  const int held_read = std::min(held.size(), kMaxHeldManifests);
  if (s.op_digest.empty() ||
      std::find(held.begin(), held.begin() + held_read, s.op_digest) ==
          held.begin() + held_read) {
    *work->mutable_operator_() = *s.op;
  }
  *work->mutable_workload() = RoundWorkload(s.sweep.spec(), round);
  *work->mutable_params() = round.params();
  *work->mutable_measurement() = s.sweep.spec().measurement();
  if (round.remeasures() > 0) {
    // Re-measuring an inconclusive result: 4x the sample cap per time, at
    // least the old cap timed, and a stricter confidence for the extra look.
    v1::MeasurementPolicy* m = work->mutable_measurement();
    const int32_t cap = std::max(m->max_samples(), m->samples());
    const int32_t scale = 1 << (2 * std::min(round.remeasures(), 3));
    m->set_samples(std::max(m->samples(), cap));
    m->set_max_samples(cap * scale);
    m->set_confidence(std::max(m->confidence(), kRemeasureConfidence));
  }
  work->set_lease_expires_unix_ms(lease->expires_unix_ms());
  work->set_lease_duration_ms(absl::ToInt64Milliseconds(lease_duration_));
  // One input seed per sweep: every round measures the same inputs, so the
  // boards compute the reference (a function of workload and seed) once per
  // sweep instead of once per round (fp64 on the host for large workloads).
  work->set_seed(s.sweep.spec().strategy().seed() * 1000003u);
  // A/B: the board times the parent variant alongside, in this lease.
  if (round.round_id() != 0 && round.parent_round() >= 0 &&
      round.parent_round() < static_cast<int64_t>(s.rounds.size()) &&
      s.sweep.spec().measurement().mode() != v1::MEASUREMENT_MODE_INDEPENDENT) {
    work->set_has_reference(true);
    work->set_reference_round(round.parent_round());
    *work->mutable_reference_params() = s.rounds[round.parent_round()].params();
  }
}

void LeaseTable::FreeBoard(Txn& txn, const std::string& board_id,
                           const std::string& lease_id) {
  auto it = registry_->boards().find(board_id);
  if (it == registry_->boards().end() || lease_id.empty()) return;
  staging_->SaveBoard(txn, board_id);
  BoardRuntime& board = it->second;
  auto ahead = std::find(board.prefetch_lease_ids.begin(),
                         board.prefetch_lease_ids.end(), lease_id);
  if (ahead != board.prefetch_lease_ids.end()) {
    board.prefetch_lease_ids.erase(ahead);
    return;
  }
  if (board.lease_id != lease_id) return;
  board.lease_id.clear();
  board.info.clear_current_lease_id();
  // The lease waiting behind it becomes the current one. Its board time (and
  // expiry) start now: the wait was not its own.
  PruneAhead(board);
  if (!board.prefetch_lease_ids.empty()) {
    const std::string next = board.prefetch_lease_ids.front();
    PromoteAhead(txn, board, next);
  }
  if (board.lease_id.empty() && board.info.state() == v1::BOARD_STATE_BUSY) {
    board.info.set_state(v1::BOARD_STATE_IDLE);
  }
}

bool LeaseTable::PromoteAhead(Txn& txn, BoardRuntime& board,
                              const std::string& lease_id) {
  auto ahead = std::find(board.prefetch_lease_ids.begin(),
                         board.prefetch_lease_ids.end(), lease_id);
  if (ahead == board.prefetch_lease_ids.end()) return false;
  v1::Round* round = Live(lease_id);
  if (round == nullptr) return false;
  // An agent runs its leases ahead in the order their builds finish: the one
  // it runs is current, and the one that was waits ahead (its build goes
  // on). The wait ahead was not its board time, which starts now.
  staging_->SaveBoard(txn, board.info.board_id());
  staging_->SaveRound(txn, *book_->Find(round->sweep_id()), *round);
  board.prefetch_lease_ids.erase(ahead);
  if (!board.lease_id.empty() && Live(board.lease_id) != nullptr) {
    board.prefetch_lease_ids.insert(board.prefetch_lease_ids.begin(),
                                    board.lease_id);
  }
  board.lease_id = lease_id;
  board.info.set_current_lease_id(lease_id);
  // A quarantined or draining board keeps its state.
  if (board.info.state() == v1::BOARD_STATE_IDLE) {
    board.info.set_state(v1::BOARD_STATE_BUSY);
  }
  const absl::Time now = clock_->Now();
  round->mutable_lease()->set_granted_unix_ms(absl::ToUnixMillis(now));
  round->mutable_lease()->set_expires_unix_ms(
      absl::ToUnixMillis(now + lease_duration_));
  return true;
}

void LeaseTable::RequeueAhead(Txn& txn, BoardRuntime& board,
                              const std::string& why) {
  staging_->SaveBoard(txn, board.info.board_id());
  // A copy: requeueing frees each lease, which erases it from the board's.
  const std::vector<std::string> held = board.prefetch_lease_ids;
  for (const std::string& id : held) {
    if (v1::Round* ahead = Live(id)) {
      Requeue(txn, *book_->Find(ahead->sweep_id()), *ahead, why);
    }
  }
  board.prefetch_lease_ids.clear();
}

void LeaseTable::PruneAhead(BoardRuntime& board) {
  board.prefetch_lease_ids.erase(
      std::remove_if(
          board.prefetch_lease_ids.begin(), board.prefetch_lease_ids.end(),
          [&](const std::string& id) { return Live(id) == nullptr; }),
      board.prefetch_lease_ids.end());
}

void LeaseTable::Requeue(Txn& txn, SweepRuntime& s, v1::Round& round,
                         const std::string& why) {
  staging_->SaveRound(txn, s, round);
  FreeBoard(txn, round.lease().board_id(), round.lease().lease_id());
  round.set_state(v1::ROUND_STATE_QUEUED);
  s.queued_from =
      std::min(s.queued_from, static_cast<size_t>(round.round_id()));
  txn.writes.PutRound(round);
  staging_->AddEvent(txn, s, v1::EVENT_KIND_ROUND_REQUEUED,
                     absl::StrCat("round ", round.round_id(),
                                  " re-queued (epoch ", round.lease().epoch(),
                                  " on ", round.lease().board_id(), "): ", why),
                     &round);
  spdlog::warn("{} round {} re-queued: {}", s.sweep.sweep_id(),
               round.round_id(), why);
}

std::optional<int64_t> LeaseTable::Renew(const LeaseId& id,
                                         const std::string& lease_id,
                                         int64_t epoch) {
  SweepRuntime* s = book_->Find(id.sweep_id);
  if (s == nullptr || id.round_id < 0 ||
      id.round_id >= static_cast<int64_t>(s->rounds.size())) {
    return std::nullopt;  // the sweep ended
  }
  v1::Round& r = s->rounds[id.round_id];
  if (r.state() != v1::ROUND_STATE_LEASED || r.lease().lease_id() != lease_id ||
      r.lease().epoch() != epoch) {
    return std::nullopt;
  }
  const int64_t expires = absl::ToUnixMillis(clock_->Now() + lease_duration_);
  r.mutable_lease()->set_expires_unix_ms(expires);
  return expires;
}

bool LeaseTable::RequeueExpired(Txn& txn, SweepRuntime& s, absl::Time now) {
  bool any = false;
  for (const int64_t id : s.leased) {
    if (id >= static_cast<int64_t>(s.rounds.size())) continue;
    v1::Round& r = s.rounds[id];
    if (r.state() == v1::ROUND_STATE_LEASED &&
        r.lease().expires_unix_ms() < absl::ToUnixMillis(now)) {
      if (metrics_ != nullptr) {
        txn.after_commit.push_back([this] { metrics_->LeaseExpired(); });
      }
      Requeue(txn, s, r, "lease expired without a result");
      any = true;
    }
  }
  return any;
}

}  // namespace tunefarm
