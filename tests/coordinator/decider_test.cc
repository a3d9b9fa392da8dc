// Decider (coordinator/decider.h) on its own (SweepPartsTest: a sweep with
// min_gain 0.02 and a budget of 2 rounds): the baseline, keep or roll back
// from A/B results, a failed baseline, and the end of a sweep at its round
// budget (after its closing check) with its rounds not run cancelled and
// their boards freed.
#include "coordinator/decider.h"

#include <string>

#include "common/params.h"
#include "gtest/gtest.h"
#include "tests/coordinator/sweep_parts_fixture.h"

namespace tunefarm {
namespace {

class DeciderTest : public SweepPartsTest {
 protected:
  // Records `round`'s result as ReportResult does before deciding.
  void Record(int i, v1::Outcome outcome, double median_us, double gain,
              double gain_lower) {
    v1::Round& r = Round(i);
    v1::RoundResult* res = r.mutable_result();
    res->set_outcome(outcome);
    res->set_detail(outcome == v1::OUTCOME_OK ? "" : "it broke");
    v1::Measurement* m = res->mutable_measurement();
    m->set_median_us(median_us);
    m->set_p20_us(median_us * 0.99);
    m->set_p80_us(median_us * 1.01);
    m->set_samples(30);
    if (i != 0) {
      m->set_paired(true);
      m->set_gain(gain);
      m->set_gain_lower(gain_lower);
      m->set_pairs(30);
      m->set_confidence(0.95);
    }
    r.set_board_id("a1/b0");
    r.set_state(v1::ROUND_STATE_DONE);
  }
  void Decide(int i) {
    Txn txn;
    decider_.Decide(txn, *s_, Round(i));
    decider_.CheckTermination(txn, *s_);
    events_ += static_cast<int>(txn.writes.mutations().size());
  }

  int events_ = 0;
};

TEST_F(DeciderTest, TheBaselineThenKeepOrRollBackOnTheGainsLowerBound) {
  Record(0, v1::OUTCOME_OK, 100, 0, 0);
  Decide(0);
  EXPECT_EQ(Round(0).decision(), v1::DECISION_BASELINE);
  EXPECT_EQ(s_->sweep.baseline_us(), 100);
  EXPECT_EQ(s_->sweep.best_round(), 0);
  EXPECT_GT(events_, 0) << "ROUND_FINISHED";

  // 5% faster, but the bound (1%) is under min_gain (2%) and it is the
  // estimate that beats it: inconclusive, measured again, not finished.
  Record(1, v1::OUTCOME_OK, 95, 0.05, 0.01);
  Decide(1);
  EXPECT_EQ(Round(1).state(), v1::ROUND_STATE_QUEUED);
  EXPECT_EQ(Round(1).remeasures(), 1);
  EXPECT_EQ(s_->sweep.rounds_finished(), 0);

  // Slower than its parent: rolled back.
  Record(2, v1::OUTCOME_OK, 110, -0.1, -0.12);
  Decide(2);
  EXPECT_EQ(Round(2).decision(), v1::DECISION_ROLLED_BACK);
  EXPECT_EQ(s_->sweep.rounds_without_gain(), 1);
  EXPECT_EQ(s_->sweep.best_round(), 0);

  // Its bound clears min_gain: kept, the new best.
  Record(1, v1::OUTCOME_OK, 90, 0.1, 0.08);
  Decide(1);
  EXPECT_EQ(Round(1).decision(), v1::DECISION_KEPT);
  EXPECT_EQ(s_->sweep.best_round(), 1);
  EXPECT_EQ(s_->sweep.best_us(), 90);
  EXPECT_EQ(s_->sweep.rounds_without_gain(), 0);
  // Two rounds finished: the budget of 2 is spent, and the search is over.
  // The closing check times the best against the baseline before the end.
  EXPECT_FALSE(s_->finished);
  ASSERT_TRUE(s_->sweep.has_closing_check());
  const int check = static_cast<int>(s_->sweep.closing_check().round_id());
  ASSERT_EQ(check, 3);
  EXPECT_EQ(Round(check).state(), v1::ROUND_STATE_QUEUED);
  EXPECT_EQ(Round(check).parent_round(), 0);
  EXPECT_EQ(ParamsKey(Round(check).params()), ParamsKey(Round(1).params()));
  Record(check, v1::OUTCOME_OK, 88, 0.12, 0.1);
  Decide(check);
  EXPECT_EQ(Round(check).decision(), v1::DECISION_CLOSING_CHECK);
  EXPECT_NEAR(s_->sweep.closing_check().speedup(), 1 / 0.88, 1e-9);
  EXPECT_EQ(s_->sweep.rounds_finished(), 2);
  EXPECT_TRUE(s_->finished);
  EXPECT_EQ(s_->sweep.state(), v1::SWEEP_STATE_SUCCEEDED);
  EXPECT_EQ(s_->sweep.termination(), v1::TERMINATION_ROUND_BUDGET);
  EXPECT_EQ(s_->sweep.report_path(), "/reports/sw-000001.md");
}

TEST_F(DeciderTest, AFailedBaselineFailsTheSweepAndCancelsWhatWaits) {
  Txn grant;
  v1::WorkItem work;
  table_.Grant(grant, *s_, Round(2), Board("a1/b1"), /*ahead=*/false,
               /*held=*/{}, &work);
  Record(0, v1::OUTCOME_BUILD_FAILED, 0, 0, 0);
  Decide(0);
  EXPECT_EQ(Round(0).decision(), v1::DECISION_BASELINE);
  EXPECT_TRUE(s_->finished);
  EXPECT_EQ(s_->sweep.state(), v1::SWEEP_STATE_FAILED);
  EXPECT_EQ(s_->sweep.termination(), v1::TERMINATION_BASELINE_FAILED);
  EXPECT_EQ(Round(1).state(), v1::ROUND_STATE_CANCELLED);
  EXPECT_EQ(Round(2).state(), v1::ROUND_STATE_CANCELLED) << "it was leased";
  EXPECT_TRUE(Board("a1/b1").lease_id.empty()) << "its board is freed";
  EXPECT_EQ(Board("a1/b1").info.state(), v1::BOARD_STATE_IDLE);
  // Ending twice changes nothing.
  Txn again;
  decider_.Finish(again, *s_, v1::SWEEP_STATE_CANCELLED,
                  v1::TERMINATION_CANCELLED, "late");
  EXPECT_EQ(s_->sweep.state(), v1::SWEEP_STATE_FAILED);
  EXPECT_TRUE(again.writes.empty());
}

}  // namespace
}  // namespace tunefarm
