// Bounded input in sweep specs (issue 16): UTF-8 only, YAML aliases, depth
// and expansion bounded, and board labels no board can carry refused at
// submit. The real ParseSweepSpec / ValidateSweepSpec against the shipped
// sim_matmul operator.
#include <string>

#include "absl/strings/str_cat.h"
#include "common/text.h"
#include "coordinator/spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/catalog.h"

namespace tunefarm {
namespace {

using ::testing::HasSubstr;

std::string Spec(const std::string& boards) {
  return absl::StrCat(
      "name: limits\nteam: demo\noperator: sim_matmul\nworkload: square_2k\n"
      "goal: {speedup: 2}\nboards: ",
      boards, "\n");
}

class SpecLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto catalog = OperatorCatalog::LoadFromDirs({TUNEFARM_SOURCE_DIR "/ops"});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = std::move(*catalog);
  }
  absl::Status Check(const std::string& yaml) {
    absl::StatusOr<v1::SweepSpec> spec = ParseSweepSpec(yaml);
    if (!spec.ok()) return spec.status();
    return ValidateSweepSpec(*std::move(spec), catalog_).status();
  }
  OperatorCatalog catalog_;
};

TEST_F(SpecLimitsTest, GoodSpecPasses) {
  absl::Status st = Check(Spec("{kind: sim, labels: {pool: demo-1}}"));
  EXPECT_TRUE(st.ok()) << st;
}

TEST_F(SpecLimitsTest, NonUtf8IsRefusedNamingTheOffset) {
  std::string yaml = Spec("{kind: sim}");
  yaml.insert(6, "\xff\xfe");  // inside the name
  absl::Status st = Check(yaml);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("not UTF-8"));
  EXPECT_THAT(st.message(), HasSubstr("offset 6"));
  // Overlong and surrogate forms are not UTF-8 either; real text is.
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));
  EXPECT_FALSE(IsValidUtf8("\xe2\x82"));
  EXPECT_TRUE(IsValidUtf8("µs, 速度, \xf0\x9f\x9a\x80"));
}

TEST_F(SpecLimitsTest, AliasBombIsRefused) {
  // Each level refers to the one before nine times: 9^8 nodes expanded.
  std::string yaml = "a0: &a0 [x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i <= 8; ++i) {
    absl::StrAppend(&yaml, "a", i, ": &a", i, " [");
    for (int k = 0; k < 9; ++k) {
      absl::StrAppend(&yaml, k ? ", " : "", "*a", i - 1);
    }
    absl::StrAppend(&yaml, "]\n");
  }
  absl::Status st = Check(yaml);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("aliases"));
  // Fewer aliases than the limit that still expand hugely (7^8 nodes) are
  // refused by the expansion count.
  std::string few = "c0: &c0 [x, x, x, x, x, x, x]\n";
  for (int i = 1; i <= 8; ++i) {
    absl::StrAppend(&few, "c", i, ": &c", i, " [");
    for (int k = 0; k < 7; ++k) {
      absl::StrAppend(&few, k ? ", " : "", "*c", i - 1);
    }
    absl::StrAppend(&few, "]\n");
  }
  st = Check(few);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("expands to more than"));
}

TEST_F(SpecLimitsTest, DeepNestingIsRefused) {
  std::string yaml = "name: ";
  yaml += std::string(200, '[') + std::string(200, ']') + "\n";
  absl::Status st = Check(yaml);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("deeper than"));
}

TEST_F(SpecLimitsTest, LabelsNoBoardCanCarryAreRefused) {
  for (const char* boards : {"{kind: sim, labels: {pool: \"$(rm -rf /)\"}}",
                             "{kind: sim, labels: {\"a b\": c}}",
                             "{kind: sim, labels: {pool: \"\"}}",
                             "{kind: sim, labels: {pool: \"x;y\"}}"}) {
    absl::Status st = Check(Spec(boards));
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << boards;
    EXPECT_THAT(st.message(), HasSubstr("can match no board")) << boards;
  }
  EXPECT_TRUE(IsBoardLabelText("example.com/pool_a-1"));
  EXPECT_FALSE(IsBoardLabelText("-leading"));
}

}  // namespace
}  // namespace tunefarm
