#include "agent/precision.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "common/files.h"
#include "gtest/gtest.h"

namespace tunefarm {
namespace {

class PrecisionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> dir = MakeTempDir("precision_test");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = *dir;
    tol_.set_rtol(0.01);
    tol_.set_atol(0.001);
    Write("ref.bin", {1.0f, -2.0f, 0.0f, 100.0f});
  }
  void TearDown() override { ASSERT_TRUE(RemoveAll(dir_).ok()); }

  std::string Write(const std::string& name, const std::vector<float>& v) {
    std::string bytes(v.size() * sizeof(float), '\0');
    if (!v.empty()) std::memcpy(bytes.data(), v.data(), bytes.size());
    EXPECT_TRUE(WriteFileAtomic(dir_ + "/" + name, bytes).ok());
    return dir_ + "/" + name;
  }
  v1::PrecisionCheck Check(const std::string& out) {
    return ComparePrecision(out, dir_ + "/ref.bin", tol_);
  }

  std::string dir_;
  v1::Tolerances tol_;
};

TEST_F(PrecisionTest, PassesWithinTolerance) {
  // 100 * 1.005: inside rtol; 0.0005 next to 0: inside atol.
  v1::PrecisionCheck c =
      Check(Write("out.bin", {1.0f, -2.0f, 0.0005f, 100.5f}));
  EXPECT_TRUE(c.passed()) << c.detail();
  EXPECT_EQ(c.elements(), 4);
  EXPECT_EQ(c.mismatches(), 0);
  EXPECT_EQ(c.nan_count(), 0);
  EXPECT_NEAR(c.max_abs_err(), 0.5, 1e-6);
  EXPECT_NEAR(c.max_rel_err(), 0.005, 1e-6);
}

TEST_F(PrecisionTest, CountsMismatches) {
  v1::PrecisionCheck c = Check(Write("out.bin", {1.1f, -2.0f, 0.01f, 100.0f}));
  EXPECT_FALSE(c.passed());
  EXPECT_EQ(c.mismatches(), 2);
  EXPECT_NEAR(c.max_abs_err(), 0.1, 1e-6);
  EXPECT_NEAR(c.max_rel_err(), 0.1, 1e-6);
  EXPECT_NE(c.detail().find("2 of 4 elements outside"), std::string::npos)
      << c.detail();
  EXPECT_NE(c.detail().find("first bad element 0"), std::string::npos)
      << c.detail();
}

TEST_F(PrecisionTest, NanOrInfNeverPasses) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  v1::PrecisionCheck c = Check(Write("out.bin", {1.0f, nan, 0.0f, inf}));
  EXPECT_FALSE(c.passed());
  EXPECT_EQ(c.nan_count(), 2);
  EXPECT_EQ(c.mismatches(), 0);
  EXPECT_NE(c.detail().find("NaN/Inf"), std::string::npos) << c.detail();
  EXPECT_NE(c.detail().find("first bad element 1"), std::string::npos)
      << c.detail();
}

TEST_F(PrecisionTest, ShortOrLongOutputFails) {
  v1::PrecisionCheck c = Check(Write("short.bin", {1.0f, -2.0f}));
  EXPECT_FALSE(c.passed());
  EXPECT_NE(c.detail().find("short"), std::string::npos) << c.detail();
  EXPECT_NE(c.detail().find("2 elements"), std::string::npos) << c.detail();

  c = Check(Write("long.bin", {1.0f, -2.0f, 0.0f, 100.0f, 5.0f}));
  EXPECT_FALSE(c.passed());
  EXPECT_NE(c.detail().find("too long"), std::string::npos) << c.detail();

  c = Check(Write("empty.bin", {}));
  EXPECT_FALSE(c.passed());
}

TEST_F(PrecisionTest, MissingFilesFail) {
  v1::PrecisionCheck c = Check(dir_ + "/never-written.bin");
  EXPECT_FALSE(c.passed());
  EXPECT_NE(c.detail().find("never-written.bin"), std::string::npos)
      << c.detail();
  EXPECT_NE(c.detail().find("missing"), std::string::npos) << c.detail();

  c = ComparePrecision(Write("out.bin", {1.0f}), dir_ + "/no-ref.bin", tol_);
  EXPECT_FALSE(c.passed());
  EXPECT_NE(c.detail().find("reference"), std::string::npos) << c.detail();
}

TEST_F(PrecisionTest, NanInReferenceFails) {
  Write("ref.bin", {std::numeric_limits<float>::quiet_NaN()});
  v1::PrecisionCheck c = Check(Write("out.bin", {1.0f}));
  EXPECT_FALSE(c.passed());
  EXPECT_NE(c.detail().find("reference has 1 NaN"), std::string::npos)
      << c.detail();
}

}  // namespace
}  // namespace tunefarm
