// Board: the interface every board kind plugs in behind (sim, cpu, cuda,
// ascend and replay). The agent daemon owns the boards; a board owns its work
// directories and child processes.
//
// Thread-safety: Evaluate runs one variant at a time (the agent guarantees
// it; implementations need not lock around it). info() is thread-safe and may
// be called while Evaluate runs; so may Prefetch (of another variant).
#ifndef TUNEFARM_AGENT_BOARD_H_
#define TUNEFARM_AGENT_BOARD_H_

#include <atomic>
#include <optional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tunefarm/v1/agent.pb.h"
#include "tunefarm/v1/pipeline.pb.h"
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

// What one evaluation produced: the typed result to report to the
// coordinator, and the profile files (read into memory, ready to send to the
// analyzers over ZeroMQ) when profiling succeeded.
struct Evaluation {
  v1::RoundResult result;
  std::optional<v1::ProfileBundle> bundle;
};

// One accelerator board.
class Board {
 public:
  virtual ~Board() = default;

  // A copy of the board's description and state: a caller may keep it while
  // the board changes state (quarantine, readmission) on another thread.
  virtual v1::BoardInfo info() const = 0;

  // build → precision → timing → profile for work.params. The variant's
  // faults are typed outcomes in result (BUILD_FAILED with the compiler
  // message, PRECISION_FAILED, RUN_TIMEOUT, RUN_CRASHED with the signal,
  // PROFILE_FAILED); a non-OK Status means the BOARD failed (not the
  // variant). `cancel` aborts early (lease revoked): then CANCELLED.
  virtual absl::StatusOr<Evaluation> Evaluate(
      const v1::WorkItem& work, const std::atomic<bool>& cancel) = 0;

  // Build/run overlap: builds work's variant ahead, without running it, so
  // that a later Evaluate of the same work finds it in the build cache. The
  // agent calls it while the board evaluates another variant, so it must not
  // touch the device. Blocking; `cancel` aborts it. The variant's own build
  // failure is not an error here (Evaluate reports it, from the cache); a
  // non-OK Status is only logged. Default: nothing to build ahead (sim).
  virtual absl::Status Prefetch(const v1::WorkItem& work,
                                const std::atomic<bool>& cancel) {
    (void)work;
    (void)cancel;
    return absl::OkStatus();
  }

  // Lifts a quarantine the board put itself in (an admin re-admitted it at
  // the coordinator). Thread-safe. Boards that never quarantine themselves
  // have nothing to lift.
  virtual void Readmit() {}
};

}  // namespace tunefarm

#endif  // TUNEFARM_AGENT_BOARD_H_
