// Golden perf-analysis.md tests: one bundle per profiler family (msprof,
// torch_npu, PyPTO, Nsight Compute), built from the real fixtures, analysed,
// and compared byte for byte with tests/analyzer/golden/<name>.md.
//
// The markdown is deterministic: bundle-relative paths only, no clock (the
// caller fills analyzed_unix_ms, which the markdown does not print).
//
// To regenerate after an intended change, run
//   TUNEFARM_UPDATE_GOLDEN=1 BUILD/tests/analyzer/analyzer_test
//       --gtest_filter='GoldenTest.*'
// and review the diff of tests/analyzer/golden/ before committing.
#include <cstdlib>
#include <string>

#include "analyzer/analyzer.h"
#include "common/files.h"
#include "gtest/gtest.h"
#include "tests/analyzer/test_bundles.h"

namespace tunefarm {
namespace {

using ::tunefarm::testing::AddFixtureFiles;
using ::tunefarm::testing::MsprofRealBundle;
using ::tunefarm::testing::TorchNpuRealBundle;

std::string GoldenPath(const std::string& name) {
  return std::string(TUNEFARM_SOURCE_DIR) + "/tests/analyzer/golden/" + name +
         ".md";
}

// Adds one file under the shared fixtures at `bundle_path`.
void AddSharedFile(const std::string& rel, const std::string& bundle_path,
                   v1::ProfileBundle& b) {
  absl::StatusOr<std::string> text =
      ReadFile(std::string(TUNEFARM_SHARED_DIR) + "/fixtures/" + rel);
  ASSERT_TRUE(text.ok()) << text.status();
  v1::ProfileFile* f = b.add_files();
  f->set_path(bundle_path);
  f->set_content(*text);
}

void ExpectGolden(const std::string& name, const v1::Diagnosis& d) {
  const std::string& got = d.perf_analysis_md();
  ASSERT_FALSE(got.empty());
  const std::string path = GoldenPath(name);
  const char* update = std::getenv("TUNEFARM_UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    ASSERT_TRUE(WriteFileAtomic(path, got).ok()) << path;
    GTEST_SKIP() << "golden rewritten: " << path
                 << " (unset TUNEFARM_UPDATE_GOLDEN to compare)";
  }
  absl::StatusOr<std::string> want = ReadFile(path);
  ASSERT_TRUE(want.ok()) << want.status()
                         << " (regenerate with TUNEFARM_UPDATE_GOLDEN=1)";
  EXPECT_EQ(got, *want) << "perf-analysis.md differs from " << path
                        << "; if intended, regenerate with "
                           "TUNEFARM_UPDATE_GOLDEN=1 and review the diff";
}

TEST(GoldenTest, MsprofRealWithParent) {
  v1::ProfileBundle parent;
  parent.set_bundle_id("bundle-parent");
  parent.set_round_id(2);
  AddFixtureFiles("helix_msprof_parent_layout", "PROF_000001_20260402160352/",
                  parent);
  v1::Diagnosis d = Analyze(MsprofRealBundle(), &parent);
  ExpectGolden("msprof_real", d);
}

TEST(GoldenTest, TorchNpuReal) {
  ExpectGolden("torch_npu_real", Analyze(TorchNpuRealBundle()));
}

TEST(GoldenTest, TorchNpuPipeUtilization) {
  v1::ProfileBundle b;
  b.set_bundle_id("bundle-pipeutil");
  b.set_round_id(4);
  b.set_chip("Ascend910B2");
  b.set_profiler("torch_npu");
  AddFixtureFiles("msprof_analyze_pipeutil", "ASCEND_PROFILER_OUTPUT/", b);
  ExpectGolden("torch_npu_pipeutil", Analyze(b));
}

TEST(GoldenTest, PyptoSwimlane) {
  v1::ProfileBundle b;
  b.set_bundle_id("bundle-pypto");
  b.set_round_id(5);
  b.set_profiler("pypto");
  AddSharedFile("ascend/pypto_swimlane_kaywang/merged_swimlane.timeline.json",
                "output/merged_swimlane.json", b);
  ExpectGolden("pypto_swimlane", Analyze(b));
}

TEST(GoldenTest, NcuGemmTiled) {
  v1::ProfileBundle b;
  b.set_bundle_id("bundle-ncu");
  b.set_round_id(6);
  b.set_board_kind("cuda");
  b.set_profiler("ncu");
  AddSharedFile("ncu/public/olajide-gpu-roofline-profiler__gemm_tiled.csv",
                "ncu/gemm_tiled.csv", b);
  ExpectGolden("ncu_gemm_tiled", Analyze(b));
}

}  // namespace
}  // namespace tunefarm
