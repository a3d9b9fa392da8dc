// Space loaders on the real fixture files (shared/fixtures/spaces) and the
// replay board answering from them.
#include <atomic>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "agent/replay_board.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "ops/catalog.h"
#include "ops/constraints.h"
#include "ops/spaces/space_file.h"

namespace tunefarm {
namespace {

using ::testing::HasSubstr;

std::string Fixture(const std::string& name) {
  return std::string(TUNEFARM_SHARED_DIR) + "/fixtures/spaces/" + name;
}

ParamMap Conv(int bx, int by, int tx, int ty, int ro, int pad, int shmem) {
  ParamMap p;
  p["block_size_x"] = IntParam(bx);
  p["block_size_y"] = IntParam(by);
  p["tile_size_x"] = IntParam(tx);
  p["tile_size_y"] = IntParam(ty);
  p["read_only"] = IntParam(ro);
  p["use_padding"] = IntParam(pad);
  p["use_shmem"] = IntParam(shmem);
  p["use_cmem"] = IntParam(1);
  p["filter_height"] = IntParam(15);
  p["filter_width"] = IntParam(15);
  return p;
}

// One file shared by the tests (parsing it takes a moment).
const Space& ConvolutionKt() {
  static const Space* space = [] {
    absl::StatusOr<Space> s =
        LoadSpaceFile(Fixture("convolution_A100.kt.json.gz"));
    EXPECT_TRUE(s.ok()) << s.status();
    return new Space(s.ok() ? *std::move(s) : Space{});
  }();
  return *space;
}

TEST(SpaceFileTest, KernelTunerCacheConvolutionA100) {
  const Space& s = ConvolutionKt();
  EXPECT_EQ(s.format, "kernel_tuner");
  EXPECT_EQ(s.device, "NVIDIA A100-PCIE-40GB");
  EXPECT_EQ(s.kernel, "convolution_kernel");
  ASSERT_EQ(s.parameters.size(), 10u);
  EXPECT_EQ(s.parameters[0].name, "block_size_x");
  EXPECT_EQ(s.parameters[0].values.size(), 16u);
  EXPECT_EQ(s.CartesianSize(), 10240);
  EXPECT_EQ(s.configs.size(), 4362u);
  EXPECT_EQ(s.ok_count, 4201u);
  int compile = 0, runtime = 0;
  for (const SpaceConfig& c : s.configs) {
    compile += c.outcome == SpaceOutcome::kCompileFailed;
    runtime += c.outcome == SpaceOutcome::kRuntimeFailed;
  }
  EXPECT_EQ(compile, 6);
  EXPECT_EQ(runtime, 155);
  // Best: 32,4,1,3,1,0,1 at 0.5536000076681376 ms.
  EXPECT_NEAR(s.best_us, 553.6000076681376, 1e-6);
  EXPECT_EQ(ParamsKey(s.configs[s.best_index].params),
            ParamsKey(Conv(32, 4, 1, 3, 1, 0, 1)));
  const SpaceConfig* first = s.Find(Conv(16, 1, 1, 1, 0, 0, 0));
  ASSERT_NE(first, nullptr);
  EXPECT_NEAR(first->time_us, 3875.3279224038124, 1e-6);
  EXPECT_EQ(first->samples_us.size(), 32u);
  const SpaceConfig* failed = s.Find(Conv(32, 16, 2, 4, 1, 0, 0));
  ASSERT_NE(failed, nullptr);
  EXPECT_EQ(failed->outcome, SpaceOutcome::kRuntimeFailed);
  EXPECT_EQ(failed->failure, "RuntimeFailedConfig");
  // use_padding with block_size_x % 32 == 0 breaks a constraint.
  EXPECT_EQ(s.Find(Conv(32, 1, 1, 1, 0, 1, 1)), nullptr);
}

TEST(SpaceFileTest, T4FileHoldsTheSameMeasurements) {
  absl::StatusOr<Space> t4 =
      LoadSpaceFile(Fixture("convolution_A100.t4.json.gz"));
  ASSERT_TRUE(t4.ok()) << t4.status();
  EXPECT_EQ(t4->format, "t4");
  EXPECT_EQ(t4->configs.size(), 4362u);
  EXPECT_EQ(t4->ok_count, 4201u);
  EXPECT_NEAR(t4->best_us, ConvolutionKt().best_us, 1e-6);
  // Domains are the values seen, sorted.
  ASSERT_EQ(t4->parameters.size(), 10u);
  EXPECT_EQ(t4->parameters[1].name, "block_size_y");
  ASSERT_EQ(t4->parameters[1].values.size(), 5u);
  EXPECT_EQ(t4->parameters[1].values[4].int_value(), 16);
  const SpaceConfig* c = t4->Find(Conv(32, 16, 2, 4, 1, 0, 0));
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->outcome, SpaceOutcome::kRuntimeFailed);
}

TEST(SpaceFileTest, KttCoulombAndPnpoly) {
  absl::StatusOr<Space> c =
      LoadSpaceFile(Fixture("coulomb3d_RTX_2080_Ti.ktt.json"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->format, "ktt");
  EXPECT_EQ(c->device, "NVIDIA GeForce RTX 2080 Ti");
  EXPECT_EQ(c->configs.size(), 210u);
  EXPECT_EQ(c->ok_count, 210u);
  EXPECT_NEAR(c->best_us, 769.696, 1e-9);  // microseconds in the file
  EXPECT_EQ(c->CartesianSize(), 2 * 3 * 6 * 6 * 2);

  absl::StatusOr<Space> p =
      LoadSpaceFile(Fixture("pnpoly_RTX_3090.ktt.json.gz"));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->configs.size(), 4092u);
  EXPECT_EQ(p->ok_count, 3818u);
  EXPECT_NEAR(p->best_us, 7224.192, 1e-9);
}

// Every file in shared/fixtures/spaces loads, with the counts and the best
// time PROVENANCE.md lists for it (checked there independently of this
// loader).
struct Provenance {
  const char* file;
  size_t entries, valid;
  double best_us;
};

class EveryFixtureSpace : public ::testing::TestWithParam<Provenance> {};

TEST_P(EveryFixtureSpace, LoadsWithItsProvenanceFigures) {
  const Provenance& want = GetParam();
  absl::StatusOr<Space> s = LoadSpaceFile(Fixture(want.file));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->configs.size(), want.entries);
  EXPECT_EQ(s->ok_count, want.valid);
  // PROVENANCE.md rounds to 4 significant digits.
  EXPECT_NEAR(s->best_us, want.best_us, want.best_us * 1e-3);
  const v1::OperatorManifest op = ManifestFromSpace(*s);
  EXPECT_EQ(op.parameters_size(), static_cast<int>(s->parameters.size()));
  // The operator.yaml written for replay boards reads back as the same
  // manifest (domains, types, defaults, stages, the replay backend).
  absl::StatusOr<v1::OperatorManifest> yaml =
      ParseOperatorManifest(SpaceManifestYaml(*s), want.file);
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  // The YAML renames the parameters, in the constraints too, so that the
  // catalog loads them and strategies enforce them on replay boards.
  v1::OperatorManifest renamed = op;
  for (v1::ParameterDomain& p : *renamed.mutable_parameters()) {
    p.set_name(ManifestParameterName(p.name()));
  }
  renamed.clear_constraints();
  for (const std::string& c : op.constraints()) {
    absl::StatusOr<std::string> r =
        RenameConstraintParameters(c, [](std::string_view n) {
          return ManifestParameterName(absl::string_view(n.data(), n.size()));
        });
    ASSERT_TRUE(r.ok()) << r.status();
    renamed.add_constraints(*r);
  }
  EXPECT_EQ(yaml->constraints_size(), op.constraints_size());
  EXPECT_TRUE(
      google::protobuf::util::MessageDifferencer::Equals(*yaml, renamed))
      << yaml->DebugString();
  EXPECT_TRUE(yaml->backends().contains("replay"));
  EXPECT_EQ(yaml->workloads(0).dims().at("configs"),
            static_cast<int64_t>(want.entries));
  ASSERT_GE(s->best_index, 0);
  EXPECT_NE(s->Find(s->configs[s->best_index].params), nullptr);
}

// PROVENANCE.md's constraints (KnownSpaceConstraints) reproduce each file's
// configuration list exactly: over the cartesian product, a configuration
// is feasible if and only if it is in the file.
TEST_P(EveryFixtureSpace, ConstraintsReproduceTheConfigurationList) {
  const Provenance& want = GetParam();
  absl::StatusOr<Space> s = LoadSpaceFile(Fixture(want.file));
  ASSERT_TRUE(s.ok()) << s.status();
  const v1::OperatorManifest op = ManifestFromSpace(*s);
  absl::StatusOr<ConstraintSet> c = ConstraintSet::ForManifest(op);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->empty(), absl::StrContains(want.file, "pnpoly"));
  // The generated operator.yaml's constraints, over its renamed parameters,
  // agree on every configuration (what replay boards' sweeps enforce).
  absl::StatusOr<v1::OperatorManifest> yaml =
      ParseOperatorManifest(SpaceManifestYaml(*s), want.file);
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  absl::StatusOr<ConstraintSet> yc = ConstraintSet::ForManifest(*yaml);
  ASSERT_TRUE(yc.ok()) << yc.status();
  EXPECT_EQ(yc->size(), c->size());
  std::vector<int> digits(op.parameters_size(), 0);
  size_t feasible = 0, mismatched = 0, yaml_mismatched = 0, total = 0;
  while (true) {
    ParamMap p, low;
    for (int i = 0; i < op.parameters_size(); ++i) {
      p[op.parameters(i).name()] = op.parameters(i).values(digits[i]);
      low[yaml->parameters(i).name()] = op.parameters(i).values(digits[i]);
    }
    const bool ok = c->Feasible(p);
    feasible += ok;
    mismatched += ok != (s->Find(p) != nullptr);
    yaml_mismatched += ok != yc->Feasible(low);
    ++total;
    int i = op.parameters_size() - 1;
    while (i >= 0 && ++digits[i] == op.parameters(i).values_size()) {
      digits[i--] = 0;
    }
    if (i < 0) break;
  }
  EXPECT_EQ(static_cast<double>(total), s->CartesianSize());
  EXPECT_EQ(feasible, want.entries);
  EXPECT_EQ(mismatched, 0u);
  EXPECT_EQ(yaml_mismatched, 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Provenance, EveryFixtureSpace,
    ::testing::Values(
        Provenance{"gemm_RTX_3090.kt.json.gz", 17956, 17956, 5658},
        Provenance{"gemm_RTX_2080_Ti.kt.json.gz", 17956, 17956, 11483},
        Provenance{"convolution_A100.kt.json.gz", 4362, 4201, 554},
        Provenance{"convolution_A100.t4.json.gz", 4362, 4201, 554},
        Provenance{"convolution_MI250X.kt.json.gz", 4362, 4362, 659},
        Provenance{"dedispersion_A100.kt.json.gz", 11130, 11130, 68120},
        Provenance{"dedispersion_MI250X.kt.json.gz", 11130, 11130, 49570},
        Provenance{"pnpoly_RTX_3090.kt.json.gz", 4092, 3774, 8714},
        Provenance{"pnpoly_RTX_3090.ktt.json.gz", 4092, 3818, 7224},
        Provenance{"coulomb3d_RTX_2080_Ti.ktt.json", 210, 210, 769.7}),
    [](const ::testing::TestParamInfo<Provenance>& info) {
      std::string name = info.param.file;
      name = name.substr(0, name.find(".json"));
      for (char& c : name) {
        if (c == '.') c = '_';
      }
      return name;
    });

TEST(SpaceFileTest, BadInputsNameTheProblem) {
  EXPECT_THAT(ParseSpace("{\"x\": 1}", "f.json").status().message(),
              HasSubstr("f.json: not a Kernel Tuner cache"));
  EXPECT_THAT(ParseSpace("{", "g.json").status().message(),
              HasSubstr("g.json: "));
  EXPECT_THAT(ParseSpace(std::string("\x1f\x8b\x08\x00garbage", 12), "h.gz")
                  .status()
                  .message(),
              HasSubstr("h.gz: "));
  EXPECT_FALSE(LoadSpaceFile(Fixture("no_such_file.json")).ok());
  const char* dup =
      R"({"tune_params": {"a": [1, 2]}, "tune_params_keys": ["a"],
          "cache": {"1": {"a": 1, "time": 1.0}, "1b": {"a": 1, "time": 2.0}}})";
  EXPECT_THAT(ParseSpace(dup, "d.json").status().message(),
              HasSubstr("appears twice"));
}

TEST(SpaceFileTest, ManifestFromSpace) {
  const v1::OperatorManifest op = ManifestFromSpace(ConvolutionKt());
  EXPECT_EQ(op.name(), "convolution_kernel");
  ASSERT_EQ(op.parameters_size(), 10);
  EXPECT_EQ(op.parameters(0).stage(), "tiling");    // block_size_x
  EXPECT_EQ(op.parameters(2).stage(), "tiling");    // tile_size_x
  EXPECT_EQ(op.parameters(4).stage(), "pipeline");  // read_only
  EXPECT_EQ(op.parameters(6).stage(), "pipeline");  // use_shmem
  EXPECT_EQ(op.parameters(7).stage(), "in_core");   // use_cmem
  EXPECT_EQ(ParamsKey(DefaultParams(op)),
            ParamsKey(Conv(16, 1, 1, 1, 0, 0, 0)));
  EXPECT_TRUE(ValidateParams(op, DefaultParams(op)).ok());
  EXPECT_EQ(SpaceSize(op), 10240u);
  EXPECT_EQ(StageForSpaceParameter("MWG"), "tiling");
  EXPECT_EQ(StageForSpaceParameter("KWI"), "pipeline");
  EXPECT_EQ(StageForSpaceParameter("VWM"), "in_core");
  EXPECT_EQ(StageForSpaceParameter("tile_stride_x"), "pipeline");
  EXPECT_EQ(StageForSpaceParameter("loop_unroll_factor_channel"), "pipeline");
}

std::unique_ptr<Board> Replay(double noise = 0) {
  ReplayBoardOptions o;
  o.board_id = "a1/replay0";
  o.agent_id = "a1";
  o.space = std::make_shared<const Space>(ConvolutionKt());
  o.noise = noise;
  o.seed = 3;
  absl::StatusOr<std::unique_ptr<Board>> b = NewReplayBoard(std::move(o));
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? *std::move(b) : nullptr;
}

absl::StatusOr<Evaluation> Eval(Board& b, const ParamMap& params,
                                int epoch = 1) {
  v1::WorkItem w;
  w.set_sweep_id("s1");
  w.set_round_id(4);
  w.set_epoch(epoch);
  *w.mutable_params() = params;
  std::atomic<bool> cancel{false};
  return b.Evaluate(w, cancel);
}

TEST(ReplayBoardTest, AnswersFromTheFile) {
  std::unique_ptr<Board> b = Replay();
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->info().kind(), "replay");
  EXPECT_EQ(b->info().chip(), "NVIDIA A100-PCIE-40GB");
  EXPECT_FALSE(b->info().simulated());
  EXPECT_THAT(b->info().labels().at("replay"),
              HasSubstr("convolution_A100.kt.json.gz"));

  absl::StatusOr<Evaluation> ok = Eval(*b, Conv(32, 4, 1, 3, 1, 0, 1));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->result.outcome(), v1::OUTCOME_OK);
  EXPECT_FALSE(ok->bundle.has_value());
  const v1::Measurement& m = ok->result.measurement();
  EXPECT_NEAR(m.median_us(), 553.6000076681376, 1e-6);
  EXPECT_FALSE(m.simulated());
  EXPECT_TRUE(m.replayed());
  EXPECT_THAT(m.policy(), HasSubstr("replayed from "));
  EXPECT_THAT(m.policy(),
              HasSubstr("measured on NVIDIA A100-PCIE-40GB by Kernel Tuner"));
  EXPECT_GT(m.samples(), 1);
  EXPECT_LE(m.min_us(), m.p20_us());
  EXPECT_LE(m.p20_us(), m.p80_us());
  EXPECT_LE(m.p80_us(), m.max_us());
  EXPECT_TRUE(ok->result.precision().passed());

  absl::StatusOr<Evaluation> crashed = Eval(*b, Conv(32, 16, 2, 4, 1, 0, 0));
  ASSERT_TRUE(crashed.ok());
  EXPECT_EQ(crashed->result.outcome(), v1::OUTCOME_RUN_CRASHED);
  EXPECT_THAT(crashed->result.detail(), HasSubstr("RuntimeFailedConfig"));

  absl::StatusOr<Evaluation> absent = Eval(*b, Conv(32, 1, 1, 1, 0, 1, 1));
  ASSERT_TRUE(absent.ok());
  EXPECT_EQ(absent->result.outcome(), v1::OUTCOME_BUILD_FAILED);
  EXPECT_THAT(absent->result.detail(),
              HasSubstr("not in the space (constraint)"));
}

// A coordinator's work names parameters the manifest's way ("mwg" for the
// Kernel Tuner file's "MWG"); the board finds them all the same.
TEST(ReplayBoardTest, AnswersManifestNamedParameters) {
  absl::StatusOr<Space> gemm =
      LoadSpaceFile(Fixture("gemm_RTX_3090.kt.json.gz"));
  ASSERT_TRUE(gemm.ok()) << gemm.status();
  ASSERT_GE(gemm->best_index, 0);
  ReplayBoardOptions o;
  o.board_id = "a1/replay0";
  o.space = std::make_shared<const Space>(*gemm);
  absl::StatusOr<std::unique_ptr<Board>> b = NewReplayBoard(std::move(o));
  ASSERT_TRUE(b.ok()) << b.status();
  ParamMap lower;
  for (const auto& [name, value] : gemm->configs[gemm->best_index].params) {
    lower[ManifestParameterName(name)] = value;
  }
  EXPECT_TRUE(lower.contains("mwg"));
  absl::StatusOr<Evaluation> ev = Eval(**b, lower);
  ASSERT_TRUE(ev.ok()) << ev.status();
  EXPECT_EQ(ev->result.outcome(), v1::OUTCOME_OK) << ev->result.detail();
  EXPECT_DOUBLE_EQ(ev->result.measurement().median_us(), gemm->best_us);
  EXPECT_TRUE(ev->result.measurement().replayed());
}

TEST(ReplayBoardTest, CompileFailuresAreBuildFailures) {
  const Space& s = ConvolutionKt();
  std::unique_ptr<Board> b = Replay();
  int seen = 0;
  for (const SpaceConfig& c : s.configs) {
    if (c.outcome != SpaceOutcome::kCompileFailed) continue;
    absl::StatusOr<Evaluation> e = Eval(*b, c.params);
    ASSERT_TRUE(e.ok());
    EXPECT_EQ(e->result.outcome(), v1::OUTCOME_BUILD_FAILED);
    EXPECT_THAT(e->result.detail(), HasSubstr("CompilationFailedConfig"));
    ++seen;
  }
  EXPECT_EQ(seen, 6);
}

TEST(ReplayBoardTest, NoiseIsDeterministicAndRecorded) {
  std::unique_ptr<Board> a = Replay(0.05);
  std::unique_ptr<Board> b = Replay(0.05);
  const ParamMap p = Conv(32, 4, 1, 3, 1, 0, 1);
  const double x1 = Eval(*a, p)->result.measurement().median_us();
  const double x2 = Eval(*b, p)->result.measurement().median_us();
  const double x3 = Eval(*a, p, 2)->result.measurement().median_us();
  EXPECT_EQ(x1, x2);
  EXPECT_NE(x1, x3);
  EXPECT_NE(x1, 553.6000076681376);
  EXPECT_THAT(Eval(*a, p)->result.measurement().policy(),
              HasSubstr("injected noise"));
  ReplayBoardOptions bad;
  bad.space = std::make_shared<const Space>(ConvolutionKt());
  bad.noise = -1;
  EXPECT_FALSE(NewReplayBoard(bad).ok());
  ReplayBoardOptions missing;
  missing.space_file = Fixture("missing.kt.json");
  EXPECT_FALSE(NewReplayBoard(missing).ok());
}

}  // namespace
}  // namespace tunefarm
