// Placement: who may use which board, and who goes first. It holds the
// board reservations (the policy file's first, then the admins'), the team
// quotas (the policy file's, overridden by the admins' stored ones) and the
// board time each team's recorded results used, and answers the placement
// questions: which team a board is reserved for, whether a board may serve
// a sweep, a team's quota and usage, and the weighted fair-share order in
// which sweeps are offered a board.
//
// Changes go through the Coordinator's transaction: Placement validates a
// change and computes the new list and its stored form; the Coordinator
// commits it, then applies it here (SetReservations, SetQuota,
// AddRecordedSeconds), and its undo puts the old value back.
//
// Owned by the Coordinator; used only on the control loop thread (not
// thread-safe).
#ifndef TUNEFARM_COORDINATOR_PLACEMENT_H_
#define TUNEFARM_COORDINATOR_PLACEMENT_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/core_state.h"
#include "coordinator/sweep_book.h"
#include "tunefarm/v1/farm.pb.h"
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

class Placement {
 public:
  // Meta keys of the admins' stored lists.
  static constexpr char kQuotasKey[] = "team_quotas";
  static constexpr char kReservationsKey[] = "board_reservations";

  // The policy file's quotas and reservations (marked from_policy here).
  Placement(v1::TeamQuota default_quota,
            std::map<std::string, v1::TeamQuota> quotas,
            std::vector<v1::BoardReservation> policy_reservations);

  // Adds what the admins stored (the meta values under the keys above, when
  // present); DATA_LOSS when one is not what it should be.
  absl::Status LoadStored(const std::optional<std::string>& reservations,
                          const std::optional<std::string>& quotas);

  // --- reservations ------------------------------------------------------
  const std::vector<v1::BoardReservation>& reservations() const {
    return reservations_;
  }
  void SetReservations(std::vector<v1::BoardReservation> reservations) {
    reservations_ = std::move(reservations);
  }
  // The team `board` is reserved for, "" when none: a reservation by board
  // id wins over a label pool, and the first matching pool wins.
  std::string ReservedFor(const v1::BoardInfo& board) const;
  // Whether `board` (its reserved_for set) may serve a sweep of `team` with
  // `selector`.
  static bool Allows(const v1::BoardInfo& board, const std::string& team,
                     const v1::BoardSelector& selector);
  // The reservations with `reservation` added, or replacing the one for the
  // same board or label set. INVALID_ARGUMENT for a malformed one,
  // FAILED_PRECONDITION when the policy file holds that target.
  absl::StatusOr<std::vector<v1::BoardReservation>> With(
      const v1::BoardReservation& reservation) const;
  // The reservations without the one for `reservation`'s target: NOT_FOUND
  // when none, FAILED_PRECONDITION when the policy file holds it.
  absl::StatusOr<std::vector<v1::BoardReservation>> Without(
      const v1::BoardReservation& reservation) const;
  // What is stored under kReservationsKey for `reservations`: the admins'.
  static std::string StoredReservations(
      const std::vector<v1::BoardReservation>& reservations);
  // "board a1/b0" or "boards labelled pool=x", for messages.
  static std::string DescribeTarget(const v1::BoardReservation& reservation);

  // --- quotas ------------------------------------------------------------
  // `team`'s quota, or the default one.
  const v1::TeamQuota& QuotaOf(const std::string& team) const;
  // Quotas by team (those set; others have the default).
  const std::map<std::string, v1::TeamQuota>& quotas() const { return quotas_; }
  // What is stored under kQuotasKey once `quota` is set; INVALID_ARGUMENT
  // naming the field for a malformed quota.
  absl::StatusOr<std::string> StoredQuotasWith(
      const v1::TeamQuota& quota) const;
  void SetQuota(const v1::TeamQuota& quota) { quotas_[quota.team()] = quota; }

  // --- usage and fair share ----------------------------------------------
  // Board seconds of recorded results, by team.
  const std::map<std::string, double>& recorded_seconds() const {
    return recorded_seconds_;
  }
  // `team`'s entry (nullopt: none), and putting one back (undo).
  std::optional<double> RecordedSeconds(const std::string& team) const;
  void RestoreRecordedSeconds(const std::string& team,
                              std::optional<double> before);
  void AddRecordedSeconds(const std::string& team, double seconds) {
    recorded_seconds_[team] += seconds;
  }
  // Board time `team` used: its recorded results plus the leases of its
  // sweeps running at `now_unix_ms`.
  double BoardSeconds(const std::string& team, const SweepBook::Sweeps& sweeps,
                      int64_t now_unix_ms) const;
  // Boards running a round of `team`'s sweeps.
  static int BoardsInUse(const std::string& team,
                         const SweepBook::Sweeps& sweeps);
  // `sweeps` in the order they are offered a board: weighted fair share
  // between teams (the team that used the least board time per unit of
  // weight first), then higher priority, then submission order. Boards
  // change hands only between rounds.
  std::vector<SweepRuntime*> FairShareOrder(const SweepBook::Sweeps& sweeps,
                                            int64_t now_unix_ms) const;

 private:
  v1::TeamQuota default_quota_;
  std::map<std::string, v1::TeamQuota> quotas_;
  // Policy-file reservations first, then the admins' (stored).
  std::vector<v1::BoardReservation> reservations_;
  std::map<std::string, double> recorded_seconds_;
};

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_PLACEMENT_H_
