// StatusBoard: the compact status board `tunefarm watch` prints every five
// finished rounds (rounds done / running / failed, best so far and speedup,
// current stage, boards busy, ETA against the budget, or the closing check
// once the search is over). It is fed the sweep's watch events in order and
// reads nothing else, so a replayed stream prints the same boards as the
// live one. Not thread-safe; owned by the watching thread.
#ifndef TUNEFARM_CLI_STATUS_BOARD_H_
#define TUNEFARM_CLI_STATUS_BOARD_H_

#include <cstdint>
#include <map>
#include <string>

#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

class StatusBoard {
 public:
  // A board every `every` finished rounds.
  explicit StatusBoard(int every = 5) : every_(every) {}

  // Takes one event; true when a board is due after it.
  bool Add(const v1::SweepEvent& event);
  // The board as of the last event (several lines, each ending in '\n').
  std::string Render() const;

 private:
  int every_;
  v1::Sweep sweep_;  // newest snapshot (spec, baseline, best)
  int64_t finished_ = 0;
  int64_t failed_ = 0;
  int64_t kept_ = 0;
  int64_t candidates_ = 0;  // finished, neither a baseline nor the check
  std::map<int64_t, std::string> running_;  // round -> board
  std::string stage_;
  bool simulated_ = false;
  bool replayed_ = false;  // numbers replayed from a measured space
  int64_t first_ms_ = 0;   // started (or first event)
  int64_t last_ms_ = 0;    // newest event
};

}  // namespace tunefarm

#endif  // TUNEFARM_CLI_STATUS_BOARD_H_
