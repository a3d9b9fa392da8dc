// Issue 6's whole-farm test: a real coordinator, a real analyzer worker and a
// real agent with `--boards ascend:0,1` pointed at the stand-ins in
// tests/ascend_standins (npu-smi, msprof and the operator's Python print and
// write the real layouts from shared/fixtures/ascend). The agent and its
// ascend board are the production binaries; only the tool paths differ.
// Checked: a sweep of ops/ascend_matmul runs to the end, in one persistent
// Python runner; its diagnoses come from the real msprof files (the hotspot
// and a pipe ratio that are in the fixture); a card failing with a device
// error twice is quarantined and its failures are not blamed on the
// variants (card 0 is drained until then, so the sweep's first leases go to
// card 1 whatever the timing); a UB overflow is the variant's BUILD_FAILED
// with the compiler's byte counts.
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "gtest/gtest.h"
#include "tests/integration/farm_fixture.h"

namespace tunefarm {
namespace {

const std::string kStandins = ASCEND_STANDINS_DIR;
const std::string kFixtures =
    std::string(TUNEFARM_SHARED_DIR) + "/fixtures/ascend";

std::string AscendSpec(const std::string& name, int max_rounds) {
  return absl::StrCat(R"(
name: )",
                      name, R"(
team: itest
operator: ascend_matmul
workload: smoke_32
goal: {speedup: 1000}
strategy: {name: random, seed: 5}
budget: {max_rounds: )",
                      max_rounds,
                      R"(, time_limit: 10m, max_rounds_without_gain: 100}
min_gain: 0.02
boards: {kind: ascend}
measurement: {warmup: 1, samples: 3}
)");
}

class AscendFarmTest : public FarmFixture {
 protected:
  void SetUp() override {
    FarmFixture::SetUp();
    if (!std::filesystem::exists(kFixtures + "/helix_msprof_real")) {
      GTEST_SKIP() << "no Ascend fixtures at " << kFixtures;
    }
    mode_file_ = dir_ + "/standin.mode";
    ASSERT_TRUE(WriteFileAtomic(mode_file_, "ok").ok());
    // The agent's children inherit these: the stand-ins read them, the
    // agent does not.
    setenv("TF_STANDIN_MODE_FILE", mode_file_.c_str(), 1);
    setenv("TF_ASCEND_FIXTURES", kFixtures.c_str(), 1);
    unsetenv("TF_STANDIN_MODE");
    unsetenv("TF_STANDIN_NPU_SMI_SAMPLE");
  }

  // `mode` for every call that runs on card `dev`.
  void SetCardMode(int dev, const std::string& mode) {
    ASSERT_TRUE(
        WriteFileAtomic(absl::StrCat(mode_file_, ".dev", dev), mode).ok());
  }

  v1::BoardInfo Board(const std::string& id) {
    v1::ListBoardsRequest req;
    v1::ListBoardsResponse resp;
    grpc::ClientContext ctx;
    Auth(&ctx);
    grpc::Status st = stub_->ListBoards(&ctx, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    for (const v1::BoardInfo& b : resp.boards()) {
      if (b.board_id() == id) return b;
    }
    ADD_FAILURE() << "no board " << id;
    return {};
  }

  // Drains (or admits) `id` once its agent has registered it.
  void Admin(const std::string& id, bool drain) {
    for (int i = 0; i < 600; ++i) {
      v1::BoardAdminRequest req;
      req.set_board_id(id);
      req.set_reason("ascend_farm_test");
      v1::BoardInfo resp;
      grpc::ClientContext ctx;
      Auth(&ctx);
      grpc::Status st = drain ? stub_->DrainBoard(&ctx, req, &resp)
                              : stub_->AdmitBoard(&ctx, req, &resp);
      if (st.ok()) return;
      ASSERT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND)
          << st.error_message();
      absl::SleepFor(absl::Milliseconds(50));
    }
    FAIL() << id << " never registered";
  }

  std::string mode_file_;
};

TEST_F(AscendFarmTest,
       SweepDiagnosesFromRealFilesAndSeparatesBoardFromVariantFaults) {
  // Card 1 fails every call with a device error (ACL 507054) from the start.
  SetCardMode(1, "device_error");
  LocalFarmOptions o;
  o.agents = 1;
  o.board_kind = "ascend";
  o.boards_flag = "ascend:0,1";
  o.agent_flags = {"--ascend_npu_smi", kStandins + "/npu-smi",
                   "--ascend_msprof",  kStandins + "/msprof",
                   "--ascend_python",  kStandins + "/ascend-python"};
  StartFarm(o);
  // Card 0 waits drained until card 1 has failed, so card 1 is the one the
  // sweep's first leases go to, however fast card 0 would be.
  ASSERT_NO_FATAL_FAILURE(Admin("agent-1/ascend0", /*drain=*/true));

  const std::string id = Submit(AscendSpec("ascend-it", 2));
  // Card 1: two device errors in a row, then quarantined; its failures were
  // re-queued as board faults, never recorded against a variant. The agent
  // reports the quarantine with its next heartbeat.
  v1::BoardInfo bad = Board("agent-1/ascend1");
  for (int i = 0; i < 1200 && bad.state() != v1::BOARD_STATE_QUARANTINED; ++i) {
    absl::SleepFor(absl::Milliseconds(50));
    bad = Board("agent-1/ascend1");
  }
  ASSERT_EQ(bad.state(), v1::BOARD_STATE_QUARANTINED) << bad.health_detail();
  EXPECT_TRUE(absl::StrContains(bad.health_detail(), "device error"))
      << bad.health_detail();
  ASSERT_NO_FATAL_FAILURE(Admin("agent-1/ascend0", /*drain=*/false));

  v1::Sweep sweep = WaitFinished(id, absl::Seconds(240));
  ASSERT_EQ(sweep.state(), v1::SWEEP_STATE_SUCCEEDED)
      << sweep.termination_detail();
  EXPECT_EQ(sweep.rounds_finished(), 2);
  EXPECT_FALSE(sweep.simulated());
  int board_faults = 0;
  for (const v1::SweepEvent& ev : Events(id)) {
    if (absl::StrContains(ev.message(), "507054")) ++board_faults;
  }
  EXPECT_GE(board_faults, 2) << "the device errors should be on record";

  const v1::ListRoundsResponse rounds = Rounds(id);
  ASSERT_EQ(rounds.rounds_size(), 3);
  int runner_starts = 0;
  for (const v1::Round& r : rounds.rounds()) {
    // The agent's board found tunefarm-py-runner.py beside it: every round
    // ran in card 0's one persistent Python runner.
    EXPECT_TRUE(absl::StrContains(r.result().measurement().policy(),
                                  "persistent Python runner"))
        << r.result().measurement().policy();
    runner_starts += r.result().runner_starts();
    ASSERT_EQ(r.state(), v1::ROUND_STATE_DONE) << r.round_id();
    EXPECT_EQ(r.result().outcome(), v1::OUTCOME_OK)
        << r.round_id() << ": " << r.result().detail();
    EXPECT_EQ(r.board_id(), "agent-1/ascend0") << r.round_id();
    EXPECT_FALSE(r.result().measurement().simulated());
  }
  EXPECT_EQ(runner_starts, 1);

  // The diagnoses come from the real msprof files the stand-in copied: the
  // fixture's op_statistic top row (matmul_kernel, 5 calls, 30.144 µs) and
  // its op_summary pipe ratios.
  v1::Diagnosis d;
  for (int i = 0; i < 400 && d.hotspots().empty(); ++i) {
    d = Rounds(id).rounds(0).diagnosis();
    if (d.hotspots().empty()) absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_FALSE(d.hotspots().empty()) << "no diagnosis of the baseline";
  EXPECT_FALSE(d.simulated());
  EXPECT_EQ(d.hotspots(0).op_name(), "matmul_kernel");
  EXPECT_EQ(d.hotspots(0).count(), 5);
  EXPECT_NEAR(d.hotspots(0).duration_us(), 30.144, 1e-6);
  bool mac_ratio = false;
  for (const v1::PipelineRatio& p : d.pipeline_ratios()) {
    if (p.column() != "aic_mac_ratio") continue;
    mac_ratio = true;
    // The fixture's own file, under the PROF_ folder msprof named.
    EXPECT_TRUE(absl::EndsWith(p.file(), "/op_summary_20260511093035.csv"))
        << p.file();
    EXPECT_GT(p.rows(), 0);
    EXPECT_GT(p.mean(), 0);
    EXPECT_LE(p.max(), 1.0) << "ratio columns are fractions";
  }
  EXPECT_TRUE(mac_ratio) << "no aic_mac_ratio read from the op_summary";

  // A UB overflow is the variant's fault: BUILD_FAILED with the compiler's
  // own byte counts, and card 0 stays in service.
  SetCardMode(0, "ub_overflow");
  const std::string id2 = Submit(AscendSpec("ascend-ub", 1));
  WaitFinished(id2, absl::Seconds(120));
  const v1::ListRoundsResponse ub = Rounds(id2);
  ASSERT_GE(ub.rounds_size(), 1);
  const v1::RoundResult& r0 = ub.rounds(0).result();
  EXPECT_EQ(r0.outcome(), v1::OUTCOME_BUILD_FAILED) << r0.detail();
  EXPECT_TRUE(absl::StrContains(r0.detail(), "384032 bytes")) << r0.detail();
  EXPECT_TRUE(absl::StrContains(r0.detail(), "196608 bytes")) << r0.detail();
  EXPECT_NE(Board("agent-1/ascend0").state(), v1::BOARD_STATE_QUARANTINED);
}

}  // namespace
}  // namespace tunefarm
