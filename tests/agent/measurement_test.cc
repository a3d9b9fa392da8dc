#include "agent/measurement.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/files.h"
#include "gtest/gtest.h"

namespace tunefarm {
namespace {

TEST(SummarizeTest, DropsWarmupAndComputesQuantiles) {
  // Warm-up samples are huge: they must not leak into the statistics.
  std::vector<double> s = {1000, 900, 5, 1, 4, 2, 3};
  v1::Measurement m = Summarize(s, 2, true, "policy text");
  EXPECT_EQ(m.warmup(), 2);
  EXPECT_EQ(m.samples(), 5);
  EXPECT_DOUBLE_EQ(m.median_us(), 3);
  EXPECT_DOUBLE_EQ(m.min_us(), 1);
  EXPECT_DOUBLE_EQ(m.max_us(), 5);
  // Sorted 1..5: p20 at position 0.8 → 1.8; p80 at 3.2 → 4.2.
  EXPECT_DOUBLE_EQ(m.p20_us(), 1.8);
  EXPECT_DOUBLE_EQ(m.p80_us(), 4.2);
  EXPECT_TRUE(m.simulated());
  EXPECT_EQ(m.policy(), "policy text");
}

TEST(SummarizeTest, EvenCountMedianAndEmpty) {
  v1::Measurement m = Summarize({4, 1, 3, 2}, 0, false, "");
  EXPECT_DOUBLE_EQ(m.median_us(), 2.5);
  EXPECT_FALSE(m.simulated());

  m = Summarize({1, 2}, 5, true, "");
  EXPECT_EQ(m.samples(), 0);
  EXPECT_EQ(m.warmup(), 2);
  EXPECT_DOUBLE_EQ(m.median_us(), 0);
}

class TimingFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> dir = MakeTempDir("timing_test");
    ASSERT_TRUE(dir.ok());
    dir_ = *dir;
  }
  void TearDown() override { ASSERT_TRUE(RemoveAll(dir_).ok()); }
  std::string Write(const std::string& text) {
    EXPECT_TRUE(WriteFileAtomic(dir_ + "/t.txt", text).ok());
    return dir_ + "/t.txt";
  }
  std::string dir_;
};

TEST_F(TimingFileTest, ReadsSamples) {
  absl::StatusOr<std::vector<double>> s =
      ReadTimingSamples(Write("1.5\n 2.25 \n\n3\n"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, (std::vector<double>{1.5, 2.25, 3}));
}

TEST_F(TimingFileTest, RejectsGarbageNamingTheLine) {
  for (const char* bad : {"1.0\nabc\n", "1.0\n-2\n", "1.0\nnan\n", "1.0\ninf\n",
                          "1.0\n1.0 2.0\n"}) {
    absl::StatusOr<std::vector<double>> s = ReadTimingSamples(Write(bad));
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find("line 2"), std::string::npos)
        << s.status();
    EXPECT_NE(s.status().message().find("t.txt"), std::string::npos)
        << s.status();
  }
}

TEST_F(TimingFileTest, EmptyOrMissing) {
  absl::StatusOr<std::vector<double>> s = ReadTimingSamples(Write("\n\n"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("no samples"), std::string::npos);
  s = ReadTimingSamples(dir_ + "/missing.txt");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.status().message().find("missing.txt"), std::string::npos);
}

// --- A/B statistics
// -----------------------------------------------------------

TEST(MedianBoundTest, RanksFollowTheBinomial) {
  // n = 5: P(B <= 4) = 31/32 >= 0.95 and P(B <= 3) = 26/32 < 0.95.
  EXPECT_EQ(MedianBoundRank(5, 0.95), 5);
  // n = 10: P(B <= 7) = 968/1024 < 0.95 <= P(B <= 8) = 1013/1024.
  EXPECT_EQ(MedianBoundRank(10, 0.95), 9);
  // n = 4: even the maximum is a bound at only 15/16.
  EXPECT_EQ(MedianBoundRank(4, 0.95), 0);
  EXPECT_EQ(MedianBoundRank(0, 0.95), 0);
  // Large n stays finite (no underflow) and near n/2 + z·sqrt(n)/2.
  const int k = MedianBoundRank(10000, 0.95);
  EXPECT_GT(k, 5070);
  EXPECT_LT(k, 5095);
  EXPECT_EQ(MinPairs(0.95), 6);
  EXPECT_EQ(MinPairs(0.999), 10);
}

TEST(PairedGainTest, ExactRatiosAndOrderStatisticBounds) {
  PairedGain g = EstimatePairedGain({90, 90, 90, 90, 90, 90},
                                    {100, 100, 100, 100, 100, 100}, 0.95);
  EXPECT_EQ(g.pairs, 6);
  EXPECT_NEAR(g.gain, 0.10, 1e-12);
  EXPECT_NEAR(g.gain_lower, 0.10, 1e-12);
  EXPECT_NEAR(g.gain_upper, 0.10, 1e-12);
  EXPECT_NEAR(g.rel_spread, 0, 1e-12);

  // Ratios 0.90 .. 0.95 (six pairs): k = MedianBoundRank(6) = 6, so the
  // bounds are the extreme ratios.
  g = EstimatePairedGain({90, 91, 92, 93, 94, 95},
                         {100, 100, 100, 100, 100, 100}, 0.95);
  EXPECT_NEAR(g.gain, 1 - 0.925, 1e-12);
  EXPECT_NEAR(g.gain_lower, 0.05, 1e-12);
  EXPECT_NEAR(g.gain_upper, 0.10, 1e-12);
  EXPECT_NEAR(g.rel_spread, 0.025 / 0.925, 1e-12);

  // Too few pairs: no bound, never a keepable lower bound.
  g = EstimatePairedGain({50, 50}, {100, 100}, 0.95);
  EXPECT_NEAR(g.gain, 0.5, 1e-12);
  EXPECT_EQ(g.gain_lower, -1);
}

// A fake board: each block's samples are base × (1 + drift × slot) for
// the variant's base, and the order of blocks is recorded.
struct FakeBlocks {
  double candidate_us = 100, reference_us = 100, drift = 0, jitter = 0;
  std::string order;
  int slot = 0;
  std::mt19937_64 rng{42};
  BlockRunner Runner() {
    return [this](bool reference, int index, int warmup,
                  int samples) -> absl::StatusOr<std::vector<double>> {
      EXPECT_EQ(index, static_cast<int>(std::count(order.begin(), order.end(),
                                                   reference ? 'B' : 'A')));
      EXPECT_EQ(warmup, 2);
      order.push_back(reference ? 'B' : 'A');
      const double base =
          (reference ? reference_us : candidate_us) * (1 + drift * slot);
      // A seeded uniform ±jitter per block.
      const double j =
          jitter * std::uniform_real_distribution<double>(-1, 1)(rng);
      ++slot;
      // Within a block, samples spread ±jitter/5 around the block's level.
      std::vector<double> out;
      for (int i = 0; i < samples; ++i) {
        out.push_back(base * (1 + j) * (1 + 0.2 * jitter * ((i % 3) - 1)));
      }
      return out;
    };
  }
};

ResolvedPolicy Policy(int samples, int max_samples, double target) {
  ResolvedPolicy p;
  p.warmup = 2;
  p.samples = samples;
  p.max_samples = max_samples;
  p.target_rel_spread = target;
  p.confidence = 0.95;
  p.ab = true;
  return p;
}

TEST(MeasureBlocksTest, AbbaOrderAndBothVariantsRecorded) {
  FakeBlocks fake;
  fake.candidate_us = 80;
  absl::StatusOr<v1::Measurement> m =
      MeasureBlocks(Policy(30, 120, 0.01), true, fake.Runner(), true, "note");
  ASSERT_TRUE(m.ok()) << m.status();
  // 30 samples over MinPairs = 6 pairs of 5-sample blocks, ABBA order.
  EXPECT_EQ(fake.order, "ABBAABBAABBA");
  EXPECT_TRUE(m->paired());
  EXPECT_EQ(m->pairs(), 6);
  EXPECT_EQ(m->samples(), 30);
  EXPECT_EQ(m->warmup(), 2);
  EXPECT_EQ(m->reference().samples(), 30);
  EXPECT_DOUBLE_EQ(m->median_us(), 80);
  EXPECT_DOUBLE_EQ(m->reference().median_us(), 100);
  EXPECT_NEAR(m->gain(), 0.2, 1e-12);
  EXPECT_NEAR(m->gain_lower(), 0.2, 1e-12);
  EXPECT_DOUBLE_EQ(m->confidence(), 0.95);
  EXPECT_TRUE(m->simulated());
  EXPECT_TRUE(absl::StrContains(m->policy(), "A/B")) << m->policy();
  EXPECT_TRUE(absl::StrContains(m->policy(), "6 ABBA pairs")) << m->policy();
  EXPECT_TRUE(absl::StrContains(m->policy(), "note")) << m->policy();
}

TEST(MeasureBlocksTest, NoisyPairsSampleMoreUntilTheCap) {
  FakeBlocks fake;
  fake.jitter = 0.05;
  // Target 0.1% is out of reach: pairs grow two at a time while
  // (pairs + 2) × 5 <= 60, i.e. up to 12 pairs.
  absl::StatusOr<v1::Measurement> m =
      MeasureBlocks(Policy(30, 60, 0.001), true, fake.Runner(), false, "");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->pairs(), 12);
  EXPECT_EQ(m->samples(), 60);
  EXPECT_GT(m->rel_spread(), 0.001);
  // No real difference: the lower bound stays below zero.
  EXPECT_LT(m->gain_lower(), 0);
  EXPECT_GT(m->gain_upper(), 0);
}

TEST(MeasureBlocksTest, QuietPairsStopAtTheMinimum) {
  FakeBlocks fake;
  fake.jitter = 0.0001;
  absl::StatusOr<v1::Measurement> m =
      MeasureBlocks(Policy(30, 600, 0.01), true, fake.Runner(), false, "");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->pairs(), 6);
  EXPECT_LE(m->rel_spread(), 0.01);
}

TEST(MeasureBlocksTest, AbbaCancelsALinearDrift) {
  // The board slows by 1% per block; the variants are identical. Timed
  // AAAA…BBBB the candidate would look faster; ABBA pairs straddle the
  // drift both ways, so the interval holds zero.
  FakeBlocks fake;
  fake.drift = 0.01;
  absl::StatusOr<v1::Measurement> m =
      MeasureBlocks(Policy(30, 30, 0.01), true, fake.Runner(), false, "");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_LT(m->gain_lower(), 0);
  EXPECT_GT(m->gain_upper(), 0);
  EXPECT_LT(std::abs(m->gain()), 0.011);
}

TEST(MeasureBlocksTest, WithoutReferenceTimesTheCandidateAlone) {
  FakeBlocks fake;
  fake.jitter = 0.05;
  absl::StatusOr<v1::Measurement> m = MeasureBlocks(
      Policy(10, 30, 0.0001), false, fake.Runner(), false, "baseline");
  ASSERT_TRUE(m.ok()) << m.status();
  // Blocks of `samples` until the cap: 3 blocks of 10.
  EXPECT_EQ(fake.order, "AAA");
  EXPECT_FALSE(m->paired());
  EXPECT_FALSE(m->has_reference());
  EXPECT_EQ(m->samples(), 30);
  EXPECT_TRUE(absl::StrContains(m->policy(), "independent")) << m->policy();

  // Independent mode ignores the reference even when there is one.
  FakeBlocks alone;
  ResolvedPolicy p = Policy(10, 10, 0.01);
  p.ab = false;
  m = MeasureBlocks(p, true, alone.Runner(), false, "");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(alone.order, "A");
}

TEST(MeasureBlocksTest, AFailingBlockStopsTheMeasurement) {
  int calls = 0;
  BlockRunner runner = [&](bool, int, int,
                           int samples) -> absl::StatusOr<std::vector<double>> {
    if (++calls == 3) return absl::AbortedError("block 3 crashed");
    return std::vector<double>(samples, 10.0);
  };
  absl::StatusOr<v1::Measurement> m =
      MeasureBlocks(Policy(30, 120, 0.01), true, runner, false, "");
  EXPECT_EQ(m.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(calls, 3);
}

TEST(ResolveMeasurementPolicyTest, DefaultsAndClamps) {
  ResolvedPolicy r = ResolveMeasurementPolicy(v1::MeasurementPolicy());
  EXPECT_EQ(r.warmup, 3);
  EXPECT_EQ(r.samples, 20);
  EXPECT_EQ(r.max_samples, 20);  // no extension unless asked
  EXPECT_DOUBLE_EQ(r.target_rel_spread, 0.01);
  EXPECT_DOUBLE_EQ(r.confidence, 0.95);
  EXPECT_TRUE(r.ab);
  v1::MeasurementPolicy p;
  p.set_samples(30);
  p.set_max_samples(10);  // below samples: raised to samples
  p.set_mode(v1::MEASUREMENT_MODE_INDEPENDENT);
  p.set_confidence(0.9);
  r = ResolveMeasurementPolicy(p);
  EXPECT_EQ(r.max_samples, 30);
  EXPECT_FALSE(r.ab);
  EXPECT_DOUBLE_EQ(r.confidence, 0.9);
}

}  // namespace
}  // namespace tunefarm
