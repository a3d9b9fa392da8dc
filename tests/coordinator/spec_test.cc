// Sweep specs: the shipped example, defaults, and one test per bad field
// (each error must name its field). The operator is a small manifest built
// here from YAML, so these tests do not depend on ops/sim_matmul.
#include "coordinator/spec.h"

#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tunefarm {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr char kOperator[] = R"(
name: sim_matmul
parameters:
  - {name: tile_m, values: [16, 32, 64, 128, 256], default: 64, stage: tiling}
  - {name: tile_n, values: [16, 32, 64], default: 32, stage: tiling}
  - {name: ratio, values: [0.5, 1.0, 2.0], default: 0.5, stage: pipeline}
  - {name: layout, values: [nd, nz], default: nd, stage: in_core}
workloads:
  - {name: square_2k, dtype: fp16, dims: {m: 2048, n: 2048, k: 2048}}
  - {name: skinny, dtype: fp16, dims: {m: 64, n: 4096, k: 4096}}
tolerances: {rtol: 0.01, atol: 0.001}
backends:
  sim: {command: ["{bin}/tunefarm-sim-matmul"]}
  cpu: {command: ["{pkg}/cpu_matmul"]}
)";

// A complete, valid spec; tests replace one line of it.
constexpr char kSpec[] = R"(name: sim-matmul-demo
team: demo
operator: sim_matmul
workload: square_2k
goal: {speedup: 3.0}
strategy: {name: random, seed: 7}
budget: {max_rounds: 60, time_limit: 30m, max_rounds_without_gain: 20}
min_gain: 0.02
boards: {kind: sim, chip: Ascend910B-sim, labels: {pool: demo}}
measurement: {warmup: 5, samples: 30, flush_cache: true}
baseline: {tile_m: 32}
priority: 0
)";

class SpecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<v1::OperatorManifest> op =
        ParseOperatorManifest(kOperator, "test/operator.yaml");
    ASSERT_TRUE(op.ok()) << op.status();
    catalog_.Add(*op);
  }

  // kSpec with the line starting with `key:` replaced by `line` (removed
  // when `line` is empty).
  static std::string With(const std::string& key, const std::string& line) {
    std::string text = kSpec;
    const size_t at = text.find(key + ":");
    EXPECT_NE(at, std::string::npos) << key;
    const size_t end = text.find('\n', at);
    text.replace(at, end - at + 1, line.empty() ? "" : line + "\n");
    return text;
  }

  absl::StatusOr<v1::SweepSpec> ParseAndValidate(const std::string& yaml) {
    absl::StatusOr<v1::SweepSpec> spec = ParseSweepSpec(yaml);
    if (!spec.ok()) return spec.status();
    return ValidateSweepSpec(*std::move(spec), catalog_);
  }

  // The error for `yaml`, which must be INVALID_ARGUMENT.
  std::string Error(const std::string& yaml) {
    absl::StatusOr<v1::SweepSpec> spec = ParseAndValidate(yaml);
    EXPECT_FALSE(spec.ok()) << yaml;
    if (spec.ok()) return "";
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument)
        << spec.status();
    return std::string(spec.status().message());
  }

  OperatorCatalog catalog_;
};

TEST_F(SpecTest, ShippedExampleParsesAndValidates) {
  absl::StatusOr<std::string> text =
      ReadFile(std::string(TUNEFARM_SOURCE_DIR) + "/examples/sim_matmul.yaml");
  ASSERT_TRUE(text.ok()) << text.status();
  absl::StatusOr<v1::SweepSpec> spec = ParseAndValidate(*text);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "sim-matmul-demo");
  EXPECT_EQ(spec->team(), "demo");
  EXPECT_EQ(spec->operator_name(), "sim_matmul");
  EXPECT_EQ(spec->workload().name(), "square_2k");
  EXPECT_EQ(spec->workload().dtype(), "fp16");  // resolved from the operator
  EXPECT_EQ(spec->workload().dims().at("m"), 2048);
  EXPECT_DOUBLE_EQ(spec->goal().speedup(), 12.0);
  EXPECT_EQ(spec->goal().target_us(), 0);
  EXPECT_EQ(spec->strategy().name(), "random");
  EXPECT_EQ(spec->strategy().seed(), 7u);
  EXPECT_EQ(spec->budget().max_rounds(), 60);
  EXPECT_EQ(spec->budget().time_limit_s(), 30 * 60);
  EXPECT_EQ(spec->budget().max_rounds_without_gain(), 20);
  EXPECT_DOUBLE_EQ(spec->min_gain(), 0.02);
  EXPECT_EQ(spec->boards().kind(), "sim");
  EXPECT_EQ(spec->boards().chip(), "Ascend910B-sim");
  // The local farm's boards carry no labels, so the demo selects none.
  EXPECT_TRUE(spec->boards().labels().empty());
  EXPECT_EQ(spec->measurement().warmup(), 5);
  EXPECT_EQ(spec->measurement().samples(), 30);
  EXPECT_TRUE(spec->measurement().flush_cache());
  EXPECT_FALSE(spec->measurement().skip_closing_check());  // on by default
  // The full merged baseline: the override plus every other default.
  ASSERT_EQ(spec->baseline_params().size(), 4u);
  EXPECT_EQ(spec->baseline_params().at("tile_m").int_value(), 32);
  EXPECT_EQ(spec->baseline_params().at("tile_n").int_value(), 32);
  EXPECT_DOUBLE_EQ(spec->baseline_params().at("ratio").double_value(), 0.5);
  EXPECT_EQ(spec->baseline_params().at("layout").string_value(), "nd");
  EXPECT_EQ(spec->priority(), 0);
}

// The example against the operators that ship in ops/ (written separately;
// reported as skipped, not passed, in a checkout without them).
TEST(ShippedSpec, ExampleValidatesAgainstShippedOperators) {
  const std::string ops = std::string(TUNEFARM_SOURCE_DIR) + "/ops";
  if (!ReadFile(ops + "/sim_matmul/operator.yaml").ok()) {
    GTEST_SKIP() << "ops/sim_matmul is not in this checkout";
  }
  absl::StatusOr<OperatorCatalog> catalog =
      OperatorCatalog::LoadFromDirs({ops});
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  absl::StatusOr<std::string> text =
      ReadFile(std::string(TUNEFARM_SOURCE_DIR) + "/examples/sim_matmul.yaml");
  ASSERT_TRUE(text.ok()) << text.status();
  absl::StatusOr<v1::SweepSpec> spec = ParseSweepSpec(*text);
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<v1::SweepSpec> valid = ValidateSweepSpec(*spec, *catalog);
  ASSERT_TRUE(valid.ok()) << valid.status();
  EXPECT_EQ(valid->baseline_params().at("tile_m").int_value(), 32);
  EXPECT_EQ(valid->boards().kind(), "sim");
}

TEST_F(SpecTest, DefaultsFilled) {
  absl::StatusOr<v1::SweepSpec> spec = ParseAndValidate(
      "name: n\nteam: t\noperator: sim_matmul\ngoal: {target_us: 40}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->workload().name(), "square_2k");  // the operator's first
  EXPECT_EQ(spec->strategy().name(), "hybrid");
  EXPECT_EQ(spec->strategy().seed(), 1u);
  EXPECT_EQ(spec->budget().max_rounds(), 50);
  EXPECT_EQ(spec->budget().time_limit_s(), 12 * 3600);
  EXPECT_EQ(spec->budget().max_rounds_without_gain(), 20);
  EXPECT_DOUBLE_EQ(spec->min_gain(), 0.02);
  EXPECT_EQ(spec->boards().kind(), "sim");  // first backend in sim, cpu, ...
  EXPECT_EQ(spec->measurement().warmup(), 5);
  EXPECT_EQ(spec->measurement().samples(), 30);
  EXPECT_EQ(spec->baseline_params().at("tile_m").int_value(), 64);
  EXPECT_DOUBLE_EQ(spec->goal().target_us(), 40);
}

TEST_F(SpecTest, ZeroIsKeptWhereLegal) {
  absl::StatusOr<v1::SweepSpec> spec =
      ParseAndValidate(With("min_gain", "min_gain: 0"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->min_gain(), 0);
  spec = ParseAndValidate(
      With("measurement",
           "measurement: {warmup: 0, samples: 3, flush_cache: false, "
           "closing_check: false}"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->measurement().warmup(), 0);
  EXPECT_FALSE(spec->measurement().flush_cache());
  EXPECT_TRUE(spec->measurement().skip_closing_check());
}

TEST_F(SpecTest, InlineWorkloadAndStrategyShorthand) {
  absl::StatusOr<v1::SweepSpec> spec = ParseAndValidate(
      With("workload",
           "workload: {name: mine, dtype: bf16, dims: {m: 4096, k: 1}}"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->workload().name(), "mine");
  EXPECT_EQ(spec->workload().dtype(), "bf16");
  EXPECT_EQ(spec->workload().dims().at("m"), 4096);
  spec = ParseAndValidate(With("strategy", "strategy: grid"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->strategy().name(), "grid");
}

TEST_F(SpecTest, DurationsAccepted) {
  for (const auto& [text, seconds] :
       std::vector<std::pair<std::string, int64_t>>{{"90s", 90},
                                                    {"30m", 1800},
                                                    {"12h", 43200},
                                                    {"7d", 604800},
                                                    {"1h30m", 5400},
                                                    {"600", 600}}) {
    absl::StatusOr<v1::SweepSpec> spec = ParseAndValidate(
        With("budget", absl::StrCat("budget: {time_limit: ", text, "}")));
    ASSERT_TRUE(spec.ok()) << text << ": " << spec.status();
    EXPECT_EQ(spec->budget().time_limit_s(), seconds) << text;
  }
}

TEST_F(SpecTest, MissingName) {
  EXPECT_EQ(Error(With("name", "")), "name: is required");
}

TEST_F(SpecTest, BadTeamCharset) {
  EXPECT_THAT(Error(With("team", "team: \"demo team\"")),
              StartsWith("team: must match [A-Za-z0-9][A-Za-z0-9._-]{0,63}"));
}

TEST_F(SpecTest, HostileNamesRejected) {
  for (const char* bad : {"\"; rm -rf /\"", "../../etc", "..", "\"a\\nb\"",
                          "\"$(reboot)\"", "-rf"}) {
    EXPECT_THAT(Error(With("name", absl::StrCat("name: ", bad))),
                StartsWith("name: must match"))
        << bad;
    EXPECT_THAT(Error(With("team", absl::StrCat("team: ", bad))),
                StartsWith("team: must match"))
        << bad;
  }
  EXPECT_THAT(Error(With("name", absl::StrCat("name: ", std::string(65, 'a')))),
              StartsWith("name: must match"));
}

TEST_F(SpecTest, UnknownOperator) {
  EXPECT_EQ(Error(With("operator", "operator: gemm")),
            "operator: unknown operator 'gemm'; known: sim_matmul");
}

TEST_F(SpecTest, UnknownWorkload) {
  EXPECT_EQ(Error(With("workload", "workload: cube_4k")),
            "workload: unknown workload 'cube_4k' of operator sim_matmul; "
            "known: square_2k, skinny");
}

TEST_F(SpecTest, BadInlineWorkload) {
  EXPECT_THAT(
      Error(With("workload", "workload: {name: w, dtype: fp16, dims: {m: 0}}")),
      StartsWith("workload.dims.m: must be between 1 and"));
  EXPECT_THAT(Error(With("workload", "workload: {name: w, dims: {m: 8}}")),
              StartsWith("workload.dtype: is required"));
  EXPECT_THAT(
      Error(With("workload", "workload: {name: w, dtype: fp16, dims: {m: x}}")),
      StartsWith("workload.dims.m: expected an integer, got 'x'"));
}

TEST_F(SpecTest, BadGoal) {
  EXPECT_THAT(Error(With("goal", "")), StartsWith("goal: set speedup"));
  EXPECT_THAT(Error(With("goal", "goal: {speedup: 0.5}")),
              StartsWith("goal.speedup: must be a number > 1"));
  EXPECT_THAT(Error(With("goal", "goal: {target_us: -4}")),
              StartsWith("goal.target_us: must be a number > 0"));
  EXPECT_THAT(Error(With("goal", "goal: {speedup: fast}")),
              StartsWith("goal.speedup: expected a number, got 'fast'"));
  EXPECT_THAT(Error(With("goal", "goal: {speedup: .inf}")),
              StartsWith("goal.speedup: must be a finite number"));
  EXPECT_THAT(Error(With("goal", "goal: {speedupp: 2}")),
              StartsWith("goal.speedupp: unknown field"));
}

TEST_F(SpecTest, UnknownStrategy) {
  EXPECT_EQ(Error(With("strategy", "strategy: {name: annealing}")),
            "strategy.name: unknown strategy 'annealing'; known: grid, guided, "
            "hybrid, random, tpe");
  EXPECT_EQ(
      Error(With("strategy",
                 "strategy: {name: guided, options: {tiling_patience: x}}")),
      "strategy.options.tiling_patience: 'x' is not a count in [0, "
      "1000000] (0 or 'unlimited' = no limit)");
  EXPECT_THAT(
      Error(With("strategy", "strategy: {name: grid, options: {depth: 3}}")),
      StartsWith("strategy.options.depth: unknown option for strategy grid"));
  EXPECT_THAT(Error(With("strategy", "strategy: {name: random, seed: -1}")),
              StartsWith("strategy.seed: expected an integer"));
}

TEST_F(SpecTest, MaxRoundsZero) {
  EXPECT_EQ(Error(With("budget", "budget: {max_rounds: 0}")),
            "budget.max_rounds: must be between 1 and 100000, got 0");
}

TEST_F(SpecTest, MaxRoundsNegative) {
  EXPECT_EQ(Error(With("budget", "budget: {max_rounds: -3}")),
            "budget.max_rounds: must be between 1 and 100000, got -3");
}

TEST_F(SpecTest, MaxRoundsNotANumber) {
  EXPECT_EQ(Error(With("budget", "budget: {max_rounds: ten}")),
            "budget.max_rounds: expected an integer, got 'ten'");
}

TEST_F(SpecTest, MaxRoundsHuge) {
  EXPECT_EQ(Error(With("budget", "budget: {max_rounds: 1000000000}")),
            "budget.max_rounds: must be between 1 and 100000, got 1000000000");
  EXPECT_THAT(
      Error(With("budget", "budget: {max_rounds: 99999999999999999999999}")),
      StartsWith("budget.max_rounds: expected an integer"));
}

TEST_F(SpecTest, TimeLimitForever) {
  EXPECT_EQ(Error(With("budget", "budget: {time_limit: forever}")),
            "budget.time_limit: expected a duration like 90s, 30m, 12h, 7d or "
            "integer seconds, got 'forever'");
  EXPECT_EQ(Error(With("budget", "budget: {time_limit: 8d}")),
            "budget.time_limit: must be between 1s and 7d, got 8d");
  EXPECT_THAT(Error(With("budget", "budget: {time_limit: 0s}")),
              StartsWith("budget.time_limit: must be between 1s and 7d"));
  EXPECT_THAT(Error(With("budget", "budget: {time_limit: 99999999999999d}")),
              StartsWith("budget.time_limit: expected a duration"));
}

TEST_F(SpecTest, MinGainOutOfRange) {
  EXPECT_EQ(Error(With("min_gain", "min_gain: 1.5")),
            "min_gain: must be a fraction in [0, 1), got 1.5");
  EXPECT_THAT(Error(With("min_gain", "min_gain: -0.1")),
              StartsWith("min_gain: must be a fraction in [0, 1)"));
}

TEST_F(SpecTest, MinGainNaN) {
  EXPECT_THAT(Error(With("min_gain", "min_gain: .nan")),
              StartsWith("min_gain: must be a finite number"));
  EXPECT_THAT(Error(With("min_gain", "min_gain: nan")),
              StartsWith("min_gain: must be a finite number"));
}

TEST_F(SpecTest, BoardKindUnknown) {
  EXPECT_EQ(Error(With("boards", "boards: {kind: tpu}")),
            "boards.kind: unknown board kind 'tpu'; known: sim, cpu, cuda, "
            "ascend, replay");
}

TEST_F(SpecTest, BoardKindWithoutBackend) {
  EXPECT_EQ(
      Error(With("boards", "boards: {kind: cuda}")),
      "boards.kind: operator sim_matmul has no 'cuda' backend; it has: sim, "
      "cpu");
}

TEST_F(SpecTest, BoardLabelsChecked) {
  EXPECT_THAT(Error(With("boards", "boards: {labels: {pool: [a, b]}}")),
              StartsWith("boards.labels.pool: expected a string, got a list"));
  EXPECT_THAT(Error(With("boards", "boards: {chip: \"x\\ty\"}")),
              StartsWith("boards.chip: must not contain control characters"));
}

TEST_F(SpecTest, BaselineUnknownParameter) {
  EXPECT_EQ(Error(With("baseline", "baseline: {tile_k: 32}")),
            "baseline.tile_k: unknown parameter of operator sim_matmul; known: "
            "tile_m, tile_n, ratio, layout");
}

TEST_F(SpecTest, BaselineOutOfDomain) {
  EXPECT_EQ(
      Error(With("baseline", "baseline: {tile_m: 48}")),
      "baseline.tile_m: parameter tile_m: 48 is not one of [16, 32, 64, 128, "
      "256]");
  EXPECT_THAT(
      Error(With("baseline", "baseline: {layout: 3}")),
      StartsWith("baseline.layout: parameter layout: expected a string"));
  // An integer in a domain of doubles means that double.
  absl::StatusOr<v1::SweepSpec> spec =
      ParseAndValidate(With("baseline", "baseline: {ratio: 2}"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_DOUBLE_EQ(spec->baseline_params().at("ratio").double_value(), 2.0);
}

TEST_F(SpecTest, MeasurementBounds) {
  EXPECT_EQ(Error(With("measurement", "measurement: {samples: 2}")),
            "measurement.samples: must be between 3 and 10000, got 2");
  EXPECT_EQ(Error(With("measurement", "measurement: {warmup: 1001}")),
            "measurement.warmup: must be between 0 and 1000, got 1001");
  EXPECT_EQ(Error(With("measurement", "measurement: {flush_cache: yes}")),
            "measurement.flush_cache: expected true or false, got 'yes'");
  EXPECT_EQ(Error(With("measurement", "measurement: {closing_check: 2}")),
            "measurement.closing_check: expected true or false, got '2'");
}

TEST_F(SpecTest, MeasurementModeAndNoisePolicy) {
  // Defaults: A/B, 1% target spread, cap 4 × samples, 95% confidence.
  absl::StatusOr<v1::SweepSpec> spec = ParseAndValidate(
      With("measurement", "measurement: {warmup: 5, samples: 30}"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->measurement().mode(), v1::MEASUREMENT_MODE_AB);
  EXPECT_DOUBLE_EQ(spec->measurement().target_rel_spread(), 0.01);
  EXPECT_EQ(spec->measurement().max_samples(), 120);
  EXPECT_DOUBLE_EQ(spec->measurement().confidence(), 0.95);

  spec = ParseAndValidate(
      With("measurement",
           "measurement: {samples: 10, mode: independent, "
           "target_rel_spread: 0.005, max_samples: 50, confidence: 0.99}"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->measurement().mode(), v1::MEASUREMENT_MODE_INDEPENDENT);
  EXPECT_DOUBLE_EQ(spec->measurement().target_rel_spread(), 0.005);
  EXPECT_EQ(spec->measurement().max_samples(), 50);
  EXPECT_DOUBLE_EQ(spec->measurement().confidence(), 0.99);

  EXPECT_EQ(Error(With("measurement", "measurement: {mode: abba}")),
            "measurement.mode: must be ab or independent, got 'abba'");
  EXPECT_EQ(
      Error(With("measurement", "measurement: {target_rel_spread: 0}")),
      "measurement.target_rel_spread: must be a fraction in (0, 0.5], got 0");
  EXPECT_EQ(
      Error(With("measurement", "measurement: {target_rel_spread: 2}")),
      "measurement.target_rel_spread: must be a fraction in (0, 0.5], got 2");
  EXPECT_EQ(Error(With("measurement", "measurement: {confidence: 0.3}")),
            "measurement.confidence: must be in [0.5, 0.999], got 0.3");
  EXPECT_EQ(Error(With("measurement", "measurement: {confidence: 1}")),
            "measurement.confidence: must be in [0.5, 0.999], got 1");
  EXPECT_EQ(
      Error(With("measurement", "measurement: {samples: 30, max_samples: 20}")),
      "measurement.max_samples: must be between measurement.samples (30) and "
      "40000, "
      "got 20");
  EXPECT_EQ(Error(With("measurement", "measurement: {max_samples: 50000}")),
            "measurement.max_samples: must be between 3 and 40000, got 50000");
}

TEST_F(SpecTest, PriorityBounds) {
  EXPECT_EQ(Error(With("priority", "priority: 101")),
            "priority: must be between -100 and 100, got 101");
}

TEST_F(SpecTest, UnknownTopLevelKey) {
  EXPECT_THAT(Error(std::string(kSpec) + "budgte: {max_rounds: 5}\n"),
              StartsWith("budgte: unknown field; known fields: name, team"));
}

TEST_F(SpecTest, DuplicateKeyRejected) {
  EXPECT_EQ(Error(std::string(kSpec) + "priority: 5\n"),
            "priority: duplicate key");
}

TEST_F(SpecTest, NonMappingDocument) {
  EXPECT_THAT(Error("- name: x\n- team: y\n"),
              StartsWith("document: expected a map, got a list"));
  EXPECT_THAT(Error("just a string\n"),
              StartsWith("document: expected a map, got 'just a string'"));
  EXPECT_EQ(Error(""), "document is empty");
  EXPECT_THAT(Error("name: [unclosed\n"),
              StartsWith("YAML syntax error at line"));
}

// Specs can arrive as protos over gRPC, bypassing the YAML parser.
TEST_F(SpecTest, ProtoSpecsGetTheSameChecks) {
  absl::StatusOr<v1::SweepSpec> good = ParseSweepSpec(kSpec);
  ASSERT_TRUE(good.ok()) << good.status();

  v1::SweepSpec spec = *good;
  spec.mutable_budget()->set_max_rounds(-3);
  EXPECT_EQ(ValidateSweepSpec(spec, catalog_).status().message(),
            "budget.max_rounds: must be between 1 and 100000, got -3");

  spec = *good;
  spec.set_min_gain(std::nan(""));
  EXPECT_THAT(std::string(ValidateSweepSpec(spec, catalog_).status().message()),
              StartsWith("min_gain: must be a fraction"));

  spec = *good;
  spec.mutable_goal()->set_speedup(std::numeric_limits<double>::infinity());
  EXPECT_THAT(std::string(ValidateSweepSpec(spec, catalog_).status().message()),
              StartsWith("goal.speedup:"));

  spec = *good;
  spec.mutable_budget()->set_time_limit_s(-1);
  EXPECT_THAT(std::string(ValidateSweepSpec(spec, catalog_).status().message()),
              StartsWith("budget.time_limit: must be between 1s and 7d"));

  spec = *good;
  spec.set_priority(1 << 30);
  EXPECT_THAT(std::string(ValidateSweepSpec(spec, catalog_).status().message()),
              StartsWith("priority:"));

  spec = *good;
  (*spec.mutable_baseline_params())["tile_m"] = IntParam(7);
  EXPECT_THAT(std::string(ValidateSweepSpec(spec, catalog_).status().message()),
              StartsWith("baseline.tile_m: parameter tile_m: 7 is not one of"));

  spec = *good;
  spec.mutable_measurement()->set_warmup(-1);
  EXPECT_THAT(std::string(ValidateSweepSpec(spec, catalog_).status().message()),
              StartsWith("measurement.warmup:"));
}

TEST(ParseDurationSeconds, Forms) {
  EXPECT_EQ(*ParseDurationSeconds("45"), 45);
  EXPECT_EQ(*ParseDurationSeconds("2h"), 7200);
  EXPECT_EQ(*ParseDurationSeconds("1d2h3m4s"), 86400 + 7200 + 180 + 4);
  EXPECT_FALSE(ParseDurationSeconds("").ok());
  EXPECT_FALSE(ParseDurationSeconds("h").ok());
  EXPECT_TRUE(ParseDurationSeconds("10").ok());
  EXPECT_FALSE(ParseDurationSeconds("1.5h").ok());
  EXPECT_FALSE(ParseDurationSeconds("10w").ok());
  EXPECT_FALSE(ParseDurationSeconds("10 m").ok());
}

}  // namespace
}  // namespace tunefarm
