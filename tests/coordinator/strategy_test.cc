// Search strategies: grid and random against histories built here, the way
// the coordinator grows them (every proposal becomes a round).
#include "coordinator/strategy.h"

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/seed_seq.h"
#include "coordinator/strategy_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/catalog.h"

namespace tunefarm {
namespace {

using ::testing::HasSubstr;

// A manifest with domains of the given sizes (integer values 0..size-1,
// default 0), parameters p0, p1, ...
v1::OperatorManifest Manifest(const std::vector<int>& sizes) {
  v1::OperatorManifest op;
  op.set_name("toy");
  for (size_t i = 0; i < sizes.size(); ++i) {
    v1::ParameterDomain* p = op.add_parameters();
    p->set_name(absl::StrCat("p", i));
    for (int v = 0; v < sizes[i]; ++v) *p->add_values() = IntParam(v * 10);
    *p->mutable_default_value() = p->values(0);
    p->set_stage("tiling");
  }
  return op;
}

// The mixed-typed 12-point space used by most tests.
v1::OperatorManifest SmallManifest() {
  v1::OperatorManifest op;
  op.set_name("small");
  v1::ParameterDomain* a = op.add_parameters();
  a->set_name("tile");
  for (int v : {16, 32, 64}) *a->add_values() = IntParam(v);
  *a->mutable_default_value() = IntParam(32);
  v1::ParameterDomain* b = op.add_parameters();
  b->set_name("layout");
  for (const char* v : {"nd", "nz"}) *b->add_values() = StringParam(v);
  *b->mutable_default_value() = StringParam("nd");
  v1::ParameterDomain* c = op.add_parameters();
  c->set_name("double_buffer");
  for (bool v : {false, true}) *c->add_values() = BoolParam(v);
  *c->mutable_default_value() = BoolParam(false);
  return op;
}

// A sweep's history, grown the way the coordinator grows it.
class History {
 public:
  History(v1::OperatorManifest op, std::string strategy, uint64_t seed)
      : op_(std::move(op)) {
    spec_.set_operator_name(op_.name());
    spec_.mutable_strategy()->set_name(strategy);
    spec_.mutable_strategy()->set_seed(seed);
    *spec_.mutable_baseline_params() = DefaultParams(op_);
    v1::Round baseline;
    baseline.set_round_id(0);
    baseline.set_parent_round(-1);
    *baseline.mutable_params() = spec_.baseline_params();
    baseline.set_state(v1::ROUND_STATE_DONE);
    baseline.set_decision(v1::DECISION_BASELINE);
    rounds_.push_back(baseline);
    best_round_ = 0;
  }

  SearchHistory view() const {
    return SearchHistory{&op_, &spec_, &rounds_, best_round_};
  }

  // Records candidates as queued rounds.
  void Add(const std::vector<Candidate>& cands) {
    for (const Candidate& c : cands)
      AddParams(c.params, v1::ROUND_STATE_QUEUED);
  }
  void AddParams(const ParamMap& params, v1::RoundState state) {
    v1::Round r;
    r.set_round_id(static_cast<int64_t>(rounds_.size()));
    r.set_parent_round(best_round_);
    *r.mutable_params() = params;
    r.set_state(state);
    rounds_.push_back(std::move(r));
  }

  std::set<std::string> Keys() const {
    std::set<std::string> keys;
    for (const v1::Round& r : rounds_) keys.insert(ParamsKey(r.params()));
    return keys;
  }

  v1::OperatorManifest op_;
  v1::SweepSpec spec_;
  std::vector<v1::Round> rounds_;
  int64_t best_round_ = -1;
};

std::vector<std::string> KeysOf(const std::vector<Candidate>& cands) {
  std::vector<std::string> keys;
  for (const Candidate& c : cands) keys.push_back(ParamsKey(c.params));
  return keys;
}

std::unique_ptr<Strategy> Make(const History& h) {
  absl::StatusOr<std::unique_ptr<Strategy>> s = NewStrategy(h.spec_, h.op_);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

// Proposes in batches of `batch` until the strategy reports exhaustion;
// returns every proposal in order and checks each against the contract.
std::vector<std::string> RunToExhaustion(History& h, int batch) {
  std::unique_ptr<Strategy> s = Make(h);
  std::vector<std::string> all;
  for (int calls = 0; calls < 10000; ++calls) {
    std::vector<Candidate> cands = s->Propose(h.view(), batch);
    if (cands.empty()) break;
    EXPECT_LE(static_cast<int>(cands.size()), batch);
    const std::set<std::string> before = h.Keys();
    std::set<std::string> batch_keys;
    for (const Candidate& c : cands) {
      const std::string key = ParamsKey(c.params);
      EXPECT_FALSE(before.contains(key)) << "repeats history: " << key;
      EXPECT_TRUE(batch_keys.insert(key).second) << "repeats batch: " << key;
      EXPECT_TRUE(ValidateParams(h.op_, c.params).ok()) << key;
      all.push_back(key);
    }
    h.Add(cands);
  }
  return all;
}

TEST(GridStrategy, EnumeratesEverythingOnceInManifestOrderThenExhausts) {
  History h(SmallManifest(), "grid", 1);
  std::vector<std::string> proposed = RunToExhaustion(h, 5);

  // Nested loops in manifest order, first parameter slowest, minus the
  // baseline (already in the history).
  std::vector<std::string> expected;
  const std::string baseline = ParamsKey(h.spec_.baseline_params());
  const v1::OperatorManifest& op = h.op_;
  for (const auto& a : op.parameters(0).values()) {
    for (const auto& b : op.parameters(1).values()) {
      for (const auto& c : op.parameters(2).values()) {
        ParamMap p;
        p["tile"] = a;
        p["layout"] = b;
        p["double_buffer"] = c;
        if (ParamsKey(p) != baseline) expected.push_back(ParamsKey(p));
      }
    }
  }
  EXPECT_EQ(proposed, expected);
  EXPECT_EQ(h.Keys().size(), SpaceSize(op));
  EXPECT_TRUE(Make(h)->Propose(h.view(), 3).empty());
}

TEST(GridStrategy, SkipsConfigurationsInAnyState) {
  History h(Manifest({2, 2}), "grid", 1);
  ParamMap p;
  p["p0"] = IntParam(0);
  p["p1"] = IntParam(10);
  h.AddParams(p, v1::ROUND_STATE_LEASED);
  p["p0"] = IntParam(10);
  p["p1"] = IntParam(0);
  h.AddParams(p, v1::ROUND_STATE_CANCELLED);
  std::vector<Candidate> cands = Make(h)->Propose(h.view(), 10);
  ASSERT_EQ(cands.size(), 1u);
  EXPECT_EQ(ParamsKey(cands[0].params), "p0=10,p1=10");
  EXPECT_THAT(cands[0].rationale, HasSubstr("grid point 4 of 4"));
}

TEST(GridStrategy, ZeroOrNegativeNProposesNothing) {
  History h(SmallManifest(), "grid", 1);
  EXPECT_TRUE(Make(h)->Propose(h.view(), 0).empty());
  EXPECT_TRUE(Make(h)->Propose(h.view(), -2).empty());
}

TEST(Strategies, CandidatesCarryParentAndChanges) {
  for (const char* name : {"grid", "random"}) {
    History h(SmallManifest(), name, 3);
    // Make a non-baseline round the best, so the parent is not round 0.
    ParamMap best = h.spec_.baseline_params();
    best["tile"] = IntParam(64);
    h.AddParams(best, v1::ROUND_STATE_DONE);
    h.best_round_ = 1;
    std::vector<Candidate> cands = Make(h)->Propose(h.view(), 4);
    ASSERT_EQ(cands.size(), 4u) << name;
    for (const Candidate& c : cands) {
      EXPECT_EQ(c.parent_round, 1) << name;
      std::vector<v1::ParamChange> want = DiffParams(best, c.params);
      ASSERT_EQ(c.changes.size(), want.size()) << name;
      EXPECT_FALSE(c.changes.empty()) << name;
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(c.changes[i].name(), want[i].name());
        EXPECT_TRUE(
            ParamValueEquals(c.changes[i].from(), best.at(want[i].name())));
        EXPECT_TRUE(
            ParamValueEquals(c.changes[i].to(), c.params.at(want[i].name())));
      }
      EXPECT_FALSE(c.rationale.empty());
    }
  }
}

TEST(Strategies, BeforeBaselinePassedParentIsMinusOneAndDiffIsAgainstBaseline) {
  History h(SmallManifest(), "random", 3);
  h.best_round_ = -1;
  std::vector<Candidate> cands = Make(h)->Propose(h.view(), 2);
  ASSERT_EQ(cands.size(), 2u);
  for (const Candidate& c : cands) {
    EXPECT_EQ(c.parent_round, -1);
    EXPECT_EQ(c.changes.size(),
              DiffParams(h.spec_.baseline_params(), c.params).size());
  }
}

TEST(RandomStrategy, DeterministicForTheSameHistory) {
  for (const std::vector<int>& sizes :
       {std::vector<int>{3, 4, 5}, std::vector<int>(20, 10)}) {
    History h(Manifest(sizes), "random", 42);
    std::vector<Candidate> a = Make(h)->Propose(h.view(), 6);
    std::vector<Candidate> b = Make(h)->Propose(h.view(), 6);  // a restart
    ASSERT_EQ(a.size(), 6u);
    EXPECT_EQ(KeysOf(a), KeysOf(b));
    // A smaller batch is a prefix of a larger one.
    std::vector<Candidate> c = Make(h)->Propose(h.view(), 2);
    ASSERT_EQ(c.size(), 2u);
    const std::vector<std::string> a_keys = KeysOf(a);
    EXPECT_EQ(KeysOf(c),
              std::vector<std::string>(a_keys.begin(), a_keys.begin() + 2));
  }
}

TEST(RandomStrategy, DifferentSeedsDrawDifferently) {
  for (const std::vector<int>& sizes :
       {std::vector<int>{4, 4, 4}, std::vector<int>(20, 10)}) {
    History h1(Manifest(sizes), "random", 1);
    History h2(Manifest(sizes), "random", 2);
    EXPECT_NE(KeysOf(Make(h1)->Propose(h1.view(), 8)),
              KeysOf(Make(h2)->Propose(h2.view(), 8)));
  }
}

TEST(RandomStrategy, NeverRepeatsAndExhaustsASmallSpace) {
  History h(SmallManifest(), "random", 9);
  std::vector<std::string> proposed = RunToExhaustion(h, 4);
  EXPECT_EQ(proposed.size(), SpaceSize(h.op_) - 1);  // all but the baseline
  EXPECT_EQ(std::set<std::string>(proposed.begin(), proposed.end()).size(),
            proposed.size());
  EXPECT_EQ(h.Keys().size(), SpaceSize(h.op_));
}

TEST(RandomStrategy, BatchOfManyIsDistinctInALargeSpace) {
  // 10^20 configurations: the rejection-sampling path.
  History h(Manifest(std::vector<int>(20, 10)), "random", 5);
  std::vector<Candidate> cands = Make(h)->Propose(h.view(), 200);
  ASSERT_EQ(cands.size(), 200u);
  std::set<std::string> keys;
  for (const Candidate& c : cands) {
    EXPECT_TRUE(ValidateParams(h.op_, c.params).ok());
    keys.insert(ParamsKey(c.params));
  }
  EXPECT_EQ(keys.size(), 200u);
  EXPECT_FALSE(keys.contains(ParamsKey(h.spec_.baseline_params())));
}

TEST(RandomStrategy, MostlyVisitedMediumSpaceStillFindsWhatIsLeft) {
  // 70,000 configurations, above the plain enumeration limit, with all but
  // 5 visited: only enumeration can find the rest reliably.
  History h(Manifest({7, 10, 1000}), "random", 11);
  std::set<std::string> left;
  for (int a = 0; a < 7; ++a) {
    for (int b = 0; b < 10; ++b) {
      for (int c = 0; c < 1000; ++c) {
        ParamMap p;
        p["p0"] = IntParam(a * 10);
        p["p1"] = IntParam(b * 10);
        p["p2"] = IntParam(c * 10);
        if (a == 0 && b == 0 && c == 0) continue;  // the baseline
        if ((a * 10000 + b * 1000 + c) % 13999 == 7) {
          left.insert(ParamsKey(p));
          continue;
        }
        h.AddParams(p, v1::ROUND_STATE_DONE);
      }
    }
  }
  ASSERT_EQ(left.size(), 5u);
  std::vector<Candidate> cands = Make(h)->Propose(h.view(), 10);
  std::vector<std::string> keys = KeysOf(cands);
  EXPECT_EQ(std::set<std::string>(keys.begin(), keys.end()), left);
}

TEST(RandomStrategy, FirstPickIsRoughlyUniform) {
  // Over 2,200 seeds the first pick among 11 untried configurations should
  // land on each about 200 times (binomial sd ~ 13.5; bounds are ~6 sd).
  std::map<std::string, int> counts;
  for (uint64_t seed = 1; seed <= 2200; ++seed) {
    History h(SmallManifest(), "random", seed);
    std::vector<Candidate> c = Make(h)->Propose(h.view(), 1);
    ASSERT_EQ(c.size(), 1u);
    ++counts[ParamsKey(c[0].params)];
  }
  EXPECT_EQ(counts.size(), 11u);
  for (const auto& [key, n] : counts) {
    EXPECT_GT(n, 120) << key;
    EXPECT_LT(n, 280) << key;
  }
}

// Grid and random keep what they derived from the history between calls
// (the visited set, the grid indices tried, where the grid walk resumes):
// a strategy that proposed all along proposes what a new one (a restarted
// coordinator's) proposes for the same history, also after the history was
// cut short (a failed commit's undo) and when it holds configurations
// outside the grid or one configuration twice.
TEST(Strategies, WhatIsKeptBetweenCallsChangesNoProposal) {
  for (const char* name : {"grid", "random"}) {
    SCOPED_TRACE(name);
    History h(Manifest({4, 5, 6}), name, 3);
    std::unique_ptr<Strategy> kept = Make(h);
    ParamMap outside = h.spec_.baseline_params();
    outside["p0"] = IntParam(7);  // not a value of p0's domain
    for (int step = 0; step < 130; ++step) {
      const int n = 1 + step % 3;
      std::vector<Candidate> got = kept->Propose(h.view(), n);
      EXPECT_EQ(KeysOf(got), KeysOf(Make(h)->Propose(h.view(), n)))
          << "step " << step;
      if (got.empty()) break;
      if (step == 20) h.AddParams(outside, v1::ROUND_STATE_DONE);
      if (step == 30) {  // the baseline measured again
        h.AddParams(h.spec_.baseline_params(), v1::ROUND_STATE_DONE);
      }
      if (step == 40) {
        // Proposed, then undone: the rounds are dropped again.
        h.Add(got);
        h.rounds_.resize(h.rounds_.size() - got.size() - 3);
        continue;
      }
      h.Add({got.front()});  // the coordinator takes one per lease
    }
    EXPECT_TRUE(kept->Propose(h.view(), 1).empty());
    EXPECT_EQ(h.Keys().size(), SpaceSize(h.op_) + 1)
        << "it stopped before every configuration was tried";
  }
}

// SeedSeq fills what std::seed_seq fills, for every length the standard's
// algorithm treats differently (t = 0, 1, 3, 5, 7, 11) and for seeds
// shorter and longer than the range; mt19937_64 seeded through it draws
// the same numbers, so proposals stay what they were.
TEST(SeedSeqTest, FillsWhatStdSeedSeqFills) {
  std::mt19937 values(12345);
  for (size_t n : {0, 1, 2, 3, 6, 7, 38, 39, 67, 68, 622, 623, 624, 1000}) {
    for (size_t s : {0, 1, 5, 8, 700, 1100}) {
      std::vector<uint32_t> v(s);
      for (uint32_t& x : v) x = values();
      std::seed_seq expected_seq(v.begin(), v.end());
      const SeedSeq ours(v);
      std::vector<uint32_t> expected(n), got(n);
      expected_seq.generate(expected.begin(), expected.end());
      ours.generate(got.begin(), got.end());
      EXPECT_EQ(got, expected) << "n=" << n << " s=" << s;
    }
  }
  std::seed_seq std_seq{7u, 0u, 42u, 0u, 0x7f4a7c15u};
  SeedSeq our_seq{7u, 0u, 42u, 0u, 0x7f4a7c15u};
  std::mt19937_64 a(std_seq), b(our_seq);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(a(), b()) << "draw " << i;
}

TEST(NewStrategy, KnownAndUnknownNames) {
  v1::OperatorManifest op = SmallManifest();
  v1::SweepSpec spec;
  spec.mutable_strategy()->set_name("grid");
  absl::StatusOr<std::unique_ptr<Strategy>> s = NewStrategy(spec, op);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->name(), "grid");
  spec.mutable_strategy()->set_name("random");
  s = NewStrategy(spec, op);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->name(), "random");

  spec.mutable_strategy()->set_name("annealing");
  s = NewStrategy(spec, op);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(),
              HasSubstr("'annealing' is unknown; known: grid, guided, hybrid, "
                        "random, tpe"));
  spec.mutable_strategy()->set_name("guided");
  s = NewStrategy(spec, op);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->name(), "guided");
}

TEST(StrategyUtil, OrderedValuesSortsNumericDomainsOnly) {
  v1::ParameterDomain numeric;
  for (int v : {64, 16, 32}) *numeric.add_values() = IntParam(v);
  std::vector<int64_t> got;
  for (const v1::ParamValue& v : OrderedValues(numeric)) {
    got.push_back(v.int_value());
  }
  EXPECT_EQ(got, (std::vector<int64_t>{16, 32, 64}));
  v1::ParameterDomain named;
  for (const char* v : {"b", "a"}) {
    named.add_values()->set_string_value(v);
  }
  const std::vector<v1::ParamValue> kept = OrderedValues(named);
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].string_value(), "b");  // declared order
}

TEST(StrategyUtil, SuggestedPositionFollowsTheDirection) {
  v1::Suggestion s;
  s.set_direction("raise");
  EXPECT_EQ(SuggestedPosition(s, 2, -1, 5), 3);  // one step
  EXPECT_EQ(SuggestedPosition(s, 2, 4, 5), 4);   // the value, that way
  EXPECT_EQ(SuggestedPosition(s, 2, 1, 5), 3);   // the value lies the other way
  EXPECT_EQ(SuggestedPosition(s, 4, -1, 5), -1);  // already at the top
  s.set_direction("lower");
  EXPECT_EQ(SuggestedPosition(s, 2, -1, 5), 1);
  EXPECT_EQ(SuggestedPosition(s, 2, 0, 5), 0);
  EXPECT_EQ(SuggestedPosition(s, 0, -1, 5), -1);
  s.set_direction("set");
  EXPECT_EQ(SuggestedPosition(s, 2, 4, 5), 4);
  EXPECT_EQ(SuggestedPosition(s, 2, 2, 5), -1);  // nothing new
  EXPECT_EQ(SuggestedPosition(s, 2, -1, 5), -1);
  s.set_direction("sideways");
  EXPECT_EQ(SuggestedPosition(s, 2, 4, 5), -1);
}

}  // namespace
}  // namespace tunefarm
