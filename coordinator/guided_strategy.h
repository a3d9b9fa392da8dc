// The guided strategy: a careful kernel engineer's loop as a Strategy.
//
//   * Stages in order: "tiling", then "pipeline", then "in_core" (each
//     parameter's stage comes from the manifest, ParameterDomain.stage;
//     empty means tiling, as in the catalog; an unknown stage name means
//     in_core). Stages without movable parameters are skipped.
//   * Every candidate is the current best round's parameters plus exactly
//     ONE change, to a parameter of the current stage.
//   * The change comes first from the best round's diagnosis: its
//     suggestions for the stage's parameters, highest confidence first
//     ("set" to `value`; "raise"/"lower" to `value` when it lies that way,
//     else one step up/down the domain). Then neighbour moves: every other
//     value of each stage parameter, nearest first (one step up/down before
//     two), parameters whose moves in that direction gained most recently
//     first, remaining ties broken by a hash of (seed, parent, move).
//     Numeric domains are ordered by value, others in declared order.
//   * A change whose precision failed (p set to v) is never proposed again,
//     from any parent. After a build failure, a crash or a timeout of the
//     single change p: a -> b, further moves of p in that direction from a
//     or beyond are deprioritised (tried after everything else).
//   * A stage ends after `patience` consecutive finished rounds of the stage
//     without a kept change (defaults 5, 8, unlimited), or when it has no
//     untried single change left; then the next stage starts. When the last
//     stage ends and the pass kept at least one change, a new pass starts at
//     the first stage (the best moved, so earlier stages have new
//     neighbours); `max_passes` bounds that (0 = as long as passes gain).
//   * When a pass keeps nothing (the best is a local optimum for single
//     changes), escape moves follow: the best with 2 or 3 parameters moved
//     1 to 3 steps each at once, drawn by the seed, stage tag "escape". The
//     only candidates with more than one change (docs/guided.md). A kept
//     escape starts a new pass from the new best; `escapes` escape rounds in
//     a row without gain (default 30, 0 = none) end the search.
//     When nothing is left, Propose returns no candidate: the stages are
//     exhausted (Exhausted() says STAGES_EXHAUSTED, or SPACE_EXHAUSTED
//     when every configuration was tried).
//   * With n > 1 it proposes up to n distinct single changes of the same
//     best. Rounds in flight count against the stage's patience, so a stage
//     with patience 5 never has more than 5 rounds without a result; when
//     the stage's budget is used up by rounds in flight, Propose returns
//     fewer (possibly zero) candidates and the caller waits for results.
//
// Stateless: the stage, pass and counters are derived from the history on
// every call (the stage a round was proposed in is Round.stage), so a
// restarted coordinator resumes exactly. Deterministic given the history and
// the seed.
//
// Options (StrategySpec.options, all optional): tiling_patience (default
// 5), pipeline_patience (8), in_core_patience (0 = unlimited), each a count
// >= 0, 0 meaning unlimited; max_passes (0 = unlimited); escapes (30;
// 0 = no escape moves).
//
// Thread-safety: none needed; Propose is a pure function of its arguments.
#ifndef TUNEFARM_COORDINATOR_GUIDED_STRATEGY_H_
#define TUNEFARM_COORDINATOR_GUIDED_STRATEGY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/strategy.h"
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

inline constexpr char kGuidedStrategyName[] = "guided";
// Round.stage of escape moves.
inline constexpr char kGuidedEscapeStage[] = "escape";

struct GuidedOptions {
  // Patience per stage, in stage order (tiling, pipeline, in_core);
  // 0 = unlimited.
  int tiling_patience = 5;
  int pipeline_patience = 8;
  int in_core_patience = 0;
  int max_passes = 0;  // 0 = unlimited (each new pass needs a gain)
  int escapes = 30;    // escape rounds in a row without gain; 0 = none
  uint64_t seed = 1;
};

// The stage names in order.
const std::vector<std::string>& GuidedStages();

// The option names the guided strategy accepts (for spec validation).
const std::vector<std::string>& GuidedOptionNames();

// Reads spec.strategy (options and seed). INVALID_ARGUMENT naming
// strategy.options.<key> for a value that is not a count in [0, 1000000]
// (or "unlimited" for the patience options) or an unknown key.
absl::StatusOr<GuidedOptions> GuidedOptionsFromSpec(
    const v1::StrategySpec& spec);

// Where a guided sweep stands, derived from its history.
struct GuidedProgress {
  int pass = 1;
  std::string stage;            // current stage or "escape"; "" when exhausted
  int rounds_without_gain = 0;  // finished, in the current stage run
  int in_flight = 0;            // queued or leased, in the current stage run
  int patience = 0;             // of the current stage; 0 = unlimited
  bool exhausted = false;       // every stage ended, no further pass
  std::string detail;           // in words, for events and reports
};

// The progress Propose would act on. Requires history.op.
GuidedProgress DescribeGuidedProgress(const GuidedOptions& options,
                                      const SearchHistory& history);

std::unique_ptr<Strategy> NewGuidedStrategy(GuidedOptions options);

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_GUIDED_STRATEGY_H_
