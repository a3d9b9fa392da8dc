// BoardRegistry: the boards and agents the coordinator knows (registered,
// or recovered from the store and LOST until their agent registers again),
// by id, and what happens to them: an agent's registration (its boards'
// leases adopted or re-queued), heartbeats (the agent's word on health and
// on the lease it runs), the loss of a silent agent's boards, and an
// admin's drain and admit. It also answers which boards fit a selector and
// how many boards are in each state.
//
// Its calls stage into the caller's Txn (a board's or agent's record saved
// through Staging before it changes, leases re-queued through the
// LeaseTable) and never commit: the Coordinator owns the transaction.
// Stamping an agent's last call (NoteSeen, Heartbeat, CallerBoard) is not
// staged: hearing from an agent is true whether or not the call commits.
//
// Owned by the Coordinator; used only on the control loop thread (not
// thread-safe). The parts in BoardRegistry::Parts must outlive it; they
// may be built after it (they point into it), since it uses them only in
// its calls.
#ifndef TUNEFARM_COORDINATOR_BOARD_REGISTRY_H_
#define TUNEFARM_COORDINATOR_BOARD_REGISTRY_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/core_state.h"
#include "tunefarm/v1/agent.pb.h"
#include "tunefarm/v1/farm.pb.h"
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

class AgentLiveness;
class FarmMetrics;
class HealthChecker;
class LeaseTable;
class Placement;
class Staging;
class SweepBook;

class BoardRegistry {
 public:
  using Boards = std::map<std::string, BoardRuntime>;
  using Agents = std::map<std::string, AgentRuntime>;

  // What its calls work through (the Coordinator's).
  struct Parts {
    SweepBook* book = nullptr;  // the leased rounds of a board
    Staging* staging = nullptr;
    LeaseTable* leases = nullptr;
    const Placement* placement = nullptr;  // reservations
    const HealthChecker* health = nullptr;
    Clock* clock = nullptr;
    FarmMetrics* metrics = nullptr;  // may be null
  };

  explicit BoardRegistry(Parts parts) : parts_(parts) {}

  // --- the calls ----------------------------------------------------------
  // Takes the boards the store holds after a restart, each LOST (no lease,
  // its reservation as placement says) until its agent registers again.
  void Recover(std::vector<v1::BoardInfo> boards);
  // Stages `request`: its boards registered to its agent. A live lease on
  // one of them that the agent claims neither as current nor as ahead is
  // re-queued (the agent restarted); one it claims that this coordinator
  // recovered is adopted. An admin's drain outlives the re-registration; a
  // board of a kind with a golden checks itself first. INVALID_ARGUMENT for
  // a request without an agent id or boards, or with an empty or duplicate
  // board id; ALREADY_EXISTS for a board another live agent registered.
  absl::Status Register(Txn& txn, const v1::RegisterAgentRequest& request);
  // Stages a heartbeat: the agent's word on its boards' health (a board it
  // quarantines is quarantined), and on the lease each runs (one held
  // ahead becomes current; one not held is named in
  // response.revoked_lease_ids). Readmitted boards are named in
  // response.readmitted_board_ids. NOT_FOUND for an agent not registered
  // (it must register again). True when a board's state changed.
  absl::StatusOr<bool> Heartbeat(Txn& txn, const v1::HeartbeatRequest& request,
                                 v1::HeartbeatResponse* response);
  // The board a call of `agent_id` is about, the call noted as heard from
  // the agent: NOT_FOUND when the agent is not registered, or the board is
  // not registered by it.
  absl::StatusOr<BoardRuntime*> CallerBoard(const std::string& agent_id,
                                            const std::string& board_id);
  // A call from `agent_id` (when registered) was heard now.
  void NoteSeen(const std::string& agent_id);
  // Stages the loss of every agent not heard from for longer than
  // `timeout` at `now` (by this registry, or by `liveness` when not null):
  // its boards LOST, their leases (ahead ones first) re-queued, the agent
  // forgotten. True when any board was lost.
  bool LoseSilentAgents(Txn& txn, absl::Time now, absl::Duration timeout,
                        const AgentLiveness* liveness);
  // Stages an admin's drain: the board runs its current round to the end
  // and gets nothing more; the rounds it holds ahead are re-queued.
  // NOT_FOUND for an unknown board.
  absl::StatusOr<BoardRuntime*> Drain(Txn& txn,
                                      const v1::BoardAdminRequest& request);
  // Stages an admin's admission: a drained or quarantined board back in
  // service (its agent told to lift its own quarantine flag), a pending or
  // failed health check replaced. NOT_FOUND for an unknown board.
  absl::StatusOr<BoardRuntime*> Admit(Txn& txn,
                                      const v1::BoardAdminRequest& request);
  // Stages every board's reserved_for as placement now says (the
  // reservations changed).
  void RefreshReservations(Txn& txn);

  // --- the records --------------------------------------------------------
  Boards& boards() { return boards_; }
  const Boards& boards() const { return boards_; }
  Agents& agents() { return agents_; }
  const Agents& agents() const { return agents_; }

  // Whether `board` fits `selector`: its kind, chip and every label.
  static bool Matches(const v1::BoardInfo& board,
                      const v1::BoardSelector& selector);
  // The records of the boards that fit `selector`, by id.
  std::vector<v1::BoardInfo> List(const v1::BoardSelector& selector) const;
  // Boards by state name ("idle", "busy", "lost", "quarantined",
  // "draining"; every one present, 0 when none).
  std::map<std::string, int> CountByState() const;
  // "idle", "busy", ...; "unknown" for anything else.
  static std::string StateName(v1::BoardState state);

 private:
  const Parts parts_;
  Boards boards_;
  Agents agents_;
};

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_BOARD_REGISTRY_H_
