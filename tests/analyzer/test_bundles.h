// Test helpers: profile bundles built from the real fixture folders.
#ifndef TUNEFARM_TESTS_ANALYZER_TEST_BUNDLES_H_
#define TUNEFARM_TESTS_ANALYZER_TEST_BUNDLES_H_

#include <filesystem>
#include <string>

#include "common/files.h"
#include "gtest/gtest.h"
#include "tunefarm/v1/pipeline.pb.h"

namespace tunefarm::testing {

inline std::string FixtureDir(const std::string& rel) {
  return std::string(TUNEFARM_SHARED_DIR) + "/fixtures/ascend/" + rel;
}

// Adds every regular file under FixtureDir(rel) to `bundle`, at
// `prefix` + its path relative to that folder.
inline void AddFixtureFiles(const std::string& rel, const std::string& prefix,
                            v1::ProfileBundle& bundle) {
  namespace fs = std::filesystem;
  fs::path root = FixtureDir(rel);
  ASSERT_TRUE(fs::is_directory(root)) << root;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file()) continue;
    absl::StatusOr<std::string> text = ReadFile(entry.path().string());
    ASSERT_TRUE(text.ok()) << text.status();
    v1::ProfileFile* f = bundle.add_files();
    f->set_path(prefix + fs::relative(entry.path(), root).generic_string());
    f->set_content(*text);
  }
}

inline v1::ProfileBundle MsprofRealBundle() {
  v1::ProfileBundle b;
  b.set_bundle_id("bundle-msprof");
  b.set_sweep_id("sweep-1");
  b.set_round_id(3);
  b.set_epoch(7);
  b.set_board_id("agent-a/npu0");
  b.set_board_kind("ascend");
  b.set_chip("Ascend910B2");
  b.set_profiler("msprof");
  b.mutable_capabilities()->set_cube_cores(24);
  b.mutable_capabilities()->set_vector_cores(48);
  AddFixtureFiles("helix_msprof_real", "PROF_000001_20260511093035/", b);
  return b;
}

inline v1::ProfileBundle TorchNpuRealBundle() {
  v1::ProfileBundle b;
  b.set_bundle_id("bundle-torch");
  b.set_sweep_id("sweep-2");
  b.set_round_id(1);
  b.set_epoch(2);
  b.set_profiler("torch_npu");
  b.mutable_capabilities()->set_cube_cores(24);
  AddFixtureFiles("helix_torch_npu_real", "worker0_ascend_pt/", b);
  return b;
}

}  // namespace tunefarm::testing

#endif  // TUNEFARM_TESTS_ANALYZER_TEST_BUNDLES_H_
