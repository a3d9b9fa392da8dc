#include "coordinator/board_registry.h"

namespace tunefarm {

bool BoardRegistry::Matches(const v1::BoardInfo& board,
                            const v1::BoardSelector& selector) {
  if (!selector.kind().empty() && selector.kind() != board.kind()) {
    return false;
  }
  if (!selector.chip().empty() && selector.chip() != board.chip()) {
    return false;
  }
  for (const auto& [key, value] : selector.labels()) {
    auto it = board.labels().find(key);
    if (it == board.labels().end() || it->second != value) return false;
  }
  return true;
}

std::vector<v1::BoardInfo> BoardRegistry::List(
    const v1::BoardSelector& selector) const {
  std::vector<v1::BoardInfo> out;
  for (const auto& [id, b] : boards_) {
    if (Matches(b.info, selector)) out.push_back(b.info);
  }
  return out;
}

std::map<std::string, int> BoardRegistry::CountByState() const {
  std::map<std::string, int> counts;
  for (v1::BoardState st :
       {v1::BOARD_STATE_IDLE, v1::BOARD_STATE_BUSY, v1::BOARD_STATE_LOST,
        v1::BOARD_STATE_QUARANTINED, v1::BOARD_STATE_DRAINING}) {
    counts[StateName(st)] = 0;
  }
  for (const auto& [id, b] : boards_) ++counts[StateName(b.info.state())];
  return counts;
}

std::vector<v1::BoardInfo> BoardRegistry::Infos() const {
  std::vector<v1::BoardInfo> boards;
  boards.reserve(boards_.size());
  for (const auto& [id, b] : boards_) boards.push_back(b.info);
  return boards;
}

std::string BoardRegistry::StateName(v1::BoardState state) {
  switch (state) {
    case v1::BOARD_STATE_IDLE:
      return "idle";
    case v1::BOARD_STATE_BUSY:
      return "busy";
    case v1::BOARD_STATE_LOST:
      return "lost";
    case v1::BOARD_STATE_QUARANTINED:
      return "quarantined";
    case v1::BOARD_STATE_DRAINING:
      return "draining";
    default:
      return "unknown";
  }
}

}  // namespace tunefarm
