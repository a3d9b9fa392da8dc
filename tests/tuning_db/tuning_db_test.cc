// The tuning database (tuning_db/): JSON round trip and its errors, the
// entry a finished sweep gives, the merge rule, the lookup rule, warm-start
// resolution, and the generated C++ header and Python module, compiled / run
// by the system c++ and python3 and checked to answer exactly like
// LookupConfig.
#include <sys/wait.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/time.h"
#include "common/files.h"
#include "common/params.h"
#include "common/subprocess.h"
#include "coordinator/spec.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/catalog.h"
#include "tuning_db/codegen.h"
#include "tuning_db/database.h"
#include "tuning_db/warm_start.h"

namespace tunefarm {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

TunedEntry Entry(std::map<std::string, int64_t> dims, double time_us,
                 int64_t mc, const std::string& device = "EPYC",
                 int64_t date_ms = 1000, const std::string& hash = "h1") {
  TunedEntry e;
  e.op = "gemm";
  e.backend = "cpu";
  e.device = device;
  e.dtype = "fp32";
  e.dims = std::move(dims);
  e.workload = absl::StrCat("w", e.dims.begin()->second);
  e.params = {
      {"mc", mc}, {"scale", 0.5}, {"layout", "row \"major\""}, {"fast", true}};
  e.time_us = time_us;
  e.p20_us = time_us * 0.9;
  e.p80_us = time_us * 1.1;
  e.samples = 9;
  e.baseline_us = time_us * 2;
  e.sweep_id = absl::StrCat("sw-", mc);
  e.round = mc % 7;
  e.board = "agent-1/cpu0";
  e.date_unix_ms = date_ms;
  e.source_hash = hash;
  return e;
}

std::map<std::string, int64_t> Mnk(int64_t m, int64_t n, int64_t k) {
  return {{"m", m}, {"n", n}, {"k", k}};
}

TuningDb SampleDb() {
  TuningDb db;
  db.entries.push_back(Entry(Mnk(256, 256, 256), 100, 32));
  db.entries.push_back(Entry(Mnk(512, 512, 512), 700, 64));
  db.entries.push_back(Entry(Mnk(1024, 1024, 1024), 5000, 128));
  db.entries.push_back(Entry(Mnk(256, 256, 256), 90, 256, "Xeon"));
  db.defaults.push_back(
      {"gemm", "cpu", json{{"mc", 64}, {"scale", 1.0}}, "h1", 1000});
  return db;
}

TEST(TuningDbTest, JsonRoundTripKeepsEverything) {
  const TuningDb db = SampleDb();
  absl::StatusOr<TuningDb> back = ParseTuningDb(TuningDbText(db), "t.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(TuningDbText(*back), TuningDbText(db));
  ASSERT_EQ(back->entries.size(), 4u);
  const json doc = json::parse(TuningDbText(db));
  EXPECT_EQ(doc.at("format"), kTuningDbFormat);
  EXPECT_EQ(doc.at("version"), kTuningDbVersion);
  const json& e = doc.at("entries").at(0);
  EXPECT_EQ(e.at("params").at("scale"), 0.5);
  EXPECT_TRUE(e.at("params").at("mc").is_number_integer());
  EXPECT_EQ(e.at("interval_us").size(), 2u);
  EXPECT_EQ(e.at("provenance").at("operator_source_hash"), "h1");
  EXPECT_EQ(e.at("provenance").at("date"), "1970-01-01T00:00:01Z");
}

TEST(TuningDbTest, ParseErrorsNameTheField) {
  json doc = TuningDbToJson(SampleDb());
  doc["format"] = "something.else";
  EXPECT_THAT(ParseTuningDb(doc.dump(), "a.json").status().message(),
              HasSubstr("a.json: .format: expected \"tunefarm.tuning_db\""));
  doc = TuningDbToJson(SampleDb());
  doc["version"] = kTuningDbVersion + 1;
  EXPECT_THAT(ParseTuningDb(doc.dump(), "a.json").status().message(),
              HasSubstr("is not supported"));
  doc = TuningDbToJson(SampleDb());
  doc["entries"][1]["time_us"] = "fast";
  EXPECT_THAT(ParseTuningDb(doc.dump(), "a.json").status().message(),
              HasSubstr(".entries[1].time_us: expected number, got string"));
  doc = TuningDbToJson(SampleDb());
  doc["entries"][0]["dims"]["m"] = -3;
  EXPECT_THAT(ParseTuningDb(doc.dump(), "a.json").status().message(),
              HasSubstr(".entries[0].dims.m: expected a positive integer"));
  doc = TuningDbToJson(SampleDb());
  doc["entries"].push_back(doc["entries"][0]);
  EXPECT_THAT(ParseTuningDb(doc.dump(), "a.json").status().message(),
              HasSubstr("two entries for gemm/cpu/EPYC/fp32/"));
  EXPECT_THAT(ParseTuningDb("{", "a.json").status().message(),
              HasSubstr("not valid JSON"));
}

TEST(TuningDbTest, MergeFasterWinsSlowerIsLoggedAndKept) {
  TuningDb db = SampleDb();
  TuningDb incoming;
  incoming.entries.push_back(Entry(Mnk(256, 256, 256), 80, 16, "EPYC", 2000));
  incoming.entries.push_back(Entry(Mnk(512, 512, 512), 900, 8, "EPYC", 2000));
  incoming.entries.push_back(Entry(Mnk(64, 64, 64), 3, 4, "EPYC", 2000));
  std::vector<std::string> log;
  MergeTuningDb(&db, incoming, &log);
  ASSERT_EQ(log.size(), 3u);
  EXPECT_THAT(log[0],
              HasSubstr("replaced gemm/cpu/EPYC/fp32/k=256,m=256,n=256"));
  EXPECT_THAT(log[0], HasSubstr("faster"));
  EXPECT_THAT(log[1], HasSubstr("kept gemm/cpu/EPYC/fp32/k=512,m=512,n=512"));
  EXPECT_THAT(log[1], HasSubstr("slower"));
  EXPECT_THAT(log[2], HasSubstr("added gemm/cpu/EPYC/fp32/k=64,m=64,n=64"));
  const Lookup a =
      LookupConfig(db, "gemm", "cpu", "EPYC", "fp32", Mnk(256, 256, 256));
  ASSERT_NE(a.entry, nullptr);
  EXPECT_EQ(a.entry->time_us, 80);
  const Lookup b =
      LookupConfig(db, "gemm", "cpu", "EPYC", "fp32", Mnk(512, 512, 512));
  ASSERT_NE(b.entry, nullptr);
  EXPECT_EQ(b.entry->time_us, 700);
  EXPECT_EQ(db.entries.size(), 5u);
}

TEST(TuningDbTest, MergeChangedSourceNewerWinsEvenIfSlower) {
  TuningDb db = SampleDb();
  TuningDb incoming;
  incoming.entries.push_back(
      Entry(Mnk(256, 256, 256), 150, 16, "EPYC", 2000, "h2"));
  std::vector<std::string> log;
  MergeTuningDb(&db, incoming, &log);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_THAT(log[0], HasSubstr("source changed"));
  EXPECT_EQ(LookupConfig(db, "gemm", "cpu", "EPYC", "fp32", Mnk(256, 256, 256))
                .entry->time_us,
            150);
  // An older measurement of other code does not come back.
  TuningDb old;
  old.entries.push_back(Entry(Mnk(256, 256, 256), 10, 8, "EPYC", 500, "h0"));
  log.clear();
  MergeTuningDb(&db, old, &log);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_THAT(log[0], HasSubstr("kept"));
  EXPECT_EQ(LookupConfig(db, "gemm", "cpu", "EPYC", "fp32", Mnk(256, 256, 256))
                .entry->time_us,
            150);
  // Exporting the same measurement again changes nothing and logs nothing.
  log.clear();
  TuningDb same = db;
  MergeTuningDb(&db, same, &log);
  EXPECT_TRUE(log.empty());
}

// A finished one-workload sweep: baseline round 0 (200 us), best round 1
// (80 us, mc 64) on agent-1/cpu0.
void FinishedSweep(v1::Sweep* sweep, std::vector<v1::Round>* rounds) {
  sweep->set_sweep_id("sw-000007");
  v1::SweepSpec& spec = *sweep->mutable_spec();
  spec.set_operator_name("gemm");
  spec.mutable_boards()->set_kind("cpu");
  spec.mutable_workload()->set_name("w256");
  spec.mutable_workload()->set_dtype("fp32");
  for (const char* d : {"m", "n", "k"}) {
    (*spec.mutable_workload()->mutable_dims())[d] = 256;
  }
  sweep->set_baseline_us(200);
  sweep->set_best_round(1);
  sweep->set_best_us(80);
  for (int i = 0; i < 2; ++i) {
    v1::Round& r = rounds->emplace_back();
    r.set_round_id(i);
    r.set_board_id("agent-1/cpu0");
    (*r.mutable_params())["mc"] = IntParam(i == 0 ? 32 : 64);
    r.mutable_result()->set_outcome(v1::OUTCOME_OK);
    r.mutable_result()->mutable_measurement()->set_median_us(i == 0 ? 200 : 80);
  }
}

TEST(TuningDbTest, ExportTakesTheBestUnlessItsClosingCheckRefutedIt) {
  v1::Sweep sweep;
  std::vector<v1::Round> rounds;
  FinishedSweep(&sweep, &rounds);
  const std::vector<v1::BoardInfo> boards;
  absl::StatusOr<TunedEntry> e = EntryFromSweep(sweep, rounds, boards);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->round, 1);
  EXPECT_EQ(e->params, (json{{"mc", 64}}));
  EXPECT_EQ(e->time_us, 80);
  EXPECT_EQ(e->baseline_us, 200);

  // The check confirmed it, or gave no bounds (no pairs): exported.
  v1::ClosingCheck& check = *sweep.mutable_closing_check();
  check.set_best_round(1);
  check.set_speedup(2.4);
  check.set_speedup_low(1.9);
  check.set_speedup_high(3.0);
  EXPECT_TRUE(EntryFromSweep(sweep, rounds, boards).ok());
  check.set_speedup_low(0);
  EXPECT_TRUE(EntryFromSweep(sweep, rounds, boards).ok());

  // Side by side, not shown faster than the baseline: nothing exported.
  check.set_speedup(1.05);
  check.set_speedup_low(0.97);
  check.set_outcome("round 1 is 1.05x the baseline's speed side by side");
  e = EntryFromSweep(sweep, rounds, boards);
  ASSERT_EQ(e.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(e.status().message(),
              HasSubstr("sw-000007: its closing check did not show the best, "
                        "round 1, faster than the baseline (round 1 is 1.05x"));
  absl::StatusOr<std::vector<TunedEntry>> all =
      EntriesFromSweep(sweep, rounds, boards);
  EXPECT_EQ(all.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(TuningDbTest, LookupExactNearestDefaultNone) {
  const TuningDb db = SampleDb();
  Lookup l =
      LookupConfig(db, "gemm", "cpu", "EPYC", "fp32", Mnk(512, 512, 512));
  EXPECT_EQ(l.source, Lookup::Source::kExact);
  EXPECT_EQ(l.entry->params.at("mc"), 64);
  // 300^3 is nearer 256^3 (3 |ln 300/256| = 0.48) than 512^3 (1.61).
  l = LookupConfig(db, "gemm", "cpu", "EPYC", "fp32", Mnk(300, 300, 300));
  EXPECT_EQ(l.source, Lookup::Source::kNearest);
  EXPECT_EQ(l.entry->params.at("mc"), 32);
  EXPECT_NEAR(l.distance, 3 * std::log(300.0 / 256), 1e-12);
  // 2000 x 2000 x 300: 1024^3 is nearer by the sum of log ratios.
  l = LookupConfig(db, "gemm", "cpu", "EPYC", "fp32", Mnk(2000, 2000, 300));
  EXPECT_EQ(l.entry->params.at("mc"), 128);
  // Any device: the faster of two equally near entries.
  l = LookupConfig(db, "gemm", "cpu", "", "fp32", Mnk(256, 256, 256));
  EXPECT_EQ(l.entry->device, "Xeon");
  // Unknown device, dtype or dim names: the manifest default.
  l = LookupConfig(db, "gemm", "cpu", "M2", "fp32", Mnk(256, 256, 256));
  EXPECT_EQ(l.source, Lookup::Source::kDefault);
  EXPECT_EQ(l.def->params.at("mc"), 64);
  l = LookupConfig(db, "gemm", "cpu", "EPYC", "fp16", Mnk(256, 256, 256));
  EXPECT_EQ(l.source, Lookup::Source::kDefault);
  l = LookupConfig(db, "gemm", "cpu", "EPYC", "fp32", {{"m", 4}, {"n", 4}});
  EXPECT_EQ(l.source, Lookup::Source::kDefault);
  l = LookupConfig(db, "softmax", "cpu", "EPYC", "fp32", Mnk(4, 4, 4));
  EXPECT_EQ(l.source, Lookup::Source::kNone);
}

v1::OperatorManifest GemmLike() {
  absl::StatusOr<v1::OperatorManifest> op = ParseOperatorManifest(R"(
name: gemm
parameters:
  - {name: mc, values: [16, 32, 64, 128, 256], default: 64}
  - {name: scale, values: [0.5, 1.0], default: 1.0}
  - {name: layout, values: ["row \"major\"", col], default: col}
tolerances: {rtol: 0, atol: 0}
backends: {cpu: {command: [x]}}
)",
                                                                  "test");
  EXPECT_TRUE(op.ok()) << op.status();
  return *op;
}

TEST(TuningDbTest, WarmStartTakesTheNearestEntrysParameters) {
  const TuningDb db = SampleDb();
  v1::Workload w;
  w.set_name("mine");
  w.set_dtype("fp32");
  (*w.mutable_dims())["m"] = 300;
  (*w.mutable_dims())["n"] = 300;
  (*w.mutable_dims())["k"] = 300;
  const WarmStart ws =
      ResolveWarmStart(db, "db.json", GemmLike(), "cpu", "EPYC", w);
  EXPECT_EQ(ws.params.at("mc").int_value(), 32);
  EXPECT_EQ(ws.params.at("scale").double_value(), 0.5);
  EXPECT_EQ(ws.params.at("layout").string_value(), "row \"major\"");
  EXPECT_FALSE(ws.params.contains("fast"));  // not a parameter here
  EXPECT_THAT(ws.source,
              HasSubstr("tuning db db.json: nearest entry "
                        "gemm/cpu/EPYC/fp32/k=256,m=256,n=256 (distance "));
  EXPECT_THAT(ws.source, HasSubstr("sweep sw-32 round 4"));
  EXPECT_THAT(ws.source, HasSubstr("left at the default): fast"));
  const WarmStart none =
      ResolveWarmStart(db, "db.json", GemmLike(), "cuda", "", w);
  EXPECT_TRUE(none.params.empty());
  EXPECT_THAT(none.source, HasSubstr("no entry for gemm on cuda"));
  // What a client sends: only the operator's part.
  TuningDb mixed = SampleDb();
  TunedEntry other = Entry(Mnk(8, 8, 8), 1, 1);
  other.op = "softmax";
  mixed.entries.push_back(other);
  absl::StatusOr<TuningDb> sent =
      ParseTuningDb(TuningDbForOperator(mixed, "gemm"), "sent");
  ASSERT_TRUE(sent.ok()) << sent.status();
  EXPECT_EQ(sent->entries.size(), 4u);
}

// The spec side: `baseline: {from_db: PATH}` parsed, refused without the
// database's content, resolved with it (explicit keys override), and the
// operator's source hash recorded.
TEST(TuningDbTest, SpecFromDbResolvesWhenTheContentIsSent) {
  OperatorCatalog catalog;
  v1::OperatorManifest op = GemmLike();
  op.set_source_hash("abc123");
  catalog.Add(op);
  const std::string yaml = R"(name: warm
team: demo
operator: gemm
workload: {name: mine, dtype: fp32, dims: {m: 300, n: 300, k: 300}}
goal: {speedup: 2}
boards: {kind: cpu, chip: EPYC}
baseline: {from_db: dbs/tuned.json, layout: col}
)";
  absl::StatusOr<v1::SweepSpec> parsed = ParseSweepSpec(yaml);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->baseline_from_db(), "dbs/tuned.json");
  EXPECT_FALSE(parsed->baseline_params().contains("from_db"));
  absl::StatusOr<v1::SweepSpec> refused = ValidateSweepSpec(*parsed, catalog);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(),
              HasSubstr("baseline.from_db: the content of 'dbs/tuned.json' "
                        "was not sent"));
  v1::SweepSpec with_db = *parsed;
  with_db.set_baseline_db_json(TuningDbForOperator(SampleDb(), "gemm"));
  absl::StatusOr<v1::SweepSpec> ok = ValidateSweepSpec(with_db, catalog);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->baseline_params().at("mc").int_value(), 32);
  EXPECT_EQ(ok->baseline_params().at("scale").double_value(), 0.5);
  EXPECT_EQ(ok->baseline_params().at("layout").string_value(), "col");
  EXPECT_THAT(ok->baseline_source(),
              HasSubstr("tuning db dbs/tuned.json: nearest entry "
                        "gemm/cpu/EPYC/fp32/k=256,m=256,n=256"));
  EXPECT_TRUE(ok->baseline_db_json().empty());
  EXPECT_EQ(ok->operator_source_hash(), "abc123");
  with_db.set_baseline_db_json("{\"format\": \"nope\"}");
  EXPECT_THAT(ValidateSweepSpec(with_db, catalog).status().message(),
              HasSubstr("baseline.from_db dbs/tuned.json: .format"));
  EXPECT_THAT(ParseSweepSpec(
                  absl::StrReplaceAll(
                      yaml, {{"from_db: dbs/tuned.json", "from_db: [a, b]"}}))
                  .status()
                  .message(),
              HasSubstr("baseline.from_db"));
}

// Runs argv to its end; the exit code (-1 if it did not exit) and output.
int RunTool(const std::vector<std::string>& argv, const std::string& log,
            std::string* output) {
  auto p = Subprocess::Start(argv, log);
  if (!p.ok()) {
    *output = std::string(p.status().message());
    return -1;
  }
  std::optional<int> status = (*p)->Wait(absl::Seconds(120));
  *output = ReadFile(log).value_or("");
  if (!status.has_value() || !WIFEXITED(*status)) return -1;
  return WEXITSTATUS(*status);
}

// Shapes asked of every form: exact, nearest, another device, any device,
// unknown dtype, unknown operator.
struct Query {
  std::string op, device, dtype;
  std::map<std::string, int64_t> dims;
};
std::vector<Query> Queries() {
  return {{"gemm", "EPYC", "fp32", Mnk(512, 512, 512)},
          {"gemm", "EPYC", "fp32", Mnk(300, 300, 300)},
          {"gemm", "EPYC", "fp32", Mnk(2000, 2000, 300)},
          {"gemm", "Xeon", "fp32", Mnk(1024, 1024, 1024)},
          {"gemm", "", "fp32", Mnk(256, 256, 256)},
          {"gemm", "M2", "fp32", Mnk(256, 256, 256)},
          {"gemm", "EPYC", "bf16", Mnk(256, 256, 256)},
          {"softmax", "EPYC", "fp32", Mnk(256, 256, 256)}};
}

// "source mc scale" per query, as LookupConfig answers.
std::string Expected() {
  const TuningDb db = SampleDb();
  std::string out;
  for (const Query& q : Queries()) {
    const Lookup l = LookupConfig(db, q.op, "cpu", q.device, q.dtype, q.dims);
    const json* params = l.entry != nullptr ? &l.entry->params
                         : l.def != nullptr ? &l.def->params
                                            : nullptr;
    if (params == nullptr) {
      absl::StrAppend(&out, "none\n");
      continue;
    }
    absl::StrAppend(&out, LookupSourceName(l.source), " ",
                    params->at("mc").get<int64_t>(), " ",
                    params->at("scale").get<double>(), "\n");
  }
  return out;
}

class GeneratedCodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = MakeTempDir("tunefarm-tdb-");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = *dir;
    ASSERT_TRUE(WriteTuningDbFiles(SampleDb(), dir_).ok());
  }
  void TearDown() override { (void)RemoveAll(dir_); }
  std::string dir_;
};

TEST_F(GeneratedCodeTest, CppHeaderAnswersLikeTheLibrary) {
  const std::string cxx = FindExecutable("c++");
  if (cxx.empty()) GTEST_SKIP() << "no c++ on PATH to compile the header";
  std::string program = R"(#include <cstdio>
#include "tuning_db.h"
int main() {
  tunefarm_tuned::Config c;
)";
  for (const Query& q : Queries()) {
    std::string dims;
    for (const auto& [k, v] : q.dims)
      absl::StrAppend(&dims, "{\"", k, "\", ", v, "}, ");
    absl::StrAppend(&program, "  if (tunefarm_tuned::Lookup(\"", q.op,
                    "\", \"cpu\", \"", q.device, "\", \"", q.dtype, "\", {",
                    dims,
                    "}, &c)) std::printf(\"%s %lld %g\\n\", c.source.c_str(), "
                    "c.Int(\"mc\"), c.Double(\"scale\"));\n  else "
                    "std::printf(\"none\\n\");\n");
  }
  absl::StrAppend(&program, "  return 0;\n}\n");
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/main.cc", program).ok());
  std::string out;
  ASSERT_EQ(RunTool({cxx, "-std=c++17", "-Wall", "-Werror", "-I", dir_,
                     dir_ + "/main.cc", "-o", dir_ + "/main"},
                    dir_ + "/cxx.log", &out),
            0)
      << out;
  ASSERT_EQ(RunTool({dir_ + "/main"}, dir_ + "/run.log", &out), 0) << out;
  EXPECT_EQ(out, Expected());
}

TEST_F(GeneratedCodeTest, PythonModuleAnswersLikeTheLibrary) {
  const std::string python = FindExecutable("python3");
  if (python.empty()) GTEST_SKIP() << "no python3 on PATH";
  std::string script = absl::StrCat("import sys\nsys.path.insert(0, \"", dir_,
                                    "\")\nimport tuning_db\n");
  for (const Query& q : Queries()) {
    std::string dims;
    for (const auto& [k, v] : q.dims)
      absl::StrAppend(&dims, "\"", k, "\": ", v, ", ");
    absl::StrAppend(&script, "r = tuning_db.lookup(\"", q.op, "\", \"cpu\", \"",
                    q.device, "\", \"", q.dtype, "\", {", dims,
                    "})\nprint(\"none\" if r is None else \"%s %d %g\" % "
                    "(r[\"source\"], r[\"params\"][\"mc\"], "
                    "r[\"params\"][\"scale\"]))\n");
  }
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/check.py", script).ok());
  std::string out;
  ASSERT_EQ(RunTool({python, dir_ + "/check.py"}, dir_ + "/py.log", &out), 0)
      << out;
  EXPECT_EQ(out, Expected());
}

}  // namespace
}  // namespace tunefarm
