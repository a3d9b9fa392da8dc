// Issue 4's termination reasons and the guided strategy's stage transitions,
// end to end through the coordinator's domain core.
//
// Each test drives a real Coordinator (no gRPC) over a real RocksDB store in
// a temp dir, with a FakeClock, one simulated board and hand-made results
// and diagnoses (the numbers a sim board and the analyzer would report).
// Assertions read the sweep's recorded termination reason and detail back
// from the Store.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "coordinator/coordinator.h"
#include "coordinator/saturation.h"
#include "coordinator/spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/catalog.h"
#include "storage/store.h"
#include "tests/coordinator/coordinator_harness.h"

namespace tunefarm {
namespace {

using ::testing::HasSubstr;

// Stage sizes chosen so that every patience count can run out: 8 tiling
// values (7 moves > 5), 10 pipeline values (9 moves > 8), 4 in_core values.
constexpr char kStagedOperator[] = R"(
name: staged
parameters:
  - {name: tile, values: [1, 2, 3, 4, 5, 6, 7, 8], default: 1, stage: tiling}
  - {name: depth, values: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], default: 1, stage: pipeline}
  - {name: vec, values: [1, 2, 4, 8], default: 1, stage: in_core}
workloads:
  - {name: one, dtype: fp16, dims: {n: 64}}
tolerances: {rtol: 0.01, atol: 0.001}
backends:
  sim: {command: ["{bin}/staged"]}
)";

// Two configurations: the baseline and one candidate.
constexpr char kTinyOperator[] = R"(
name: tiny
parameters:
  - {name: x, values: [1, 2], default: 1}
workloads:
  - {name: one, dtype: fp32, dims: {n: 16}}
tolerances: {rtol: 0.01, atol: 0.001}
backends:
  sim: {command: ["{bin}/tiny"]}
)";

constexpr char kBoard[] = "a1/b0";

struct Spec {
  std::string op = "staged";
  std::string goal = "{speedup: 100}";
  std::string strategy = "grid";
  std::string budget = "{max_rounds: 100, max_rounds_without_gain: 100}";
  std::string extra = "";  // more top-level YAML lines
};

std::string Yaml(const Spec& s) {
  return absl::StrCat("name: term\nteam: qa\noperator: ", s.op,
                      "\ngoal: ", s.goal, "\nstrategy: ", s.strategy,
                      "\nbudget: ", s.budget,
                      "\nmin_gain: 0.02\nboards: {kind: sim}\n",
                      "measurement: {warmup: 1, samples: 5}\n", s.extra);
}

class TerminationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(disk_.MakeDir("termination_test").ok());
    for (const char* text : {kStagedOperator, kTinyOperator}) {
      absl::StatusOr<v1::OperatorManifest> op =
          ParseOperatorManifest(text, "test/operator.yaml");
      ASSERT_TRUE(op.ok()) << op.status();
      catalog_.Add(*op);
    }
    CoordinatorOptions options;
    options.lease_duration = absl::Seconds(10);
    options.agent_timeout = absl::Hours(100);  // time-limit tests jump ahead
    absl::Status st = disk_.Open(&catalog_, &clock_, options);
    ASSERT_TRUE(st.ok()) << st;
    v1::RegisterAgentRequest reg;
    reg.set_agent_id("a1");
    reg.set_node("node-a1");
    v1::BoardInfo* b = reg.add_boards();
    b->set_board_id(kBoard);
    b->set_kind("sim");
    b->set_chip("chip-x");
    b->set_simulated(true);
    ASSERT_TRUE(coord()->RegisterAgent(reg).ok());
  }

  Coordinator* coord() { return disk_.coordinator(); }
  Store* store() { return disk_.store(); }

  void Submit(const Spec& spec) {
    v1::SubmitSweepRequest request;
    request.set_spec_yaml(Yaml(spec));
    absl::StatusOr<v1::SubmitSweepResponse> r =
        coord()->SubmitSweep(request, AnonymousAdmin());
    ASSERT_TRUE(r.ok()) << r.status();
    id_ = r->sweep().sweep_id();
  }

  // The next round for the board; round_id -1 when none was granted.
  v1::WorkItem Lease() {
    v1::LeaseWorkRequest request;
    request.set_agent_id("a1");
    request.set_board_id(kBoard);
    absl::StatusOr<v1::LeaseWorkResponse> r = coord()->LeaseWork(request);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok() || !r->granted()) {
      v1::WorkItem none;
      none.set_round_id(-1);
      return none;
    }
    return r->work();
  }

  void Report(const v1::WorkItem& w, v1::Outcome outcome, double us) {
    v1::ReportResultRequest request;
    request.set_agent_id("a1");
    request.set_board_id(kBoard);
    request.set_lease_id(w.lease_id());
    request.set_epoch(w.epoch());
    request.set_sweep_id(w.sweep_id());
    request.set_round_id(w.round_id());
    v1::RoundResult* result = request.mutable_result();
    result->set_outcome(outcome);
    result->mutable_precision()->set_passed(outcome == v1::OUTCOME_OK);
    if (outcome == v1::OUTCOME_OK) {
      v1::Measurement* m = result->mutable_measurement();
      m->set_median_us(us);
      m->set_p20_us(us);
      m->set_p80_us(us);
      m->set_samples(5);
      m->set_simulated(true);
    } else {
      result->set_detail("test says no");
    }
    absl::StatusOr<v1::ReportResultResponse> r = coord()->ReportResult(request);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->accepted()) << r->reason();
  }

  // Leases the next round and reports it OK at `us`; its id (-1: none).
  int64_t Run(double us) {
    const v1::WorkItem w = Lease();
    if (w.round_id() >= 0) Report(w, v1::OUTCOME_OK, us);
    return w.round_id();
  }

  absl::Status Diagnose(int64_t round_id, const v1::Diagnosis& given) {
    v1::Diagnosis d = given;
    d.set_sweep_id(id_);
    d.set_round_id(round_id);
    d.set_epoch(1);
    d.set_analyzer_id("an-1");
    d.set_simulated(true);
    return coord()->RecordDiagnosis(d);
  }

  v1::Sweep Sweep() {
    absl::StatusOr<v1::Sweep> s = store()->GetSweep(id_);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : v1::Sweep();
  }
  std::vector<v1::Round> Rounds() {
    absl::StatusOr<std::vector<v1::Round>> r = store()->ListRounds(id_);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : std::vector<v1::Round>();
  }
  bool Running() { return Sweep().state() == v1::SWEEP_STATE_RUNNING; }

  // The sweep ended in `state` for `reason`. A search that ended with a
  // best other than the baseline waits for its closing check (a round that
  // times the best against the baseline): it is run first, unpaired.
  void ExpectEnded(v1::SweepState state, v1::TerminationReason reason,
                   const std::string& detail) {
    if (Running() && Sweep().has_closing_check()) {
      const int64_t check = Sweep().closing_check().round_id();
      EXPECT_EQ(Run(Sweep().best_us()), check);
    }
    const v1::Sweep s = Sweep();
    EXPECT_EQ(s.state(), state) << v1::SweepState_Name(s.state());
    EXPECT_EQ(s.termination(), reason)
        << v1::TerminationReason_Name(s.termination()) << ": "
        << s.termination_detail();
    EXPECT_THAT(s.termination_detail(), HasSubstr(detail));
    EXPECT_EQ(coord()->active_sweeps(), 0);
  }

  OperatorCatalog catalog_;
  FakeClock clock_;
  CoordinatorOnDisk disk_;
  std::string id_;
};

v1::Diagnosis AscendLike(double core_utilization_pct, double bubble_rate_pct) {
  v1::Diagnosis d;
  d.mutable_timeline()->set_core_utilization_pct(core_utilization_pct);
  d.mutable_timeline()->set_bubble_rate_pct(bubble_rate_pct);
  d.add_hotspots()->set_op_name("MatMul");
  return d;
}

v1::Diagnosis Gpu(double achieved_tflops, double attainable_tflops) {
  v1::Diagnosis d;
  v1::RooflineSignals* r = d.mutable_roofline();
  r->set_peak_tflops(60);
  r->set_bandwidth_gbps(4800);
  r->set_ridge_flop_per_byte(12.5);
  r->set_arithmetic_intensity(2);
  r->set_attainable_tflops(attainable_tflops);
  r->set_achieved_tflops(achieved_tflops);
  d.add_hotspots()->set_op_name("gemm_kernel");
  return d;
}

// --- stages ---------------------------------------------------------------

TEST_F(TerminationTest, GuidedStagesMoveOnAtTheirPatienceThenStagesExhausted) {
  Submit({.strategy = "guided"});
  ASSERT_EQ(Run(100), 0);
  // Nothing ever gains: tiling ends after 5 rounds, pipeline after 8,
  // in_core (unlimited) after its 3 moves; the pass kept nothing, so 30
  // escape moves (the default) follow, then the stages are exhausted.
  while (Run(100) >= 0) {
  }
  const std::vector<v1::Round> rounds = Rounds();
  ASSERT_EQ(rounds.size(), 1u + 5 + 8 + 3 + 30);
  for (size_t i = 1; i < rounds.size(); ++i) {
    const char* want = i <= 5    ? "tiling"
                       : i <= 13 ? "pipeline"
                       : i <= 16 ? "in_core"
                                 : "escape";
    EXPECT_EQ(rounds[i].stage(), want) << "round " << i;
    if (i <= 16) {
      EXPECT_EQ(rounds[i].changes_size(), 1) << "round " << i;
    } else {
      EXPECT_GE(rounds[i].changes_size(), 2) << "round " << i;
    }
  }
  ExpectEnded(v1::SWEEP_STATE_SUCCEEDED, v1::TERMINATION_STAGES_EXHAUSTED,
              "every stage exhausted after pass 1 (the pass kept no change); "
              "30 escape moves from the best found no gain");
}

TEST_F(TerminationTest, KeptEscapeMoveStartsANewPass) {
  Submit({.strategy =
              "{name: guided, options: {tiling_patience: 1, pipeline_patience: "
              "1, in_core_patience: 1, escapes: 3}}"});
  ASSERT_EQ(Run(100), 0);
  for (int i = 1; i <= 3; ++i) ASSERT_EQ(Run(100), i);
  ASSERT_EQ(Run(50), 4);  // the first escape move gains
  while (Run(60) >= 0) {
  }
  // The last round is the closing check, which the loop ran too.
  const std::vector<v1::Round> rounds = Rounds();
  ASSERT_EQ(rounds.size(), 12u);
  const std::vector<std::string> stages = {
      "baseline", "tiling",  "pipeline", "in_core", "escape", "tiling",
      "pipeline", "in_core", "escape",   "escape",  "escape", "closing check"};
  for (size_t i = 1; i < rounds.size(); ++i) {
    EXPECT_EQ(rounds[i].stage(), stages[i]) << "round " << i;
  }
  EXPECT_EQ(rounds[4].decision(), v1::DECISION_KEPT);
  EXPECT_GE(rounds[4].changes_size(), 2);
  EXPECT_EQ(rounds[5].parent_round(), 4);
  ExpectEnded(v1::SWEEP_STATE_SUCCEEDED, v1::TERMINATION_STAGES_EXHAUSTED,
              "every stage exhausted after pass 2 (the pass kept no change); "
              "3 escape moves from the best found no gain");
}

TEST_F(TerminationTest, GainRestartsTheStagePatience) {
  Submit({.strategy = "{name: guided, options: {pipeline_patience: 2, "
                      "in_core_patience: 1, max_passes: 1}}"});
  ASSERT_EQ(Run(100), 0);
  // Round 2 (tiling) is kept: tiling then needs 5 more rounds without gain
  // (7 tiling rounds in all; its 5 untried moves from the new best fit).
  ASSERT_EQ(Run(100), 1);
  ASSERT_EQ(Run(50), 2);
  while (Run(60) >= 0) {
  }
  const std::vector<v1::Round> rounds = Rounds();
  EXPECT_EQ(rounds[2].decision(), v1::DECISION_KEPT);
  ASSERT_EQ(rounds.size(), 1u + 2 + 5 + 2 + 1 + 1);  // the closing check last
  for (size_t i = 1; i < rounds.size(); ++i) {
    const char* want = i <= 7    ? "tiling"
                       : i <= 9  ? "pipeline"
                       : i <= 10 ? "in_core"
                                 : "closing check";
    EXPECT_EQ(rounds[i].stage(), want) << "round " << i;
  }
  ExpectEnded(v1::SWEEP_STATE_SUCCEEDED, v1::TERMINATION_STAGES_EXHAUSTED,
              "(pass limit reached)");
}

TEST_F(TerminationTest, GuidedThatTriedEverythingEndsAsSpaceExhausted) {
  Submit({.op = "tiny", .strategy = "guided"});
  ASSERT_EQ(Run(100), 0);
  ASSERT_EQ(Run(100), 1);
  EXPECT_EQ(Run(100), -1);
  ExpectEnded(v1::SWEEP_STATE_SUCCEEDED, v1::TERMINATION_SPACE_EXHAUSTED,
              "every configuration of the space was tried");
}

TEST_F(TerminationTest, GridEndsAsSpaceExhausted) {
  Submit({.op = "tiny"});
  ASSERT_EQ(Run(100), 0);
  ASSERT_EQ(Run(100), 1);
  ExpectEnded(v1::SWEEP_STATE_SUCCEEDED, v1::TERMINATION_SPACE_EXHAUSTED,
              "strategy grid has no untried configuration left");
}

// --- goal, budgets, time ----------------------------------------------------

TEST_F(TerminationTest, GoalBySpeedup) {
  Submit({.goal = "{speedup: 2}"});
  ASSERT_EQ(Run(100), 0);
  ASSERT_EQ(Run(60), 1);
  EXPECT_TRUE(Running());
  ASSERT_EQ(Run(40), 2);
  ExpectEnded(v1::SWEEP_STATE_SUCCEEDED, v1::TERMINATION_GOAL_REACHED,
              "speedup 2.50x reached the goal of 2.00x");
}

TEST_F(TerminationTest, GoalByTargetTime) {
  Submit({.goal = "{target_us: 45}"});
  ASSERT_EQ(Run(100), 0);
  ASSERT_EQ(Run(50), 1);
  EXPECT_TRUE(Running());
  ASSERT_EQ(Run(45), 2);
  ExpectEnded(v1::SWEEP_STATE_SUCCEEDED, v1::TERMINATION_GOAL_REACHED,
              "45.0 µs reached the target of 45.0 µs");
}

TEST_F(TerminationTest, RoundBudget) {
  Submit({.budget = "{max_rounds: 3}"});
  ASSERT_EQ(Run(100), 0);
  for (int i = 1; i <= 3; ++i) ASSERT_EQ(Run(100 - i * 10), i);
  ExpectEnded(v1::SWEEP_STATE_SUCCEEDED, v1::TERMINATION_ROUND_BUDGET,
              "round budget of 3 spent");
  EXPECT_EQ(Rounds().size(), 5u);  // the baseline, 3, the closing check
}

TEST_F(TerminationTest, RoundsWithoutGain) {
  Submit({.budget = "{max_rounds: 50, max_rounds_without_gain: 3}"});
  ASSERT_EQ(Run(100), 0);
  ASSERT_EQ(Run(80), 1);  // a gain resets the count
  for (int i = 2; i <= 4; ++i) ASSERT_EQ(Run(99), i);
  ExpectEnded(v1::SWEEP_STATE_SUCCEEDED, v1::TERMINATION_NO_GAIN,
              "3 rounds in a row without gain");
}

TEST_F(TerminationTest, TimeLimitDefaultsToTwelveHours) {
  Submit({});
  EXPECT_EQ(Sweep().spec().budget().time_limit_s(), 12 * 3600);
  ASSERT_EQ(Run(100), 0);
  clock_.Advance(absl::Hours(12) - absl::Seconds(1));
  ASSERT_TRUE(coord()->Tick().ok());
  EXPECT_TRUE(Running());
  ASSERT_EQ(Run(99), 1);
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(coord()->Tick().ok());
  ExpectEnded(v1::SWEEP_STATE_SUCCEEDED, v1::TERMINATION_TIME_LIMIT,
              "time limit of 43200 s reached");
}

TEST_F(TerminationTest, TimeLimitEndsAtTheResultThatCrossesIt) {
  Submit({.budget = "{max_rounds: 50, time_limit: 10m}"});
  ASSERT_EQ(Run(100), 0);
  const v1::WorkItem w = Lease();
  ASSERT_EQ(w.round_id(), 1);
  clock_.Advance(absl::Minutes(10));
  Report(w, v1::OUTCOME_OK, 99);
  ExpectEnded(v1::SWEEP_STATE_SUCCEEDED, v1::TERMINATION_TIME_LIMIT,
              "time limit of 600 s reached");
}

TEST_F(TerminationTest, BaselineFailed) {
  Submit({});
  const v1::WorkItem w = Lease();
  ASSERT_EQ(w.round_id(), 0);
  Report(w, v1::OUTCOME_PRECISION_FAILED, 0);
  ExpectEnded(v1::SWEEP_STATE_FAILED, v1::TERMINATION_BASELINE_FAILED,
              "OUTCOME_PRECISION_FAILED");
}

TEST_F(TerminationTest, Cancel) {
  Submit({});
  ASSERT_EQ(Run(100), 0);
  v1::CancelSweepRequest cancel;
  cancel.set_sweep_id(id_);
  cancel.set_reason("wrong workload");
  ASSERT_TRUE(coord()->CancelSweep(cancel, AnonymousAdmin()).ok());
  ExpectEnded(v1::SWEEP_STATE_CANCELLED, v1::TERMINATION_CANCELLED,
              "wrong workload");
}

// --- board saturated -------------------------------------------------------

TEST_F(TerminationTest, AscendLikeBoardSaturatedByTheBaselineDiagnosis) {
  Submit({});
  ASSERT_EQ(Run(100), 0);
  // Utilisation high but bubbles too: headroom left. (A round's diagnosis
  // is recorded once: the next reading comes from the next kept round.)
  ASSERT_TRUE(Diagnose(0, AscendLike(86, 12)).ok());
  EXPECT_TRUE(Running());
  ASSERT_EQ(Run(80), 1);
  ASSERT_TRUE(Diagnose(1, AscendLike(86, 6)).ok());
  ExpectEnded(v1::SWEEP_STATE_SUCCEEDED, v1::TERMINATION_BOARD_SATURATED,
              "board saturated on round 1 (board a1/b0): core utilisation "
              "86% > 80% and bubble rate 6% < 10% [simulated]");
}

TEST_F(TerminationTest, SaturationReadsOnlyTheKeptRoundsDiagnosis) {
  Submit({});
  ASSERT_EQ(Run(100), 0);
  ASSERT_EQ(Run(120), 1);  // rolled back
  ASSERT_TRUE(Diagnose(1, AscendLike(95, 1)).ok());
  EXPECT_TRUE(Running());
  ASSERT_EQ(Run(80), 2);  // kept: its diagnosis counts
  ASSERT_TRUE(Diagnose(2, AscendLike(81, 9.5)).ok());
  ExpectEnded(v1::SWEEP_STATE_SUCCEEDED, v1::TERMINATION_BOARD_SATURATED,
              "saturated on round 2");
}

TEST_F(TerminationTest, AscendThresholdsComeFromTheSpec) {
  Submit({.extra =
              "saturation: {core_utilization_pct: 90, bubble_rate_pct: 5}\n"});
  ASSERT_EQ(Run(100), 0);
  ASSERT_TRUE(Diagnose(0, AscendLike(86, 4)).ok());
  EXPECT_TRUE(Running());
  ASSERT_EQ(Run(80), 1);
  ASSERT_TRUE(Diagnose(1, AscendLike(92, 6)).ok());
  EXPECT_TRUE(Running());
  ASSERT_EQ(Run(60), 2);
  ASSERT_TRUE(Diagnose(2, AscendLike(92, 4)).ok());
  ExpectEnded(v1::SWEEP_STATE_SUCCEEDED, v1::TERMINATION_BOARD_SATURATED,
              "core utilisation 92% > 90% and bubble rate 4% < 5%");
}

TEST_F(TerminationTest, GpuSaturatedAtItsRooflineBound) {
  Submit({});
  ASSERT_EQ(Run(100), 0);
  ASSERT_TRUE(Diagnose(0, Gpu(9.0, 9.6)).ok());  // 94%: outside 5%
  EXPECT_TRUE(Running());
  ASSERT_EQ(Run(90), 1);
  ASSERT_TRUE(Diagnose(1, Gpu(9.2, 9.6)).ok());  // 96%
  ExpectEnded(v1::SWEEP_STATE_SUCCEEDED, v1::TERMINATION_BOARD_SATURATED,
              "gemm_kernel at 9.2 TFLOP/s is 96% of its roofline bound 9.6 "
              "TFLOP/s (memory-bound at 2 FLOP/byte; within the 5% margin)");
}

// A diagnosis names the bundle of a recorded result (issue 16): one that
// comes before its round's result is refused, and the agent's re-sent
// bundle, diagnosed after the result, is what saturation reads.
TEST_F(TerminationTest, DiagnosisBeforeTheResultIsCheckedWithTheResult) {
  Submit({.extra = "saturation: {roofline_margin: 0.1}\n"});
  ASSERT_EQ(Run(100), 0);
  const v1::WorkItem w = Lease();
  ASSERT_EQ(w.round_id(), 1);
  EXPECT_EQ(Diagnose(1, Gpu(9.0, 9.6)).code(),  // 94%: within 10%
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Running());
  Report(w, v1::OUTCOME_OK, 90);
  ASSERT_TRUE(Diagnose(1, Gpu(9.0, 9.6)).ok());
  ExpectEnded(v1::SWEEP_STATE_SUCCEEDED, v1::TERMINATION_BOARD_SATURATED,
              "within the 10% margin");
}

TEST_F(TerminationTest, SaturationCanBeTurnedOff) {
  Submit({.extra = "saturation: {enabled: false}\n"});
  ASSERT_EQ(Run(100), 0);
  ASSERT_TRUE(Diagnose(0, AscendLike(99, 0.5)).ok());
  ASSERT_EQ(Run(80), 1);
  ASSERT_TRUE(Diagnose(1, Gpu(9.6, 9.6)).ok());
  EXPECT_TRUE(Running());
}

TEST(SaturationTest, UnmeasuredSignalsNeverSaturate) {
  const v1::SaturationPolicy defaults;
  EXPECT_FALSE(SaturationOf(v1::Diagnosis(), defaults).has_value());
  v1::Diagnosis no_ai;  // Ascend task tables: achieved only, no bound
  no_ai.mutable_roofline()->set_achieved_tflops(50);
  EXPECT_FALSE(SaturationOf(no_ai, defaults).has_value());
  EXPECT_TRUE(SaturationOf(AscendLike(80.5, 9.9), defaults).has_value());
  EXPECT_FALSE(SaturationOf(AscendLike(80, 5), defaults).has_value());
  EXPECT_FALSE(SaturationOf(AscendLike(85, 10), defaults).has_value());
}

TEST(SaturationTest, BadPolicyNamesTheField) {
  OperatorCatalog catalog;
  absl::StatusOr<v1::OperatorManifest> op =
      ParseOperatorManifest(kTinyOperator, "test/operator.yaml");
  ASSERT_TRUE(op.ok()) << op.status();
  catalog.Add(*op);
  for (const auto& [extra, field] :
       std::vector<std::pair<std::string, std::string>>{
           {"saturation: {roofline_margin: 1.5}\n",
            "saturation.roofline_margin"},
           {"saturation: {core_utilization_pct: 120}\n",
            "saturation.core_utilization_pct"},
           {"saturation: {bubble_rate_pct: -1}\n",
            "saturation.bubble_rate_pct"},
           {"saturation: {enabled: maybe}\n", "saturation.enabled"},
           {"saturation: {utilisation: 80}\n", "utilisation"}}) {
    absl::StatusOr<v1::SweepSpec> spec =
        ParseSweepSpec(Yaml({.op = "tiny", .extra = extra}));
    if (spec.ok()) spec = ValidateSweepSpec(*spec, catalog);
    ASSERT_FALSE(spec.ok()) << extra;
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(spec.status().message(), HasSubstr(field)) << extra;
  }
}

}  // namespace
}  // namespace tunefarm
