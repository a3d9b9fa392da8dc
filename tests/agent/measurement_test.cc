#include "agent/measurement.h"

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
  absl::StatusOr<std::vector<double>> s = ReadTimingSamples(Write("1.5\n 2.25 \n\n3\n"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, (std::vector<double>{1.5, 2.25, 3}));
}

TEST_F(TimingFileTest, RejectsGarbageNamingTheLine) {
  for (const char* bad : {"1.0\nabc\n", "1.0\n-2\n", "1.0\nnan\n", "1.0\ninf\n",
                          "1.0\n1.0 2.0\n"}) {
    absl::StatusOr<std::vector<double>> s = ReadTimingSamples(Write(bad));
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find("line 2"), std::string::npos) << s.status();
    EXPECT_NE(s.status().message().find("t.txt"), std::string::npos) << s.status();
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

}  // namespace
}  // namespace tunefarm
