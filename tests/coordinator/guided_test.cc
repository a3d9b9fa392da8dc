// The guided strategy over a small hand-made space, driven by a miniature of
// the coordinator's loop (same decision rule as Coordinator::Decide).
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/guided_strategy.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/catalog.h"

namespace tunefarm {
namespace {

using ::testing::HasSubstr;

v1::OperatorManifest Op() {
  v1::OperatorManifest op;
  op.set_name("toy");
  auto add = [&](const std::string& name, const std::string& stage,
                 std::vector<v1::ParamValue> values, int def) {
    v1::ParameterDomain* p = op.add_parameters();
    p->set_name(name);
    p->set_stage(stage);
    for (auto& v : values) *p->add_values() = v;
    *p->mutable_default_value() = values[def];
  };
  add("t1", "tiling", {IntParam(8), IntParam(1), IntParam(4), IntParam(2)}, 3);
  add("t2", "tiling", {IntParam(16), IntParam(32), IntParam(64)}, 0);
  add("p1", "pipeline", {IntParam(1), IntParam(2), IntParam(3)}, 0);
  add("c1", "in_core", {StringParam("a"), StringParam("b")}, 0);
  return op;
}

struct Result {
  v1::Outcome outcome = v1::OUTCOME_OK;
  double us = 100;
};
using Cost = std::function<Result(const ParamMap&)>;

int64_t I(const ParamMap& p, const std::string& n) {
  return p.at(n).int_value();
}

class Driver {
 public:
  Driver(Cost cost, GuidedOptions o = {}) : op_(Op()), cost_(std::move(cost)) {
    strategy_ = NewGuidedStrategy(o);
    spec_.mutable_strategy()->set_name("guided");
    spec_.mutable_strategy()->set_seed(o.seed);
    v1::Round base;
    base.set_round_id(0);
    base.set_parent_round(-1);
    base.set_stage("baseline");
    *base.mutable_params() = DefaultParams(op_);
    Finish(base);
    base.set_decision(v1::DECISION_BASELINE);
    best_ = 0;
    best_us_ = base.result().measurement().median_us();
    rounds_.push_back(base);
  }

  SearchHistory History() const { return {&op_, &spec_, &rounds_, best_}; }
  std::vector<Candidate> Propose(int n) {
    return strategy_->Propose(History(), n);
  }

  // Appends a candidate as queued (in flight).
  v1::Round& Queue(const Candidate& c) {
    v1::Round r;
    r.set_round_id(static_cast<int64_t>(rounds_.size()));
    r.set_parent_round(c.parent_round);
    *r.mutable_params() = c.params;
    for (const auto& ch : c.changes) *r.add_changes() = ch;
    r.set_stage(c.stage);
    r.set_state(v1::ROUND_STATE_QUEUED);
    rounds_.push_back(r);
    return rounds_.back();
  }

  // Runs a queued round and decides it like the coordinator.
  void Complete(int64_t id) {
    v1::Round& r = rounds_[id];
    Finish(r);
    if (r.result().outcome() != v1::OUTCOME_OK) {
      r.set_decision(v1::DECISION_REJECTED);
      return;
    }
    const double us = r.result().measurement().median_us();
    const double parent =
        rounds_[r.parent_round()].result().measurement().median_us();
    if (us < parent && us < best_us_) {
      r.set_decision(v1::DECISION_KEPT);
      best_ = id;
      best_us_ = us;
    } else {
      r.set_decision(v1::DECISION_ROLLED_BACK);
    }
  }

  // One sequential round; false when the strategy has nothing.
  bool Step() {
    std::vector<Candidate> c = Propose(1);
    if (c.empty()) return false;
    if (c[0].stage == kGuidedEscapeStage) {
      CheckEscape(c[0]);
    } else {
      CheckSingleChange(c[0]);
    }
    Complete(Queue(c[0]).round_id());
    return true;
  }

  // Escape moves: 2 or 3 changes from the best, each 1 to 3 steps.
  void CheckEscape(const Candidate& c) const {
    EXPECT_EQ(c.parent_round, best_);
    EXPECT_GE(c.changes.size(), 2u) << c.rationale;
    EXPECT_LE(c.changes.size(), 3u) << c.rationale;
    EXPECT_THAT(c.rationale, HasSubstr("escape move"));
    ParamMap expect = rounds_[best_].params();
    for (const auto& ch : c.changes) expect[ch.name()] = ch.to();
    EXPECT_EQ(ParamsKey(expect), ParamsKey(c.params));
  }

  void CheckSingleChange(const Candidate& c) const {
    EXPECT_EQ(c.parent_round, best_);
    ASSERT_EQ(c.changes.size(), 1u) << c.rationale;
    ParamMap expect = rounds_[best_].params();
    expect[c.changes[0].name()] = c.changes[0].to();
    EXPECT_EQ(ParamsKey(expect), ParamsKey(c.params));
  }

  std::vector<v1::Round>& rounds() { return rounds_; }
  int64_t best() const { return best_; }
  v1::Round& best_round() { return rounds_[best_]; }
  Strategy& strategy() { return *strategy_; }
  v1::SweepSpec& spec() { return spec_; }

 private:
  void Finish(v1::Round& r) {
    const Result res = cost_(r.params());
    r.set_state(v1::ROUND_STATE_DONE);
    r.mutable_result()->set_outcome(res.outcome);
    r.mutable_result()->mutable_measurement()->set_median_us(res.us);
  }

  v1::OperatorManifest op_;
  v1::SweepSpec spec_;
  Cost cost_;
  std::unique_ptr<Strategy> strategy_;
  std::vector<v1::Round> rounds_;
  int64_t best_ = -1;
  double best_us_ = 0;
};

Result Flat(const ParamMap&) { return {}; }

TEST(GuidedTest, StagesEndAfterTheirPatienceThenExhausted) {
  GuidedOptions o;
  o.tiling_patience = 2;
  o.pipeline_patience = 2;
  o.in_core_patience = 0;  // unlimited: until its one alternative is tried
  o.escapes = 0;
  Driver d(Flat, o);
  while (d.Step()) {
  }
  std::vector<std::string> stages;
  for (const v1::Round& r : d.rounds()) stages.push_back(r.stage());
  EXPECT_EQ(stages,
            (std::vector<std::string>{"baseline", "tiling", "tiling",
                                      "pipeline", "pipeline", "in_core"}));
  const GuidedProgress g = DescribeGuidedProgress(o, d.History());
  EXPECT_TRUE(g.exhausted);
  EXPECT_THAT(g.detail, HasSubstr("every stage exhausted after pass 1"));
}

TEST(GuidedTest, DefaultPatienceIsFiveEightUnlimited) {
  GuidedOptions o;
  EXPECT_EQ(o.tiling_patience, 5);
  EXPECT_EQ(o.pipeline_patience, 8);
  EXPECT_EQ(o.in_core_patience, 0);
  Driver d(Flat, o);
  while (d.Step()) {
  }
  // tiling has 3 + 2 = 5 single changes (t1 has 3 others, t2 2), pipeline 2,
  // in_core 1: a flat space ends each stage by exhaustion, not patience.
  int tiling = 0, pipeline = 0, in_core = 0;
  for (const v1::Round& r : d.rounds()) {
    tiling += r.stage() == "tiling";
    pipeline += r.stage() == "pipeline";
    in_core += r.stage() == "in_core";
  }
  EXPECT_EQ(tiling, 5);
  EXPECT_EQ(pipeline, 2);
  EXPECT_EQ(in_core, 1);
}

TEST(GuidedTest, GainResetsPatienceAndStartsAnotherPass) {
  GuidedOptions o;
  o.tiling_patience = 3;    // the three one-step moves fit in it
  o.pipeline_patience = 1;  // p1 2 first (nearest): p1 = 3 needs pass 2
  o.in_core_patience = 1;
  o.escapes = 0;  // passes only
  // Faster with larger t2 and with p1 = 3; everything else flat.
  Driver d(
      [](const ParamMap& p) {
        return Result{v1::OUTCOME_OK,
                      100.0 - I(p, "t2") / 16.0 - 10.0 * (I(p, "p1") == 3)};
      },
      o);
  while (d.Step()) {
    ASSERT_LT(d.rounds().size(), 50u);
  }
  EXPECT_EQ(I(d.best_round().params(), "t2"), 64);
  EXPECT_EQ(I(d.best_round().params(), "p1"), 3);
  // A tiling round after a pipeline round: a second pass happened.
  bool second_pass = false;
  for (size_t i = 1; i + 1 < d.rounds().size(); ++i) {
    if (d.rounds()[i].stage() != "tiling" &&
        d.rounds()[i + 1].stage() == "tiling") {
      second_pass = true;
    }
  }
  EXPECT_TRUE(second_pass);
  EXPECT_TRUE(DescribeGuidedProgress(o, d.History()).exhausted);

  GuidedOptions one = o;
  one.max_passes = 1;
  Driver d1(
      [](const ParamMap& p) {
        return Result{v1::OUTCOME_OK,
                      100.0 - I(p, "t2") / 16.0 - 10.0 * (I(p, "p1") == 3)};
      },
      one);
  while (d1.Step()) {
  }
  for (size_t i = 1; i + 1 < d1.rounds().size(); ++i) {
    EXPECT_FALSE(d1.rounds()[i].stage() != "tiling" &&
                 d1.rounds()[i + 1].stage() == "tiling");
  }
  EXPECT_THAT(DescribeGuidedProgress(one, d1.History()).detail,
              HasSubstr("pass limit reached"));
}

TEST(GuidedTest, EscapeMovesLeaveALocalOptimumThenStagesExhaust) {
  // The baseline (t1 2, t2 16) beats every single change of t1 or t2, but
  // changing both at once is five times faster.
  auto cost = [](const ParamMap& p) {
    const bool t1 = I(p, "t1") != 2, t2 = I(p, "t2") != 16;
    return Result{v1::OUTCOME_OK, t1 && t2 ? 10.0 : t1 || t2 ? 100.0 : 50.0};
  };
  GuidedOptions o;
  o.escapes = 0;
  Driver single(cost, o);
  while (single.Step()) {
  }
  EXPECT_EQ(single.best(), 0);  // stuck without escape moves

  o.escapes = 30;
  Driver d(cost, o);
  while (d.Step()) {
    ASSERT_LT(d.rounds().size(), 200u);
  }
  EXPECT_NE(I(d.best_round().params(), "t1"), 2);
  EXPECT_NE(I(d.best_round().params(), "t2"), 16);
  EXPECT_EQ(d.best_round().stage(), "escape");
  const GuidedProgress g = DescribeGuidedProgress(o, d.History());
  EXPECT_TRUE(g.exhausted);
  EXPECT_THAT(g.detail,
              HasSubstr("30 escape moves from the best found no gain"));
  int last_escapes = 0;  // the run of escape rounds the history ends with
  for (auto it = d.rounds().rbegin(); it != d.rounds().rend(); ++it) {
    if (it->stage() != "escape") break;
    ++last_escapes;
  }
  EXPECT_EQ(last_escapes, 30);
  const Exhaustion why = d.strategy().Exhausted(d.History());
  EXPECT_EQ(why.reason, v1::TERMINATION_STAGES_EXHAUSTED);
  EXPECT_EQ(why.detail, g.detail);
}

TEST(GuidedTest, NeighboursNearestFirstWithoutDiagnosis) {
  Driver d(Flat);
  std::vector<Candidate> c = d.Propose(10);
  // Tiling only: t1 (ordered 1,2,4,8, at 2) has 3 moves, t2 (at 16) 2.
  ASSERT_EQ(c.size(), 5u);
  std::set<std::string> first3;
  for (int i = 0; i < 3; ++i) {
    d.CheckSingleChange(c[i]);
    EXPECT_EQ(c[i].stage, "tiling");
    first3.insert(absl::StrCat(c[i].changes[0].name(), "=",
                               ParamValueToString(c[i].changes[0].to())));
  }
  // The three one-step moves (t1 2->1, t1 2->4, t2 16->32) come first.
  EXPECT_EQ(first3, (std::set<std::string>{"t1=1", "t1=4", "t2=32"}));
  EXPECT_THAT(c[0].rationale, HasSubstr("neighbour: 1 step"));
}

TEST(GuidedTest, SuggestionsAreFollowedFirstByConfidence) {
  Driver d(Flat);
  v1::Diagnosis* diag = d.best_round().mutable_diagnosis();
  auto suggest = [&](const std::string& p, const std::string& dir,
                     double conf) {
    v1::Suggestion* s = diag->add_suggestions();
    s->set_parameter(p);
    s->set_direction(dir);
    s->set_confidence(conf);
    s->set_rule("rule_" + p);
    return s;
  };
  suggest("t1", "lower", 0.5);
  suggest("t2", "raise", 0.9);
  suggest("p1", "raise", 0.99);  // pipeline: not in the tiling stage
  *suggest("t1", "set", 0.7)->mutable_value() = IntParam(8);
  std::vector<Candidate> c = d.Propose(3);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].changes[0].name(), "t2");
  EXPECT_EQ(c[0].changes[0].to().int_value(), 32);
  EXPECT_THAT(c[0].rationale, HasSubstr("analyzer suggests raise t2"));
  EXPECT_EQ(c[1].changes[0].name(), "t1");
  EXPECT_EQ(c[1].changes[0].to().int_value(), 8);
  EXPECT_EQ(c[2].changes[0].name(), "t1");
  EXPECT_EQ(c[2].changes[0].to().int_value(), 1);
}

TEST(GuidedTest, PrecisionFailedChangeIsNeverRetried) {
  GuidedOptions o;
  o.tiling_patience = 0;
  o.escapes = 10;
  // t1 = 8 always fails precision (escape moves avoid it too); larger t2 is
  // faster.
  Driver d(
      [](const ParamMap& p) {
        if (I(p, "t1") == 8) return Result{v1::OUTCOME_PRECISION_FAILED, 0};
        return Result{v1::OUTCOME_OK, 100.0 - I(p, "t2") / 16.0};
      },
      o);
  int failures = 0;
  while (d.Step()) {
    ASSERT_LT(d.rounds().size(), 60u);
  }
  for (const v1::Round& r : d.rounds()) {
    failures += r.result().outcome() == v1::OUTCOME_PRECISION_FAILED;
  }
  EXPECT_EQ(failures, 1);
  EXPECT_EQ(I(d.best_round().params(), "t2"), 64);
}

TEST(GuidedTest, BuildFailureDeprioritisesTheSameDirection) {
  Driver d(Flat);
  // t1 2 -> 4 fails to build.
  Candidate c;
  c.parent_round = 0;
  c.params = d.rounds()[0].params();
  c.params["t1"] = IntParam(4);
  c.changes = DiffParams(d.rounds()[0].params(), c.params);
  c.stage = "tiling";
  v1::Round& r = d.Queue(c);
  r.set_state(v1::ROUND_STATE_DONE);
  r.mutable_result()->set_outcome(v1::OUTCOME_BUILD_FAILED);
  r.set_decision(v1::DECISION_REJECTED);
  std::vector<Candidate> next = d.Propose(10);
  ASSERT_EQ(next.size(), 4u);
  // t1 -> 8 (up from 2, beyond the failure) is last; the others first.
  EXPECT_EQ(next.back().changes[0].name(), "t1");
  EXPECT_EQ(next.back().changes[0].to().int_value(), 8);
  for (size_t i = 0; i + 1 < next.size(); ++i) {
    EXPECT_FALSE(next[i].changes[0].name() == "t1" &&
                 next[i].changes[0].to().int_value() == 8);
  }
}

TEST(GuidedTest, KDistinctSingleChangesAndPatienceCountsInFlight) {
  GuidedOptions o;
  o.tiling_patience = 3;
  Driver d(Flat, o);
  std::vector<Candidate> c = d.Propose(4);
  ASSERT_EQ(c.size(), 3u);  // the stage's budget: 3 rounds without gain
  std::set<std::string> keys;
  for (const Candidate& x : c) {
    d.CheckSingleChange(x);
    keys.insert(ParamsKey(x.params));
  }
  EXPECT_EQ(keys.size(), 3u);
  for (const Candidate& x : c) d.Queue(x);
  // All three in flight: wait, not exhausted.
  EXPECT_TRUE(d.Propose(4).empty());
  GuidedProgress g = DescribeGuidedProgress(o, d.History());
  EXPECT_FALSE(g.exhausted);
  EXPECT_EQ(g.in_flight, 3);
  EXPECT_THAT(g.detail, HasSubstr("waiting"));
  // Two finish without gain: one slot is still taken, the stage waits.
  d.Complete(1);
  d.Complete(2);
  EXPECT_TRUE(d.Propose(4).empty());
  d.Complete(3);
  // Tiling is out of patience: the next proposals are pipeline changes.
  std::vector<Candidate> p = d.Propose(4);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].stage, "pipeline");
  EXPECT_EQ(p[1].stage, "pipeline");
  EXPECT_NE(ParamsKey(p[0].params), ParamsKey(p[1].params));
}

TEST(GuidedTest, DeterministicAndResumable) {
  auto cost = [](const ParamMap& p) {
    return Result{v1::OUTCOME_OK, 100.0 + (I(p, "t1") - 4) * (I(p, "t1") - 4) -
                                      I(p, "t2") / 8.0 - I(p, "p1")};
  };
  GuidedOptions o;
  o.seed = 7;
  Driver a(cost, o), b(cost, o);
  while (a.Step()) {
  }
  while (b.Step()) {
  }
  ASSERT_EQ(a.rounds().size(), b.rounds().size());
  for (size_t i = 0; i < a.rounds().size(); ++i) {
    EXPECT_EQ(ParamsKey(a.rounds()[i].params()),
              ParamsKey(b.rounds()[i].params()));
  }
  // A fresh strategy object (a restarted coordinator) on a prefix of the
  // history proposes what the original did next.
  Driver c(cost, o);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(c.Step());
  const std::vector<Candidate> before = c.Propose(2);
  std::unique_ptr<Strategy> restarted = NewGuidedStrategy(o);
  const std::vector<Candidate> after = restarted->Propose(c.History(), 2);
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(ParamsKey(before[i].params), ParamsKey(after[i].params));
    EXPECT_EQ(before[i].rationale, after[i].rationale);
  }
  EXPECT_EQ(I(a.best_round().params(), "t1"), 4);
  EXPECT_EQ(I(a.best_round().params(), "t2"), 64);
  EXPECT_EQ(I(a.best_round().params(), "p1"), 3);
}

TEST(GuidedTest, OptionsAndFactory) {
  v1::StrategySpec s;
  s.set_name("guided");
  s.set_seed(9);
  (*s.mutable_options())["tiling_patience"] = "3";
  (*s.mutable_options())["in_core_patience"] = "unlimited";
  absl::StatusOr<GuidedOptions> o = GuidedOptionsFromSpec(s);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->tiling_patience, 3);
  EXPECT_EQ(o->pipeline_patience, 8);
  EXPECT_EQ(o->in_core_patience, 0);
  EXPECT_EQ(o->seed, 9u);
  (*s.mutable_options())["pipeline_patience"] = "-2";
  EXPECT_EQ(GuidedOptionsFromSpec(s).status().message(),
            "strategy.options.pipeline_patience: '-2' is not a count in [0, "
            "1000000] (0 or 'unlimited' = no limit)");
  s.mutable_options()->erase("pipeline_patience");
  (*s.mutable_options())["escapes"] = "unlimited";
  EXPECT_EQ(GuidedOptionsFromSpec(s).status().message(),
            "strategy.options.escapes: 'unlimited' is not a count in [0, "
            "1000000] (0 = no escape moves)");
  (*s.mutable_options())["escapes"] = "0";
  ASSERT_TRUE(GuidedOptionsFromSpec(s).ok());
  EXPECT_EQ(GuidedOptionsFromSpec(s)->escapes, 0);
  EXPECT_EQ(GuidedOptions().escapes, 30);
  (*s.mutable_options())["speed"] = "1";
  EXPECT_THAT(GuidedOptionsFromSpec(s).status().message(),
              HasSubstr("strategy.options.speed: unknown option"));

  v1::SweepSpec spec;
  spec.mutable_strategy()->set_name("guided");
  absl::StatusOr<std::unique_ptr<Strategy>> st = NewStrategy(spec, Op());
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ((*st)->name(), "guided");
}

}  // namespace
}  // namespace tunefarm
