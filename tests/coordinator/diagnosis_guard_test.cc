// A diagnosis is recorded only for the round, the lease epoch and the bundle
// id the coordinator leased out and recorded (issue 16), idempotently. A
// real Coordinator over RocksDB in a temporary folder, driven directly.
#include <string>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "coordinator/auth.h"
#include "coordinator/coordinator.h"
#include "gtest/gtest.h"
#include "ops/catalog.h"
#include "tests/coordinator/coordinator_harness.h"

namespace tunefarm {
namespace {

class DiagnosisGuardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto catalog = OperatorCatalog::LoadFromDirs({TUNEFARM_SOURCE_DIR "/ops"});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = std::move(*catalog);
    ASSERT_TRUE(disk_.MakeDir("diagnosis_guard_test").ok());
    CoordinatorOptions o;
    o.lease_duration = absl::Hours(1);
    o.agent_timeout = absl::Hours(1);
    ASSERT_TRUE(disk_.Open(&catalog_, &clock_, o).ok());
    v1::SubmitSweepRequest submit;
    submit.set_spec_yaml(
        "name: guard\nteam: demo\noperator: sim_matmul\nworkload: square_2k\n"
        "goal: {speedup: 100}\nstrategy: grid\nbudget: {max_rounds: 5}\n"
        "boards: {kind: sim}\n");
    auto s = core()->SubmitSweep(submit, AnonymousAdmin());
    ASSERT_TRUE(s.ok()) << s.status();
    id_ = s->sweep().sweep_id();
    v1::RegisterAgentRequest reg;
    reg.set_agent_id("a1");
    v1::BoardInfo* b = reg.add_boards();
    b->set_board_id("a1/b0");
    b->set_kind("sim");
    b->set_chip("Ascend910B-sim");
    b->set_simulated(true);
    ASSERT_TRUE(core()->RegisterAgent(reg).ok());
  }
  Coordinator* core() { return disk_.coordinator(); }

  v1::WorkItem Lease() {
    v1::LeaseWorkRequest r;
    r.set_agent_id("a1");
    r.set_board_id("a1/b0");
    auto w = core()->LeaseWork(r);
    EXPECT_TRUE(w.ok() && w->granted());
    return w.ok() ? w->work() : v1::WorkItem();
  }
  void Report(const v1::WorkItem& w, const std::string& bundle_id) {
    v1::ReportResultRequest r;
    r.set_agent_id("a1");
    r.set_board_id("a1/b0");
    r.set_lease_id(w.lease_id());
    r.set_epoch(w.epoch());
    r.set_sweep_id(w.sweep_id());
    r.set_round_id(w.round_id());
    v1::RoundResult* res = r.mutable_result();
    res->set_outcome(v1::OUTCOME_OK);
    res->set_bundle_id(bundle_id);
    v1::Measurement* m = res->mutable_measurement();
    m->set_median_us(100);
    m->set_p20_us(100);
    m->set_p80_us(100);
    m->set_samples(5);
    m->set_simulated(true);
    auto a = core()->ReportResult(r);
    ASSERT_TRUE(a.ok() && a->accepted()) << a.status();
  }
  v1::Diagnosis Diag(const v1::WorkItem& w, const std::string& bundle_id) {
    v1::Diagnosis d;
    d.set_sweep_id(w.sweep_id());
    d.set_round_id(w.round_id());
    d.set_epoch(w.epoch());
    d.set_bundle_id(bundle_id);
    d.set_analyzer_id("analyzer-1");
    d.add_hotspots()->set_op_name("MatMul");
    return d;
  }

  FakeClock clock_;
  OperatorCatalog catalog_;
  CoordinatorOnDisk disk_;
  std::string id_;
};

TEST_F(DiagnosisGuardTest, OnlyTheRecordedResultsBundleIsDiagnosed) {
  const v1::WorkItem w = Lease();
  const std::string bundle = absl::StrCat(id_, ".r0.e", w.epoch(), ".b0");
  // Leased but not reported: nothing to diagnose yet (and the agent that
  // would report it sends its bundle only after the answer).
  EXPECT_EQ(core()->RecordDiagnosis(Diag(w, bundle)).code(),
            absl::StatusCode::kFailedPrecondition);
  Report(w, bundle);
  // Another bundle id, another epoch, another round: never recorded.
  EXPECT_EQ(core()->RecordDiagnosis(Diag(w, "forged")).code(),
            absl::StatusCode::kFailedPrecondition);
  v1::Diagnosis stale = Diag(w, bundle);
  stale.set_epoch(w.epoch() + 1);
  EXPECT_EQ(core()->RecordDiagnosis(stale).code(),
            absl::StatusCode::kFailedPrecondition);
  v1::Diagnosis other = Diag(w, bundle);
  other.set_round_id(3);
  EXPECT_NE(core()->RecordDiagnosis(other).code(), absl::StatusCode::kOk);
  // The genuine one lands once; a re-send is a duplicate.
  ASSERT_TRUE(core()->RecordDiagnosis(Diag(w, bundle)).ok());
  EXPECT_EQ(core()->RecordDiagnosis(Diag(w, bundle)).code(),
            absl::StatusCode::kAlreadyExists);
  auto round = disk_.store()->GetRound(id_, 0);
  ASSERT_TRUE(round.ok()) << round.status();
  EXPECT_EQ(round->diagnosis().bundle_id(), bundle);
  EXPECT_EQ(round->diagnosis().hotspots(0).op_name(), "MatMul");
}

}  // namespace
}  // namespace tunefarm
