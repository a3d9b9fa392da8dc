// The replay board: answers Evaluate from a measured search space (a Kernel
// Tuner cache, T4 or KTT file, ops/spaces/space_file.h) instead of running
// anything. Every number it reports is a REAL measurement, made by someone
// else on the GPU the file names, so results are not marked simulated but
// replayed (Measurement.replayed); the measurement policy says "replayed
// from <file>: measured on <GPU> by <tool>" and BoardInfo carries the label
// replay=<file>.
//
// Its own library (tunefarm_replay_board), linked by the agent executable
// and the search benchmark only, so the agent library does not carry the
// space parsers and zlib.
//
//   in the file, ran      -> OK: median_us = the file's recorded objective
//                            (Kernel Tuner: the mean of its runs; KTT: the
//                            total kernel duration), p20/p80/min/max from
//                            the recorded runs when the file has them;
//                            precision passed (the tools only record
//                            configurations whose output they accepted).
//   in the file, failed   -> BUILD_FAILED (compile failure recorded) or
//                            RUN_CRASHED (runtime failure recorded), with
//                            the file's failure text.
//   not in the file       -> BUILD_FAILED "not in the space (constraint)":
//                            such configurations break the kernel's
//                            constraints and were never built.
// No profile is produced (Evaluation.bundle is empty), so the guided strategy
// works from neighbour moves alone on this board.
//
// Optional multiplicative Gaussian noise (relative standard deviation
// `noise`), deterministic from (seed, work seed, configuration, epoch), for
// noise-robustness tests.
//
// Thread-safety as Board: one Evaluate at a time, info() from any thread.
// The Space may be shared between boards (it is immutable).
#ifndef TUNEFARM_AGENT_REPLAY_BOARD_H_
#define TUNEFARM_AGENT_REPLAY_BOARD_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "agent/board.h"
#include "ops/spaces/space_file.h"

namespace tunefarm {

// The board kind replay boards register as.
inline constexpr char kReplayBoardKind[] = "replay";

struct ReplayBoardOptions {
  std::string board_id, agent_id, node;
  std::string space_file;              // loaded unless `space` is given
  std::shared_ptr<const Space> space;  // preloaded (shared between boards)
  uint64_t seed = 0;
  double noise = 0;  // relative standard deviation of the reported times
  std::map<std::string, std::string> labels;
};

// INVALID_ARGUMENT / NOT_FOUND when the space file cannot be loaded, or for
// a negative or non-finite noise.
absl::StatusOr<std::unique_ptr<Board>> NewReplayBoard(
    ReplayBoardOptions options);

}  // namespace tunefarm

#endif  // TUNEFARM_AGENT_REPLAY_BOARD_H_
