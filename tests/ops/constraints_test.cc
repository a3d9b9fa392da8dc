// The constraint language (ops/constraints.h): Python-like arithmetic and
// logic over parameters, clear errors for bad expressions, the limits, and
// constraints in operator manifests (parsing, projection, the shipped gemm
// cuda limits).
#include "ops/constraints.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/catalog.h"

namespace tunefarm {
namespace {

using ::testing::HasSubstr;

ParamMap P(std::initializer_list<std::pair<const char*, int64_t>> kv) {
  ParamMap p;
  for (const auto& [k, v] : kv) p[k] = IntParam(v);
  return p;
}

bool Holds(const std::string& expr, const ParamMap& p) {
  absl::StatusOr<ConstraintSet> c = ConstraintSet::Compile({expr});
  EXPECT_TRUE(c.ok()) << expr << ": " << c.status();
  return c.ok() && c->Feasible(p);
}

TEST(ConstraintsTest, ArithmeticFollowsPython) {
  const ParamMap p = P({{"a", 7}, {"b", 2}, {"c", -7}});
  EXPECT_TRUE(Holds("a % b == 1", p));
  EXPECT_TRUE(Holds("c % b == 1", p));  // the divisor's sign, as Python
  EXPECT_TRUE(Holds("a / b == 3.5", p));
  EXPECT_TRUE(Holds("a // b == 3", p));
  EXPECT_TRUE(Holds("c // b == -4", p));
  EXPECT_TRUE(Holds("2 ** 3 ** 2 == 512", p));  // right-associative
  EXPECT_TRUE(Holds("-a + +b == -5", p));
  EXPECT_TRUE(Holds("a + b * 3 == 13 and (a + b) * 3 == 27", p));
  EXPECT_TRUE(Holds("min(a, b, 5) == 2 and max(a, b) == 7 and abs(c) == 7", p));
  EXPECT_TRUE(Holds("1e3 == 1000 and .5 * 2 == 1", p));
}

TEST(ConstraintsTest, ComparisonsChainAndLogicShortCircuits) {
  const ParamMap p = P({{"x", 8}, {"y", 64}, {"z", 0}});
  EXPECT_TRUE(Holds("32 <= x * y <= 1024", p));
  EXPECT_FALSE(Holds("32 <= x * y <= 256", p));
  EXPECT_FALSE(Holds("600 <= x * y <= 1024", p));
  EXPECT_TRUE(Holds("z == 0 or y % z == 0", p));  // no division by zero
  EXPECT_FALSE(Holds("z != 0 and y % z == 0", p));
  EXPECT_TRUE(Holds("not z and !(x > y) && (x < y || z)", p));
  EXPECT_TRUE(Holds("True and not False", p));
}

TEST(ConstraintsTest, StringsAndBools) {
  ParamMap p;
  p["method"] = StringParam("shared");
  v1::ParamValue b;
  b.set_bool_value(true);
  p["pad"] = b;
  EXPECT_TRUE(Holds("method == 'shared' and pad", p));
  EXPECT_TRUE(Holds("method != \"global\"", p));
  absl::StatusOr<ConstraintSet> c = ConstraintSet::Compile({"method < 'x'"});
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->Feasible(p));
  EXPECT_THAT(c->Check(p).message(), HasSubstr("strings compare only"));
}

TEST(ConstraintsTest, EvaluationErrorsMakeTheConstraintFalseAndAreNamed) {
  absl::StatusOr<ConstraintSet> c =
      ConstraintSet::Compile({"a > 0", "b % a == 0"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->Check(P({{"a", 2}, {"b", 4}})).ok());
  absl::Status s = c->Check(P({{"a", 2}, {"b", 3}}));
  EXPECT_THAT(s.message(), HasSubstr("violates constraint 'b % a == 0'"));
  s = c->Check(P({{"a", 0}, {"b", 3}}));
  EXPECT_THAT(s.message(), HasSubstr("violates constraint 'a > 0'"));
  absl::StatusOr<ConstraintSet> d = ConstraintSet::Compile({"b % a == 0"});
  ASSERT_TRUE(d.ok());
  EXPECT_THAT(d->Check(P({{"a", 0}, {"b", 3}})).message(),
              HasSubstr("division by zero"));
  EXPECT_THAT(d->Check(P({{"b", 3}})).message(),
              HasSubstr("parameter 'a' is not set"));
  EXPECT_FALSE(d->Feasible(P({{"b", 3}})));
}

TEST(ConstraintsTest, BadExpressionsNameTheProblemAndTheColumn) {
  struct Case {
    std::string expr, want;
  };
  for (const Case& c : std::vector<Case>{
           {"a +", "unexpected end of expression, at column 4"},
           {"(a + 1", "expected ')'"},
           {"a $ b", "unexpected character '$', at column 3"},
           {"__import__('os')", "unknown function '__import__'"},
           {"a.b == 1", "unexpected character '.'"},
           {"'abc", "unterminated string"},
           {"a if b else c", "unexpected 'if'"},
           {"lambda x", "'lambda' is not supported"},
           {"abs(a, b)", "abs() takes one argument"},
           {"1..2 > 0", "bad number '1..2'"},
           {"", "unexpected end of expression"},
       }) {
    absl::StatusOr<ConstraintSet> s = ConstraintSet::Compile({"a > 0", c.expr});
    ASSERT_FALSE(s.ok()) << c.expr;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.status().message(), HasSubstr("constraints[1]: ")) << c.expr;
    EXPECT_THAT(s.status().message(), HasSubstr(c.want)) << c.expr;
  }
  absl::StatusOr<ConstraintSet> unknown =
      ConstraintSet::Compile({"tile * 2 <= blok"}, {"tile", "block"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(),
              HasSubstr("constraints[0]: unknown parameter 'blok'"));
}

TEST(ConstraintsTest, LimitsBoundParsing) {
  EXPECT_THAT(
      ConstraintSet::Compile({std::string(5000, '1')}).status().message(),
      HasSubstr("the limit is 4096"));
  EXPECT_THAT(ConstraintSet::Compile(
                  {std::string(100, '(') + "1" + std::string(100, ')')})
                  .status()
                  .message(),
              HasSubstr("nests deeper than 64"));
  std::string sum = "1";
  for (int i = 0; i < 1100; ++i) sum += "+1";
  EXPECT_THAT(ConstraintSet::Compile({sum}).status().message(),
              HasSubstr("more than 1024 terms"));
  EXPECT_FALSE(ConstraintSet::Compile(std::vector<std::string>(300, "1")).ok());
}

constexpr char kManifest[] = R"(
name: k
parameters:
  - {name: tile, values: [16, 32, 64], default: 16}
  - {name: threads, values: [1, 2, 4], default: 1, backends: [cpu]}
  - {name: block, values: [128, 256, 512], default: 128, backends: [cuda]}
constraints:
  - "tile * block <= 16384"
  - "tile * threads <= 64"
  - "tile >= 16"
tolerances: {rtol: 0.001, atol: 0.0001}
backends:
  cpu: {sources: [k.cc]}
  cuda: {sources: [k.cu]}
)";

TEST(ManifestConstraintsTest, ParsedCheckedAndProjectedPerBackend) {
  absl::StatusOr<v1::OperatorManifest> op =
      ParseOperatorManifest(kManifest, "k.yaml");
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ(op->constraints_size(), 3);
  const v1::OperatorManifest cuda = ProjectManifest(*op, "cuda");
  ASSERT_EQ(cuda.constraints_size(), 2);
  EXPECT_EQ(cuda.constraints(0), "tile * block <= 16384");
  EXPECT_EQ(cuda.constraints(1), "tile >= 16");
  const v1::OperatorManifest cpu = ProjectManifest(*op, "cpu");
  ASSERT_EQ(cpu.constraints_size(), 2);
  EXPECT_EQ(cpu.constraints(0), "tile * threads <= 64");

  std::string bad = kManifest;
  bad.replace(bad.find("\"tile >= 16\""), 12, "\"tile >= \"");
  absl::StatusOr<v1::OperatorManifest> b = ParseOperatorManifest(bad, "k.yaml");
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(b.status().message(),
              HasSubstr("k.yaml: constraints[2]: unexpected end"));
  std::string typo = kManifest;
  typo.replace(typo.find("tile >= 16"), 4, "tyle");
  b = ParseOperatorManifest(typo, "k.yaml");
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(b.status().message(), HasSubstr("unknown parameter 'tyle'"));
}

TEST(ManifestConstraintsTest, ShippedGemmCudaLimitsThreadsAndSharedMemory) {
  absl::StatusOr<v1::OperatorManifest> op =
      LoadOperatorManifest(std::string(TUNEFARM_SOURCE_DIR) + "/ops/gemm");
  ASSERT_TRUE(op.ok()) << op.status();
  const v1::OperatorManifest cuda = ProjectManifest(*op, "cuda");
  absl::StatusOr<ConstraintSet> c = ConstraintSet::ForManifest(cuda);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_FALSE(c->empty());
  EXPECT_TRUE(c->Feasible(DefaultParams(cuda)));
  ParamMap p = DefaultParams(cuda);
  // 256/2 * 256/2 = 16384 threads per block.
  p["block_m"] = IntParam(256);
  p["block_n"] = IntParam(256);
  p["thread_m"] = IntParam(2);
  p["thread_n"] = IntParam(2);
  EXPECT_THAT(c->Check(p).message(), HasSubstr("1024"));
  // 16 threads: under a warp.
  p["block_m"] = IntParam(32);
  p["block_n"] = IntParam(32);
  p["thread_m"] = IntParam(16);
  p["thread_n"] = IntParam(4);
  EXPECT_FALSE(c->Feasible(p));
  // 2 * 32 * (256 + 4 + 256) * 4 = 132 KB fits; threads 256/16 * 256/16.
  p["block_m"] = IntParam(256);
  p["block_n"] = IntParam(256);
  p["thread_m"] = IntParam(16);
  p["thread_n"] = IntParam(16);
  p["block_k"] = IntParam(32);
  p["stages"] = IntParam(2);
  EXPECT_TRUE(c->Check(p).ok()) << c->Check(p);
  // The cpu projection carries none of the cuda constraints.
  EXPECT_EQ(ProjectManifest(*op, "cpu").constraints_size(), 0);
}

// Renaming touches parameter references only: not functions, keywords,
// True/False, numbers or the text of strings; spacing stays as written.
TEST(ConstraintsTest, BySlotAgreesWithByName) {
  // Values passed by slot (names() order) decide as the same values in a
  // ParamMap, a parameter left unset included.
  absl::StatusOr<ConstraintSet> c = ConstraintSet::Compile(
      {"32 <= bx * by <= 1024", "tx > 1 or sx == 0", "mode != 'slow'"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->names(),
              ::testing::ElementsAre("bx", "by", "mode", "sx", "tx"));
  int feasible = 0;
  for (int bx : {1, 8, 64}) {
    for (int by : {2, 32, 256}) {
      for (int tx : {1, 2}) {
        for (int sx : {0, 1}) {
          for (const char* mode : {"fast", "slow", ""}) {
            ParamMap p = P({{"bx", bx}, {"by", by}, {"tx", tx}, {"sx", sx}});
            if (*mode != '\0') p["mode"] = StringParam(mode);
            std::vector<const v1::ParamValue*> by_slot;
            for (const std::string& name : c->names()) {
              auto it = p.find(name);
              by_slot.push_back(it == p.end() ? nullptr : &it->second);
            }
            const bool expected = c->Feasible(p);
            feasible += expected;
            EXPECT_EQ(c->FeasibleBySlot(by_slot), expected)
                << bx << " " << by << " " << tx << " " << sx << " " << mode;
          }
        }
      }
    }
  }
  EXPECT_GT(feasible, 0);
  // Too few slots: the missing ones are unset, so nothing holds.
  const v1::ParamValue v = IntParam(64);
  EXPECT_FALSE(c->FeasibleBySlot({&v, &v}));
}

TEST(ConstraintsTest, RenameChangesOnlyParameterNames) {
  const auto lower = [](std::string_view n) {
    std::string s(n);
    for (char& c : s) c = static_cast<char>(std::tolower(c));
    return s;
  };
  absl::StatusOr<std::string> r = RenameConstraintParameters(
      "KWG % ((MDIMC*NDIMC)/MDIMA) == 0 and max(MWG,  NWG) <= 1E3 or "
      "METHOD == 'MWG' or True",
      lower);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r,
            "kwg % ((mdimc*ndimc)/mdima) == 0 and max(mwg,  nwg) <= 1E3 or "
            "method == 'MWG' or True");
  EXPECT_EQ(*ConstraintNames(*r),
            (std::vector<std::string>{"kwg", "mdima", "mdimc", "method", "mwg",
                                      "ndimc", "nwg"}));
  // The renamed text means the same over the renamed parameters.
  ParamMap upper = P({{"A", 6}, {"B", 4}});
  ParamMap low = P({{"a", 6}, {"b", 4}});
  for (const std::string expr : {"A % B == 2", "32 <= A*B <= 1024"}) {
    absl::StatusOr<std::string> renamed =
        RenameConstraintParameters(expr, lower);
    ASSERT_TRUE(renamed.ok());
    EXPECT_EQ(Holds(expr, upper), Holds(*renamed, low)) << expr;
  }
  absl::StatusOr<std::string> bad = RenameConstraintParameters("A +", lower);
  EXPECT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("unexpected end"));
}

}  // namespace
}  // namespace tunefarm
