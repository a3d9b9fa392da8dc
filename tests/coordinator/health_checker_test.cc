// HealthChecker (coordinator/health_checker.h) on its own, over the shipped
// operators and the sim board's shipped golden: when a board is due, the
// work that runs its golden, the verdict on a result and the next check.
#include "coordinator/health_checker.h"

#include <map>
#include <string>
#include <utility>

#include "coordinator/lease_id.h"
#include "gtest/gtest.h"
#include "ops/catalog.h"

namespace tunefarm {
namespace {

class HealthCheckerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto catalog = OperatorCatalog::LoadFromDirs({TUNEFARM_SOURCE_DIR "/ops"});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = std::move(*catalog);
    auto checks = LoadHealthChecks(TUNEFARM_SOURCE_DIR "/ops/health", catalog_);
    ASSERT_TRUE(checks.ok()) << checks.status();
    ASSERT_TRUE(checks->contains("sim"));
    golden_ = checks->at("sim");
    options_.checks = std::move(*checks);
    options_.interval = absl::Hours(1);
    options_.retry_interval = absl::Minutes(5);
    options_.lease_duration = absl::Seconds(30);
  }
  static v1::BoardInfo Board(const std::string& kind, v1::BoardState state) {
    v1::BoardInfo b;
    b.set_board_id("a1/b0");
    b.set_kind(kind);
    b.set_state(state);
    return b;
  }
  static v1::RoundResult Result(v1::Outcome outcome, double median_us) {
    v1::RoundResult r;
    r.set_outcome(outcome);
    r.set_detail("the device fell off the bus");
    r.mutable_measurement()->set_median_us(median_us);
    return r;
  }

  OperatorCatalog catalog_;
  HealthCheck golden_;
  HealthCheckerOptions options_;
  const absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
};

TEST_F(HealthCheckerTest, ABoardIsDueWhenPendingOrAtItsNextCheck) {
  HealthChecker checker(&catalog_, options_);
  const v1::BoardInfo idle = Board("sim", v1::BOARD_STATE_IDLE);
  const absl::Time later = now_ + absl::Minutes(1);
  EXPECT_TRUE(checker.Checks("sim"));
  EXPECT_TRUE(checker.Due(idle, /*check_due=*/true, later, now_));
  EXPECT_FALSE(checker.Due(idle, false, later, now_));
  EXPECT_TRUE(checker.Due(idle, false, now_, now_));
  EXPECT_FALSE(
      checker.Due(Board("sim", v1::BOARD_STATE_DRAINING), true, now_, now_))
      << "a draining board runs nothing new";
  EXPECT_FALSE(checker.Checks("no-such-kind"));
  EXPECT_FALSE(checker.Due(Board("no-such-kind", v1::BOARD_STATE_IDLE), true,
                           now_, now_));
}

TEST_F(HealthCheckerTest, TheWorkRunsTheGoldenUnderAHealthLease) {
  HealthChecker checker(&catalog_, options_);
  v1::WorkItem work;
  const absl::Time expires = now_ + options_.lease_duration;
  ASSERT_TRUE(
      checker.Work(Board("sim", v1::BOARD_STATE_IDLE), 3, expires, &work).ok());
  EXPECT_TRUE(work.health_check());
  std::optional<HealthLeaseId> lease = HealthLeaseId::Parse(work.lease_id());
  ASSERT_TRUE(lease.has_value()) << work.lease_id();
  EXPECT_EQ(lease->board_id, "a1/b0");
  EXPECT_EQ(lease->check, 3);
  EXPECT_EQ(work.epoch(), 3);
  EXPECT_EQ(work.seed(), 3u);
  EXPECT_EQ(work.operator_().name(), golden_.spec.operator_name());
  EXPECT_EQ(work.workload().name(), golden_.spec.workload().name());
  EXPECT_EQ(work.lease_expires_unix_ms(), absl::ToUnixMillis(expires));
  EXPECT_EQ(work.lease_duration_ms(), 30'000);

  // Its operator gone from the catalog: an error naming the golden's file,
  // and no work.
  OperatorCatalog empty;
  HealthChecker orphan(&empty, options_);
  v1::WorkItem none;
  absl::Status st =
      orphan.Work(Board("sim", v1::BOARD_STATE_IDLE), 1, expires, &none);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find(golden_.source), std::string::npos) << st;
  EXPECT_EQ(none.lease_id(), "");
}

TEST_F(HealthCheckerTest, AResultPassesOnlyWhenOkAndInRange) {
  HealthChecker checker(&catalog_, options_);
  const double inside = (golden_.min_us + golden_.max_us) / 2;
  v1::RoundResult ok = Result(v1::OUTCOME_OK, inside);
  HealthVerdict v = checker.Judge("sim", &ok, "");
  EXPECT_TRUE(v.passed) << v.why;
  EXPECT_NE(v.why.find(" in ["), std::string::npos) << v.why;

  ok.mutable_measurement()->set_median_us(golden_.max_us * 2);
  v = checker.Judge("sim", &ok, "");
  EXPECT_FALSE(v.passed);
  EXPECT_NE(v.why.find("outside"), std::string::npos) << v.why;

  const v1::RoundResult crashed = Result(v1::OUTCOME_BOARD_LOST, inside);
  v = checker.Judge("sim", &crashed, "");
  EXPECT_FALSE(v.passed);
  EXPECT_NE(v.why.find("OUTCOME_BOARD_LOST"), std::string::npos) << v.why;

  v = checker.Judge("sim", nullptr, "no result within the lease");
  EXPECT_FALSE(v.passed);
  EXPECT_EQ(v.why, "no result within the lease");
  EXPECT_NE(checker.FailedDetail("sim", v.why).find(golden_.source),
            std::string::npos);
}

TEST_F(HealthCheckerTest, ThePassedAreRecheckedPeriodicallyTheFailedSooner) {
  HealthChecker checker(&catalog_, options_);
  EXPECT_EQ(checker.NextCheck(now_, true), now_ + options_.interval);
  EXPECT_EQ(checker.NextCheck(now_, false), now_ + options_.retry_interval);
  options_.interval = absl::ZeroDuration();
  HealthChecker never(&catalog_, options_);
  EXPECT_EQ(never.NextCheck(now_, true), absl::InfiniteFuture());
  EXPECT_EQ(never.NextCheck(now_, false), now_ + options_.retry_interval);
}

}  // namespace
}  // namespace tunefarm
