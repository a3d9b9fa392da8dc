// A diagnosis is recorded only for the round, the lease epoch and the bundle
// id the coordinator leased out and recorded (issue 16), idempotently. A
// real Coordinator over RocksDB in a temporary folder, driven directly, and
// through the diagnosis intake (coordinator/diagnosis_intake.h) that acks
// what the analyzers send.
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "coordinator/auth.h"
#include "coordinator/coordinator.h"
#include "coordinator/diagnosis_intake.h"
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

// The intake acks a diagnosis once recorded (under the name the transport
// authenticated), a re-send as a duplicate, one never recordable as
// rejected, and one without a bundle id without asking the core.
TEST_F(DiagnosisGuardTest, TheIntakeAcksWhatTheCoreRecordedOrNeverWill) {
  const v1::WorkItem w = Lease();
  const std::string bundle = absl::StrCat(id_, ".r0.e", w.epoch(), ".b0");
  Report(w, bundle);
  int recorded = 0;
  const auto record = [&](const v1::Diagnosis& d) {
    ++recorded;
    return core()->RecordDiagnosis(d);
  };
  std::optional<v1::PipelineMessage> reply =
      IntakeDiagnosis(Diag(w, bundle), "lab-analyzer", record);
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->ack().bundle_id(), bundle);
  EXPECT_EQ(reply->ack().sweep_id(), id_);
  EXPECT_EQ(reply->ack().round_id(), 0);
  EXPECT_FALSE(reply->ack().duplicate());
  EXPECT_EQ(reply->ack().rejected(), "");
  auto round = disk_.store()->GetRound(id_, 0);
  ASSERT_TRUE(round.ok()) << round.status();
  EXPECT_EQ(round->diagnosis().analyzer_id(), "lab-analyzer/analyzer-1");

  reply = IntakeDiagnosis(Diag(w, bundle), "lab-analyzer", record);
  ASSERT_TRUE(reply.has_value());
  EXPECT_TRUE(reply->ack().duplicate());

  reply = IntakeDiagnosis(Diag(w, "forged"), "lab-analyzer", record);
  ASSERT_TRUE(reply.has_value());
  EXPECT_NE(reply->ack().rejected(), "");
  EXPECT_EQ(recorded, 3);

  reply = IntakeDiagnosis(Diag(w, ""), "lab-analyzer", record);
  ASSERT_TRUE(reply.has_value());
  EXPECT_NE(reply->ack().rejected().find("bundle_id"), std::string::npos);
  EXPECT_EQ(recorded, 3) << "a diagnosis without a bundle id reached the core";
}

// What could not be recorded for now (store down, disk full) is not acked,
// so it is re-sent; an unauthenticated sender's claim stands as it is.
TEST(DiagnosisIntakeTest, NoAckUnlessRecordedOrNeverRecordable) {
  v1::Diagnosis d;
  d.set_bundle_id("b1");
  EXPECT_FALSE(DiagnosisAck(d, absl::UnavailableError("store")).has_value());
  EXPECT_FALSE(
      DiagnosisAck(d, absl::ResourceExhaustedError("disk full")).has_value());
  EXPECT_TRUE(DiagnosisAck(d, absl::OkStatus()).has_value());
  d.set_analyzer_id("claimed");
  EXPECT_EQ(AttributeDiagnosis(d, "").analyzer_id(), "claimed");
  EXPECT_EQ(AttributeDiagnosis(d, "claimed").analyzer_id(), "claimed");
  d.clear_analyzer_id();
  EXPECT_EQ(AttributeDiagnosis(d, "lab").analyzer_id(), "lab");
}

}  // namespace
}  // namespace tunefarm
