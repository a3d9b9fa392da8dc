// Per-backend parameters (`backends: [cpu]`), compiled backend entries
// (sources/compiler/flags), ProjectManifest, and the shipped compiled
// operators (gemm, softmax) loading from the repository's ops/.
#include <string>

#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/catalog.h"

namespace tunefarm {
namespace {

using ::testing::HasSubstr;

constexpr char kManifest[] = R"(
name: two_backends
parameters:
  - name: tile
    values: [16, 32]
    default: 16
  - name: threads
    values: [1, 2]
    default: 1
    backends: [cpu]
  - name: block_x
    values: [128, 256]
    default: 128
    backends: [cuda]
tolerances: {rtol: 0.001, atol: 0.0001}
backends:
  cpu:
    sources: [cpu/k.cc, cpu/util.cc]
    compiler: c++
    flags: [-O3, -march=native]
  cuda:
    sources: [cuda/k.cu]
    compiler: nvcc
)";

std::string Replace(const std::string& from, const std::string& to) {
  return absl::StrReplaceAll(kManifest, {{from, to}});
}

TEST(BackendsManifest, ReadsSourcesCompilerFlagsAndParameterBackends) {
  absl::StatusOr<v1::OperatorManifest> op =
      ParseOperatorManifest(kManifest, "m.yaml");
  ASSERT_TRUE(op.ok()) << op.status();
  const v1::BackendEntry& cpu = op->backends().at("cpu");
  EXPECT_THAT(cpu.sources(), ::testing::ElementsAre("cpu/k.cc", "cpu/util.cc"));
  EXPECT_EQ(cpu.compiler(), "c++");
  EXPECT_THAT(cpu.flags(), ::testing::ElementsAre("-O3", "-march=native"));
  EXPECT_TRUE(cpu.command().empty());
  EXPECT_TRUE(op->backends().at("cuda").flags().empty());
  EXPECT_THAT(op->parameters(1).backends(), ::testing::ElementsAre("cpu"));
  EXPECT_TRUE(op->parameters(0).backends().empty());
}

TEST(BackendsManifest, ProjectionKeepsOnlyTheKindsParameters) {
  absl::StatusOr<v1::OperatorManifest> op =
      ParseOperatorManifest(kManifest, "m.yaml");
  ASSERT_TRUE(op.ok()) << op.status();
  v1::OperatorManifest cpu = ProjectManifest(*op, "cpu");
  ASSERT_EQ(cpu.parameters_size(), 2);
  EXPECT_EQ(cpu.parameters(0).name(), "tile");
  EXPECT_EQ(cpu.parameters(1).name(), "threads");
  EXPECT_EQ(cpu.backends_size(), 2);  // the rest is unchanged
  v1::OperatorManifest cuda = ProjectManifest(*op, "cuda");
  ASSERT_EQ(cuda.parameters_size(), 2);
  EXPECT_EQ(cuda.parameters(1).name(), "block_x");
  ParamMap params = DefaultParams(cpu);
  EXPECT_TRUE(ValidateParams(cpu, params).ok());
  params["block_x"] = IntParam(128);
  EXPECT_FALSE(ValidateParams(cpu, params).ok());  // not a cpu parameter
  EXPECT_EQ(SpaceSize(cpu), 4u);
}

TEST(BackendsManifest, BadEntriesNameTheField) {
  struct Case {
    std::string from, to, error;
  };
  const Case cases[] = {
      {"backends: [cpu]", "backends: [tpu]",
       "parameters[1].backends[0]: unknown board kind 'tpu'"},
      {"backends: [cpu]", "backends: [sim]",
       "parameters[1].backends[0]: 'sim' has no entry under backends"},
      {"backends: [cpu]", "backends: []",
       "parameters[1].backends: must be a non-empty list"},
      {"backends: [cpu]", "backends: [cpu, cpu]", "duplicate board kind 'cpu'"},
      {"[cpu/k.cc, cpu/util.cc]", "[../k.cc]",
       "backends.cpu.sources[0]: '../k.cc' escapes the package"},
      {"[cpu/k.cc, cpu/util.cc]", "[/abs/k.cc]",
       "must be relative to the package"},
      {"    compiler: c++\n", "    compiler: c++\n    command: [x]\n",
       "has both command and sources"},
      {"    sources: [cuda/k.cu]\n    compiler: nvcc\n", "    compiler: nvcc\n",
       "backends.cuda: needs either command"},
      {"    flags: [-O3, -march=native]", "    flags: [-O3, \"\"]",
       "backends.cpu.flags[1]: must not be empty"},
      {"    flags: [-O3, -march=native]", "    linker: ld",
       "backends.cpu.linker: unknown field"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<v1::OperatorManifest> op =
        ParseOperatorManifest(Replace(c.from, c.to), "m.yaml");
    ASSERT_FALSE(op.ok()) << c.to;
    EXPECT_THAT(std::string(op.status().message()), HasSubstr(c.error)) << c.to;
    EXPECT_THAT(std::string(op.status().message()), HasSubstr("m.yaml"))
        << c.to;
  }
}

TEST(ShippedCompiledOperators, GemmAndSoftmaxLoadWithCpuBackends) {
  for (const char* name : {"gemm", "softmax"}) {
    absl::StatusOr<v1::OperatorManifest> op =
        LoadOperatorManifest(std::string(TUNEFARM_SOURCE_DIR) + "/ops/" + name);
    ASSERT_TRUE(op.ok()) << op.status();
    const v1::BackendEntry& cpu = op->backends().at("cpu");
    EXPECT_FALSE(cpu.sources().empty());
    v1::OperatorManifest projected = ProjectManifest(*op, "cpu");
    EXPECT_GE(SpaceSize(projected), 100u) << name;
    EXPECT_TRUE(ValidateParams(projected, DefaultParams(projected)).ok());
  }
}

}  // namespace
}  // namespace tunefarm
