// Multi-workload sweeps (coordinator/workloads.h) through the coordinator's
// domain core: per_workload lineages sharing one board, a workload that met
// its goal taking no more boards, one_config's configurations measured on
// every workload and judged by the weighted geometric mean, recovery after
// a restart, the spec's errors for bad workload lists and weights, and the
// views the strategies see (WorkloadViews) against their definition.
//
// A real Coordinator (no gRPC) over RocksDB in a temp dir, a FakeClock, one
// simulated board and hand-made results: the time a round reports is a
// function of its workload and parameters, so the tests know which
// configuration must win.
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/files.h"
#include "coordinator/coordinator.h"
#include "coordinator/report.h"
#include "coordinator/report_render.h"
#include "coordinator/spec.h"
#include "coordinator/workloads.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/catalog.h"
#include "storage/fault_injecting_store.h"
#include "storage/store.h"
#include "tests/coordinator/coordinator_harness.h"

namespace tunefarm {
namespace {

using ::testing::HasSubstr;

constexpr char kOperator[] = R"(
name: shapes
parameters:
  - {name: tile, values: [1, 2, 4, 8], default: 1, stage: tiling}
workloads:
  - {name: small, dtype: fp32, dims: {n: 64}}
  - {name: mid, dtype: fp32, dims: {n: 256}}
  - {name: large, dtype: fp32, dims: {n: 1024}}
tolerances: {rtol: 0.01, atol: 0.001}
backends:
  sim: {command: ["{bin}/shapes"]}
)";

constexpr char kBoard[] = "a1/b0";

std::string Yaml(const std::string& workloads, const std::string& extra) {
  return absl::StrCat(
      "name: multi\nteam: qa\noperator: shapes\nworkloads: ", workloads,
      "\nstrategy: grid\nmin_gain: 0.02\nboards: {kind: sim}\n",
      "measurement: {warmup: 1, samples: 5, mode: independent}\n", extra);
}

// The time of `tile` on a workload: `small` likes tile 2, `mid` tile 4,
// `large` tile 8 (each 2x faster there than the default), and an inline
// workload like `mid`.
double TimeOf(const std::string& workload, int64_t tile) {
  const std::map<std::string, int64_t> best = {
      {"small", 2}, {"mid", 4}, {"large", 8}, {"extra", 4}};
  const double base = workload == "small" ? 10 : workload == "large" ? 90 : 40;
  return tile == best.at(workload) ? base / 2 : base * (1 + 0.1 * tile);
}

class MultiWorkloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(disk_.MakeDir("multi_workload_test").ok());
    absl::StatusOr<v1::OperatorManifest> op =
        ParseOperatorManifest(kOperator, "test/operator.yaml");
    ASSERT_TRUE(op.ok()) << op.status();
    catalog_.Add(*op);
    Open();
  }

  void Open() {
    CoordinatorOptions options;
    options.lease_duration = absl::Seconds(10);
    options.agent_timeout = absl::Hours(100);
    absl::Status st = disk_.Open(&catalog_, &clock_, options);
    ASSERT_TRUE(st.ok()) << st;
    v1::RegisterAgentRequest reg;
    reg.set_agent_id("a1");
    reg.set_node("node-a1");
    v1::BoardInfo* b = reg.add_boards();
    b->set_board_id(kBoard);
    b->set_kind("sim");
    b->set_simulated(true);
    ASSERT_TRUE(coord()->RegisterAgent(reg).ok());
  }

  Coordinator* coord() { return disk_.coordinator(); }

  void Submit(const std::string& yaml) {
    v1::SubmitSweepRequest request;
    request.set_spec_yaml(yaml);
    absl::StatusOr<v1::SubmitSweepResponse> r =
        coord()->SubmitSweep(request, AnonymousAdmin());
    ASSERT_TRUE(r.ok()) << r.status();
    id_ = r->sweep().sweep_id();
  }

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
    if (outcome == v1::OUTCOME_OK) {
      v1::Measurement* m = result->mutable_measurement();
      m->set_median_us(us);
      m->set_p20_us(us * 0.99);
      m->set_p80_us(us * 1.01);
      m->set_samples(5);
      m->set_simulated(true);
    } else {
      result->set_detail("test says no");
    }
    absl::StatusOr<v1::ReportResultResponse> r = coord()->ReportResult(request);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->accepted()) << r->reason();
  }

  // Leases the next round and reports the time its workload and tile give;
  // the work item (round_id -1: none was granted).
  v1::WorkItem Run() {
    const v1::WorkItem w = Lease();
    if (w.round_id() < 0) return w;
    Report(w, v1::OUTCOME_OK,
           TimeOf(w.workload().name(), w.params().at("tile").int_value()));
    return w;
  }

  v1::Sweep Sweep() {
    absl::StatusOr<v1::Sweep> s = disk_.store()->GetSweep(id_);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : v1::Sweep();
  }
  std::vector<v1::Round> Rounds() {
    absl::StatusOr<std::vector<v1::Round>> r = disk_.store()->ListRounds(id_);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : std::vector<v1::Round>();
  }

  OperatorCatalog catalog_;
  FakeClock clock_;
  CoordinatorOnDisk disk_;
  std::string id_;
};

TEST_F(MultiWorkloadTest, PerWorkloadLineagesShareTheBoardAndStopAtTheGoal) {
  Submit(Yaml("[small, mid, large]",
              "goal: {speedup: 1.8}\nbudget: {max_rounds: 10}\n"));
  // The baselines first, one per workload, in order; the board's work
  // item names the round's workload.
  for (int i = 0; i < 3; ++i) {
    const v1::WorkItem w = Run();
    EXPECT_EQ(w.round_id(), i);
    EXPECT_EQ(w.workload().name(), Sweep().spec().workloads(i).name());
  }
  std::map<std::string, int> leased;
  std::map<std::string, int> after_done;
  for (int n = 0; n < 40; ++n) {
    const v1::Sweep before = Sweep();
    const v1::WorkItem w = Run();
    if (w.round_id() < 0) break;
    ++leased[w.workload().name()];
    for (const v1::WorkloadProgress& p : before.workload_progress()) {
      if (p.done() && p.workload() == w.workload().name()) {
        ++after_done[p.workload()];
      }
    }
  }
  const v1::Sweep s = Sweep();
  EXPECT_EQ(s.state(), v1::SWEEP_STATE_SUCCEEDED) << s.termination_detail();
  EXPECT_EQ(s.termination(), v1::TERMINATION_GOAL_REACHED)
      << s.termination_detail();
  EXPECT_TRUE(after_done.empty()) << "a done workload took a board";
  ASSERT_EQ(s.workload_progress_size(), 3);
  const std::vector<v1::Round> rounds = Rounds();
  for (const v1::WorkloadProgress& p : s.workload_progress()) {
    EXPECT_TRUE(p.done()) << p.workload();
    EXPECT_EQ(p.termination(), v1::TERMINATION_GOAL_REACHED) << p.workload();
    EXPECT_GT(leased[p.workload()], 0) << p.workload();
    ASSERT_GE(p.best_round(), 3);
    const v1::Round& best = rounds[p.best_round()];
    EXPECT_EQ(best.workload(), p.workload());
    EXPECT_EQ(best.decision(), v1::DECISION_KEPT);
    // Each workload found its own best tile.
    EXPECT_DOUBLE_EQ(p.best_us(), TimeOf(p.workload(),
                                         best.params().at("tile").int_value()));
    EXPECT_NEAR(p.baseline_us() / p.best_us(), 2.2, 1e-9) << p.workload();
  }
  // Every candidate's parent measured the same workload.
  for (const v1::Round& r : rounds) {
    if (r.parent_round() < 0) continue;
    EXPECT_EQ(rounds[r.parent_round()].workload_index(), r.workload_index());
  }
  // The sweep's summary is the geometric mean: 2.2x everywhere is 2.2x.
  EXPECT_NEAR(s.baseline_us() / s.best_us(), 2.2, 1e-9);
  EXPECT_THAT(s.termination_detail(), HasSubstr("every workload is done"));

  // The report: one section per workload, and each round's workload.
  const nlohmann::json report = BuildReport(s, rounds, {});
  ASSERT_TRUE(ValidateReport(report).ok()) << ValidateReport(report);
  ASSERT_EQ(report.at("workloads").size(), 3u);
  EXPECT_EQ(report.at("objective"), "per_workload");
  EXPECT_EQ(report.at("rounds")[1].at("workload"), "mid");
  absl::StatusOr<std::string> md = RenderReportMarkdown(report);
  ASSERT_TRUE(md.ok()) << md.status();
  EXPECT_THAT(*md, HasSubstr("### Workload small (fp32, n=64)"));
  EXPECT_THAT(*md, HasSubstr("### Workload mid (fp32, n=256)"));
  EXPECT_THAT(*md, HasSubstr("### Workload large (fp32, n=1024)"));
  EXPECT_THAT(*md, HasSubstr("| round | workload | parent |"));
  EXPECT_THAT(*md, HasSubstr("**2.20x**"));
}

TEST_F(MultiWorkloadTest, AWorkloadThatMetItsGoalTakesNoMoreBoards) {
  // `small` reaches 1.8x on its first candidate (grid: tile 2); `large`
  // needs tile 8, beyond its budget of 2 rounds.
  Submit(Yaml("[small, large]",
              "goal: {speedup: 1.8}\nbudget: {max_rounds: 2}\n"));
  for (int i = 0; i < 2; ++i) Run();
  const v1::WorkItem first = Run();  // the workload with fewest rounds: small
  EXPECT_EQ(first.workload().name(), "small");
  EXPECT_EQ(first.params().at("tile").int_value(), 2);
  v1::Sweep s = Sweep();
  ASSERT_EQ(s.workload_progress_size(), 2);
  EXPECT_TRUE(s.workload_progress(0).done());
  EXPECT_EQ(s.workload_progress(0).termination(), v1::TERMINATION_GOAL_REACHED);
  EXPECT_FALSE(s.workload_progress(1).done());
  // From now on every board goes to `large`, until its budget is spent.
  int large = 0;
  for (v1::WorkItem w = Run(); w.round_id() >= 0; w = Run()) {
    EXPECT_EQ(w.workload().name(), "large");
    ++large;
  }
  EXPECT_EQ(large, 2);
  s = Sweep();
  EXPECT_EQ(s.state(), v1::SWEEP_STATE_SUCCEEDED);
  // Not every workload met its goal: the first that did not says why.
  EXPECT_EQ(s.termination(), v1::TERMINATION_ROUND_BUDGET)
      << s.termination_detail();
  EXPECT_THAT(s.termination_detail(),
              HasSubstr("small: speedup 2.20x reached the goal"));
  EXPECT_THAT(s.termination_detail(),
              HasSubstr("large: round budget of 2 spent"));
}

TEST_F(MultiWorkloadTest,
       OneConfigIsMeasuredOnEveryWorkloadAndJudgedByTheMean) {
  // Weights make `mid` decide. Tile 2 halves small's time and slows the
  // others by 9%: unweighted a gain, weighted 1:10:1 not. Tile 4 halves
  // mid's time: weighted, a large gain.
  Submit(Yaml("[small, mid, large]",
              "objective: {name: one_config, weights: {small: 1, mid: 10, "
              "large: 1}}\ngoal: {speedup: 100}\nbudget: {max_rounds: 3}\n"));
  for (int i = 0; i < 3; ++i) Run();
  v1::Sweep s = Sweep();
  EXPECT_EQ(s.best_round(), 0);
  const double base = WeightedGeomean(
      {TimeOf("small", 1), TimeOf("mid", 1), TimeOf("large", 1)}, {1, 10, 1});
  EXPECT_NEAR(s.baseline_us(), base, 1e-9);
  // Each configuration: three rounds, one per workload, same parameters.
  for (v1::WorkItem w = Run(); w.round_id() >= 0; w = Run()) {
  }
  s = Sweep();
  EXPECT_EQ(s.state(), v1::SWEEP_STATE_SUCCEEDED) << s.termination_detail();
  EXPECT_EQ(s.termination(), v1::TERMINATION_ROUND_BUDGET);
  const std::vector<v1::Round> rounds = Rounds();
  ASSERT_EQ(rounds.size(), 12u);  // baseline + 3 configurations, x3
  for (size_t first = 3; first < rounds.size(); first += 3) {
    for (size_t i = 0; i < 3; ++i) {
      const v1::Round& r = rounds[first + i];
      EXPECT_EQ(r.workload_index(), static_cast<int>(i));
      EXPECT_EQ(r.params().at("tile").int_value(),
                rounds[first].params().at("tile").int_value());
      // The parent configuration's round of the same workload.
      EXPECT_EQ(r.parent_round(),
                rounds[first].parent_round() + static_cast<int64_t>(i));
      EXPECT_EQ(r.decision(), rounds[first].decision());
    }
  }
  // Grid: tile 2, 4, 8. Only tile 4 wins the weighted mean.
  EXPECT_EQ(rounds[3].params().at("tile").int_value(), 2);
  EXPECT_EQ(rounds[3].decision(), v1::DECISION_ROLLED_BACK);
  ASSERT_GE(s.best_round(), 3);
  EXPECT_EQ(rounds[s.best_round()].params().at("tile").int_value(), 4);
  EXPECT_EQ(rounds[s.best_round()].decision(), v1::DECISION_KEPT);
  EXPECT_THAT(rounds[s.best_round()].decision_reason(),
              HasSubstr("weighted geometric mean of time ratios"));
  const double best = WeightedGeomean(
      {TimeOf("small", 4), TimeOf("mid", 4), TimeOf("large", 4)}, {1, 10, 1});
  EXPECT_NEAR(s.best_us(), best, 1e-9);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(s.workload_progress(i).best_round(), s.best_round() + i);
  }
}

TEST_F(MultiWorkloadTest, OneConfigRejectedOnOneWorkloadIsRejectedForAll) {
  Submit(Yaml("[small, mid]",
              "objective: {name: one_config, weights: {small: 1, mid: 1}}\n"
              "goal: {speedup: 100}\nbudget: {max_rounds: 1}\n"));
  Run();
  Run();
  const v1::WorkItem a = Lease();  // the configuration's `small` round
  ASSERT_EQ(a.round_id(), 2);
  Report(a, v1::OUTCOME_RUN_CRASHED, 0);
  const std::vector<v1::Round> rounds = Rounds();
  ASSERT_EQ(rounds.size(), 4u);
  EXPECT_EQ(rounds[2].decision(), v1::DECISION_REJECTED);
  EXPECT_EQ(rounds[3].state(), v1::ROUND_STATE_CANCELLED);
  EXPECT_THAT(rounds[3].decision_reason(),
              HasSubstr("failed on workload small"));
  EXPECT_EQ(Sweep().state(), v1::SWEEP_STATE_SUCCEEDED);
  EXPECT_EQ(Sweep().termination(), v1::TERMINATION_ROUND_BUDGET);
}

TEST_F(MultiWorkloadTest, ARestartedCoordinatorResumesTheSweep) {
  Submit(Yaml("[small, {name: extra, dtype: fp32, dims: {n: 512}}]",
              "goal: {speedup: 1.8}\nbudget: {max_rounds: 10}\n"));
  Run();
  Run();
  Run();  // small, tile 2: done
  const v1::Sweep before = Sweep();
  ASSERT_TRUE(before.workload_progress(0).done());
  disk_.Close();
  Open();
  EXPECT_EQ(coord()->active_sweeps(), 1);
  int extra = 0;
  for (v1::WorkItem w = Run(); w.round_id() >= 0; w = Run()) {
    EXPECT_EQ(w.workload().name(), "extra");
    EXPECT_EQ(w.workload().dims().at("n"), 512);
    ++extra;
  }
  const v1::Sweep s = Sweep();
  EXPECT_EQ(s.state(), v1::SWEEP_STATE_SUCCEEDED) << s.termination_detail();
  EXPECT_EQ(s.termination(), v1::TERMINATION_GOAL_REACHED);
  // Grid: tile 2 (slower), then 4 (the goal).
  EXPECT_EQ(extra, 2);
  EXPECT_EQ(s.workload_progress(1).best_us(), TimeOf("extra", 4));
}

// --- the spec -----------------------------------------------------------

class MultiWorkloadSpecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<v1::OperatorManifest> op =
        ParseOperatorManifest(kOperator, "test/operator.yaml");
    ASSERT_TRUE(op.ok()) << op.status();
    catalog_.Add(*op);
  }
  absl::StatusOr<v1::SweepSpec> Check(const std::string& yaml) {
    absl::StatusOr<v1::SweepSpec> spec = ParseSweepSpec(yaml);
    if (!spec.ok()) return spec.status();
    return ValidateSweepSpec(*std::move(spec), catalog_);
  }
  void ExpectError(const std::string& workloads, const std::string& extra,
                   const std::string& error) {
    absl::StatusOr<v1::SweepSpec> s =
        Check(Yaml(workloads, absl::StrCat("goal: {speedup: 2}\n", extra)));
    ASSERT_FALSE(s.ok()) << workloads << " " << extra;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.status().message(), HasSubstr(error));
  }
  OperatorCatalog catalog_;
};

TEST_F(MultiWorkloadSpecTest, NamesAndInlineShapesResolve) {
  absl::StatusOr<v1::SweepSpec> s =
      Check(Yaml("[small, {name: odd, dtype: fp32, dims: {n: 100}}]",
                 "goal: {speedup: 2}\n"));
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->workloads_size(), 2);
  EXPECT_EQ(s->workloads(0).dims().at("n"), 64);
  EXPECT_EQ(s->workloads(1).dims().at("n"), 100);
  EXPECT_EQ(s->objective(), v1::WORKLOAD_OBJECTIVE_PER_WORKLOAD);
  EXPECT_FALSE(s->has_workload());
}

TEST_F(MultiWorkloadSpecTest, BadSpecsNameWhatIsWrong) {
  ExpectError("[small, huge]", "",
              "workloads[1]: unknown workload 'huge' of operator shapes; "
              "known: small, mid, large");
  ExpectError("[small, mid, small]", "",
              "workloads[2]: duplicate workload 'small' (also workloads[0])");
  ExpectError("[small, {name: again, dtype: fp32, dims: {n: 64}}]", "",
              "workloads[1]: duplicate workload: 'again' has the dtype and "
              "dims of workloads[0] ('small')");
  std::string many = "[";
  for (size_t i = 0; i <= kMaxWorkloads; ++i) {
    absl::StrAppend(&many, i ? ", " : "", "{name: w", i,
                    ", dtype: fp32, dims: {n: ", i + 1, "}}");
  }
  ExpectError(many + "]", "", "workloads: has 33 entries; the limit is 32");
  ExpectError("[small, mid]", "objective: {name: one_config}\n",
              "objective.weights: no weight for workload 'small'");
  ExpectError("[small, mid]",
              "objective: {name: one_config, weights: {small: 1}}\n",
              "no weight for workload 'mid'");
  ExpectError("[small, mid]",
              "objective: {name: one_config, weights: {small: 1, mid: -2}}\n",
              "objective.weights.mid: must be a finite number > 0");
  ExpectError("[small, mid]",
              "objective: {name: one_config, weights: {small: 0, mid: 1}}\n",
              "objective.weights.small: must be a finite number > 0");
  ExpectError("[small, mid]",
              "objective: {name: one_config, weights: {small: .nan, mid: "
              "1}}\n",
              "objective.weights.small: must be a finite number");
  ExpectError("[small, mid]",
              "objective: {name: one_config, weights: {small: .inf, mid: "
              "1}}\n",
              "objective.weights.small: must be a finite number");
  ExpectError("[small, mid]",
              "objective: {name: one_config, weights: {small: 1, mid: 1, "
              "large: 1}}\n",
              "objective.weights.large: is not a workload of this sweep");
  ExpectError("[small, mid]",
              "objective: {name: per_workload, weights: {small: 1}}\n",
              "objective.weights: only objective one_config weighs workloads");
  ExpectError("[small, mid]", "objective: best\n",
              "objective: must be per_workload or one_config, got 'best'");
  ExpectError("[small, mid]", "workload: small\n",
              "workloads: name either workload or workloads, not both");
  ExpectError("small", "", "workloads: expected a list of workloads");
  ExpectError("[]", "", "workloads: must name at least one workload");
  absl::StatusOr<v1::SweepSpec> s = Check(
      "name: x\nteam: qa\noperator: shapes\nobjective: per_workload\n"
      "goal: {speedup: 2}\n");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(),
              HasSubstr("objective: needs a list of workloads"));
  s = Check(Yaml("[small, mid]",
                 "objective: {name: one_config, weights: {small: 1, mid: 1}}\n"
                 "goal: {target_us: 5}\n"));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("goal.target_us"));
  // A spec sent as a proto (gRPC) meets the same checks.
  absl::StatusOr<v1::SweepSpec> parsed = ParseSweepSpec(
      Yaml("[small, mid]",
           "objective: {name: one_config, weights: {small: 1, mid: 1}}\n"
           "goal: {speedup: 2}\n"));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  (*parsed->mutable_workload_weights())["mid"] = std::nan("");
  s = ValidateSweepSpec(*parsed, catalog_);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(),
              HasSubstr("objective.weights.mid: must be a finite number > 0"));
}

// WorkloadViews against its definition (WorkloadHistory, ConfigHistory):
// rounds are added, changed and removed (as an undo removes them) at
// random, and synced now and then, so several changes, removals and
// additions (ids reused after a removal) fall between two syncs. After each
// sync the views equal the definition and the counts a walk over the
// rounds.
TEST(WorkloadViewsTest, StayEqualToTheHistoriesThroughChangesAndUndos) {
  for (const v1::WorkloadObjective objective :
       {v1::WORKLOAD_OBJECTIVE_PER_WORKLOAD,
        v1::WORKLOAD_OBJECTIVE_ONE_CONFIG}) {
    SCOPED_TRACE(v1::WorkloadObjective_Name(objective));
    v1::SweepSpec spec;
    spec.set_objective(objective);
    constexpr int kWorkloads = 3;
    for (int i = 0; i < kWorkloads; ++i) {
      spec.add_workloads()->set_name(absl::StrCat("w", i));
    }
    (*spec.mutable_workload_weights())["w1"] = 2;
    const bool one_config = objective == v1::WORKLOAD_OBJECTIVE_ONE_CONFIG;
    std::mt19937 rng(static_cast<uint32_t>(objective));
    std::vector<v1::Round> rounds;
    WorkloadViews views;
    auto add = [&](int workload) {
      v1::Round r;
      r.set_round_id(static_cast<int64_t>(rounds.size()));
      r.set_workload_index(workload);
      r.set_workload(absl::StrCat("w", workload));
      const bool baseline = r.round_id() < kWorkloads;
      r.set_parent_round(baseline ? -1 : r.round_id() % kWorkloads);
      r.set_state(v1::ROUND_STATE_QUEUED);
      (*r.mutable_params())["tile"].set_int_value(
          static_cast<int64_t>(rng() % 64));
      rounds.push_back(std::move(r));
    };
    for (int i = 0; i < kWorkloads; ++i) add(i);
    int syncs = 0, removals = 0;
    for (int step = 0; step < 3000; ++step) {
      const int op = static_cast<int>(rng() % 10);
      if (op < 3) {  // a new round, or a new configuration's rounds
        if (one_config) {
          for (int i = 0; i < kWorkloads; ++i) add(i);
        } else {
          add(static_cast<int>(rng() % kWorkloads));
        }
      } else if (op < 7) {  // a round changes
        v1::Round& r = rounds[rng() % rounds.size()];
        views.Changed(r.round_id());
        const v1::RoundState states[] = {
            v1::ROUND_STATE_QUEUED, v1::ROUND_STATE_LEASED,
            v1::ROUND_STATE_DONE, v1::ROUND_STATE_CANCELLED};
        r.set_state(states[rng() % 4]);
        r.clear_result();
        r.clear_decision();
        if (r.state() == v1::ROUND_STATE_DONE) {
          r.mutable_result()->set_outcome(
              rng() % 5 == 0 ? v1::OUTCOME_PRECISION_FAILED : v1::OUTCOME_OK);
          r.mutable_result()->mutable_measurement()->set_median_us(
              1 + static_cast<double>(rng() % 1000));
          r.set_decision(rng() % 2 ? v1::DECISION_KEPT
                                   : v1::DECISION_ROLLED_BACK);
        }
      } else if (op < 8) {  // an undo removes the newest rounds
        const size_t k =
            std::min<size_t>(rng() % 4, rounds.size() - kWorkloads);
        rounds.resize(rounds.size() - k);
        views.Truncated(rounds.size());
        removals += k > 0 ? 1 : 0;
      } else {
        ++syncs;
        views.Sync(spec, rounds);
        if (one_config) {
          const std::vector<v1::Round> want = ConfigHistory(spec, rounds);
          ASSERT_EQ(views.Configs().size(), want.size()) << "step " << step;
          for (size_t c = 0; c < want.size(); ++c) {
            ASSERT_EQ(views.Configs()[c].SerializeAsString(),
                      want[c].SerializeAsString())
                << "step " << step << ", configuration " << c;
          }
          continue;
        }
        for (int i = 0; i < kWorkloads; ++i) {
          const std::vector<v1::Round> want = WorkloadHistory(rounds, i);
          ASSERT_EQ(views.Workload(i).size(), want.size()) << "step " << step;
          int64_t candidates = 0, in_flight = 0;
          for (size_t j = 0; j < want.size(); ++j) {
            ASSERT_EQ(views.Workload(i)[j].SerializeAsString(),
                      want[j].SerializeAsString())
                << "step " << step << ", workload " << i << ", round "
                << want[j].round_id();
            candidates += want[j].parent_round() >= 0 ? 1 : 0;
            in_flight += want[j].state() == v1::ROUND_STATE_QUEUED ||
                                 want[j].state() == v1::ROUND_STATE_LEASED
                             ? 1
                             : 0;
          }
          EXPECT_EQ(views.Candidates(i), candidates) << "step " << step;
          EXPECT_EQ(views.InFlight(i), in_flight) << "step " << step;
        }
      }
    }
    EXPECT_GT(syncs, 400);
    EXPECT_GT(removals, 100);
    EXPECT_GT(rounds.size(), 100u);  // the views grew, not only churned
  }
}

// A failed commit undoes what its calls staged, the views the strategies
// see included. The same multi-workload sweeps run in group commits of two
// calls (as the control loop batches them; the second call's proposal
// reads what the first staged), once over a store that never fails and once
// over one that fails every third batch, each failed batch run again. After
// every batch, failed or not, the views equal their definition
// (Coordinator::CheckViews), and both runs store the same rounds, proposal
// for proposal.
TEST(MultiWorkloadFaultTest, FailedBatchesLeaveTheViewsAndLineagesAsNone) {
  // The shapes operator with a second parameter, so lineages are longer.
  const std::string two_params =
      absl::StrReplaceAll(kOperator, {{"name: shapes\n", "name: shapes2\n"},
                                      {"stage: tiling}\n",
                                       "stage: tiling}\n"
                                       "  - {name: unroll, values: [1, 2, 3, "
                                       "4], default: 1, stage: pipeline}\n"}});
  auto run = [&](const std::string& strategy, const std::string& objective,
                 bool fail, int* failures) {
    OperatorCatalog catalog;
    EXPECT_TRUE(AddOperator(&catalog, two_params).ok());
    FakeClock clock;
    CoordinatorOptions options;
    options.lease_duration = absl::Seconds(10);
    options.agent_timeout = absl::Hours(100);
    CoordinatorOverFaults core;
    EXPECT_TRUE(core.Open(&catalog, &clock, options).ok());
    Coordinator* coord = core.coordinator();
    EXPECT_TRUE(coord->RegisterAgent(SimAgent("a1", 2)).ok());
    v1::SubmitSweepRequest submit;
    submit.set_spec_yaml(absl::StrCat(
        "name: faults\nteam: qa\noperator: shapes2\n", "goal: {speedup: 100}\n",
        "workloads: [small, mid, large]\n", "objective: ", objective,
        "\nstrategy: {name: ", strategy, ", seed: 3}\n",
        "budget: {max_rounds: 10, max_rounds_without_gain: 10}\n",
        "min_gain: 0.02\nboards: {kind: sim}\n",
        "measurement: {warmup: 1, samples: 5, mode: independent}\n"));
    auto submitted = coord->SubmitSweep(submit, AnonymousAdmin());
    EXPECT_TRUE(submitted.ok()) << submitted.status();
    const std::string id = submitted.ok() ? submitted->sweep().sweep_id() : "";
    const std::vector<std::string> boards = {"a1/b0", "a1/b1"};
    int batches = 0;
    // One group commit of `calls`; a failed one is undone whole and run
    // again, up to 10 times.
    auto batch = [&](const std::function<void()>& calls) {
      for (int attempt = 0; attempt < 10; ++attempt) {
        coord->BeginBatch();
        calls();
        if (fail && ++batches % 3 == 0) core.faults()->FailNthCommit(1);
        const absl::Status committed = coord->CommitBatch();
        const absl::Status views = coord->CheckViews();
        EXPECT_TRUE(views.ok())
            << views << " (after a batch that "
            << (committed.ok() ? "committed" : "failed") << ")";
        if (committed.ok()) return;
        ++*failures;
      }
      ADD_FAILURE() << "a batch failed 10 times";
    };
    for (int step = 0; step < 200 && coord->active_sweeps() > 0; ++step) {
      std::vector<v1::WorkItem> work(boards.size());
      batch([&] {
        for (size_t b = 0; b < boards.size(); ++b) {
          auto r = coord->LeaseWork(LeaseFor(boards[b]));
          EXPECT_TRUE(r.ok()) << r.status();
          work[b] = r.ok() && r->granted() ? r->work() : v1::WorkItem();
        }
      });
      batch([&] {
        for (size_t b = 0; b < boards.size(); ++b) {
          const v1::WorkItem& w = work[b];
          if (w.lease_id().empty()) continue;
          const double us =
              TimeOf(w.workload().name(), w.params().at("tile").int_value()) *
              (1 + 0.05 * static_cast<double>(
                              (w.params().at("unroll").int_value() + 1) % 4));
          auto r = coord->ReportResult(ResultFor(boards[b], w, us));
          EXPECT_TRUE(r.ok()) << r.status();
        }
      });
    }
    EXPECT_EQ(coord->active_sweeps(), 0);
    std::vector<std::string> lines;
    auto rounds = core.base()->ListRounds(id);
    EXPECT_TRUE(rounds.ok()) << rounds.status();
    for (const v1::Round& r :
         rounds.ok() ? *rounds : std::vector<v1::Round>{}) {
      lines.push_back(
          absl::StrCat(r.round_id(), " ", r.workload(), " tile ",
                       r.params().at("tile").int_value(), " unroll ",
                       r.params().at("unroll").int_value(), " parent ",
                       r.parent_round(), " ", v1::RoundState_Name(r.state()),
                       " ", v1::Decision_Name(r.decision())));
    }
    return lines;
  };
  for (const std::string objective :
       {"per_workload",
        "{name: one_config, weights: {small: 1, mid: 2, large: 1}}"}) {
    for (const std::string strategy : {"grid", "hybrid"}) {
      SCOPED_TRACE(absl::StrCat(objective, ", ", strategy));
      int none = 0, failures = 0;
      const std::vector<std::string> clean =
          run(strategy, objective, false, &none);
      const std::vector<std::string> faulty =
          run(strategy, objective, true, &failures);
      EXPECT_EQ(none, 0);
      EXPECT_GT(failures, 5);
      EXPECT_GT(clean.size(), 12u);
      EXPECT_EQ(faulty, clean);
    }
  }
}

TEST(MultiWorkloadExampleTest, ShippedExampleIsValid) {
  const std::string root = TUNEFARM_SOURCE_DIR;
  absl::StatusOr<OperatorCatalog> catalog =
      OperatorCatalog::LoadFromDirs({root + "/ops"});
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  absl::StatusOr<std::string> yaml =
      ReadFile(root + "/examples/cpu_gemm_shapes.yaml");
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  absl::StatusOr<v1::SweepSpec> spec = ParseSweepSpec(*yaml);
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<v1::SweepSpec> valid = ValidateSweepSpec(*spec, *catalog);
  ASSERT_TRUE(valid.ok()) << valid.status();
  EXPECT_EQ(valid->workloads_size(), 4);
  EXPECT_EQ(valid->workloads(0).dims().at("m"), 256);
}

}  // namespace
}  // namespace tunefarm
