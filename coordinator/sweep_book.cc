#include "coordinator/sweep_book.h"

#include <algorithm>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "coordinator/strategy.h"

namespace tunefarm {

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
  // Rounds are cancelled only when the sweep ends, and every candidate
  // result recorded counts in rounds_finished.
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
