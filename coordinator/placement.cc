#include "coordinator/placement.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tunefarm {
namespace {

// Whether two reservations name the same board or the same label pool.
bool SameTarget(const v1::BoardReservation& a, const v1::BoardReservation& b) {
  if (a.board_id() != b.board_id() || a.labels_size() != b.labels_size()) {
    return false;
  }
  for (const auto& [key, value] : a.labels()) {
    auto it = b.labels().find(key);
    if (it == b.labels().end() || it->second != value) return false;
  }
  return true;
}

}  // namespace

Placement::Placement(v1::TeamQuota default_quota,
                     std::map<std::string, v1::TeamQuota> quotas,
                     std::vector<v1::BoardReservation> policy_reservations)
    : default_quota_(std::move(default_quota)),
      quotas_(std::move(quotas)),
      reservations_(std::move(policy_reservations)) {
  for (v1::BoardReservation& r : reservations_) r.set_from_policy(true);
}

absl::Status Placement::LoadStored(
    const std::optional<std::string>& reservations,
    const std::optional<std::string>& quotas) {
  if (reservations.has_value()) {
    v1::ListReservationsResponse stored;
    if (!stored.ParseFromString(*reservations)) {
      return absl::DataLossError(absl::StrCat("meta ", kReservationsKey,
                                              " is not a reservation list"));
    }
    for (const v1::BoardReservation& r : stored.reservations()) {
      reservations_.push_back(r);
    }
  }
  if (quotas.has_value()) {
    v1::ListTeamsResponse stored;
    if (!stored.ParseFromString(*quotas)) {
      return absl::DataLossError(
          absl::StrCat("meta ", kQuotasKey, " is not a quota list"));
    }
    // Quotas an admin set at run time win over the policy file's.
    for (const v1::TeamUsage& u : stored.teams()) {
      quotas_[u.quota().team()] = u.quota();
    }
  }
  return absl::OkStatus();
}

std::string Placement::ReservedFor(const v1::BoardInfo& board) const {
  std::string pool_team;
  for (const v1::BoardReservation& r : reservations_) {
    if (!r.board_id().empty()) {
      if (r.board_id() == board.board_id()) return r.team();
      continue;
    }
    if (!pool_team.empty()) continue;
    bool all = true;
    for (const auto& [key, value] : r.labels()) {
      auto it = board.labels().find(key);
      all = all && it != board.labels().end() && it->second == value;
    }
    if (all) pool_team = r.team();
  }
  return pool_team;
}

bool Placement::Allows(const v1::BoardInfo& board, const std::string& team,
                       const v1::BoardSelector& selector) {
  const std::string& reserved = board.reserved_for();
  if (!reserved.empty()) return reserved == team;
  return !selector.reserved_only();
}

absl::StatusOr<std::vector<v1::BoardReservation>> Placement::With(
    const v1::BoardReservation& reservation) const {
  if (reservation.board_id().empty() == reservation.labels().empty()) {
    return absl::InvalidArgumentError(
        "reservation: name exactly one of board_id and labels");
  }
  if (reservation.team().empty()) {
    return absl::InvalidArgumentError("reservation.team: must not be empty");
  }
  std::vector<v1::BoardReservation> next = reservations_;
  auto it = std::find_if(next.begin(), next.end(),
                         [&](const v1::BoardReservation& r) {
                           return SameTarget(r, reservation);
                         });
  if (it != next.end() && it->from_policy()) {
    return absl::FailedPreconditionError(
        absl::StrCat(DescribeTarget(reservation),
                     " is reserved by the policy file: edit it there"));
  }
  v1::BoardReservation r = reservation;
  r.set_from_policy(false);
  if (it != next.end()) {
    *it = std::move(r);
  } else {
    next.push_back(std::move(r));
  }
  return next;
}

absl::StatusOr<std::vector<v1::BoardReservation>> Placement::Without(
    const v1::BoardReservation& reservation) const {
  std::vector<v1::BoardReservation> next = reservations_;
  auto it = std::find_if(next.begin(), next.end(),
                         [&](const v1::BoardReservation& r) {
                           return SameTarget(r, reservation);
                         });
  if (it == next.end()) {
    return absl::NotFoundError(
        absl::StrCat("no reservation for ", DescribeTarget(reservation)));
  }
  if (it->from_policy()) {
    return absl::FailedPreconditionError(
        absl::StrCat(DescribeTarget(reservation),
                     " is reserved by the policy file: edit it there"));
  }
  next.erase(it);
  return next;
}

std::string Placement::StoredReservations(
    const std::vector<v1::BoardReservation>& reservations) {
  v1::ListReservationsResponse stored;
  for (const v1::BoardReservation& r : reservations) {
    if (!r.from_policy()) *stored.add_reservations() = r;
  }
  return stored.SerializeAsString();
}

std::string Placement::DescribeTarget(const v1::BoardReservation& r) {
  if (!r.board_id().empty()) return absl::StrCat("board ", r.board_id());
  std::vector<std::string> labels;
  for (const auto& [key, value] : r.labels()) {
    labels.push_back(absl::StrCat(key, "=", value));
  }
  std::sort(labels.begin(), labels.end());
  return absl::StrCat("boards labelled ", absl::StrJoin(labels, ","));
}

const v1::TeamQuota& Placement::QuotaOf(const std::string& team) const {
  auto it = quotas_.find(team);
  return it != quotas_.end() ? it->second : default_quota_;
}

absl::StatusOr<std::string> Placement::StoredQuotasWith(
    const v1::TeamQuota& quota) const {
  if (quota.team().empty()) {
    return absl::InvalidArgumentError("quota.team: must not be empty");
  }
  if (!(quota.weight() >= 0 && quota.weight() <= 1e6)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "quota.weight: must be between 0 and 1e6, got ", quota.weight()));
  }
  if (quota.max_boards() < 0 || quota.max_active_sweeps() < 0) {
    return absl::InvalidArgumentError(
        "quota.max_boards, quota.max_active_sweeps: must not be negative "
        "(0 = unlimited)");
  }
  v1::ListTeamsResponse stored;
  for (const auto& [team, q] : quotas_) {
    if (team != quota.team()) *stored.add_teams()->mutable_quota() = q;
  }
  *stored.add_teams()->mutable_quota() = quota;
  return stored.SerializeAsString();
}

std::optional<double> Placement::RecordedSeconds(
    const std::string& team) const {
  auto it = recorded_seconds_.find(team);
  if (it == recorded_seconds_.end()) return std::nullopt;
  return it->second;
}

void Placement::RestoreRecordedSeconds(const std::string& team,
                                       std::optional<double> before) {
  if (before.has_value()) {
    recorded_seconds_[team] = *before;
  } else {
    recorded_seconds_.erase(team);
  }
}

double Placement::BoardSeconds(const std::string& team,
                               const SweepBook::Sweeps& sweeps,
                               int64_t now_unix_ms) const {
  double total = RecordedSeconds(team).value_or(0);
  for (const auto& [id, s] : sweeps) {
    if (s->sweep.spec().team() != team) continue;
    for (const int64_t id : s->leased) {
      if (id >= static_cast<int64_t>(s->rounds.size())) continue;
      const v1::Round& r = s->rounds[id];
      if (r.state() == v1::ROUND_STATE_LEASED) {
        total +=
            std::max<int64_t>(0, now_unix_ms - r.lease().granted_unix_ms()) /
            1e3;
      }
    }
  }
  return total;
}

int Placement::BoardsInUse(const std::string& team,
                           const SweepBook::Sweeps& sweeps) {
  int n = 0;
  for (const auto& [id, s] : sweeps) {
    if (s->sweep.spec().team() != team) continue;
    for (const int64_t id : s->leased) {
      n += id < static_cast<int64_t>(s->rounds.size()) &&
                   s->rounds[id].state() == v1::ROUND_STATE_LEASED
               ? 1
               : 0;
    }
  }
  return n;
}

std::vector<SweepRuntime*> Placement::FairShareOrder(
    const SweepBook::Sweeps& sweeps, int64_t now_unix_ms) const {
  std::map<std::string, double> share;
  for (const auto& [id, s] : sweeps) share[s->sweep.spec().team()] = 0;
  // One team has nothing to share with.
  if (share.size() > 1) {
    for (auto& [team, value] : share) {
      const double w = QuotaOf(team).weight() > 0 ? QuotaOf(team).weight() : 1;
      value = BoardSeconds(team, sweeps, now_unix_ms) / w;
    }
  }
  std::vector<SweepRuntime*> order;
  for (const auto& [id, s] : sweeps) order.push_back(s.get());
  std::stable_sort(order.begin(), order.end(),
                   [&share](const SweepRuntime* a, const SweepRuntime* b) {
                     const double sa = share[a->sweep.spec().team()];
                     const double sb = share[b->sweep.spec().team()];
                     if (sa != sb) return sa < sb;
                     return a->sweep.spec().priority() >
                            b->sweep.spec().priority();
                   });
  return order;
}

}  // namespace tunefarm
