// Model-based search over the whole space, and the hybrid that pairs it with
// a one-change walk from the best, so that every free board and every
// evaluation of the budget is used.
//
//   tpe     a Tree-structured Parzen Estimator over the discrete parameters
//           (as Optuna's multivariate TPE): the finished rounds are split
//           into the good ones (the fastest gamma fraction) and the rest
//           (slower, failed or out of the space); candidates are drawn
//           around good configurations (a per-parameter kernel over the
//           domain's order, plus a uniform prior) and the one with the
//           highest density ratio good / rest is proposed. It starts from
//           `startup` uniform draws. Failures teach it the constraints it
//           was not given: a failed configuration's neighbourhood scores
//           low.
//   hybrid  the walk, then tpe: up to `walk` one-change moves from the
//           current best (the best round's diagnosis suggestions first,
//           then neighbours one or two steps away, ranked by the model)
//           are in flight or finished per best; a new best starts a new
//           walk. Every other board, and the budget after the walk around
//           the best stalls, goes to tpe.
//
// Rounds carry their lineage: the parent is the best round; walk rounds are
// tagged with the parameter's stage (tiling, pipeline, in_core) and change
// one parameter; model rounds are tagged "global" ("explore" while the
// model starts up) and their rationale says how many parameters they move
// at once.
//
// Neither stops while an untried feasible configuration remains: when the
// model's draws keep hitting tried configurations, uniform draws follow,
// and for spaces of up to 2^22 configurations an enumeration finds what is
// left. Only configurations that satisfy the constraints are proposed.
//
// Stateless and deterministic: every proposal is a function of the history
// and the seed (the generator is seeded from seed and the history length),
// so a restarted coordinator proposes the same.
//
// Options (StrategySpec.options): startup (uniform draws before the model,
// default 10), gamma_pct (the good fraction in percent, default 15), walk
// (walk rounds per best, hybrid only, default 4; 0 = none), candidates
// (draws scored per proposal, default 64), use_diagnosis (1 = walk from the
// diagnosis' suggestions first, default 1).
//
// Thread-safety: none needed; Propose is a pure function of its arguments.
#ifndef TUNEFARM_COORDINATOR_HYBRID_STRATEGY_H_
#define TUNEFARM_COORDINATOR_HYBRID_STRATEGY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/strategy.h"
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

inline constexpr char kHybridStrategyName[] = "hybrid";
inline constexpr char kTpeStrategyName[] = "tpe";
// Round.stage of model rounds, and of uniform draws before the model.
inline constexpr char kGlobalStage[] = "global";
inline constexpr char kExploreStage[] = "explore";

struct HybridOptions {
  int startup = 10;
  int gamma_pct = 15;
  int walk = 4;  // 0 = pure tpe
  int walk_share_pct = 50;
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
