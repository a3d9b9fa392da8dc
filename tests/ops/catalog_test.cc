// Operator manifests and the catalog: parsing good and bad manifests from
// YAML text, loading packages from real folders, and parameter checks.
#include "ops/catalog.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "common/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tunefarm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kGood[] = R"(
name: toy_matmul
description: A toy operator for tests.
parameters:
  - name: tile_m
    values: [16, 32, 64]
    default: 32
    stage: tiling
    description: rows per tile
  - name: ratio
    values: [0.5, 1, 2.5]
    default: 1
    stage: pipeline
  - name: layout
    values: [nz, "nd"]
    default: nd
    stage: in_core
  - name: double_buffer
    values: [false, true]
    default: false
workloads:
  - name: square_2k
    dtype: fp16
    dims: {m: 2048, n: 2048, k: 2048}
  - name: tall
    dtype: fp32
    dims: {m: 8192, n: 128, k: 512}
tolerances: {rtol: 0.01, atol: 0.001}
backends:
  sim:
    command: ["{bin}/tunefarm-sim-matmul", "--pkg", "{pkg}"]
  cpu:
    command: ["{pkg}/run_cpu"]
)";

// kGood with `from` replaced by `to` (each test breaks one field).
std::string Mutate(const std::string& from, const std::string& to) {
  std::string text = kGood;
  EXPECT_NE(text.find(from), std::string::npos) << from;
  return absl::StrReplaceAll(text, {{from, to}});
}

absl::Status ParseError(const std::string& yaml) {
  absl::StatusOr<v1::OperatorManifest> m =
      ParseOperatorManifest(yaml, "ops/x/operator.yaml");
  EXPECT_FALSE(m.ok()) << yaml;
  return m.ok() ? absl::OkStatus() : m.status();
}

TEST(ParseOperatorManifest, ReadsEveryField) {
  absl::StatusOr<v1::OperatorManifest> m =
      ParseOperatorManifest(kGood, "ops/toy/operator.yaml");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->name(), "toy_matmul");
  EXPECT_EQ(m->description(), "A toy operator for tests.");
  ASSERT_EQ(m->parameters_size(), 4);

  const v1::ParameterDomain& tile = m->parameters(0);
  EXPECT_EQ(tile.name(), "tile_m");
  ASSERT_EQ(tile.values_size(), 3);
  EXPECT_EQ(tile.values(2).int_value(), 64);
  EXPECT_EQ(tile.default_value().int_value(), 32);
  EXPECT_EQ(tile.stage(), "tiling");
  EXPECT_EQ(tile.description(), "rows per tile");

  // Integers among doubles read as doubles, default included.
  const v1::ParameterDomain& ratio = m->parameters(1);
  ASSERT_EQ(ratio.values_size(), 3);
  for (const auto& v : ratio.values()) EXPECT_TRUE(v.has_double_value());
  EXPECT_EQ(ratio.values(1).double_value(), 1.0);
  EXPECT_TRUE(ratio.default_value().has_double_value());
  EXPECT_EQ(ratio.stage(), "pipeline");

  const v1::ParameterDomain& layout = m->parameters(2);
  EXPECT_EQ(layout.values(0).string_value(), "nz");
  EXPECT_EQ(layout.values(1).string_value(), "nd");
  EXPECT_EQ(layout.default_value().string_value(), "nd");

  const v1::ParameterDomain& db = m->parameters(3);
  EXPECT_TRUE(db.values(1).bool_value());
  EXPECT_FALSE(db.default_value().bool_value());
  EXPECT_EQ(db.stage(), "tiling");  // the documented default

  ASSERT_EQ(m->workloads_size(), 2);
  EXPECT_EQ(m->workloads(0).name(), "square_2k");
  EXPECT_EQ(m->workloads(0).dtype(), "fp16");
  EXPECT_EQ(m->workloads(0).dims().at("k"), 2048);
  EXPECT_EQ(m->workloads(1).dims().at("m"), 8192);
  EXPECT_DOUBLE_EQ(m->tolerances().rtol(), 0.01);
  EXPECT_DOUBLE_EQ(m->tolerances().atol(), 0.001);
  ASSERT_EQ(m->backends().size(), 2u);
  EXPECT_THAT(m->backends().at("sim").command(),
              ElementsAre("{bin}/tunefarm-sim-matmul", "--pkg", "{pkg}"));
  EXPECT_THAT(m->backends().at("cpu").command(), ElementsAre("{pkg}/run_cpu"));
  EXPECT_EQ(m->package_dir(), "");
}

TEST(ParseOperatorManifest, DefaultNotInValuesNamesFileFieldAndValues) {
  absl::Status s = ParseError(Mutate("default: 32", "default: 512"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "ops/x/operator.yaml: parameters[0].default: 512 is not one of "
            "values [16, 32, 64]");
}

TEST(ParseOperatorManifest, DuplicateParameterRejected) {
  absl::Status s = ParseError(Mutate("name: ratio", "name: tile_m"));
  EXPECT_THAT(s.message(), HasSubstr("parameters[1].name"));
  EXPECT_THAT(s.message(), HasSubstr("duplicate parameter 'tile_m'"));
}

TEST(ParseOperatorManifest, EmptyValuesRejected) {
  absl::Status s = ParseError(Mutate("values: [16, 32, 64]", "values: []"));
  EXPECT_THAT(s.message(),
              HasSubstr("parameters[0].values: must not be empty"));
}

TEST(ParseOperatorManifest, MixedValueTypesRejected) {
  absl::Status s =
      ParseError(Mutate("values: [16, 32, 64]", "values: [16, big, 64]"));
  EXPECT_THAT(s.message(), HasSubstr("parameters[0].values[1]"));
  EXPECT_THAT(s.message(), HasSubstr("share one type"));
}

TEST(ParseOperatorManifest, DuplicateValueRejected) {
  absl::Status s =
      ParseError(Mutate("values: [16, 32, 64]", "values: [16, 32, 16]"));
  EXPECT_THAT(s.message(),
              HasSubstr("parameters[0].values[2]: duplicate value 16"));
}

TEST(ParseOperatorManifest, MissingDefaultRejected) {
  absl::Status s = ParseError(Mutate("    default: 32\n", ""));
  EXPECT_THAT(s.message(), HasSubstr("parameters[0].default: is required"));
}

TEST(ParseOperatorManifest, UnknownStageRejected) {
  absl::Status s = ParseError(Mutate("stage: pipeline", "stage: pipelin"));
  EXPECT_THAT(s.message(),
              HasSubstr("parameters[1].stage: unknown stage 'pipelin'"));
}

TEST(ParseOperatorManifest, BadNamesRejected) {
  for (const char* bad :
       {"Tile_M", "9tile", "tile-m", "tile m", "\"\"", "../x"}) {
    absl::Status s =
        ParseError(Mutate("name: tile_m", absl::StrCat("name: ", bad)));
    EXPECT_THAT(s.message(),
                HasSubstr("parameters[0].name: must match [a-z][a-z0-9_]*"))
        << bad;
  }
  absl::Status s = ParseError(Mutate("name: toy_matmul", "name: Toy-Matmul"));
  EXPECT_THAT(s.message(), HasSubstr("ops/x/operator.yaml: name: must match"));
  s = ParseError(Mutate("name: square_2k", "name: Square"));
  EXPECT_THAT(s.message(), HasSubstr("workloads[0].name: must match"));
  s = ParseError(
      Mutate("dims: {m: 2048, n: 2048, k: 2048}", "dims: {m: 0, n: 1, k: 1}"));
  EXPECT_THAT(s.message(),
              HasSubstr("workloads[0].dims.m: must be between 1 and"));
}

TEST(ParseOperatorManifest, UnknownKeysRejected) {
  absl::Status s = ParseError(Mutate("tolerances:", "tolerance:"));
  EXPECT_THAT(s.message(),
              HasSubstr("ops/x/operator.yaml: tolerance: unknown field"));
  s = ParseError(Mutate("    stage: tiling\n", "    stag: tiling\n"));
  EXPECT_THAT(s.message(), HasSubstr("parameters[0].stag: unknown field"));
}

TEST(ParseOperatorManifest, BackendChecks) {
  absl::Status s =
      ParseError(Mutate("command: [\"{pkg}/run_cpu\"]", "command: []"));
  EXPECT_THAT(
      s.message(),
      HasSubstr("backends.cpu.command: must be a non-empty list of strings"));
  s = ParseError(
      Mutate("command: [\"{pkg}/run_cpu\"]", "command: \"{pkg}/run_cpu\""));
  EXPECT_THAT(s.message(),
              HasSubstr("backends.cpu.command: must be a non-empty list"));
  s = ParseError(Mutate("command: [\"{pkg}/run_cpu\"]", "command: [[a]]"));
  EXPECT_THAT(s.message(),
              HasSubstr("backends.cpu.command[0]: expected a string"));
  s = ParseError(Mutate("  cpu:\n", "  tpu:\n"));
  EXPECT_THAT(s.message(), HasSubstr("backends.tpu: unknown board kind"));
}

TEST(ParseOperatorManifest, TolerancesChecked) {
  absl::Status s = ParseError(Mutate("rtol: 0.01", "rtol: -1"));
  EXPECT_THAT(s.message(), HasSubstr("tolerances.rtol: must be >= 0"));
  s = ParseError(Mutate("atol: 0.001", "atol: .nan"));
  EXPECT_THAT(s.message(),
              HasSubstr("tolerances.atol: must be a finite number"));
}

TEST(ParseOperatorManifest, SyntaxErrorCarriesLine) {
  absl::Status s = ParseError("name: x\nparameters: [1, 2\nbackends: {}\n");
  EXPECT_THAT(s.message(),
              HasSubstr("ops/x/operator.yaml: YAML syntax error at line"));
  s = ParseError("name: toy\ndescription: ok\n  bad: indent: here\n");
  EXPECT_THAT(s.message(), HasSubstr("YAML syntax error at line 3"));
}

TEST(ParseOperatorManifest, NonMapAndEmptyDocumentsRejected) {
  EXPECT_THAT(ParseError("- a\n- b\n").message(),
              HasSubstr("document: expected a map, got a list"));
  EXPECT_THAT(ParseError("").message(), HasSubstr("document is empty"));
  EXPECT_THAT(ParseError("name: a\n---\nname: b\n").message(),
              HasSubstr("expected one YAML document"));
}

TEST(ParseOperatorManifest, DuplicateKeyRejected) {
  absl::Status s = ParseError(Mutate("description: A toy operator for tests.",
                                     "description: a\ndescription: b"));
  EXPECT_THAT(s.message(), HasSubstr("description: duplicate key"));
}

class CatalogDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> dir = MakeTempDir("catalog_test");
    ASSERT_TRUE(dir.ok()) << dir.status();
    root_ = *dir;
  }
  void TearDown() override { ASSERT_TRUE(RemoveAll(root_).ok()); }

  void WritePackage(const std::string& dir, const std::string& yaml) {
    ASSERT_TRUE(MakeDirs(dir).ok());
    ASSERT_TRUE(WriteFileAtomic(dir + "/operator.yaml", yaml).ok());
  }
  std::string Named(const std::string& name) {
    return Mutate("name: toy_matmul", "name: " + name);
  }

  std::string root_;
};

TEST_F(CatalogDirTest, LoadsFolderOfPackagesAndSinglePackage) {
  WritePackage(root_ + "/ops/alpha", Named("alpha"));
  WritePackage(root_ + "/ops/beta", Named("beta"));
  ASSERT_TRUE(MakeDirs(root_ + "/ops/not_a_package").ok());
  WritePackage(root_ + "/mine/gamma", Named("gamma"));

  absl::StatusOr<OperatorCatalog> c =
      OperatorCatalog::LoadFromDirs({root_ + "/ops", root_ + "/mine/gamma"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->Names(), ElementsAre("alpha", "beta", "gamma"));
  absl::StatusOr<const v1::OperatorManifest*> beta = c->Find("beta");
  ASSERT_TRUE(beta.ok()) << beta.status();
  EXPECT_EQ((*beta)->package_dir(), root_ + "/ops/beta");
  EXPECT_EQ((*beta)->parameters_size(), 4);
}

TEST_F(CatalogDirTest, UnknownOperatorListsKnown) {
  WritePackage(root_ + "/ops/alpha", Named("alpha"));
  WritePackage(root_ + "/ops/beta", Named("beta"));
  absl::StatusOr<OperatorCatalog> c =
      OperatorCatalog::LoadFromDirs({root_ + "/ops"});
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<const v1::OperatorManifest*> m = c->Find("gemm");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(m.status().message(),
            "unknown operator 'gemm'; known: alpha, beta");
}

TEST_F(CatalogDirTest, DuplicateOperatorNamesBothPlaces) {
  WritePackage(root_ + "/a/one", Named("same"));
  WritePackage(root_ + "/b/two", Named("same"));
  absl::StatusOr<OperatorCatalog> c =
      OperatorCatalog::LoadFromDirs({root_ + "/a", root_ + "/b"});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(),
              HasSubstr("operator 'same' is defined twice"));
  EXPECT_THAT(c.status().message(), HasSubstr("a/one/operator.yaml"));
  EXPECT_THAT(c.status().message(), HasSubstr("b/two/operator.yaml"));
}

TEST_F(CatalogDirTest, BadManifestNamesItsFile) {
  WritePackage(root_ + "/ops/good", Named("good"));
  WritePackage(root_ + "/ops/bad", Mutate("default: 32", "default: 7"));
  absl::StatusOr<OperatorCatalog> c =
      OperatorCatalog::LoadFromDirs({root_ + "/ops"});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(
      c.status().message(),
      HasSubstr(root_ + "/ops/bad/operator.yaml: parameters[0].default: 7"));
}

TEST_F(CatalogDirTest, MissingOrEmptyRootRejected) {
  absl::StatusOr<OperatorCatalog> c =
      OperatorCatalog::LoadFromDirs({root_ + "/does_not_exist"});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("does_not_exist"));
  ASSERT_TRUE(MakeDirs(root_ + "/empty/sub").ok());
  c = OperatorCatalog::LoadFromDirs({root_ + "/empty"});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("holds no package"));
}

TEST(OperatorCatalog, AddAndFind) {
  OperatorCatalog c;
  EXPECT_THAT(c.Find("x").status().message(), HasSubstr("known: (none)"));
  absl::StatusOr<v1::OperatorManifest> m = ParseOperatorManifest(kGood, "t");
  ASSERT_TRUE(m.ok());
  c.Add(*m);
  ASSERT_TRUE(c.Find("toy_matmul").ok());
  EXPECT_THAT(c.Names(), ElementsAre("toy_matmul"));
}

class ParamsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<v1::OperatorManifest> m = ParseOperatorManifest(kGood, "t");
    ASSERT_TRUE(m.ok()) << m.status();
    op_ = *m;
  }
  v1::OperatorManifest op_;
};

TEST_F(ParamsTest, DefaultsAreValid) {
  ParamMap d = DefaultParams(op_);
  EXPECT_EQ(d.size(), 4u);
  EXPECT_EQ(d.at("tile_m").int_value(), 32);
  EXPECT_EQ(d.at("layout").string_value(), "nd");
  EXPECT_TRUE(ValidateParams(op_, d).ok());
}

TEST_F(ParamsTest, ValidateParamsNamesParameterAndValue) {
  ParamMap p = DefaultParams(op_);
  p["tile_m"] = IntParam(48);
  absl::Status s = ValidateParams(op_, p);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "parameter tile_m: 48 is not one of [16, 32, 64]");

  p = DefaultParams(op_);
  p["tile_m"] = StringParam("32");
  EXPECT_THAT(ValidateParams(op_, p).message(),
              HasSubstr("parameter tile_m: expected an integer, got a string"));

  p = DefaultParams(op_);
  p.erase("layout");
  EXPECT_EQ(ValidateParams(op_, p).message(), "parameter layout is missing");

  p = DefaultParams(op_);
  p["unroll"] = IntParam(2);
  EXPECT_THAT(
      ValidateParams(op_, p).message(),
      HasSubstr("unknown parameter 'unroll' for operator toy_matmul; known: "
                "tile_m, ratio, layout, double_buffer"));
}

TEST_F(ParamsTest, SpaceSizeMultipliesAndSaturates) {
  EXPECT_EQ(SpaceSize(op_), 3u * 3u * 2u * 2u);
  v1::OperatorManifest big;
  for (int i = 0; i < 20; ++i) {
    v1::ParameterDomain* p = big.add_parameters();
    p->set_name(absl::StrCat("p", i));
    for (int v = 0; v < 1000; ++v) *p->add_values() = IntParam(v);
  }
  EXPECT_EQ(SpaceSize(big), UINT64_MAX);
}

// Issue 17: a replay backend runs nothing (measured spaces answer), and a
// loaded package carries the sha256 of its manifest and sources.
TEST(ParseOperatorManifest, ReplayBackendHoldsNothing) {
  const std::string replay = Mutate("backends:", "backends:\n  replay: {}");
  absl::StatusOr<v1::OperatorManifest> op =
      ParseOperatorManifest(replay, "ops/toy/operator.yaml");
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_TRUE(op->backends().contains("replay"));
  EXPECT_THAT(
      ParseError(Mutate("backends:", "backends:\n  replay: {command: [x]}"))
          .message(),
      HasSubstr("backends.replay: a replay backend runs nothing"));
}

TEST_F(CatalogDirTest, SourceHashFollowsManifestAndSources) {
  const std::string yaml =
      Mutate("backends:", "backends:\n  cuda: {sources: [k.cu]}");
  WritePackage(root_ + "/p", yaml);
  ASSERT_TRUE(WriteFileAtomic(root_ + "/p/k.cu", "kernel v1").ok());
  absl::StatusOr<v1::OperatorManifest> a = LoadOperatorManifest(root_ + "/p");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->source_hash().size(), 64u);
  absl::StatusOr<v1::OperatorManifest> again =
      LoadOperatorManifest(root_ + "/p");
  EXPECT_EQ(again->source_hash(), a->source_hash());
  ASSERT_TRUE(WriteFileAtomic(root_ + "/p/k.cu", "kernel v2").ok());
  absl::StatusOr<v1::OperatorManifest> b = LoadOperatorManifest(root_ + "/p");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_NE(b->source_hash(), a->source_hash());
}

}  // namespace
}  // namespace tunefarm
