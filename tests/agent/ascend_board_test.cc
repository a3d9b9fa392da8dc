// The ascend board end to end against the stand-ins in tests/ascend_standins
// (npu-smi, msprof and the operator runtime print and write the real
// layouts from shared/fixtures/ascend). The board is the production code and
// is given the stand-ins only as tool paths; these tests are what knows.
#include "agent/ascend_board.h"

#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/ascend_errors.h"
#include "agent/measurement.h"
#include "agent/npu_smi.h"
#include "analyzer/analyzer.h"
#include "common/files.h"
#include "common/params.h"
#include "gtest/gtest.h"
#include "ops/catalog.h"

namespace tunefarm {
namespace {

namespace fs = std::filesystem;

const std::string kStandins = ASCEND_STANDINS_DIR;
const std::string kFixtures =
    std::string(TUNEFARM_SHARED_DIR) + "/fixtures/ascend";
const std::string kMsprofOut =
    kFixtures + "/helix_msprof_real/mindstudio_profiler_output";

std::string MustRead(const std::string& path) {
  absl::StatusOr<std::string> s = ReadFile(path);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : "";
}

// The matmul_kernel "Task Duration(us)" column of the real op_summary, read
// here independently of the stand-in (header lookup by name).
std::vector<double> FixtureMatmulDurations() {
  std::string name;
  for (const auto& e : fs::directory_iterator(kMsprofOut)) {
    if (absl::StartsWith(e.path().filename().string(), "op_summary_"))
      name = e.path().string();
  }
  std::vector<std::string> lines =
      absl::StrSplit(MustRead(name), '\n', absl::SkipEmpty());
  std::vector<std::string> header = absl::StrSplit(lines[0], ',');
  int type_col = -1, dur_col = -1;
  for (size_t i = 0; i < header.size(); ++i) {
    if (header[i] == "OP Type") type_col = static_cast<int>(i);
    if (header[i] == "Task Duration(us)") dur_col = static_cast<int>(i);
  }
  std::vector<double> out;
  for (size_t r = 1; r < lines.size(); ++r) {
    // The rows with quoted shapes hold commas only after these columns.
    std::vector<std::string> cells = absl::StrSplit(lines[r], ',');
    if (cells[type_col] == "matmul_kernel")
      out.push_back(std::stod(cells[dur_col]));
  }
  return out;
}

class AscendBoardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> tmp = MakeTempDir("tf-ascend-test");
    ASSERT_TRUE(tmp.ok()) << tmp.status();
    tmp_ = *tmp;
    mode_file_ = tmp_ + "/mode";
    log_ = tmp_ + "/standin.log";
    SetMode("ok");
    setenv("TF_STANDIN_MODE_FILE", mode_file_.c_str(), 1);
    setenv("TF_STANDIN_LOG", log_.c_str(), 1);
    setenv("TF_ASCEND_FIXTURES", kFixtures.c_str(), 1);
    unsetenv("TF_STANDIN_NPU_SMI_SAMPLE");
    options_.agent_id = "agent-a";
    options_.node = "node-a";
    options_.work_root = tmp_ + "/work";
    options_.npu_smi = kStandins + "/npu-smi";
    options_.msprof = kStandins + "/msprof";
    options_.python = kStandins + "/ascend-python";

    absl::StatusOr<v1::OperatorManifest> op = LoadOperatorManifest(
        std::string(TUNEFARM_SOURCE_DIR) + "/ops/ascend_matmul");
    ASSERT_TRUE(op.ok()) << op.status();
    work_.set_lease_id("lease-1");
    work_.set_epoch(1);
    work_.set_sweep_id("sweep-asc");
    work_.set_round_id(3);
    *work_.mutable_operator_() = *op;
    for (const v1::Workload& w : op->workloads()) {
      if (w.name() == "smoke_32") *work_.mutable_workload() = w;
    }
    ASSERT_EQ(work_.workload().name(), "smoke_32");
    *work_.mutable_params() = DefaultParams(*op);
    work_.mutable_measurement()->set_warmup(2);
    work_.mutable_measurement()->set_samples(5);
    work_.set_seed(42);
  }
  void TearDown() override { (void)RemoveAll(tmp_); }

  void SetMode(const std::string& m) {
    ASSERT_TRUE(WriteFileAtomic(mode_file_, m).ok());
  }

  std::unique_ptr<Board> FirstBoard() {
    absl::StatusOr<std::vector<std::unique_ptr<Board>>> boards =
        DiscoverAscendBoards(options_);
    EXPECT_TRUE(boards.ok()) << boards.status();
    if (!boards.ok() || boards->empty()) return nullptr;
    return std::move((*boards)[3]);  // device 3: isolation must say 3, not 0
  }

  void SetCommand(std::vector<std::string> cmd) {
    auto& entry = (*work_.mutable_operator_()->mutable_backends())["ascend"];
    entry.clear_command();
    for (auto& c : cmd) entry.add_command(c);
  }

  std::string tmp_, mode_file_, log_;
  AscendBoardOptions options_;
  v1::WorkItem work_;
  std::atomic<bool> cancel_{false};
};

TEST(NpuSmiTest, ParsesRealEightCardTable) {
  absl::StatusOr<std::vector<NpuChip>> chips =
      ParseNpuSmiInfo(MustRead(kStandins + "/npu_smi_info_910b3_x8.txt"));
  ASSERT_TRUE(chips.ok()) << chips.status();
  ASSERT_EQ(chips->size(), 8u);
  EXPECT_EQ((*chips)[0].name, "910B3");
  EXPECT_EQ((*chips)[0].health, "OK");
  EXPECT_DOUBLE_EQ((*chips)[0].power_w, 94.7);
  EXPECT_DOUBLE_EQ((*chips)[0].temp_c, 54);
  EXPECT_EQ((*chips)[0].bus_id, "0000:C1:00.0");
  EXPECT_TRUE((*chips)[0].has_hbm);
  EXPECT_EQ((*chips)[0].hbm_used_mb, 3396);
  EXPECT_EQ((*chips)[0].hbm_total_mb, 65536);
  EXPECT_EQ((*chips)[7].npu_id, 7);
  EXPECT_EQ((*chips)[7].device_id, -1);
}

TEST(NpuSmiTest, ParsesDeviceColumnNaPowerAndTouchingSlash) {
  absl::StatusOr<std::vector<NpuChip>> chips =
      ParseNpuSmiInfo(MustRead(kStandins + "/npu_smi_info_310p3.txt"));
  ASSERT_TRUE(chips.ok()) << chips.status();
  ASSERT_EQ(chips->size(), 1u);
  EXPECT_EQ((*chips)[0].npu_id, 6);
  EXPECT_EQ((*chips)[0].device_id, 0);
  EXPECT_FALSE((*chips)[0].has_power);
  EXPECT_FALSE((*chips)[0].has_hbm);
  EXPECT_EQ((*chips)[0].memory_total_mb, 21525);
  // "54592/ 65536" as printed by a real 910B3 host.
  absl::StatusOr<std::vector<NpuChip>> touching = ParseNpuSmiInfo(
      "| NPU   Name                | Health        | Power(W)    Temp(C)       "
      "    Hugepages-Usage(page)|\n"
      "| 0     910B3               | OK            | 96.8        32            "
      "    0    / 0             |\n"
      "| 0                         | 0000:C1:00.0  | 0           0    / 0      "
      "    54592/ 65536         |\n");
  ASSERT_TRUE(touching.ok()) << touching.status();
  EXPECT_EQ((*touching)[0].hbm_used_mb, 54592);
  EXPECT_FALSE(ParseNpuSmiInfo("no table here").ok());
  absl::StatusOr<std::vector<NpuChip>> bad = ParseNpuSmiInfo(
      "| NPU   Name | Health | Power(W) Temp(C) Hugepages-Usage(page)|\n| x "
      "910B3 | OK | 1 2 0 / 0 |\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "line 2"))
      << bad.status();
}

TEST(NpuSmiTest, ChipTable) {
  AscendChipSpec a2 = AscendChipSpecFor("910B2");
  EXPECT_EQ(a2.cube_cores, 24);
  EXPECT_EQ(a2.ub_bytes, 196608);
  EXPECT_NEAR(a2.peak_tflops_fp16, 353.9, 0.1);
  AscendChipSpec a5 = AscendChipSpecFor("Ascend950DT");
  EXPECT_EQ(a5.cube_cores, 32);
  EXPECT_EQ(a5.ub_bytes, 253952);
  EXPECT_NEAR(a5.peak_tflops_fp16, 432.5, 0.1);
  EXPECT_FALSE(AscendChipSpecFor("310P3").known);
}

TEST(AscendErrorsTest, ClassifiesRealMessages) {
  AscendFailure ub = ClassifyAscendFailure(
      "error: ub overflow, requires 3072256 bits while 1572864 bits available! "
      "(possible reason");
  EXPECT_EQ(ub.fault, AscendFault::kUbOverflow);
  EXPECT_EQ(ub.requested_bytes, 384032);
  EXPECT_EQ(ub.available_bytes, 196608);
  AscendFailure grid =
      ClassifyAscendFailure("coreDim=524288 can't be greater than UINT16_MAX");
  EXPECT_EQ(grid.fault, AscendFault::kGridLimit);
  EXPECT_EQ(grid.core_dim, 524288);
  EXPECT_EQ(ClassifyAscendFailure("error code is 507054").fault,
            AscendFault::kDevice);
  EXPECT_EQ(ClassifyAscendFailure("error code is 1507054").fault,
            AscendFault::kUnknown);
  EXPECT_EQ(ClassifyAscendFailure(
                "triton.compiler.errors.MLIRCompilationError:\nerror: x")
                .fault,
            AscendFault::kCompile);
  EXPECT_EQ(ClassifyAscendFailure("Segmentation fault").fault,
            AscendFault::kUnknown);
}

TEST(AscendProfilerPlanTest, ReadsTheCommand) {
  absl::StatusOr<AscendProfilerPlan> p = AscendProfilerPlanFor(
      {"py", "run.py", "--aic_metrics", "MemoryUB,PipeUtilization"});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->profiler, "msprof");
  EXPECT_EQ(p->aic_metrics,
            (std::vector<std::string>{"PipeUtilization", "MemoryUB"}));
  p = AscendProfilerPlanFor(
      {"py", "--profiler=torch_npu", "--aic-metrics=MemoryUB"});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->profiler, "torch_npu");
  EXPECT_EQ(p->aic_metrics,
            (std::vector<std::string>{"PipeUtilization", "MemoryUB"}));
  EXPECT_FALSE(AscendProfilerPlanFor({"py", "--profiler", "nsys"}).ok());
  EXPECT_FALSE(AscendProfilerPlanFor({"py", "--aic_metrics", "Bogus"}).ok());
}

TEST_F(AscendBoardTest, DiscoversCardsWithRooflineFigures) {
  absl::StatusOr<std::vector<std::unique_ptr<Board>>> boards =
      DiscoverAscendBoards(options_);
  ASSERT_TRUE(boards.ok()) << boards.status();
  ASSERT_EQ(boards->size(), 8u);
  const v1::BoardInfo& info = (*boards)[2]->info();
  EXPECT_EQ(info.board_id(), "agent-a/ascend2");
  EXPECT_EQ(info.kind(), "ascend");
  EXPECT_EQ(info.chip(), "910B3");
  EXPECT_FALSE(info.simulated());
  EXPECT_EQ(info.state(), v1::BOARD_STATE_IDLE);
  EXPECT_EQ(info.capabilities().cube_cores(), 20);
  EXPECT_EQ(info.capabilities().vector_cores(), 40);
  EXPECT_EQ(info.capabilities().ub_bytes(), 196608);
  EXPECT_EQ(info.labels().at("bus_id"), "0000:C2:00.0");
  EXPECT_TRUE(absl::StrContains(info.health_detail(), "95.6 W"))
      << info.health_detail();

  options_.devices = {1, 5};
  boards = DiscoverAscendBoards(options_);
  ASSERT_TRUE(boards.ok());
  ASSERT_EQ(boards->size(), 2u);
  EXPECT_EQ((*boards)[1]->info().board_id(), "agent-a/ascend5");
  options_.devices = {9};
  EXPECT_TRUE(absl::IsInvalidArgument(DiscoverAscendBoards(options_).status()));

  options_.devices.clear();
  SetMode("npu_smi_error");
  EXPECT_TRUE(absl::IsUnavailable(DiscoverAscendBoards(options_).status()));
  options_.npu_smi = tmp_ + "/no-such-npu-smi";
  EXPECT_TRUE(absl::IsNotFound(DiscoverAscendBoards(options_).status()));
}

TEST_F(AscendBoardTest, EvaluatesEndToEndWithMsprofBundle) {
  std::unique_ptr<Board> board = FirstBoard();
  ASSERT_NE(board, nullptr);
  absl::StatusOr<Evaluation> eval = board->Evaluate(work_, cancel_);
  ASSERT_TRUE(eval.ok()) << eval.status();
  const v1::RoundResult& r = eval->result;
  ASSERT_EQ(r.outcome(), v1::OUTCOME_OK) << r.detail();
  EXPECT_TRUE(r.precision().passed());
  EXPECT_EQ(r.precision().elements(), 32 * 32);

  // The measurement is what the run printed: the real durations, in turn.
  std::vector<double> durs = FixtureMatmulDurations();
  ASSERT_FALSE(durs.empty());
  std::vector<double> printed;
  for (int i = 0; i < 2 + 5; ++i) printed.push_back(durs[i % durs.size()]);
  v1::Measurement expect = Summarize(printed, 2, false, "");
  EXPECT_DOUBLE_EQ(r.measurement().median_us(), expect.median_us());
  EXPECT_EQ(r.measurement().samples(), 5);
  EXPECT_FALSE(r.measurement().simulated());

  // Isolation: every child saw device 3 only.
  std::string log = MustRead(log_);
  EXPECT_TRUE(absl::StrContains(
      log, "stage=build ASCEND_RT_VISIBLE_DEVICES=3 TILE_FWK_DEVICE_ID=3"))
      << log;
  EXPECT_TRUE(absl::StrContains(
      log, "msprof aic-metrics=PipeUtilization ASCEND_RT_VISIBLE_DEVICES=3"));
  EXPECT_TRUE(
      absl::StrContains(log, "stage=profile ASCEND_RT_VISIBLE_DEVICES=3"));

  // The bundle holds the real files, byte for byte.
  ASSERT_TRUE(eval->bundle.has_value());
  const v1::ProfileBundle& b = *eval->bundle;
  EXPECT_EQ(b.profiler(), "msprof");
  EXPECT_EQ(b.board_kind(), "ascend");
  EXPECT_EQ(b.chip(), "910B3");
  EXPECT_EQ(r.bundle_id(), b.bundle_id());
  int matched = 0;
  for (const v1::ProfileFile& f : b.files()) {
    EXPECT_TRUE(absl::StartsWith(f.path(), "PipeUtilization/PROF_"))
        << f.path();
    const std::string base = fs::path(f.path()).filename().string();
    EXPECT_EQ(f.content(), MustRead(kMsprofOut + "/" + base)) << f.path();
    ++matched;
  }
  EXPECT_EQ(matched, 5);

  // The analyzer diagnoses from them: op_statistic's top row.
  v1::Diagnosis d = Analyze(b);
  ASSERT_FALSE(d.hotspots().empty());
  EXPECT_EQ(d.hotspots(0).op_name(), "matmul_kernel");
  EXPECT_NEAR(d.hotspots(0).duration_us(), 30.144, 1e-6);
  EXPECT_EQ(d.hotspots(0).count(), 5);
}

// Each mode on its own card (the stand-ins' per-card mode files), all at
// once: every stand-in call is a fresh Python interpreter, and one after the
// other they made this the slowest test of the suite.
TEST_F(AscendBoardTest, FailureModesMapToOutcomes) {
  struct Case {
    std::string mode;
    v1::Outcome outcome;
    std::vector<std::string> detail;
  };
  const std::vector<Case> cases = {
      {"compile_error",
       v1::OUTCOME_BUILD_FAILED,
       {"compile failure", "BishengHIR"}},
      {"ub_overflow",
       v1::OUTCOME_BUILD_FAILED,
       {"UB overflow", "384032 bytes", "196608 bytes"}},
      {"grid_limit", v1::OUTCOME_BUILD_FAILED, {"grid limit", "262144"}},
      {"precision", v1::OUTCOME_PRECISION_FAILED, {"precision"}},
      {"timeout", v1::OUTCOME_RUN_TIMEOUT, {"run did not finish within 2s"}},
      {"crash", v1::OUTCOME_RUN_CRASHED, {"SIGSEGV"}},
      {"msprof_error", v1::OUTCOME_PROFILE_FAILED, {"msprof", "export failed"}},
  };
  absl::StatusOr<std::vector<std::unique_ptr<Board>>> boards =
      DiscoverAscendBoards(options_);
  ASSERT_TRUE(boards.ok()) << boards.status();
  // Only the hanging run needs a short limit; the others must not hit it
  // on a loaded machine.
  options_.run_timeout = absl::Seconds(2);
  absl::StatusOr<std::vector<std::unique_ptr<Board>>> short_limit =
      DiscoverAscendBoards(options_);
  ASSERT_TRUE(short_limit.ok()) << short_limit.status();
  ASSERT_GE(boards->size(), cases.size());
  SetMode("ok");  // a card without its own mode would succeed
  std::vector<absl::StatusOr<Evaluation>> evals(cases.size(),
                                                absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < cases.size(); ++i) {
    ASSERT_TRUE(
        WriteFileAtomic(absl::StrCat(mode_file_, ".dev", i), cases[i].mode)
            .ok());
    Board* b = (cases[i].mode == "timeout" ? *short_limit : *boards)[i].get();
    threads.emplace_back([&, b, i] { evals[i] = b->Evaluate(work_, cancel_); });
  }
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const absl::StatusOr<Evaluation>& eval = evals[i];
    ASSERT_TRUE(eval.ok()) << c.mode << ": " << eval.status();
    EXPECT_EQ(eval->result.outcome(), c.outcome)
        << c.mode << ": " << eval->result.detail();
    for (const std::string& s : c.detail) {
      EXPECT_TRUE(absl::StrContains(eval->result.detail(), s))
          << c.mode << ": " << eval->result.detail();
    }
    if (c.outcome == v1::OUTCOME_PROFILE_FAILED) {
      EXPECT_GT(eval->result.measurement().median_us(), 0);  // kept
    }
    EXPECT_NE((*boards)[i]->info().state(), v1::BOARD_STATE_QUARANTINED);
  }
  // Each ran on its own card.
  const std::string log = MustRead(log_);
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_TRUE(
        absl::StrContains(log, absl::StrCat("ASCEND_RT_VISIBLE_DEVICES=", i)))
        << cases[i].mode;
  }
}

// A/B on the ascend board as on every kind: the parent's parameters run in
// the same lease, in ABBA blocks, and the result is the paired comparison;
// only the candidate's first block is judged against the reference.
TEST_F(AscendBoardTest, AbTimesTheParentInTheSameLease) {
  std::unique_ptr<Board> board = FirstBoard();
  ASSERT_NE(board, nullptr);
  work_.set_has_reference(true);
  work_.set_reference_round(2);
  *work_.mutable_reference_params() = work_.params();
  v1::ParamValue slower;
  slower.set_int_value(128);  // the stand-in's run stage scales by block_m
  (*work_.mutable_reference_params())["block_m"] = slower;
  work_.mutable_measurement()->set_mode(v1::MEASUREMENT_MODE_AB);
  absl::StatusOr<Evaluation> eval = board->Evaluate(work_, cancel_);
  ASSERT_TRUE(eval.ok()) << eval.status();
  const v1::RoundResult& r = eval->result;
  ASSERT_EQ(r.outcome(), v1::OUTCOME_OK) << r.detail();
  EXPECT_TRUE(r.measurement().paired()) << r.measurement().policy();
  EXPECT_EQ(r.measurement().reference_round(), 2);
  EXPECT_GE(r.measurement().pairs(), 2);
  // The parent (block_m 128) times at twice the candidate (64): a gain of
  // about one half.
  EXPECT_GT(r.measurement().reference().median_us(),
            1.5 * r.measurement().median_us());
  EXPECT_GT(r.measurement().gain(), 0.4);
  const fs::path parent_params = fs::path(options_.work_root) / "ascend3" /
                                 "sweep-asc" / "round_3" / "epoch_1" /
                                 "parent" / "params.json";
  EXPECT_TRUE(absl::StrContains(MustRead(parent_params.string()), "128"));
}

// With a cache folder, the host reference of a (package, workload, seed)
// runs once: another variant reuses it (and still passes its check); another
// seed computes its own.
TEST_F(AscendBoardTest, ReferenceIsComputedOncePerWorkloadAndSeed) {
  options_.cache_dir = tmp_ + "/cache";
  std::unique_ptr<Board> board = FirstBoard();
  ASSERT_NE(board, nullptr);
  auto references = [&] {
    absl::StatusOr<std::string> log = ReadFile(log_);
    if (!log.ok()) return -1;
    int n = 0;
    for (size_t at = log->find("stage=reference"); at != std::string::npos;
         at = log->find("stage=reference", at + 1)) {
      ++n;
    }
    return n;
  };
  auto evaluate = [&](int64_t round) {
    work_.set_round_id(round);
    absl::StatusOr<Evaluation> e = board->Evaluate(work_, cancel_);
    EXPECT_TRUE(e.ok()) << e.status();
    if (!e.ok()) return;
    EXPECT_EQ(e->result.outcome(), v1::OUTCOME_OK) << e->result.detail();
    EXPECT_TRUE(e->result.precision().passed());
  };
  evaluate(3);
  EXPECT_EQ(references(), 1);
  v1::ParamValue other;
  other.set_int_value(128);
  (*work_.mutable_params())["block_m"] = other;
  evaluate(4);
  EXPECT_EQ(references(), 1) << "the reference ran again for another variant";
  work_.set_seed(43);
  evaluate(5);
  EXPECT_EQ(references(), 2) << "another seed needs its own reference";
}

TEST_F(AscendBoardTest, DeviceErrorIsTheBoardsAndTwiceQuarantines) {
  std::unique_ptr<Board> owned = FirstBoard();
  ASSERT_NE(owned, nullptr);
  Board* board = owned.get();
  SetMode("device_error");
  absl::StatusOr<Evaluation> e1 = board->Evaluate(work_, cancel_);
  ASSERT_TRUE(absl::IsUnavailable(e1.status())) << e1.status();
  EXPECT_TRUE(absl::StrContains(e1.status().message(), "507054"))
      << e1.status();
  EXPECT_NE(board->info().state(), v1::BOARD_STATE_QUARANTINED);
  EXPECT_EQ(board->info().state(), v1::BOARD_STATE_IDLE);

  // A good evaluation in between resets the count.
  SetMode("ok");
  ASSERT_TRUE(board->Evaluate(work_, cancel_).ok());
  SetMode("device_error");
  ASSERT_FALSE(board->Evaluate(work_, cancel_).ok());
  EXPECT_NE(board->info().state(), v1::BOARD_STATE_QUARANTINED);

  const v1::BoardInfo& before = board->info();
  absl::StatusOr<Evaluation> e2 = board->Evaluate(work_, cancel_);
  ASSERT_TRUE(absl::IsUnavailable(e2.status()));
  EXPECT_EQ(board->info().state(), v1::BOARD_STATE_QUARANTINED);
  EXPECT_TRUE(absl::StrContains(board->info().health_detail(),
                                "2 device errors in a row"))
      << board->info().health_detail();
  EXPECT_EQ(before.state(), v1::BOARD_STATE_IDLE);  // old snapshot still valid

  SetMode("ok");
  absl::StatusOr<Evaluation> refused = board->Evaluate(work_, cancel_);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  board->Readmit();
  EXPECT_EQ(board->info().state(), v1::BOARD_STATE_IDLE);
  absl::StatusOr<Evaluation> again = board->Evaluate(work_, cancel_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->result.outcome(), v1::OUTCOME_OK);
}

TEST_F(AscendBoardTest, TorchNpuProfilerBundle) {
  SetCommand({"{python}", "{pkg}/run.py", "--profiler", "torch_npu"});
  std::unique_ptr<Board> board = FirstBoard();
  ASSERT_NE(board, nullptr);
  absl::StatusOr<Evaluation> eval = board->Evaluate(work_, cancel_);
  ASSERT_TRUE(eval.ok()) << eval.status();
  ASSERT_EQ(eval->result.outcome(), v1::OUTCOME_OK) << eval->result.detail();
  ASSERT_TRUE(eval->bundle.has_value());
  EXPECT_EQ(eval->bundle->profiler(), "torch_npu");
  const std::string src =
      kFixtures + "/helix_torch_npu_real/ASCEND_PROFILER_OUTPUT/";
  int n = 0;
  for (const v1::ProfileFile& f : eval->bundle->files()) {
    EXPECT_TRUE(
        absl::StrContains(f.path(), "_ascend_pt/ASCEND_PROFILER_OUTPUT/"))
        << f.path();
    EXPECT_EQ(f.content(),
              MustRead(src + fs::path(f.path()).filename().string()));
    ++n;
  }
  EXPECT_EQ(n, 6);
  v1::Diagnosis d = Analyze(*eval->bundle);
  ASSERT_FALSE(d.hotspots().empty());
  EXPECT_EQ(d.hotspots(0).op_name(), "matmul_kernel");

  SetMode("torch_npu_empty");
  eval = board->Evaluate(work_, cancel_);
  ASSERT_TRUE(eval.ok());
  EXPECT_EQ(eval->result.outcome(), v1::OUTCOME_PROFILE_FAILED);
  EXPECT_TRUE(
      absl::StrContains(eval->result.detail(), "ASCEND_PROFILER_OUTPUT"));
}

TEST_F(AscendBoardTest, PyptoProfilerBundle) {
  SetCommand({"{python}", "{pkg}/run.py", "--profiler", "pypto"});
  std::unique_ptr<Board> board = FirstBoard();
  ASSERT_NE(board, nullptr);
  absl::StatusOr<Evaluation> eval = board->Evaluate(work_, cancel_);
  ASSERT_TRUE(eval.ok()) << eval.status();
  ASSERT_EQ(eval->result.outcome(), v1::OUTCOME_OK) << eval->result.detail();
  ASSERT_EQ(eval->bundle->files_size(), 1);
  const v1::ProfileFile& f = eval->bundle->files(0);
  EXPECT_TRUE(absl::StartsWith(f.path(), "output/output_")) << f.path();
  EXPECT_TRUE(absl::EndsWith(f.path(), "/merged_swimlane.json"));
  EXPECT_EQ(f.content(),
            MustRead(kFixtures +
                     "/pypto_swimlane_kaywang/merged_swimlane.timeline.json"));
  EXPECT_TRUE(absl::StrContains(
      MustRead(log_),
      "stage=profile ASCEND_RT_VISIBLE_DEVICES=3 TILE_FWK_DEVICE_ID=3"));
  v1::Diagnosis d = Analyze(*eval->bundle);
  EXPECT_FALSE(d.perf_analysis_md().empty());
}

// The stand-in log's lines that contain `what`.
std::vector<std::string> LogLines(const std::string& log,
                                  const std::string& what) {
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (absl::StrContains(line, what)) out.emplace_back(line);
  }
  return out;
}

// The pid a stand-in log line names ("... pid=<n>").
std::string PidOf(const std::string& line) {
  const size_t at = line.rfind("pid=");
  return at == std::string::npos ? "" : line.substr(at + 4);
}

// With the Python runner, every stage of every round (candidate and parent,
// reference included) runs in one interpreter that imported the program
// once; the profiler stays a process of its own. The same work with
// `isolation: process` gives the same kind of result, one process a stage.
TEST_F(AscendBoardTest, PythonRunnerServesEveryRoundFromOneStart) {
  options_.py_runner = PY_VARIANT_RUNNER;
  options_.profile = false;
  std::unique_ptr<Board> board = FirstBoard();
  ASSERT_NE(board, nullptr);
  work_.set_has_reference(true);
  work_.set_reference_round(2);
  *work_.mutable_reference_params() = work_.params();
  v1::ParamValue slower;
  slower.set_int_value(128);
  (*work_.mutable_reference_params())["block_m"] = slower;
  work_.mutable_measurement()->set_mode(v1::MEASUREMENT_MODE_AB);
  int starts = 0;
  std::vector<v1::RoundResult> results;
  for (int round = 3; round < 6; ++round) {
    work_.set_round_id(round);
    absl::StatusOr<Evaluation> eval = board->Evaluate(work_, cancel_);
    ASSERT_TRUE(eval.ok()) << eval.status();
    ASSERT_EQ(eval->result.outcome(), v1::OUTCOME_OK) << eval->result.detail();
    EXPECT_TRUE(eval->result.precision().passed());
    EXPECT_TRUE(eval->result.measurement().paired());
    EXPECT_TRUE(absl::StrContains(eval->result.measurement().policy(),
                                  "persistent Python runner"))
        << eval->result.measurement().policy();
    starts += eval->result.runner_starts();
    results.push_back(eval->result);
  }
  EXPECT_EQ(starts, 1);
  const std::string log = MustRead(log_);
  const std::vector<std::string> imports = LogLines(log, "imported pid=");
  ASSERT_EQ(imports.size(), 1u) << log;
  const std::vector<std::string> stages = LogLines(log, "stage=");
  EXPECT_GE(stages.size(), 3u * 5);  // build, reference, ABBA blocks
  for (const std::string& line : stages) {
    EXPECT_EQ(PidOf(line), PidOf(imports[0])) << line;
    EXPECT_TRUE(absl::StrContains(line, "ASCEND_RT_VISIBLE_DEVICES=3")) << line;
  }

  ASSERT_TRUE(WriteFileAtomic(log_, "").ok());
  work_.mutable_measurement()->set_isolation(v1::ISOLATION_PROCESS);
  work_.set_round_id(6);
  absl::StatusOr<Evaluation> alone = board->Evaluate(work_, cancel_);
  ASSERT_TRUE(alone.ok()) << alone.status();
  ASSERT_EQ(alone->result.outcome(), v1::OUTCOME_OK);
  EXPECT_EQ(alone->result.runner_starts(), 0);
  EXPECT_TRUE(alone->result.precision().passed());
  EXPECT_EQ(alone->result.precision().elements(),
            results[0].precision().elements());
  // The stand-in's durations are the same in both modes: so is the result.
  EXPECT_DOUBLE_EQ(alone->result.measurement().median_us(),
                   results[0].measurement().median_us());
  EXPECT_DOUBLE_EQ(alone->result.measurement().gain(),
                   results[0].measurement().gain());
  EXPECT_TRUE(absl::StrContains(alone->result.measurement().policy(),
                                "one process per stage"));
  EXPECT_GT(LogLines(MustRead(log_), "imported pid=").size(), 3u);
}

// A variant that takes the runner down (SIGSEGV, abort), hangs it, raises or
// writes wrong output gets its outcome typed as in a process; the runner is
// replaced and the next round on the board succeeds in a fresh one.
TEST_F(AscendBoardTest, PythonRunnerIsRestartedAfterEveryKindOfFailure) {
  options_.py_runner = PY_VARIANT_RUNNER;
  options_.profile = false;
  options_.run_timeout = absl::Seconds(2);
  std::unique_ptr<Board> board = FirstBoard();
  ASSERT_NE(board, nullptr);
  struct Case {
    std::string mode;
    v1::Outcome outcome;
    std::string detail;
  };
  const std::vector<Case> cases = {
      {"crash", v1::OUTCOME_RUN_CRASHED, "SIGSEGV"},
      {"abort", v1::OUTCOME_RUN_CRASHED, "SIGABRT"},
      {"raise", v1::OUTCOME_RUN_CRASHED, "the stand-in kernel raised"},
      {"timeout", v1::OUTCOME_RUN_TIMEOUT, "did not finish within 2s"},
      {"precision", v1::OUTCOME_PRECISION_FAILED, "precision"},
  };
  int round = 10;
  for (const Case& c : cases) {
    SetMode(c.mode);
    work_.set_round_id(round++);
    absl::StatusOr<Evaluation> bad = board->Evaluate(work_, cancel_);
    ASSERT_TRUE(bad.ok()) << c.mode << ": " << bad.status();
    EXPECT_EQ(bad->result.outcome(), c.outcome)
        << c.mode << ": " << bad->result.detail();
    EXPECT_TRUE(absl::StrContains(bad->result.detail(), c.detail))
        << c.mode << ": " << bad->result.detail();
    SetMode("ok");
    work_.set_round_id(round++);
    absl::StatusOr<Evaluation> next = board->Evaluate(work_, cancel_);
    ASSERT_TRUE(next.ok()) << c.mode << ": " << next.status();
    EXPECT_EQ(next->result.outcome(), v1::OUTCOME_OK)
        << "after " << c.mode << ": " << next->result.detail();
    EXPECT_EQ(next->result.runner_starts(), 1) << "after " << c.mode;
  }
}

}  // namespace
}  // namespace tunefarm
