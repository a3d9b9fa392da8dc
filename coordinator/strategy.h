// Search strategies: what a sweep tries next. A Strategy looks at the whole
// history of a sweep (every round, any state, diagnoses included) and
// proposes new parameter configurations, each tagged with its parent round
// and the change against that parent.
//
// Built-in strategies:
//   grid    the cartesian product of the parameter domains in manifest
//           order, like nested loops: the first parameter varies slowest,
//           the last fastest, each domain walked in its declared order.
//           Configurations already in the history are skipped.
//   random  uniform over the configurations not yet in the history. The
//           generator is seeded from spec.strategy.seed mixed with the
//           number of rounds in the history, so a restarted coordinator
//           proposes the same candidates. Small or mostly-visited spaces are
//           enumerated (exact uniform choice among what is left); large ones
//           are rejection-sampled parameter by parameter.
//
// hybrid_strategy.h has the model-based ones (tpe, hybrid).
//
// Every strategy proposes only configurations that satisfy the operator's
// constraints (OperatorManifest.constraints, ops/constraints.h).
//
// Contract for every implementation (guided_strategy.h is the third):
//   * Propose is deterministic given the history; a strategy keeps no hidden
//     state that is not derivable from the history. It may keep what it
//     derived from earlier calls' rounds (HistoryCursor in
//     strategy_util.h says when those are still this history's) as long as
//     a call returns what a fresh strategy would.
//   * Proposals never repeat a configuration already in the history (any
//     state) or each other. Configurations are identified by ParamsKey.
//     The one exception: guided, hybrid and tpe re-race an inconclusive
//     round's configuration once against a later best (stage "rerace",
//     RaceAgainCandidate in strategy_util.h).
//   * Each candidate's parent_round is history.best_round and its changes
//     are DiffParams(parent's params, params); before a baseline passed
//     (best_round -1) the parent's params are the spec's baseline_params.
//   * An empty proposal with no round in flight means the strategy has
//     nothing left; Exhaustion then says why (the termination reason and
//     its detail, recorded on the sweep). An empty proposal while rounds
//     are in flight may only mean "wait for results" (guided patience).
//   * Propose is called before the baseline's result only when
//     ProposesWhileBaselineRuns() says so; its candidates then search the
//     whole space (they need no measurement of the baseline), and the
//     coordinator makes the baseline their parent (ProposeNextCandidate).
//
// Thread-safety: none; strategies are called from the coordinator's control
// thread only.
#ifndef TUNEFARM_COORDINATOR_STRATEGY_H_
#define TUNEFARM_COORDINATOR_STRATEGY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "common/params.h"
#include "ops/constraints.h"
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

struct Candidate {
  int64_t parent_round = -1;
  ParamMap params;
  std::vector<v1::ParamChange> changes;  // against the parent, names sorted
  std::string stage;                     // guided strategy's stage; "" else
  std::string rationale;                 // why, in words, for the report
};

// What a strategy sees: the whole history, diagnoses included. Pointers are
// borrowed for the duration of one Propose call.
struct SearchHistory {
  const v1::OperatorManifest* op = nullptr;
  const v1::SweepSpec* spec = nullptr;
  // Every round so far, any state (queued, leased, done), ascending round_id.
  const std::vector<v1::Round>* rounds = nullptr;
  int64_t best_round = -1;  // -1 before the baseline passed
  // How many times the coordinator put rounds of this history back as they
  // were (an undone commit can return a staged result's round to LEASED, or
  // drop rounds): what a strategy derived from rounds' states before is
  // stale once it changes (HistoryCursor).
  int64_t rewinds = 0;
};

// Why a strategy proposes nothing more: the sweep's termination reason and
// its detail in words.
struct Exhaustion {
  v1::TerminationReason reason = v1::TERMINATION_SPACE_EXHAUSTED;
  std::string detail;
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string_view name() const = 0;

  // Up to n new candidates (see the contract above). n <= 0 gives none.
  virtual std::vector<Candidate> Propose(const SearchHistory& history,
                                         int n) = 0;

  // Why Propose(history, 1) came back empty with nothing in flight. The
  // default: SPACE_EXHAUSTED, "strategy <name> has no untried configuration
  // left". Strategies that stop before the space is spent override it.
  virtual Exhaustion Exhausted(const SearchHistory& history) const;

  // Whether the free boards may get this strategy's candidates while the
  // baseline runs (history.best_round -1, round 0 not done). A strategy
  // that starts with draws over the whole space (hybrid, tpe) loses
  // nothing by not knowing the baseline's time yet; one that walks from
  // the baseline's measurement (guided) or steps through the space in
  // order (grid, random: nothing to gain) does not. Default: false.
  virtual bool ProposesWhileBaselineRuns() const { return false; }
};

// What the coordinator's NextRound does with a single-workload sweep's
// strategy (also what bench/search_bench simulates K boards with): the next
// candidate for a free board, or why there is none.
struct NextCandidate {
  enum class Kind {
    kWait,       // nothing now: the baseline runs, the budget is taken by
                 // rounds in flight, or the strategy waits for results
    kExhausted,  // the strategy has nothing left and nothing is in flight
    kPropose,
  };
  Kind kind = Kind::kWait;
  Candidate candidate;  // kPropose: its parent_round is a real round
  Exhaustion why;       // kExhausted
};

// `history.rounds` holds the sweep's rounds, round 0 its baseline;
// `max_candidates` the round budget (candidates, the baseline not
// counted); `in_flight` the candidates leased or queued. Before the
// baseline's result the strategy is asked only when it proposes while the
// baseline runs and the baseline is leased; such a candidate's parent is
// the baseline (round 0), and the decider judges it once the baseline's
// result is in (Decider::Decide).
NextCandidate ProposeNextCandidate(Strategy& strategy,
                                   const SearchHistory& history,
                                   int64_t max_candidates, int64_t in_flight);

// The operator's constraints, compiled; empty when it has none (or when they
// do not compile: the catalog rejects such manifests at load).
ConstraintSet ConstraintsOf(const v1::OperatorManifest& op);

// INVALID_ARGUMENT for unknown strategy names (listing the known ones). An
// empty name gives the default, kDefaultStrategyName (hybrid_strategy.h).
absl::StatusOr<std::unique_ptr<Strategy>> NewStrategy(
    const v1::SweepSpec& spec, const v1::OperatorManifest& op);

// The built-in strategies, for tests and embedders.
std::unique_ptr<Strategy> NewGridStrategy();
std::unique_ptr<Strategy> NewRandomStrategy();

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_STRATEGY_H_
