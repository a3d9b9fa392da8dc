// The tuning report: the model built from a real RocksDB store, its JSON
// round trip and validation, the golden renderings (Markdown, SVG, DOT) of a
// fixed report JSON, the report folder with and without Graphviz, and the
// live status board of `tunefarm watch`.
//
// Goldens live in tests/coordinator/golden/report/. After an intended
// change, regenerate them and review the diff:
//   TUNEFARM_UPDATE_GOLDEN=1 BUILD/tests/coordinator/report_test
// (input.json is then rebuilt from the fixture records below, and the
// renderings from it.)
#include "coordinator/report.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "cli/status_board.h"
#include "common/files.h"
#include "common/params.h"
#include "coordinator/queries.h"
#include "coordinator/report_render.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/rocksdb_store.h"
#include "storage/store.h"

namespace tunefarm {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

const char* const kGoldenDir =
    TUNEFARM_SOURCE_DIR "/tests/coordinator/golden/report/";

bool Updating() { return std::getenv("TUNEFARM_UPDATE_GOLDEN") != nullptr; }

// Compares `actual` with the golden file, or rewrites it when updating.
void ExpectGolden(const std::string& name, const std::string& actual) {
  const std::string path = std::string(kGoldenDir) + name;
  if (Updating()) {
    ASSERT_TRUE(MakeDirs(kGoldenDir).ok());
    ASSERT_TRUE(WriteFileAtomic(path, actual).ok()) << path;
    return;
  }
  absl::StatusOr<std::string> golden = ReadFile(path);
  ASSERT_TRUE(golden.ok()) << golden.status()
                           << " (regenerate with TUNEFARM_UPDATE_GOLDEN=1)";
  EXPECT_EQ(actual, *golden) << name
                             << " differs from its golden; if the "
                                "change is intended, regenerate with "
                                "TUNEFARM_UPDATE_GOLDEN=1 and review "
                                "the diff";
}

// --- fixture: one simulated sweep with every kind of round ------------------

constexpr int64_t kStart = 1767225600000;  // 2026-01-01 00:00:00 UTC

v1::ParamChange Change(const std::string& name, int64_t from, int64_t to) {
  v1::ParamChange c;
  c.set_name(name);
  *c.mutable_from() = IntParam(from);
  *c.mutable_to() = IntParam(to);
  return c;
}

v1::Diagnosis Diag(const std::string& bound, double share, double mte2,
                   double idle, double device_us) {
  v1::Diagnosis d;
  d.set_bundle_id("b");
  d.set_bound(bound);
  d.set_operator_type("cube");
  d.set_total_device_us(device_us);
  v1::Hotspot* h = d.add_hotspots();
  h->set_op_name("MatMul");
  h->set_share(share);
  h->set_duration_us(device_us * share);
  v1::PipelineRatio* p = d.add_pipeline_ratios();
  p->set_column("aic_mte2_ratio");
  p->set_mean(mte2);
  d.mutable_timeline()->set_idle_ratio(idle);
  d.set_simulated(true);
  return d;
}

struct Fixture {
  v1::Sweep sweep;
  std::vector<v1::Round> rounds;
  std::vector<v1::BoardInfo> boards;
};

Fixture MakeFixture() {
  Fixture f;
  v1::Sweep& s = f.sweep;
  s.set_sweep_id("sw-000042");
  v1::SweepSpec* spec = s.mutable_spec();
  spec->set_name("matmul-demo");
  spec->set_team("kernels");
  spec->set_operator_name("sim_matmul");
  spec->mutable_workload()->set_name("m1024");
  spec->mutable_workload()->set_dtype("fp16");
  spec->mutable_goal()->set_speedup(3);
  spec->mutable_strategy()->set_name("guided");
  spec->mutable_strategy()->set_seed(7);
  spec->mutable_budget()->set_max_rounds(8);
  spec->mutable_budget()->set_time_limit_s(600);
  spec->set_min_gain(0.02);
  spec->mutable_boards()->set_kind("sim");
  s.set_state(v1::SWEEP_STATE_SUCCEEDED);
  s.set_termination(v1::TERMINATION_NO_GAIN);
  s.set_termination_detail("no gain in 3 rounds");
  s.set_submitted_unix_ms(kStart - 2000);
  s.set_started_unix_ms(kStart);
  s.set_finished_unix_ms(kStart + 95500);
  s.set_best_round(4);
  s.set_baseline_us(100);
  s.set_best_us(50);
  s.set_rounds_finished(6);
  s.set_simulated(true);

  // id, parent, change, board, outcome, median, decision, parent_us
  struct Row {
    int64_t id, parent;
    std::vector<v1::ParamChange> changes;
    const char* board;
    v1::Outcome outcome;
    double us;
    v1::Decision decision;
    const char* reason;
    const char* detail;
    int attempts;
  };
  const std::vector<Row> rows = {
      {0,
       -1,
       {},
       "a1/sim0",
       v1::OUTCOME_OK,
       100,
       v1::DECISION_BASELINE,
       "baseline",
       "",
       1},
      {1,
       0,
       {Change("tile_m", 64, 128)},
       "a1/sim0",
       v1::OUTCOME_OK,
       80,
       v1::DECISION_KEPT,
       "20.0% faster than round 0",
       "",
       1},
      {2,
       1,
       {Change("unroll", 1, 2)},
       "a2/sim0",
       v1::OUTCOME_OK,
       82,
       v1::DECISION_ROLLED_BACK,
       "2.5% slower than round 1",
       "",
       1},
      {3,
       1,
       {Change("buffers", 1, 2)},
       "a1/sim0",
       v1::OUTCOME_BUILD_FAILED,
       0,
       v1::DECISION_REJECTED,
       "build failed",
       "error: UB overflow: 270336 bytes > 262144",
       1},
      {4,
       1,
       {Change("tile_n", 64, 128)},
       "a2/sim0",
       v1::OUTCOME_OK,
       50,
       v1::DECISION_KEPT,
       "37.5% faster than round 1",
       "",
       2},
      {5,
       4,
       {Change("unroll", 1, 4)},
       "a1/sim0",
       v1::OUTCOME_PRECISION_FAILED,
       0,
       v1::DECISION_REJECTED,
       "precision failed",
       "max_rel_err 0.3 > rtol 0.01",
       1},
      {6,
       4,
       {Change("k_split", 1, 2)},
       "a2/sim0",
       v1::OUTCOME_RUN_TIMEOUT,
       0,
       v1::DECISION_REJECTED,
       "run timed out",
       "killed after 30 s",
       1},
      {7,
       4,
       {Change("tile_k", 32, 64)},
       "",
       v1::OUTCOME_UNSPECIFIED,
       0,
       v1::DECISION_UNSPECIFIED,
       "not run: the sweep ended",
       "",
       1},
  };
  std::map<std::string, int64_t> params = {{"tile_m", 64}, {"tile_n", 64},
                                           {"tile_k", 32}, {"unroll", 1},
                                           {"buffers", 1}, {"k_split", 1}};
  std::map<int64_t, std::map<std::string, int64_t>> by_round;
  for (const Row& row : rows) {
    std::map<std::string, int64_t> p =
        row.parent < 0 ? params : by_round[row.parent];
    v1::Round r;
    r.set_sweep_id(s.sweep_id());
    r.set_round_id(row.id);
    r.set_parent_round(row.parent);
    for (const v1::ParamChange& c : row.changes) {
      *r.add_changes() = c;
      p[c.name()] = c.to().int_value();
    }
    by_round[row.id] = p;
    for (const auto& [name, v] : p) (*r.mutable_params())[name] = IntParam(v);
    r.set_stage(row.id < 4 ? "tiling" : "pipeline");
    if (row.id == 1) r.set_rationale("walk: the diagnosis suggests tile_m");
    if (row.id == 4) r.set_rationale("model: best log ratio 2.31");
    r.set_attempts(row.attempts);
    r.set_board_id(row.board);
    r.set_created_unix_ms(kStart + row.id * 10000);
    if (row.outcome == v1::OUTCOME_UNSPECIFIED) {
      r.set_state(v1::ROUND_STATE_CANCELLED);
    } else {
      r.set_state(v1::ROUND_STATE_DONE);
      r.set_finished_unix_ms(kStart + row.id * 10000 + 9000);
      r.mutable_result()->set_outcome(row.outcome);
      r.mutable_result()->set_detail(row.detail);
      v1::Measurement* m = r.mutable_result()->mutable_measurement();
      m->set_simulated(true);
      if (row.us > 0) {
        m->set_median_us(row.us);
        m->set_p20_us(row.us * 0.99);
        m->set_p80_us(row.us * 1.01);
        m->set_samples(50);
        m->set_warmup(5);
        m->set_policy("5 warm-up, 50 samples, median, simulated");
      }
    }
    r.set_decision(row.decision);
    r.set_decision_reason(row.reason);
    if (row.parent >= 0 && row.outcome == v1::OUTCOME_OK) {
      r.set_parent_us(rows[row.parent].us);
    }
    f.rounds.push_back(r);
  }
  // Round 4 was timed A/B against its parent in the same lease.
  v1::Measurement* ab = f.rounds[4].mutable_result()->mutable_measurement();
  ab->set_paired(true);
  ab->mutable_reference()->set_median_us(80);
  ab->set_gain(0.375);
  ab->set_gain_lower(0.30);
  ab->set_gain_upper(0.45);
  ab->set_pairs(20);
  ab->set_confidence(0.95);
  *f.rounds[0].mutable_diagnosis() = Diag("memory", 0.82, 0.61, 0.12, 98);
  *f.rounds[1].mutable_diagnosis() = Diag("memory", 0.85, 0.45, 0.08, 78);
  *f.rounds[4].mutable_diagnosis() = Diag("compute", 0.93, 0.22, 0.03, 49);
  for (const char* id : {"a1/sim0", "a2/sim0"}) {
    v1::BoardInfo b;
    b.set_board_id(id);
    b.set_kind("sim");
    b.set_chip("Ascend910B-sim");
    b.set_simulated(true);
    f.boards.push_back(b);
  }
  return f;
}

class ReportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> dir = MakeTempDir("report_test");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = *dir;
  }
  void TearDown() override { ASSERT_TRUE(RemoveAll(dir_).ok()); }

  static json Input() {
    absl::StatusOr<std::string> text =
        ReadFile(std::string(kGoldenDir) + "input.json");
    EXPECT_TRUE(text.ok()) << text.status();
    absl::StatusOr<json> report = ParseReport(text.value_or("{}"));
    EXPECT_TRUE(report.ok()) << report.status();
    return report.value_or(json());
  }

  std::string dir_;
};

// --- the model, from a real store --------------------------------------------

TEST_F(ReportTest, ModelIsBuiltFromTheStoredRecords) {
  const Fixture f = MakeFixture();
  absl::StatusOr<std::unique_ptr<Store>> store = OpenRocksDbStore(dir_ + "/db");
  ASSERT_TRUE(store.ok()) << store.status();
  WriteSet writes;
  writes.PutSweep(f.sweep);
  for (const v1::Round& r : f.rounds) writes.PutRound(r);
  for (const v1::BoardInfo& b : f.boards) writes.PutBoard(b);
  ASSERT_TRUE((*store)->Commit(writes).ok());

  v1::GetReportRequest request;
  request.set_sweep_id(f.sweep.sweep_id());
  absl::StatusOr<v1::GetReportResponse> response =
      QueryReport(**store, request);
  ASSERT_TRUE(response.ok()) << response.status();
  absl::StatusOr<json> report = ParseReport(response->report_json());
  ASSERT_TRUE(report.ok()) << report.status();

  // The Markdown the coordinator serves is rendered from that JSON.
  absl::StatusOr<std::string> md = RenderReportMarkdown(*report);
  ASSERT_TRUE(md.ok()) << md.status();
  EXPECT_EQ(response->markdown(), *md);

  // Each round's interval: the A/B gain's on the parent's time for round 4
  // (80 µs x (1 - [0.45, 0.30])), the median's 95% interval from its
  // p20..p80 spread over 50 samples otherwise, none without a time.
  const json& rounds = report->at("rounds");
  ASSERT_EQ(rounds.size(), 8u);
  EXPECT_NEAR(rounds[4].at("interval_us")[0].get<double>(), 44.0, 1e-9);
  EXPECT_NEAR(rounds[4].at("interval_us")[1].get<double>(), 56.0, 1e-9);
  const double half = 1.96 * 1.2533 * 1.6 / 1.6832 / std::sqrt(50.0);
  EXPECT_NEAR(rounds[1].at("interval_us")[0].get<double>(), 80 - half, 1e-9);
  EXPECT_NEAR(rounds[1].at("interval_us")[1].get<double>(), 80 + half, 1e-9);
  EXPECT_TRUE(rounds[3].at("interval_us").is_null());  // build failed
  EXPECT_TRUE(rounds[7].at("interval_us").is_null());  // never ran

  const json& o = report->at("overview");
  EXPECT_EQ(o.at("operator"), "sim_matmul");
  EXPECT_EQ(o.at("goal"), "3.00x faster");
  EXPECT_DOUBLE_EQ(o.at("achieved_speedup").get<double>(), 2.0);
  EXPECT_FALSE(o.at("goal_met").get<bool>());
  EXPECT_DOUBLE_EQ(o.at("duration_s").get<double>(), 95.5);
  EXPECT_EQ(o.at("rounds"), 8);
  ASSERT_EQ(o.at("boards").size(), 2u);
  EXPECT_EQ(o.at("boards")[1].at("rounds"), 3);
  EXPECT_TRUE(o.at("boards")[1].at("simulated").get<bool>());
  EXPECT_TRUE(report->at("simulated").get<bool>());
  EXPECT_EQ(report->at("kept_path"), json({0, 1, 4}));
  EXPECT_EQ(report->at("best").at("config"),
            "buffers=1,k_split=1,tile_k=32,tile_m=128,tile_n=128,unroll=1");

  // Each round: change in % against its parent, best so far.
  EXPECT_DOUBLE_EQ(rounds[2].at("change_pct").get<double>(), 2.5);
  EXPECT_EQ(rounds[2].at("decision"), "rolled_back");
  EXPECT_DOUBLE_EQ(rounds[3].at("best_so_far_us").get<double>(), 80);
  EXPECT_TRUE(rounds[3].at("time_us").is_null());
  EXPECT_DOUBLE_EQ(rounds[6].at("best_so_far_us").get<double>(), 50);
  EXPECT_EQ(rounds[7].at("outcome"), "cancelled");
  EXPECT_EQ(rounds[4].at("rationale"), "model: best log ratio 2.31");
  EXPECT_EQ(rounds[2].at("rationale"), "");
  // The kept path says why each of its rounds was proposed.
  EXPECT_NE(md->find("round 4: tile_n 64→128 — 50.00 µs (simulated). Why: "
                     "model: best log ratio 2.31\n"),
            std::string::npos)
      << *md;

  // Effective optimisations: the two kept changes, with their gains.
  const json& effective = report->at("effective");
  ASSERT_EQ(effective.size(), 2u);
  EXPECT_DOUBLE_EQ(effective[0].at("gain_pct").get<double>(), 20);
  EXPECT_DOUBLE_EQ(effective[1].at("gain_pct").get<double>(), 37.5);

  // Problems: one of each failure, and the round that lost its board.
  const json& counts = report->at("problems").at("counts");
  EXPECT_EQ(counts.at("build_failed"), 1);
  EXPECT_EQ(counts.at("precision_failed"), 1);
  EXPECT_EQ(counts.at("run_timeout"), 1);
  EXPECT_EQ(counts.at("board_fault"), 1);
  EXPECT_EQ(report->at("problems").at("items").size(), 4u);

  // Signals that moved between the baseline's and the best's diagnoses.
  std::map<std::string, json> moved;
  for (const json& m : report->at("signals").at("moved")) {
    moved[m.at("signal").get<std::string>()] = m;
  }
  EXPECT_EQ(moved["bound"].at("baseline"), "memory");
  EXPECT_EQ(moved["bound"].at("best"), "compute");
  EXPECT_DOUBLE_EQ(moved["pipe aic_mte2_ratio"].at("best").get<double>(), 0.22);
  EXPECT_TRUE(moved.count("hotspot share"));
  EXPECT_FALSE(moved.count("hotspot")) << "MatMul in both: not moved";
  EXPECT_FALSE(moved.count("operator type"));

  // The checked-in golden input is exactly this model (plus the pictures of
  // a written folder).
  json with_pictures = *report;
  with_pictures["pictures"] = {{"progress_svg", "progress.svg"},
                               {"lineage_dot", "lineage.dot"},
                               {"lineage_svg", "lineage.svg"},
                               {"lineage_note", ""}};
  ExpectGolden("input.json", with_pictures.dump(2) + "\n");
}

// The sweep's speedup is its closing check's once that measured one: the
// best and the baseline timed side by side, not two leases' medians. The
// goal is judged on it, and the best round keeps its own medians' ratio.
TEST_F(ReportTest, TheClosingCheckIsTheHeadlineWhenItMeasuredOne) {
  Fixture f = MakeFixture();  // goal 3x; the leases' medians say 2x
  absl::StatusOr<std::unique_ptr<Store>> store = OpenRocksDbStore(dir_ + "/db");
  ASSERT_TRUE(store.ok()) << store.status();
  auto report_of = [&](const v1::Sweep& sweep) {
    WriteSet writes;
    writes.PutSweep(sweep);
    for (const v1::Round& r : f.rounds) writes.PutRound(r);
    EXPECT_TRUE((*store)->Commit(writes).ok());
    v1::GetReportRequest request;
    request.set_sweep_id(sweep.sweep_id());
    absl::StatusOr<v1::GetReportResponse> response =
        QueryReport(**store, request);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.value_or(v1::GetReportResponse());
  };

  v1::GetReportResponse plain = report_of(f.sweep);
  json report = ParseReport(plain.report_json()).value_or(json());
  EXPECT_EQ(report.at("overview").at("speedup_basis"), "lease_medians");
  EXPECT_DOUBLE_EQ(plain.speedup(), 2.0);
  EXPECT_THAT(plain.markdown(),
              HasSubstr("| achieved | **2.00x** from two leases' medians "
                        "(simulated; goal not met) |"));

  v1::ClosingCheck& c = *f.sweep.mutable_closing_check();
  c.set_round_id(8);
  c.set_best_round(4);
  c.set_lease_speedup(2.0);
  c.set_speedup(3.2);
  c.set_speedup_low(3.05);
  c.set_speedup_high(3.4);
  c.set_confidence(0.95);
  c.set_outcome("round 4 is 3.20x the baseline's speed side by side");
  v1::GetReportResponse checked = report_of(f.sweep);
  report = ParseReport(checked.report_json()).value_or(json());
  const json& o = report.at("overview");
  EXPECT_EQ(o.at("speedup_basis"), "side_by_side");
  EXPECT_DOUBLE_EQ(o.at("achieved_speedup").get<double>(), 3.2);
  EXPECT_TRUE(o.at("goal_met").get<bool>());
  EXPECT_DOUBLE_EQ(report.at("best").at("speedup").get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(checked.speedup(), 3.2);
  EXPECT_THAT(checked.markdown(),
              HasSubstr("| achieved | **3.20x** side by side (3.05x to "
                        "3.40x, each bound at 95%) (simulated; goal met) |"));

  // A check that gave no paired result leaves the leases' figure.
  c.set_speedup(0);
  c.set_speedup_low(0);
  c.set_speedup_high(0);
  c.set_outcome("the board timed no pairs");
  v1::GetReportResponse unpaired = report_of(f.sweep);
  report = ParseReport(unpaired.report_json()).value_or(json());
  EXPECT_EQ(report.at("overview").at("speedup_basis"), "lease_medians");
  EXPECT_DOUBLE_EQ(unpaired.speedup(), 2.0);
  EXPECT_FALSE(report.at("overview").at("goal_met").get<bool>());
}

TEST_F(ReportTest, RunningSweepWithoutPassingBaseline) {
  Fixture f = MakeFixture();
  f.sweep.set_state(v1::SWEEP_STATE_RUNNING);
  f.sweep.set_finished_unix_ms(0);
  f.sweep.set_best_round(-1);
  f.sweep.set_best_us(0);
  f.rounds.resize(1);
  f.rounds[0].set_state(v1::ROUND_STATE_LEASED);
  f.rounds[0].clear_result();
  f.rounds[0].set_decision(v1::DECISION_UNSPECIFIED);
  const json report = BuildReport(f.sweep, f.rounds);
  ASSERT_TRUE(ValidateReport(report).ok()) << ValidateReport(report);
  EXPECT_TRUE(report.at("best").is_null());
  EXPECT_TRUE(report.at("kept_path").empty());
  absl::StatusOr<std::string> md = RenderReportMarkdown(report);
  ASSERT_TRUE(md.ok()) << md.status();
  EXPECT_THAT(*md, HasSubstr("No configuration passed"));
  EXPECT_THAT(*md, HasSubstr("| 0 | - | baseline | a1/sim0 | leased |"));
  EXPECT_TRUE(RenderProgressSvg(report).ok());
  EXPECT_TRUE(RenderLineageDot(report).ok());
}

// --- JSON --------------------------------------------------------------------

TEST_F(ReportTest, JsonRoundTripRendersTheSame) {
  const Fixture f = MakeFixture();
  const json built = BuildReport(f.sweep, f.rounds, f.boards);
  absl::StatusOr<json> parsed = ParseReport(built.dump());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, built);
  EXPECT_EQ(RenderReportMarkdown(*parsed).value(),
            RenderReportMarkdown(built).value());
  EXPECT_EQ(RenderProgressSvg(*parsed).value(),
            RenderProgressSvg(built).value());
  EXPECT_EQ(RenderLineageDot(*parsed).value(), RenderLineageDot(built).value());
  // What the coordinator writes at the end of a sweep is the same Markdown.
  EXPECT_EQ(RenderReport(f.sweep, f.rounds),
            RenderReportMarkdown(BuildReport(f.sweep, f.rounds)).value());
}

TEST_F(ReportTest, BadJsonIsRefusedNamingTheField) {
  const json good = Input();
  auto error = [](const json& j) {
    return std::string(ValidateReport(j).message());
  };
  json j = good;
  j["schema_version"] = 2;
  EXPECT_THAT(error(j), HasSubstr("report.schema_version: 2 is not supported"));
  j = good;
  j["rounds"][3]["decision"] = 7;
  EXPECT_EQ(error(j),
            "report.rounds[3].decision: expected a string, got number");
  j = good;
  j["overview"].erase("name");
  EXPECT_EQ(error(j), "report.overview.name: missing");
  j = good;
  j["closing_check"] = {{"round", 9},         {"best_round", 4},
                        {"lease_speedup", 2}, {"speedup", "fast"},
                        {"speedup_low", 0},   {"speedup_high", 0},
                        {"confidence", 0},    {"outcome", ""}};
  EXPECT_EQ(error(j),
            "report.closing_check.speedup: expected a number, got string");
  j["closing_check"]["speedup"] = 1.9;
  EXPECT_THAT(RenderReportMarkdown(j).value(),
              HasSubstr("| closing check (round 9) | running |"));
  j = good;
  j["overview"]["speedup_basis"] = "guessed";
  EXPECT_THAT(error(j), HasSubstr("report.overview.speedup_basis: expected"));
  j = good;
  j["best"]["params"]["tile_m"] = json::array();
  EXPECT_THAT(error(j), HasSubstr("report.best.params.tile_m"));
  EXPECT_EQ(RenderReportMarkdown(j).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(ParseReport("{\"schema\": ").status().message()),
              HasSubstr("not valid JSON"));
}

// --- golden renderings of a fixed input --------------------------------------

TEST_F(ReportTest, GoldenMarkdownSvgAndDot) {
  const json input = Input();
  absl::StatusOr<std::string> md = RenderReportMarkdown(input);
  absl::StatusOr<std::string> svg = RenderProgressSvg(input);
  absl::StatusOr<std::string> dot = RenderLineageDot(input);
  ASSERT_TRUE(md.ok()) << md.status();
  ASSERT_TRUE(svg.ok()) << svg.status();
  ASSERT_TRUE(dot.ok()) << dot.status();
  ExpectGolden("report.md", *md);
  ExpectGolden("progress.svg", *svg);
  ExpectGolden("lineage.dot", *dot);
  // What a reader must find, whatever the goldens say.
  EXPECT_THAT(*md, HasSubstr("**Simulated board.**"));
  EXPECT_THAT(*md, HasSubstr("## Kept path (baseline → best)"));
  EXPECT_THAT(*md, HasSubstr("| median µs (simulated) | 100.00 | 50.00 |"));
  EXPECT_THAT(*md, HasSubstr("![lineage tree](lineage.svg)"));
  EXPECT_THAT(*svg, HasSubstr("simulated"));
  EXPECT_THAT(*svg, HasSubstr(">interval</text>"));  // bars and their legend
  EXPECT_THAT(*dot, HasSubstr("r1 -> r4"));
}

// --- the folder
// ---------------------------------------------------------------

void ExpectFolder(const std::string& dir) {
  for (const char* name :
       {"report.md", "report.json", "progress.svg", "lineage.dot"}) {
    EXPECT_TRUE(std::filesystem::exists(dir + "/" + name)) << name;
  }
  absl::StatusOr<std::string> text = ReadFile(dir + "/report.json");
  ASSERT_TRUE(text.ok());
  absl::StatusOr<json> report = ParseReport(*text);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(ReadFile(dir + "/report.md").value_or(""),
            RenderReportMarkdown(*report).value_or("?"));
}

TEST_F(ReportTest, FolderWithoutGraphvizWritesTheDotAndSaysSo) {
  json input = Input();
  input.erase("pictures");
  ASSERT_TRUE(MakeDirs(dir_ + "/out").ok());
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/out/lineage.svg", "stale").ok());
  absl::StatusOr<json> written = WriteReportFolder(
      input, dir_ + "/out", {.dot_program = dir_ + "/no/such/dot"});
  ASSERT_TRUE(written.ok()) << written.status();
  ExpectFolder(dir_ + "/out");
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/out/lineage.svg"))
      << "a stale picture must not pass for this one";
  EXPECT_EQ(written->at("pictures").at("lineage_svg"), "");
  const std::string md = ReadFile(dir_ + "/out/report.md").value_or("");
  EXPECT_THAT(md, HasSubstr("Graphviz `dot` is not installed"));
  EXPECT_THAT(md, Not(HasSubstr("![lineage tree]")));
  EXPECT_THAT(md, HasSubstr("[lineage.dot](lineage.dot)"));
}

TEST_F(ReportTest, FolderWhenDotFailsSaysWhy) {
  // A real child process that fails like a broken Graphviz would.
  const std::string fake = dir_ + "/dot";
  ASSERT_TRUE(WriteFileAtomic(fake,
                              "#!/bin/sh\necho 'syntax error in line 1' >&2\n"
                              "exit 3\n")
                  .ok());
  ASSERT_EQ(::chmod(fake.c_str(), 0755), 0);
  absl::StatusOr<json> written =
      WriteReportFolder(Input(), dir_ + "/out", {.dot_program = fake});
  ASSERT_TRUE(written.ok()) << written.status();
  ExpectFolder(dir_ + "/out");
  const std::string note = written->at("pictures").at("lineage_note");
  EXPECT_THAT(note, HasSubstr("syntax error in line 1"));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/out/lineage.svg"));
}

TEST_F(ReportTest, FolderWithGraphvizDrawsTheLineage) {
  if (::access("/usr/bin/dot", X_OK) != 0) {
    GTEST_SKIP() << "Graphviz is not installed (/usr/bin/dot); "
                    "scripts/install-deps.sh installs it";
  }
  absl::StatusOr<json> written = WriteReportFolder(Input(), dir_ + "/out");
  ASSERT_TRUE(written.ok()) << written.status();
  ExpectFolder(dir_ + "/out");
  EXPECT_EQ(written->at("pictures").at("lineage_note"), "");
  EXPECT_THAT(ReadFile(dir_ + "/out/lineage.svg").value_or(""),
              HasSubstr("<svg"));
}

// --- the live status board
// ----------------------------------------------------

v1::SweepEvent Event(v1::EventKind kind, int64_t at_s, const v1::Round* round,
                     const v1::Sweep* sweep) {
  v1::SweepEvent ev;
  ev.set_kind(kind);
  ev.set_time_unix_ms(kStart + at_s * 1000);
  if (round != nullptr) *ev.mutable_round() = *round;
  if (sweep != nullptr) *ev.mutable_sweep() = *sweep;
  return ev;
}

TEST(StatusBoardTest, PrintsEveryFiveRoundsWithBestBoardsAndEta) {
  Fixture f = MakeFixture();
  v1::Sweep sweep = f.sweep;
  sweep.set_state(v1::SWEEP_STATE_RUNNING);
  StatusBoard board;
  int due = 0;
  EXPECT_FALSE(board.Add(Event(v1::EVENT_KIND_STARTED, 0, nullptr, &sweep)));
  for (int i = 0; i < 7; ++i) {
    v1::Round r = f.rounds[i];
    r.mutable_lease()->set_board_id(i % 2 == 0 ? "a1/sim0" : "a2/sim0");
    EXPECT_FALSE(
        board.Add(Event(v1::EVENT_KIND_ROUND_LEASED, i * 10, &r, nullptr)));
    // Round 6 stays in flight.
    if (i == 6) break;
    if (board.Add(
            Event(v1::EVENT_KIND_ROUND_FINISHED, i * 10 + 10, &r, nullptr))) {
      ++due;
      EXPECT_EQ(i, 4) << "a board after the fifth finished round";
    }
  }
  EXPECT_EQ(due, 1);
  EXPECT_EQ(board.Render(),
            "── status of sw-000042: 6 rounds done (4 ok, 2 failed, 2 kept), "
            "1 running ──\n"
            "   best so far: 50.00 µs (round 4), 2.00x over the 100.00 µs "
            "baseline [simulated]; goal 3.00x\n"
            "   stage: pipeline   boards busy: 1 (a1/sim0)\n"
            "   ETA: ~30s for 3 more of 8 rounds; elapsed 1m of the 10m time "
            "budget\n");
}

TEST(StatusBoardTest, OnceTheSearchIsOverShowsTheClosingCheckNotAnEta) {
  Fixture f = MakeFixture();
  v1::Sweep sweep = f.sweep;
  sweep.set_state(v1::SWEEP_STATE_RUNNING);
  StatusBoard board(7);  // the check's result is the seventh
  board.Add(Event(v1::EVENT_KIND_STARTED, 0, nullptr, &sweep));
  for (int i = 0; i < 6; ++i) {
    board.Add(Event(v1::EVENT_KIND_ROUND_FINISHED, i * 10 + 10, &f.rounds[i],
                    nullptr));
  }
  v1::Round in_play = f.rounds[6];
  in_play.mutable_lease()->set_board_id("a1/sim0");
  board.Add(Event(v1::EVENT_KIND_ROUND_LEASED, 55, &in_play, nullptr));
  EXPECT_THAT(board.Render(), HasSubstr("boards busy: 1 (a1/sim0)"));
  // The check starts: the rounds in play were cancelled.
  v1::ClosingCheck& c = *sweep.mutable_closing_check();
  c.set_round_id(7);
  c.set_best_round(4);
  c.set_termination_detail("no gain in 5 rounds");
  v1::Round check = f.rounds[4];
  check.set_round_id(7);
  check.set_parent_round(0);
  check.set_stage("closing check");
  board.Add(Event(v1::EVENT_KIND_CLOSING_CHECK, 60, &check, &sweep));
  EXPECT_THAT(board.Render(),
              HasSubstr("   ETA: the search is over (no gain in 5 rounds); "
                        "closing check: round 7 times the best, round 4, "
                        "against the baseline side by side; elapsed 1m"));
  EXPECT_THAT(board.Render(), HasSubstr("boards busy: 0\n"));

  // The check's own result is no candidate of the budget.
  check.set_decision(v1::DECISION_CLOSING_CHECK);
  // No board for it: the outcome comes with the sweep's end, just after.
  EXPECT_FALSE(
      board.Add(Event(v1::EVENT_KIND_ROUND_FINISHED, 70, &check, nullptr)));
  c.set_outcome("round 4 is 1.98x the baseline's speed side by side");
  board.Add(Event(v1::EVENT_KIND_FINISHED, 70, nullptr, &sweep));
  EXPECT_THAT(board.Render(),
              HasSubstr("   ETA: the search is over (no gain in 5 rounds); "
                        "closing check: round 4 is 1.98x the baseline's "
                        "speed side by side; elapsed 1m10s"));
  // The search resumed (the check found a goal not met): an ETA again, 5
  // candidates of the 8 done, a round each 10 s.
  sweep.clear_closing_check();
  board.Add(Event(v1::EVENT_KIND_SEARCH_RESUMED, 70, nullptr, &sweep));
  EXPECT_THAT(board.Render(), HasSubstr("ETA: ~30s for 3 more of 8 rounds"));
  // Two workloads: the budget counts per workload.
  sweep.mutable_spec()->add_workloads()->set_name("small");
  sweep.mutable_spec()->add_workloads()->set_name("large");
  board.Add(Event(v1::EVENT_KIND_FINISHED, 70, nullptr, &sweep));
  EXPECT_THAT(board.Render(),
              HasSubstr("ETA: ~1m50s for 11 more of 16 rounds"));
}

}  // namespace
}  // namespace tunefarm
