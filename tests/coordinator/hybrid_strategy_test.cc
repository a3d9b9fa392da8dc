// The model-based strategies (tpe, hybrid) and constraints in every
// strategy: sweeps run here against a toy objective, the way the coordinator
// grows a history (propose, evaluate, keep when faster than the best).
#include "coordinator/hybrid_strategy.h"

#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/strategy.h"
#include "coordinator/strategy_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/catalog.h"

namespace tunefarm {
namespace {

using ::testing::HasSubstr;

// Parameters a, b, c, d with values 0..size-1 (times 1), stages spread.
v1::OperatorManifest Toy(int size, std::vector<std::string> constraints = {}) {
  v1::OperatorManifest op;
  op.set_name("toy");
  const char* stages[] = {"tiling", "tiling", "pipeline", "in_core"};
  for (int i = 0; i < 4; ++i) {
    v1::ParameterDomain* p = op.add_parameters();
    p->set_name(std::string(1, static_cast<char>('a' + i)));
    for (int v = 0; v < size; ++v) *p->add_values() = IntParam(v);
    *p->mutable_default_value() = IntParam(0);
    p->set_stage(stages[i]);
  }
  for (std::string& c : constraints) op.add_constraints(std::move(c));
  return op;
}

int64_t Get(const ParamMap& p, const char* name) {
  return p.at(name).int_value();
}

// Time of a configuration: a bowl with its minimum at (5, 2, 6, 1); nullopt
// for a configuration that fails (an unknown constraint).
using Objective = std::function<std::optional<double>(const ParamMap&)>;
std::optional<double> Bowl(const ParamMap& p) {
  const double a = Get(p, "a") - 5.0, b = Get(p, "b") - 2.0,
               c = Get(p, "c") - 6.0, d = Get(p, "d") - 1.0;
  return 100 + a * a + 3 * b * b + 2 * c * c + d * d + 0.5 * a * c;
}

struct Sweep {
  v1::OperatorManifest op;
  v1::SweepSpec spec;
  std::vector<v1::Round> rounds;
  int64_t best = -1;
  double best_us = INFINITY;
  int64_t rewinds = 0;

  Sweep(v1::OperatorManifest o, const std::string& strategy, uint64_t seed)
      : op(std::move(o)) {
    spec.mutable_strategy()->set_name(strategy);
    spec.mutable_strategy()->set_seed(seed);
    *spec.mutable_baseline_params() = DefaultParams(op);
  }
  SearchHistory view() const { return {&op, &spec, &rounds, best, rewinds}; }

  v1::Round& Add(const Candidate& c) {
    v1::Round r;
    r.set_round_id(static_cast<int64_t>(rounds.size()));
    r.set_parent_round(c.parent_round);
    *r.mutable_params() = c.params;
    for (const v1::ParamChange& ch : c.changes) *r.add_changes() = ch;
    r.set_stage(c.stage);
    r.set_state(v1::ROUND_STATE_QUEUED);
    rounds.push_back(std::move(r));
    return rounds.back();
  }
  void Finish(v1::Round& r, const Objective& f) {
    r.set_state(v1::ROUND_STATE_DONE);
    const std::optional<double> us = f(r.params());
    if (!us.has_value()) {
      r.mutable_result()->set_outcome(v1::OUTCOME_BUILD_FAILED);
      r.set_decision(v1::DECISION_REJECTED);
      return;
    }
    r.mutable_result()->set_outcome(v1::OUTCOME_OK);
    r.mutable_result()->mutable_measurement()->set_median_us(*us);
    if (*us < best_us) {
      best_us = *us;
      best = r.round_id();
      r.set_decision(r.round_id() == 0 ? v1::DECISION_BASELINE
                                       : v1::DECISION_KEPT);
    } else {
      r.set_decision(v1::DECISION_ROLLED_BACK);
    }
  }
  // A candidate: the baseline's parameters with `set` changed, parent the
  // best, as a strategy would propose it.
  Candidate From(const std::map<std::string, int64_t>& set,
                 std::string stage = "") const {
    Candidate c;
    c.parent_round = best;
    c.params = spec.baseline_params();
    for (const auto& [name, v] : set) c.params[name] = IntParam(v);
    c.changes = DiffParams(spec.baseline_params(), c.params);
    c.stage = std::move(stage);
    return c;
  }
  // Finishes `r` measured at `us` with the keep rule's `decision`.
  void FinishAs(v1::Round& r, double us, v1::Decision decision) {
    r.set_state(v1::ROUND_STATE_DONE);
    r.mutable_result()->set_outcome(v1::OUTCOME_OK);
    r.mutable_result()->mutable_measurement()->set_median_us(us);
    r.set_decision(decision);
  }
  void Baseline(const Objective& f) { Finish(Add(From({})), f); }
};

std::unique_ptr<Strategy> Make(const Sweep& s) {
  absl::StatusOr<std::unique_ptr<Strategy>> st = NewStrategy(s.spec, s.op);
  EXPECT_TRUE(st.ok()) << st.status();
  return st.ok() ? *std::move(st) : nullptr;
}

// Runs one candidate at a time for up to `budget` rounds; the rounds run.
int RunSequential(Sweep& s, const Objective& f, int budget) {
  std::unique_ptr<Strategy> st = Make(s);
  s.Baseline(f);
  int n = 1;
  while (n < budget) {
    std::vector<Candidate> c = st->Propose(s.view(), 1);
    if (c.empty()) break;
    s.Finish(s.Add(c[0]), f);
    ++n;
  }
  return n;
}

int CountStage(const Sweep& s, const std::string& stage) {
  int n = 0;
  for (const v1::Round& r : s.rounds) n += r.stage() == stage;
  return n;
}

// Runs on one round at a time until a candidate of `stage` is proposed
// (then its rationale) or `rounds` rounds went by (nullopt).
std::optional<std::string> NextRationaleOf(Sweep& s, const Objective& f,
                                           const std::string& stage,
                                           int rounds) {
  std::unique_ptr<Strategy> st = Make(s);
  for (int i = 0; i < rounds; ++i) {
    for (const Candidate& c : st->Propose(s.view(), 1)) {
      if (c.stage == stage) return c.rationale;
      s.Finish(s.Add(c), f);
    }
  }
  return std::nullopt;
}

TEST(HybridStrategy, FindsTheBowlsMinimumAndKeepsLineage) {
  for (const char* name : {"hybrid", "tpe"}) {
    Sweep s(Toy(8), name, 7);
    RunSequential(s, Bowl, 120);
    EXPECT_EQ(s.best_us, 100) << name << " did not reach the minimum";
    std::set<std::string> keys;
    int multi = 0, walk = 0;
    for (const v1::Round& r : s.rounds) {
      EXPECT_TRUE(keys.insert(ParamsKey(r.params())).second) << "repeat";
      if (r.round_id() == 0) continue;
      EXPECT_GE(r.parent_round(), 0);
      EXPECT_LT(r.parent_round(), r.round_id());
      EXPECT_EQ(r.changes_size(),
                static_cast<int>(
                    DiffParams(s.rounds[r.parent_round()].params(), r.params())
                        .size()));
      EXPECT_THAT(r.stage(),
                  ::testing::AnyOf("tiling", "pipeline", "in_core", "global",
                                   "explore", "recombine", "restart"));
      if (r.stage() == "tiling" || r.stage() == "pipeline" ||
          r.stage() == "in_core") {
        EXPECT_EQ(r.changes_size(), 1) << "walk rounds change one parameter";
        ++walk;
      }
      multi += r.changes_size() > 1;
    }
    EXPECT_GT(multi, 0) << name;
    if (std::string(name) == "tpe") {
      EXPECT_EQ(walk, 0);
    } else {
      EXPECT_GT(walk, 0);
    }
  }
}

TEST(HybridStrategy, RationaleLabelsMultiParameterMoves) {
  Sweep s(Toy(6), "hybrid", 3);
  std::unique_ptr<Strategy> st = Make(s);
  s.Baseline(Bowl);
  for (int i = 0; i < 40; ++i) {
    std::vector<Candidate> c = st->Propose(s.view(), 1);
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].parent_round, s.best);
    if (c[0].changes.size() > 1) {
      EXPECT_THAT(
          c[0].rationale,
          HasSubstr(absl::StrCat("multi-parameter move: ", c[0].changes.size(),
                                 " parameters at once")));
    } else {
      EXPECT_THAT(c[0].rationale, HasSubstr("1 parameter changed"));
    }
    s.Finish(s.Add(c[0]), Bowl);
  }
}

TEST(HybridStrategy, DeterministicForTheSameHistory) {
  Sweep s1(Toy(8), "hybrid", 11), s2(Toy(8), "hybrid", 11);
  RunSequential(s1, Bowl, 60);
  RunSequential(s2, Bowl, 60);
  ASSERT_EQ(s1.rounds.size(), s2.rounds.size());
  for (size_t i = 0; i < s1.rounds.size(); ++i) {
    EXPECT_EQ(ParamsKey(s1.rounds[i].params()),
              ParamsKey(s2.rounds[i].params()));
  }
}

TEST(HybridStrategy, NeverStopsWhileUntriedFeasibleConfigurationsRemain) {
  // 3^4 = 81 configurations, 50 feasible (1 + 4 + 10 + 16 + 19 with a
  // sum of 0..4): every one is proposed once, then nothing.
  for (const char* name : {"hybrid", "tpe", "random", "grid", "guided"}) {
    Sweep s(Toy(3, {"a + b + c + d <= 4"}), name, 5);
    std::unique_ptr<Strategy> st = Make(s);
    s.Baseline(Bowl);
    size_t proposed = 1;
    for (int i = 0; i < 200; ++i) {
      std::vector<Candidate> c = st->Propose(s.view(), 3);
      if (c.empty()) break;
      for (const Candidate& cand : c) {
        EXPECT_TRUE(ConstraintsOf(s.op).Feasible(cand.params))
            << name << ": " << ParamsKey(cand.params);
        s.Finish(s.Add(cand), Bowl);
        ++proposed;
      }
    }
    if (std::string(name) == "guided") {
      EXPECT_LE(proposed, 50u);  // guided may stop early (its stages)
    } else {
      EXPECT_EQ(proposed, 50u) << name;
      EXPECT_EQ(st->Exhausted(s.view()).reason,
                v1::TERMINATION_SPACE_EXHAUSTED);
    }
  }
}

TEST(HybridStrategy, LearnsUnknownConstraintsFromFailures) {
  // b > 6 or d > 6 fails (not declared; away from the optimum): the model
  // stops proposing there.
  const Objective f = [](const ParamMap& p) -> std::optional<double> {
    if (Get(p, "b") > 6 || Get(p, "d") > 6) return std::nullopt;
    return Bowl(p);
  };
  int early = 0, late = 0;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    Sweep s(Toy(10), "tpe", seed);
    RunSequential(s, f, 100);
    for (const v1::Round& r : s.rounds) {
      const bool failed = r.result().outcome() != v1::OUTCOME_OK;
      if (r.round_id() >= 1 && r.round_id() <= 20) early += failed;
      if (r.round_id() >= 60) late += failed;
    }
  }
  // Uniform draws fail 51% of the time; the model learns to avoid it.
  EXPECT_LT(late, early) << "early " << early << " late " << late;
  EXPECT_LT(late, 0.1 * 4 * 40);
}

TEST(HybridStrategy, RoundsInFlightDoNotCapTheBatch) {
  Sweep s(Toy(8), "hybrid", 2);
  std::unique_ptr<Strategy> st = Make(s);
  s.Baseline(Bowl);
  // 64 boards: 64 distinct candidates at once, then 64 more with those in
  // flight.
  for (int wave = 0; wave < 2; ++wave) {
    std::vector<Candidate> c = st->Propose(s.view(), 64);
    EXPECT_EQ(c.size(), 64u);
    for (const Candidate& cand : c) s.Add(cand);
  }
  std::set<std::string> keys;
  for (const v1::Round& r : s.rounds) keys.insert(ParamsKey(r.params()));
  EXPECT_EQ(keys.size(), s.rounds.size());
}

TEST(HybridStrategy, WalkTriesTheDiagnosisSuggestionFirst) {
  Sweep s(Toy(8), "hybrid", 2);
  std::unique_ptr<Strategy> st = Make(s);
  s.Baseline(Bowl);
  v1::Suggestion* sug = s.rounds[0].mutable_diagnosis()->add_suggestions();
  sug->set_parameter("c");
  sug->set_direction("set");
  *sug->mutable_value() = IntParam(6);
  sug->set_confidence(0.9);
  sug->set_rule("test_rule");
  std::vector<Candidate> c = st->Propose(s.view(), 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(Get(c[0].params, "c"), 6);
  EXPECT_EQ(c[0].stage, "pipeline");
  EXPECT_THAT(c[0].rationale, HasSubstr("analyzer suggests set c"));
  // Ignored with use_diagnosis 0.
  (*s.spec.mutable_strategy()->mutable_options())["use_diagnosis"] = "0";
  std::unique_ptr<Strategy> ignoring = Make(s);
  c = ignoring->Propose(s.view(), 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_THAT(c[0].rationale, ::testing::Not(HasSubstr("analyzer")));
}

TEST(HybridStrategy, ABatchSpreadsOverTheTechniques) {
  // 16 boards free at once after 30 finished rounds: the bandit counts each
  // proposal of the batch as a use without a gain yet, so one technique
  // does not take every board.
  Sweep s(Toy(8), "hybrid", 4);
  RunSequential(s, Bowl, 30);
  std::unique_ptr<Strategy> st = Make(s);
  std::vector<Candidate> c = st->Propose(s.view(), 16);
  ASSERT_EQ(c.size(), 16u);
  std::map<std::string, int> by_technique;
  for (const Candidate& cand : c) {
    const bool walk = cand.stage == "tiling" || cand.stage == "pipeline" ||
                      cand.stage == "in_core" || cand.stage == "restart";
    ++by_technique[walk                      ? "walk"
                   : cand.stage == "explore" ? "global"
                                             : cand.stage];
    EXPECT_THAT(cand.rationale, ::testing::AnyOf(HasSubstr("bandit: "),
                                                 HasSubstr("after a new best")))
        << cand.stage;
  }
  EXPECT_GE(by_technique.size(), 3u);
  for (const auto& [technique, n] : by_technique) {
    EXPECT_LE(n, 10) << technique << " took " << n << " of 16 boards";
  }
}

TEST(HybridStrategy, ExplorationIsOneOfTheBanditsTechniques) {
  // After the start-up, the bandit also gives rounds to exploration: untried
  // uniform draws, the one the model rates best.
  Sweep s(Toy(8), "hybrid", 5);
  RunSequential(s, Bowl, 30);
  const std::optional<std::string> why =
      NextRationaleOf(s, Bowl, "explore", 60);
  ASSERT_TRUE(why.has_value());
  EXPECT_THAT(*why, HasSubstr("bandit: exploration"));
  EXPECT_THAT(*why, HasSubstr("exploration: of 4 uniform untried draws, the "
                              "one the model rates best"));
}

TEST(HybridStrategy, RecombinesTwoFastConfigurations) {
  Sweep s(Toy(8), "hybrid", 6);
  RunSequential(s, Bowl, 60);
  EXPECT_GT(CountStage(s, "recombine"), 0);
  // The rationale names both parents.
  const std::optional<std::string> why =
      NextRationaleOf(s, Bowl, "recombine", 12);
  ASSERT_TRUE(why.has_value());
  EXPECT_THAT(*why, ::testing::ContainsRegex(
                        "recombination of rounds [0-9]+ and [0-9]+ \\(the "
                        "[0-9]+\\. and [0-9]+\\. fastest\\)"));
}

TEST(HybridStrategy, RestartsFromAnEliteWhenStuck) {
  // Two basins: the baseline (all 0) sits in the shallow one, a local
  // optimum for single changes; the deep one is at a = b = 7. Once the best
  // stops moving for restart_after finished rounds, walk rounds start from
  // the fastest configuration at least two parameters from the best.
  const Objective f = [](const ParamMap& p) -> std::optional<double> {
    const double a = Get(p, "a"), b = Get(p, "b"), c = Get(p, "c"),
                 d = Get(p, "d");
    return std::min(100 + a * a + b * b,
                    60 + 4 * ((a - 7) * (a - 7) + (b - 7) * (b - 7))) +
           c * c + d * d;
  };
  Sweep s(Toy(8), "hybrid", 9);
  (*s.spec.mutable_strategy()->mutable_options())["restart_after"] = "10";
  RunSequential(s, f, 120);
  EXPECT_GT(CountStage(s, "restart"), 0);
  for (const v1::Round& r : s.rounds) {
    if (r.stage() == "restart") {
      EXPECT_GE(r.parent_round(), 0);
    }
  }
  // The rationale of a restart names the elite and why.
  const std::optional<std::string> why = NextRationaleOf(s, f, "restart", 40);
  ASSERT_TRUE(why.has_value());
  EXPECT_THAT(*why, HasSubstr("elite restart from round "));
}

// A deceptive space, as pnpoly's: method d = 0 wins only with a at the far
// end of its domain (7); near the shallow basin (a around 3) d = 0 is the
// slowest method, and a = 7 is slow with any other method. So the model
// rates the deep basin low: the fast rounds never come near it and the slow
// ones cover both of its halves.
std::optional<double> Deceptive(const ParamMap& p) {
  const double a = Get(p, "a"), b = Get(p, "b") - 3.0, c = Get(p, "c") - 3.0,
               d = Get(p, "d");
  if (d == 0 && a == 7) return 50 + b * b + c * c;
  return 100 + (a - 3) * (a - 3) + b * b + c * c + (d == 0 ? 30 : d);
}

TEST(HybridStrategy, ExploresAwayFromEverythingTriedOnceTheBestStalls) {
  int found = 0, by_away = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    SCOPED_TRACE(seed);
    Sweep s(Toy(8), "hybrid", seed);
    std::unique_ptr<Strategy> st = Make(s);
    s.Baseline(Deceptive);
    bool away = false;
    for (int n = 1; n < 400 && s.best_us >= 100; ++n) {
      std::vector<Candidate> c = st->Propose(s.view(), 1);
      ASSERT_EQ(c.size(), 1u);
      away = c[0].stage == "explore" &&
             c[0].rationale.find("exploration away from everything tried") !=
                 std::string::npos;
      if (away) {
        EXPECT_THAT(c[0].rationale, HasSubstr("rounds without a new best"));
      }
      s.Finish(s.Add(c[0]), Deceptive);
    }
    if (s.best_us < 100) {
      ++found;
      by_away += away;
    }
  }
  // The deep basin is 1 of 64 (a, d) pairs: a uniform draw finds it in
  // about 64 rounds. With exploration that asks the model even when stuck,
  // 2 of these 10 seeds never found it in 400 rounds.
  EXPECT_EQ(found, 10);
  // And it is that exploration that finds it, in most seeds.
  EXPECT_GE(by_away, 5);
}

// guided, tpe and hybrid alike (RaceAgainCandidate).
TEST(HybridStrategy, ReracesAnInconclusiveRoundOnceAgainstTheBest) {
  for (const char* strategy : {"hybrid", "tpe", "guided"}) {
    SCOPED_TRACE(strategy);
    Sweep s(Toy(8), strategy, 3);
    s.spec.set_min_gain(0.02);
    s.Baseline(Bowl);  // all 0: 225 µs
    // Two inconclusive rounds: one 20% faster than the best (worth a second
    // race), one 0.5% faster (below min_gain: not).
    auto inconclusive = [&](int64_t a, double us) {
      v1::Round& r = s.Add(s.From({{"a", a}}, "tiling"));
      s.FinishAs(r, us, v1::DECISION_INCONCLUSIVE);
      return r.round_id();
    };
    const int64_t fast = inconclusive(3, 180);
    inconclusive(1, 224);
    std::unique_ptr<Strategy> st = Make(s);
    std::vector<Candidate> c = st->Propose(s.view(), 1);
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].stage, "rerace");
    EXPECT_EQ(ParamsKey(c[0].params), ParamsKey(s.rounds[fast].params()));
    EXPECT_EQ(c[0].parent_round, 0);
    EXPECT_THAT(c[0].rationale, HasSubstr(absl::StrCat(
                                    "re-race of inconclusive round ", fast)));
    s.Add(c[0]);
    // Once raced (here still in flight), never again; nor the other one.
    for (int i = 0; i < 20; ++i) {
      for (const Candidate& next : st->Propose(s.view(), 1)) {
        EXPECT_NE(next.stage, "rerace") << next.rationale;
        s.Finish(s.Add(next), Bowl);
      }
    }
  }
}

TEST(HybridStrategy, StartsWithUniformDrawsBeforeTheModel) {
  Sweep s(Toy(8), "hybrid", 5);
  std::unique_ptr<Strategy> st = Make(s);
  s.Baseline(Bowl);
  // startup (10) finished rounds, the baseline included.
  for (int i = 0; i < 9; ++i) {
    std::vector<Candidate> c = st->Propose(s.view(), 1);
    ASSERT_EQ(c.size(), 1u);
    EXPECT_EQ(c[0].stage, "explore") << i;
    EXPECT_THAT(c[0].rationale, HasSubstr("start-up: "));
    s.Finish(s.Add(c[0]), Bowl);
  }
  // Then the walk's burst from the best, and the bandit.
  std::vector<Candidate> c = st->Propose(s.view(), 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_THAT(c[0].rationale, ::testing::AnyOf(HasSubstr("after a new best"),
                                               HasSubstr("bandit: ")));
}

TEST(OrderWeight, OrderedSmoothAndUnorderedDomains) {
  // Mean log times per position; one sample each is enough here.
  auto at = [](std::vector<double> means) {
    std::vector<std::vector<double>> t;
    for (double m : means) t.push_back({m});
    return t;
  };
  const double linear = OrderWeight(at({1, 2, 3, 4, 5, 6, 7, 8}), -1);
  EXPECT_NEAR(linear, 1 - 3.0 / 9, 1e-9);  // 1 - 3 / (k + 1) for k = 8
  EXPECT_GT(OrderWeight(at({25, 16, 9, 4, 1, 0, 1, 4}), -1), 0.5);  // a bowl
  // A method id: neighbours in the order differ more than values at random.
  EXPECT_EQ(OrderWeight(at({0, 9, 1, 8, 2, 7, 3, 6}), -1), 0.0);
  EXPECT_LT(OrderWeight(at({2.62, 2.96, 2.66, 2.67}), -1), 0.5);
  // Unobserved positions are skipped; under three observed values, or no
  // difference at all, the order is undetermined.
  EXPECT_EQ(OrderWeight({{1.0}, {}, {2.0}, {}}, 0.25), 0.25);
  EXPECT_EQ(OrderWeight(at({3, 3, 3}), 0.25), 0.25);
  EXPECT_NEAR(OrderWeight({{1.0}, {}, {2.0, 2.0}, {3.0}}, -1), 0.25, 1e-9);
}

// The model learns per parameter whether the domain's order explains the
// times: after a full factorial over a (times rise with a) and m (a method
// id whose times jump around), it treats m as unordered and a as ordered.
TEST(HybridStrategy, ModelTreatsAParameterWhoseOrderDoesNotMatterAsCategory) {
  v1::OperatorManifest op;
  op.set_name("toy");
  for (const char* name : {"a", "m", "e"}) {
    v1::ParameterDomain* p = op.add_parameters();
    p->set_name(name);
    for (int v = 0; v < (name[0] == 'e' ? 4 : 8); ++v) {
      *p->add_values() = IntParam(v);
    }
    *p->mutable_default_value() = IntParam(0);
  }
  const double jumps[8] = {0, 9, 1, 8, 2, 7, 3, 6};
  const Objective f = [&](const ParamMap& p) -> std::optional<double> {
    return 100 * std::exp(0.5 * Get(p, "a") + 0.5 * jumps[Get(p, "m")]);
  };
  Sweep s(op, "tpe", 3);
  s.Baseline(f);
  for (int a = 0; a < 8; ++a) {
    for (int m = 0; m < 8; ++m) {
      if (a == 0 && m == 0) continue;  // the baseline
      s.Finish(s.Add(s.From({{"a", a}, {"m", m}})), f);
    }
  }
  std::unique_ptr<Strategy> st = Make(s);
  std::vector<Candidate> c = st->Propose(s.view(), 1);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].stage, "global");
  // e has one value seen: undetermined, not listed.
  EXPECT_THAT(c[0].rationale, HasSubstr("; unordered: m;"));
}

// With many boards the start-up counts its draws in flight: a batch of 16
// right after the baseline holds about `startup` start-up draws (those
// expected to finish OK at the success rate seen), not 16, and the other
// boards go to the walk and the bandit.
TEST(HybridStrategy, StartUpCountsItsDrawsInFlight) {
  Sweep s(Toy(8), "hybrid", 3);
  std::unique_ptr<Strategy> st = Make(s);
  s.Baseline(Bowl);
  std::vector<Candidate> c = st->Propose(s.view(), 16);
  ASSERT_EQ(c.size(), 16u);
  int startup = 0;
  for (const Candidate& cand : c) {
    startup += cand.rationale.find("start-up: ") != std::string::npos;
  }
  EXPECT_GE(startup, 9);  // startup (10) less the baseline
  EXPECT_LT(startup, 16);
  // One at a time, the start-up waits for its results.
  Sweep one(Toy(8), "hybrid", 3);
  EXPECT_EQ(RunSequential(one, Bowl, 10), 10);
  int sequential = 0;
  for (const v1::Round& r : one.rounds) sequential += r.stage() == "explore";
  EXPECT_EQ(sequential, 9);
}

// The walk's burst after a new best grows with the rounds in flight: its
// rounds go out together, so a batch tries more single changes of the best
// than one board would before the bandit takes over.
TEST(HybridStrategy, ABatchWalksMoreOfTheNewBestsNeighbourhood) {
  Sweep s(Toy(8), "hybrid", 4);
  RunSequential(s, Bowl, 30);
  std::unique_ptr<Strategy> st = Make(s);
  auto walks = [&](int n) {
    int k = 0;
    for (const Candidate& c : st->Propose(s.view(), n)) {
      if (c.rationale.find("after a new best") == std::string::npos) continue;
      ++k;
      EXPECT_EQ(c.changes.size(), 1u) << c.rationale;
      EXPECT_EQ(c.parent_round, s.best);
    }
    return k;
  };
  const int one_by_one = [&] {
    // Sequentially the burst is `walk` (4) rounds at most.
    Sweep t = s;
    int k = 0;
    for (int i = 0; i < 16; ++i) {
      std::vector<Candidate> c = st->Propose(t.view(), 1);
      if (c.empty()) break;
      k += c[0].rationale.find("after a new best") != std::string::npos &&
           c[0].parent_round == s.best;
      v1::Round& r = t.Add(c[0]);
      r.set_state(v1::ROUND_STATE_DONE);
      r.mutable_result()->set_outcome(v1::OUTCOME_OK);
      r.mutable_result()->mutable_measurement()->set_median_us(1e9);
      r.set_decision(v1::DECISION_ROLLED_BACK);
    }
    return k;
  }();
  EXPECT_LE(one_by_one, 4);
  EXPECT_GT(walks(16), one_by_one);
}

// The strategy keeps what it read from each round between calls (its
// RoundIndex); what it proposes must stay what a strategy that never saw
// the sweep before proposes: while rounds are in flight and finish, when it
// is shown another history with the same round ids, and another grid.
TEST(HybridStrategy, ProposesWhatAFreshStrategyProposesWhateverItSawBefore) {
  // Parameters, stages, rationales and parents: what a proposal is.
  auto same = [](const std::vector<Candidate>& a,
                 const std::vector<Candidate>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (ParamsKey(a[i].params) != ParamsKey(b[i].params) ||
          a[i].stage != b[i].stage || a[i].rationale != b[i].rationale ||
          a[i].parent_round != b[i].parent_round) {
        return false;
      }
    }
    return !a.empty();
  };
  // `b` + `d` above 12 fails, as an unknown constraint would.
  const Objective objective = [](const ParamMap& p) -> std::optional<double> {
    if (Get(p, "b") + Get(p, "d") > 12) return std::nullopt;
    return Bowl(p);
  };
  for (const char* name : {"hybrid", "tpe"}) {
    Sweep s(Toy(8), name, 5);
    std::unique_ptr<Strategy> kept = Make(s);
    s.Baseline(objective);
    // Two in flight at a time, the older one finishing after each proposal.
    std::vector<int64_t> in_flight;
    for (int step = 0; step < 80; ++step) {
      std::vector<Candidate> c = kept->Propose(s.view(), 2);
      ASSERT_TRUE(same(c, Make(s)->Propose(s.view(), 2)))
          << name << " step " << step;
      in_flight.push_back(s.Add(c[0]).round_id());
      if (in_flight.size() > 2) {
        s.Finish(s.rounds[in_flight.front()], objective);
        in_flight.erase(in_flight.begin());
      }
    }
    // A strategy made as `kept` was, that saw nothing before.
    auto fresh = [&](const SearchHistory& h) {
      absl::StatusOr<std::unique_ptr<Strategy>> st = NewStrategy(s.spec, *h.op);
      EXPECT_TRUE(st.ok()) << st.status();
      return (*st)->Propose(h, 3);
    };
    // Another sweep's history under the same round ids, then this one's.
    Sweep other(Toy(8), name, 6);
    RunSequential(other, Bowl, 60);
    EXPECT_TRUE(same(kept->Propose(other.view(), 3), fresh(other.view())))
        << name;
    EXPECT_TRUE(same(kept->Propose(s.view(), 3), fresh(s.view()))) << name;
    // A round in flight finishes faster than any other but waits for its
    // parent's result to be judged; it is measured again (queued), finishes
    // slower, and is judged.
    v1::Round& again = s.rounds[in_flight.front()];
    s.FinishAs(again, 90, v1::DECISION_UNSPECIFIED);
    EXPECT_TRUE(same(kept->Propose(s.view(), 3), fresh(s.view()))) << name;
    again.set_state(v1::ROUND_STATE_QUEUED);
    EXPECT_TRUE(same(kept->Propose(s.view(), 3), fresh(s.view()))) << name;
    s.FinishAs(again, 400, v1::DECISION_UNSPECIFIED);
    EXPECT_TRUE(same(kept->Propose(s.view(), 3), fresh(s.view()))) << name;
    s.FinishAs(again, 400, v1::DECISION_ROLLED_BACK);
    EXPECT_TRUE(same(kept->Propose(s.view(), 3), fresh(s.view()))) << name;
    // An undone commit puts the judged round back in flight, and the
    // history counts the rewind.
    again.set_state(v1::ROUND_STATE_LEASED);
    again.clear_decision();
    ++s.rewinds;
    EXPECT_TRUE(same(kept->Propose(s.view(), 3), fresh(s.view()))) << name;
    // An undone commit: the last rounds go, and a round with other
    // parameters takes the last one's place.
    s.rounds.resize(s.rounds.size() - 2);
    EXPECT_TRUE(same(kept->Propose(s.view(), 3), fresh(s.view()))) << name;
    *s.rounds.back().mutable_params() = other.rounds[5].params();
    EXPECT_TRUE(same(kept->Propose(s.view(), 3), fresh(s.view()))) << name;
    // The same rounds on another grid: a ninth value on every parameter.
    const v1::OperatorManifest wider = Toy(9);
    SearchHistory on_wider = s.view();
    on_wider.op = &wider;
    EXPECT_TRUE(same(kept->Propose(on_wider, 3), fresh(on_wider))) << name;
  }
}

// The start-up's draws are a maximin design: over ten seeds, each draw lies
// farther from the configurations tried before it than uniform draws do.
TEST(HybridStrategy, StartUpDrawsSpreadOverTheSpace) {
  auto spread = [](const std::string& strategy) {
    double sum = 0;
    for (uint64_t seed = 1; seed <= 10; ++seed) {
      Sweep s(Toy(8), strategy, seed);
      RunSequential(s, Bowl, 10);
      for (size_t i = 1; i < s.rounds.size(); ++i) {
        double nearest = INFINITY;
        for (size_t j = 0; j < i; ++j) {
          double d = 0;
          for (const char* p : {"a", "b", "c", "d"}) {
            d += std::abs(Get(s.rounds[i].params(), p) -
                          Get(s.rounds[j].params(), p)) /
                 7.0;
          }
          nearest = std::min(nearest, d);
        }
        sum += nearest;
      }
    }
    return sum;
  };
  EXPECT_GT(spread("hybrid"), 1.1 * spread("random"));
}

// While the baseline runs (leased, no result: best_round -1) the free
// boards get draws over the whole space only, even once rounds finished
// before the baseline are enough for the model: a walk needs a measured
// best. Their parent is the baseline (ProposeNextCandidate).
TEST(HybridStrategy, WhileTheBaselineRunsOnlyWholeSpaceDraws) {
  for (const char* name : {"hybrid", "tpe"}) {
    Sweep s(Toy(8), name, 7);
    std::unique_ptr<Strategy> st = Make(s);
    EXPECT_TRUE(st->ProposesWhileBaselineRuns()) << name;
    s.Add(s.From({})).set_state(v1::ROUND_STATE_LEASED);  // the baseline
    // 40 rounds proposed while it runs, 30 finished (the model is ready).
    for (int i = 0; i < 40; ++i) {
      NextCandidate next =
          ProposeNextCandidate(*st, s.view(), /*max_candidates=*/100, i);
      ASSERT_EQ(next.kind, NextCandidate::Kind::kPropose) << name << " " << i;
      const Candidate& c = next.candidate;
      EXPECT_EQ(c.parent_round, 0) << name;
      EXPECT_FALSE(c.changes.empty()) << name;
      EXPECT_THAT(c.stage, ::testing::AnyOf("explore", "global")) << name;
      EXPECT_THAT(c.rationale, HasSubstr("while the baseline runs")) << name;
      v1::Round& r = s.Add(c);
      if (i < 30) {
        // Results before the baseline's wait for it, undecided.
        r.set_state(v1::ROUND_STATE_DONE);
        r.mutable_result()->set_outcome(v1::OUTCOME_OK);
        r.mutable_result()->mutable_measurement()->set_median_us(
            *Bowl(r.params()));
      } else {
        r.set_state(v1::ROUND_STATE_LEASED);
      }
    }
    EXPECT_EQ(CountStage(s, "explore") + CountStage(s, "global"), 40);
  }
}

// The coordinator's next candidate: nothing before the baseline's result
// for a strategy that does not propose while it runs (nor for any while
// the baseline waits in the queue), the round budget, and exhaustion only
// when nothing is in flight.
TEST(ProposeNextCandidate, WaitsBudgetsAndExhausts) {
  for (const char* name : {"guided", "grid", "random"}) {
    Sweep s(Toy(2), name, 1);
    std::unique_ptr<Strategy> st = Make(s);
    EXPECT_FALSE(st->ProposesWhileBaselineRuns()) << name;
    s.Add(s.From({})).set_state(v1::ROUND_STATE_LEASED);
    EXPECT_EQ(ProposeNextCandidate(*st, s.view(), 100, 0).kind,
              NextCandidate::Kind::kWait)
        << name;
  }
  Sweep s(Toy(2), "hybrid", 1);  // 16 configurations
  std::unique_ptr<Strategy> st = Make(s);
  EXPECT_EQ(ProposeNextCandidate(*st, s.view(), 100, 0).kind,
            NextCandidate::Kind::kWait)
      << "no baseline round";
  s.Add(s.From({}));  // queued: the baseline goes out first
  EXPECT_EQ(ProposeNextCandidate(*st, s.view(), 100, 0).kind,
            NextCandidate::Kind::kWait);
  s.Finish(s.rounds[0], Bowl);
  EXPECT_EQ(ProposeNextCandidate(*st, s.view(), 0, 0).kind,
            NextCandidate::Kind::kWait)
      << "budget of no candidates";
  for (int i = 0; i < 15; ++i) {
    NextCandidate next = ProposeNextCandidate(*st, s.view(), 100, 0);
    ASSERT_EQ(next.kind, NextCandidate::Kind::kPropose) << i;
    EXPECT_EQ(next.candidate.parent_round, s.best);
    s.Finish(s.Add(next.candidate), Bowl);
  }
  EXPECT_EQ(ProposeNextCandidate(*st, s.view(), 100, 1).kind,
            NextCandidate::Kind::kWait)
      << "a round in flight may still change what is left";
  NextCandidate done = ProposeNextCandidate(*st, s.view(), 100, 0);
  EXPECT_EQ(done.kind, NextCandidate::Kind::kExhausted);
  EXPECT_EQ(done.why.reason, v1::TERMINATION_SPACE_EXHAUSTED);
}

TEST(HybridStrategy, OptionsAreChecked) {
  v1::StrategySpec spec;
  spec.set_name("hybrid");
  (*spec.mutable_options())["walk"] = "3";
  (*spec.mutable_options())["gamma_pct"] = "20";
  absl::StatusOr<HybridOptions> o = HybridOptionsFromSpec(spec, true);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->walk, 3);
  EXPECT_EQ(o->gamma_pct, 20);
  EXPECT_THAT(HybridOptionsFromSpec(spec, false).status().message(),
              HasSubstr("strategy.options.walk: unknown option for strategy "
                        "tpe"));
  (*spec.mutable_options())["gamma_pct"] = "0";
  EXPECT_THAT(HybridOptionsFromSpec(spec, true).status().message(),
              HasSubstr("strategy.options.gamma_pct: '0' is not an integer in "
                        "[1, 100]"));
}

}  // namespace
}  // namespace tunefarm
