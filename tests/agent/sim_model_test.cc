#include "agent/sim_model.h"

#include <algorithm>
#include <limits>

#include "gtest/gtest.h"
#include "yaml-cpp/yaml.h"

namespace tunefarm {
namespace {

v1::Workload Square2k() {
  v1::Workload w;
  w.set_name("square_2k");
  w.set_dtype("fp16");
  (*w.mutable_dims())["m"] = 2048;
  (*w.mutable_dims())["n"] = 2048;
  (*w.mutable_dims())["k"] = 2048;
  return w;
}

v1::Workload Ragged() {
  v1::Workload w;
  w.set_name("ragged");
  w.set_dtype("fp16");
  (*w.mutable_dims())["m"] = 1000;
  (*w.mutable_dims())["n"] = 1000;
  (*w.mutable_dims())["k"] = 512;
  return w;
}

ParamMap Params(int64_t tm, int64_t tn, int64_t tk, int64_t b, int64_t bd) {
  ParamMap p;
  p["tile_m"] = IntParam(tm);
  p["tile_n"] = IntParam(tn);
  p["tile_k"] = IntParam(tk);
  p["buffer_count"] = IntParam(b);
  p["block_dim"] = IntParam(bd);
  return p;
}

ParamMap Defaults() {
  ParamMap p;
  for (const SimParamDomain& d : SimMatmulDomain())
    p[d.name] = IntParam(d.default_value);
  return p;
}

// Every configuration of the domain.
std::vector<ParamMap> AllConfigs() {
  std::vector<ParamMap> out(1);
  for (const SimParamDomain& d : SimMatmulDomain()) {
    std::vector<ParamMap> next;
    for (const ParamMap& p : out) {
      for (int64_t v : d.values) {
        ParamMap q = p;
        q[d.name] = IntParam(v);
        next.push_back(q);
      }
    }
    out = std::move(next);
  }
  return out;
}

double Latency(const v1::Workload& w, const ParamMap& p) {
  absl::StatusOr<SimKernelTiming> t = ModelMatmul(DefaultSimChip(), w, p);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? t->latency_us : -1;
}

TEST(SimModelTest, ChipMatchesTheA2Facts) {
  SimChip chip = DefaultSimChip();
  EXPECT_EQ(chip.name, "Ascend910B-sim");
  v1::BoardCapabilities caps = SimChipCapabilities(chip);
  EXPECT_EQ(caps.cube_cores(), 24);
  EXPECT_EQ(caps.vector_cores(), 48);
  EXPECT_EQ(caps.ub_bytes(), 196608);
  EXPECT_DOUBLE_EQ(caps.memory_bandwidth_gbps(), 1600);
  EXPECT_DOUBLE_EQ(caps.clock_mhz(), 1800);
  EXPECT_NEAR(caps.peak_tflops(), 353.9, 0.1);  // 24 × 4096 × 2 × 1.8 GHz
  EXPECT_DOUBLE_EQ(caps.launch_overhead_us(), 5);
}

TEST(SimModelTest, Deterministic) {
  const ParamMap p = Params(64, 128, 64, 2, 24);
  absl::StatusOr<SimKernelTiming> a =
      ModelMatmul(DefaultSimChip(), Square2k(), p);
  absl::StatusOr<SimKernelTiming> b =
      ModelMatmul(DefaultSimChip(), Square2k(), p);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->latency_us, b->latency_us);
  EXPECT_EQ(a->total_cycles, b->total_cycles);
  const std::string key = ParamsKey(p);
  std::vector<double> samples;
  for (int i = 0; i < 50; ++i) {
    const double s = SimNoisySample(a->latency_us, 42, key, i);
    EXPECT_EQ(s, SimNoisySample(a->latency_us, 42, key, i));
    EXPECT_LE(std::abs(s / a->latency_us - 1), 0.01);
    samples.push_back(s);
  }
  // Noise exists, and depends on the seed.
  EXPECT_NE(*std::min_element(samples.begin(), samples.end()),
            *std::max_element(samples.begin(), samples.end()));
  EXPECT_NE(SimNoisySample(a->latency_us, 42, key, 0),
            SimNoisySample(a->latency_us, 43, key, 0));
}

TEST(SimModelTest, AtLeast200ValidConfigsAndSomeInvalid) {
  const SimChip chip = DefaultSimChip();
  int valid = 0, invalid = 0;
  for (const ParamMap& p : AllConfigs()) {
    absl::StatusOr<MatmulConfig> c = ParseMatmulConfig(p);
    ASSERT_TRUE(c.ok()) << c.status();
    absl::Status st = CheckMatmulBuild(chip, *c);
    if (st.ok()) {
      ++valid;
    } else {
      ++invalid;
      EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
      EXPECT_EQ(ModelMatmul(chip, Square2k(), p).status().code(),
                absl::StatusCode::kResourceExhausted);
    }
  }
  EXPECT_GE(valid, 200);
  EXPECT_GT(invalid, 0);
  EXPECT_GE(SimMatmulDomain().size(), 4u);
}

TEST(SimModelTest, UbOverflowMessage) {
  absl::StatusOr<MatmulConfig> c =
      ParseMatmulConfig(Params(256, 256, 128, 4, 16));
  ASSERT_TRUE(c.ok());
  absl::Status st = CheckMatmulBuild(DefaultSimChip(), *c);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(
      st.message(),
      "UB overflow: tile_m=256 tile_n=256 tile_k=128 buffer_count=4 needs "
      "786432 bytes, UB holds 196608 bytes");
}

TEST(SimModelTest, DefaultsBuildAndAreAMediocreBaseline) {
  const SimChip chip = DefaultSimChip();
  for (const v1::Workload& w : {Square2k(), Ragged()}) {
    const double baseline = Latency(w, Defaults());
    double best = std::numeric_limits<double>::max(), worst = 0;
    for (const ParamMap& p : AllConfigs()) {
      absl::StatusOr<SimKernelTiming> t = ModelMatmul(chip, w, p);
      if (!t.ok()) continue;
      best = std::min(best, t->latency_us);
      worst = std::max(worst, t->latency_us);
    }
    // The best valid variant is several times faster than the baseline, and
    // the baseline is not the worst either.
    EXPECT_GT(baseline / best, 4.0) << w.name();
    EXPECT_GT(worst / baseline, 2.0) << w.name();
    EXPECT_GT(best, chip.launch_overhead_us) << w.name();
  }
}

TEST(SimModelTest, LandscapeIsNotMonotone) {
  const v1::Workload w = Square2k();
  // More blocks than cube cores: a second uneven wave makes 32 worse than 24.
  EXPECT_LT(Latency(w, Params(128, 128, 64, 2, 24)),
            Latency(w, Params(128, 128, 64, 2, 32)));
  EXPECT_LT(Latency(w, Params(128, 128, 64, 2, 16)),
            Latency(w, Params(128, 128, 64, 2, 8)));
  // Double buffering overlaps load and compute.
  EXPECT_LT(Latency(w, Params(128, 128, 64, 2, 24)),
            Latency(w, Params(128, 128, 64, 1, 24)));
  // Bigger tiles help, up to a point: 64→128 wins, but a tall thin 256×16
  // tile loses to 128×32 of similar area.
  EXPECT_LT(Latency(w, Params(128, 128, 64, 2, 24)),
            Latency(w, Params(64, 64, 64, 2, 24)));
  EXPECT_LT(Latency(w, Params(128, 32, 64, 2, 24)),
            Latency(w, Params(256, 16, 64, 2, 24)));
  // The breakdown is consistent: ratios are fractions.
  absl::StatusOr<SimKernelTiming> t =
      ModelMatmul(DefaultSimChip(), w, Params(128, 128, 64, 2, 24));
  ASSERT_TRUE(t.ok());
  for (double r : {t->mac_ratio, t->mte1_ratio, t->mte2_ratio, t->scalar_ratio,
                   t->fixpipe_ratio}) {
    EXPECT_GT(r, 0);
    EXPECT_LE(r, 1);
  }
  EXPECT_EQ(t->block_dim, 24);
  EXPECT_EQ(t->tiles, 16 * 16);
}

TEST(SimModelTest, TailBugPredicate) {
  MatmulConfig c;
  c.tile_n = 128;
  EXPECT_TRUE(MatmulHasTailBug(c, 1000));
  EXPECT_FALSE(MatmulHasTailBug(c, 2048));
  c.tile_n = 64;
  EXPECT_FALSE(MatmulHasTailBug(c, 1000));  // narrow tiles take the scalar path
  c.tile_n = 256;
  EXPECT_TRUE(MatmulHasTailBug(c, 1000));
}

TEST(SimModelTest, RejectsBadParamsNamingTheField) {
  ParamMap p = Defaults();
  p["tile_m"] = StringParam("; rm -rf /");
  absl::Status st = ParseMatmulConfig(p).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("tile_m must be an integer"), std::string::npos)
      << st;

  p = Defaults();
  p["tile_k"] = IntParam(int64_t{1} << 62);
  st = ParseMatmulConfig(p).status();
  EXPECT_NE(
      st.message().find("tile_k=4611686018427387904 is outside its domain"),
      std::string::npos)
      << st;

  p = Defaults();
  p["../../etc/passwd"] = IntParam(1);
  st = ParseMatmulConfig(p).status();
  EXPECT_NE(st.message().find("unknown parameter \"../../etc/passwd\""),
            std::string::npos)
      << st;

  p = Defaults();
  p.erase("block_dim");
  st = ParseMatmulConfig(p).status();
  EXPECT_NE(st.message().find("block_dim is missing"), std::string::npos) << st;

  v1::Workload w = Square2k();
  (*w.mutable_dims())["n"] = 0;
  st = ParseMatmulShape(w).status();
  EXPECT_NE(st.message().find("dim n=0"), std::string::npos) << st;
  w = Square2k();
  w.set_dtype("int4");
  EXPECT_NE(ParseMatmulShape(w).status().message().find("dtype"),
            std::string::npos);
}

// The manifest the ops catalog serves must describe what the kernel accepts.
TEST(SimModelTest, ManifestMatchesTheKernelDomain) {
  YAML::Node m = YAML::LoadFile(std::string(TUNEFARM_SOURCE_DIR) +
                                "/ops/sim_matmul/operator.yaml");
  EXPECT_EQ(m["name"].as<std::string>(), "sim_matmul");
  const std::vector<SimParamDomain>& domain = SimMatmulDomain();
  ASSERT_EQ(m["parameters"].size(), domain.size());
  for (size_t i = 0; i < domain.size(); ++i) {
    YAML::Node p = m["parameters"][i];
    EXPECT_EQ(p["name"].as<std::string>(), domain[i].name);
    EXPECT_EQ(p["values"].as<std::vector<int64_t>>(), domain[i].values)
        << domain[i].name;
    EXPECT_EQ(p["default"].as<int64_t>(), domain[i].default_value)
        << domain[i].name;
    EXPECT_EQ(p["stage"].as<std::string>(), domain[i].stage) << domain[i].name;
  }
  EXPECT_EQ(m["backends"]["sim"]["command"][0].as<std::string>(),
            "{bin}/tunefarm-sim-matmul");
}

}  // namespace
}  // namespace tunefarm
