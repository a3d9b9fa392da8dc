// Model-based search over the whole space, and the hybrid that pairs it with
// a one-change walk from the best, so that every free board and every
// evaluation of the budget is used.
//
//   tpe     a Tree-structured Parzen Estimator over the discrete parameters
//           (as Optuna's multivariate TPE): the finished rounds are split
//           into the good ones (the fastest gamma fraction) and the rest
//           (slower, failed or out of the space; at most 512, an evenly
//           spaced sample past that, so that a score's cost stops growing
//           with the sweep); candidates are drawn around good
//           configurations (per parameter, a mixture of a kernel over the
//           domain's order and a categorical one, weighted by how much
//           the order explains the times so far: OrderWeight; plus a
//           uniform prior) and the one with the highest density ratio
//           good / rest is proposed. It starts from `startup` uniform
//           draws. Failures teach it the constraints it was not
//           given: a failed configuration's neighbourhood scores low.
//   hybrid  a bandit over four techniques, as OpenTuner's AUC bandit:
//           the walk (one change from the current best: the best round's
//           diagnosis suggestions first, then the single change the model
//           rates best; an elite restart walks from the fastest other
//           configuration instead when the best has no single change left
//           or `restart_after` finished rounds brought no new best), the
//           model (tpe), recombination (a genetic algorithm's crossover
//           of two of the fastest configurations, plus mutation) and
//           exploration (of 4 uniform untried draws, the one the model
//           rates best; once `restart_after` finished rounds brought no new
//           best, the one farthest from everything tried, because the
//           model's rating keeps draws off what the slow rounds cover,
//           which in a deceptive space is where the next basin lies).
//           Each new best first gets `walk` walk rounds; every other board
//           goes to the technique with the best recent record of new bests
//           (the area under its curve over its last uses in the last
//           `bandit_window` rounds) plus an exploration bonus.
//           Its `startup` first rounds are draws of a maximin design (of 4
//           uniform untried draws, the one farthest from every
//           configuration tried or in flight).
//
// Inconclusive rounds are re-raced: when an inconclusive round's median
// beats the current best's by min_gain, its configuration is proposed once
// more (stage "rerace", parent the best), so that the keep rule judges it
// again against the best with fresh samples. This is the one exception to
// "never repeat a configuration", at most once per configuration.
//
// Batches: rounds in flight count as slow in the model (a constant liar,
// as Optuna's constant_liar) and as uses without a gain in the bandit, so
// K boards proposed on the same information spread over the space and over
// the techniques instead of piling onto one region. The start-up counts its
// draws in flight at the success rate seen so far (it ends once `startup`
// OK rounds are expected, not finished), and the walk's burst after a new
// best grows by one round per two in flight (its rounds go out together,
// so a batch covers more of the best's neighbourhood at once). With one
// board neither changes anything.
//
// Rounds carry their lineage: the parent is the best round; walk rounds are
// tagged with the parameter's stage (tiling, pipeline, in_core) and change
// one parameter; elite restarts are tagged "restart", recombinations
// "recombine", model rounds "global", start-up and exploration rounds
// "explore";
// the rationale says which technique and why, and how many parameters a
// round moves at once.
//
// Neither stops while an untried feasible configuration remains: when the
// techniques' draws keep hitting tried configurations, uniform draws
// follow, and for spaces of up to 2^22 configurations an enumeration finds
// what is left. Only configurations that satisfy the constraints are
// proposed.
//
// Deterministic: every proposal is a function of the history and the seed
// (the generator is seeded from seed and the history length), so a
// restarted coordinator proposes the same. Between calls it keeps each
// round's grid position and technique, read once (a round's parameters and
// stage never change), so a proposal does not re-read the whole history.
//
// Options (StrategySpec.options): startup (start-up draws before the model,
// default 10), gamma_pct (the good fraction in percent, default 15),
// candidates (draws scored per proposal, default 64), use_diagnosis (1 =
// walk from the diagnosis' suggestions first, default 1); hybrid only: walk
// (walk rounds right after each new best before the bandit, default 4),
// restart_after (default 20; 0 = restart only when the best has no single
// change left, and exploration always asks the model), bandit_window (default
// 50), bandit_c_pct (the exploration weight in percent, default 30).
//
// Thread-safety: none; called from the coordinator's control thread only.
#ifndef TUNEFARM_COORDINATOR_HYBRID_STRATEGY_H_
#define TUNEFARM_COORDINATOR_HYBRID_STRATEGY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/strategy.h"
#include "coordinator/strategy_util.h"  // kRerace
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

inline constexpr char kHybridStrategyName[] = "hybrid";
// What a spec without `strategy:` (or with no name) gets: the strategy that
// does best on the measured spaces (docs/benchmarks.md).
inline constexpr char kDefaultStrategyName[] = "hybrid";
inline constexpr char kTpeStrategyName[] = "tpe";
// Round.stage of model rounds, and of start-up and exploration draws.
inline constexpr char kGlobalStage[] = "global";
inline constexpr char kExploreStage[] = "explore";
// Round.stage of recombination rounds and of walk rounds from an elite
// other than the best (elite restart).
inline constexpr char kRecombineStage[] = "recombine";
inline constexpr char kRestartStage[] = "restart";

struct HybridOptions {
  int startup = 10;
  int gamma_pct = 15;
  bool bandit = true;      // hybrid; false = tpe (the model alone)
  int walk = 4;            // walk rounds right after each new best
  int restart_after = 20;  // 0 = no elite restart while the best has moves
  int bandit_window = 50;
  int bandit_c_pct = 30;
  int candidates = 64;
  bool use_diagnosis = true;
  uint64_t seed = 1;
};

// The option names these strategies accept (for spec validation).
const std::vector<std::string>& HybridOptionNames();

// Reads spec.strategy (options and seed); `walk` false gives tpe (walk 0,
// and the walk option is rejected). INVALID_ARGUMENT naming
// strategy.options.<key> for an unknown key or a value out of range.
absl::StatusOr<HybridOptions> HybridOptionsFromSpec(
    const v1::StrategySpec& spec, bool walk);

std::unique_ptr<Strategy> NewHybridStrategy(HybridOptions options);

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_HYBRID_STRATEGY_H_
