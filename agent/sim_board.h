// The `sim` board: runs an operator's "sim" backend (for the shipped
// sim_matmul, the tunefarm-sim-matmul program, whose timings and profiles
// come from the deterministic Ascend910B-sim model) through the full
// build → reference → run → precision → timing → profile pipeline
// (RunStages, so A/B timing against the parent too), in child processes with
// timeouts. Every number it reports is marked simulated.
//
// NewSimBoard returns a Board; the caller owns it. Thread-safety as Board:
// one Evaluate at a time, info() from any thread.
#ifndef TUNEFARM_AGENT_SIM_BOARD_H_
#define TUNEFARM_AGENT_SIM_BOARD_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "agent/board.h"

namespace tunefarm {

struct SimBoardOptions {
  std::string board_id, agent_id, node;
  // Where tunefarm-sim-matmul lives; "{bin}" in a manifest command expands
  // to it.
  std::string bin_dir;
  // Work directories go under it: <work_root>/<sweep>/round_<r>/epoch_<e>.
  std::string work_root;
  // Seed of the simulated inputs and timing noise when the work item has
  // none (seed 0).
  uint64_t seed = 0;
  // Extra real wall time the run stage sleeps (tests use it to make a round
  // take time).
  absl::Duration run_delay = absl::ZeroDuration();
  // Injected noise (tests, demos of a noisy board): > 0 makes every timed
  // run's speed off by up to ±noise and each sample jitter by up to ±noise
  // (SimInjectedNoiseSample), each block drawing its own; 0 = the model's
  // own ±0.75 % jitter.
  double noise = 0;
  // > 0: every variant is modelled at this latency (no real differences
  // between variants; tests of the keep/rollback decision).
  double fixed_latency_us = 0;
  // Where each (program, workload, seed)'s reference output is kept and
  // reused (CommandReferenceCacheEntry); empty: computed every round.
  std::string cache_dir;
  // Timeout of each stage (build, reference, run, profile).
  absl::Duration stage_timeout = absl::Minutes(2);
  std::map<std::string, std::string> labels;
};

std::unique_ptr<Board> NewSimBoard(SimBoardOptions options);

}  // namespace tunefarm

#endif  // TUNEFARM_AGENT_SIM_BOARD_H_
