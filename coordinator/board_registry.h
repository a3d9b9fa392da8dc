// BoardRegistry: the boards and agents the coordinator knows (registered,
// or recovered from the store and LOST until their agent registers again),
// by id. It answers which boards fit a selector and how many boards are in
// each state. Registering, heartbeats, loss and drain/admit are staged by
// the Coordinator in its transaction, which saves a board's or agent's
// record for undo before changing it here.
//
// Owned by the Coordinator; used only on the control loop thread (not
// thread-safe).
#ifndef TUNEFARM_COORDINATOR_BOARD_REGISTRY_H_
#define TUNEFARM_COORDINATOR_BOARD_REGISTRY_H_

#include <map>
#include <string>
#include <vector>

#include "coordinator/core_state.h"
#include "tunefarm/v1/farm.pb.h"
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

class BoardRegistry {
 public:
  using Boards = std::map<std::string, BoardRuntime>;
  using Agents = std::map<std::string, AgentRuntime>;

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
  // Every board's record, by id.
  std::vector<v1::BoardInfo> Infos() const;
  // "idle", "busy", ...; "unknown" for anything else.
  static std::string StateName(v1::BoardState state);

 private:
  Boards boards_;
  Agents agents_;
};

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_BOARD_REGISTRY_H_
