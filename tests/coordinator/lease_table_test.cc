// LeaseTable (coordinator/lease_table.h) on its own, over one sim_matmul
// sweep of the shipped operators and two boards: grants and the work they
// carry, leases ahead promoted when the current one ends, renewal, expiry,
// re-queueing, and undo of everything a grant changed.
#include "coordinator/lease_table.h"

#include <string>
#include <utility>

#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/board_registry.h"
#include "coordinator/placement.h"
#include "coordinator/spec.h"
#include "coordinator/staging.h"
#include "coordinator/sweep_book.h"
#include "gtest/gtest.h"
#include "ops/catalog.h"

namespace tunefarm {
namespace {

constexpr absl::Duration kLease = absl::Seconds(30);

class LeaseTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto catalog = OperatorCatalog::LoadFromDirs({TUNEFARM_SOURCE_DIR "/ops"});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = std::move(*catalog);
    auto spec = ParseSweepSpec(
        "name: leases\nteam: qa\noperator: sim_matmul\n"
        "workload: square_2k\ngoal: {speedup: 100}\nstrategy: random\n"
        "budget: {max_rounds: 5}\nboards: {kind: sim}\n");
    ASSERT_TRUE(spec.ok()) << spec.status();
    auto valid = ValidateSweepSpec(*spec, catalog_);
    ASSERT_TRUE(valid.ok()) << valid.status();
    v1::Sweep sweep;
    sweep.set_sweep_id("sw-000001");
    *sweep.mutable_spec() = *valid;
    sweep.set_state(v1::SWEEP_STATE_RUNNING);
    auto s = book_.Load(sweep);
    ASSERT_TRUE(s.ok()) << s.status();
    s_ = *s;
    for (int i = 0; i < 3; ++i) {
      v1::Round r;
      r.set_sweep_id("sw-000001");
      r.set_round_id(i);
      r.set_parent_round(i == 0 ? -1 : 0);
      r.set_state(v1::ROUND_STATE_QUEUED);
      s_->rounds.push_back(r);
    }
    for (const char* id : {"a1/b0", "a1/b1"}) {
      BoardRuntime& b = registry_.boards()[id];
      b.info.set_board_id(id);
      b.info.set_agent_id("a1");
      b.info.set_kind("sim");
      b.info.set_state(v1::BOARD_STATE_IDLE);
    }
  }

  BoardRuntime& Board(const std::string& id) { return registry_.boards()[id]; }
  v1::Round& Round(int i) { return s_->rounds[i]; }
  // Grants round `i` to `board` in `txn` (a transaction of its own when
  // null, applied).
  v1::WorkItem Grant(int i, const std::string& board, bool ahead,
                     Txn* txn = nullptr) {
    Txn own;
    v1::WorkItem work;
    table_.Grant(txn != nullptr ? *txn : own, *s_, Round(i), Board(board),
                 ahead, &work);
    return work;
  }

  OperatorCatalog catalog_;
  FakeClock clock_;
  SweepBook book_{&catalog_};
  BoardRegistry registry_;
  Placement placement_{v1::TeamQuota(), {}, {}};
  Staging staging_{&book_, &registry_, &placement_, &clock_};
  LeaseTable table_{&book_, &registry_, &staging_, &clock_, kLease, nullptr};
  SweepRuntime* s_ = nullptr;
};

TEST_F(LeaseTableTest, AGrantLeasesTheRoundAndCarriesItsWork) {
  const absl::Time now = clock_.Now();
  Txn txn;
  const v1::WorkItem work = Grant(1, "a1/b0", /*ahead=*/false, &txn);
  const v1::Round& r = Round(1);
  EXPECT_EQ(r.state(), v1::ROUND_STATE_LEASED);
  EXPECT_EQ(r.lease().epoch(), 1);
  EXPECT_EQ(r.lease().lease_id(), "sw-000001/1/1");
  EXPECT_EQ(r.lease().board_id(), "a1/b0");
  EXPECT_EQ(r.lease().expires_unix_ms(), absl::ToUnixMillis(now + kLease));
  EXPECT_EQ(Board("a1/b0").lease_id, "sw-000001/1/1");
  EXPECT_EQ(Board("a1/b0").info.state(), v1::BOARD_STATE_BUSY);
  EXPECT_EQ(table_.Live("sw-000001/1/1"), &Round(1));
  EXPECT_EQ(table_.Live("sw-000001/1/2"), nullptr) << "another epoch";
  EXPECT_EQ(table_.Live("health:a1/b0:1"), nullptr);
  EXPECT_EQ(work.lease_id(), "sw-000001/1/1");
  EXPECT_EQ(work.operator_().name(), "sim_matmul");
  EXPECT_TRUE(work.has_reference()) << "A/B against its parent, round 0";
  EXPECT_EQ(work.reference_round(), 0);
  // The round and its ROUND_LEASED (and the sweep's STARTED, it was not
  // QUEUED) go to the store with the commit.
  EXPECT_FALSE(txn.writes.empty());

  // Undone (the commit failed): round and board as before.
  for (auto it = txn.undo.rbegin(); it != txn.undo.rend(); ++it) (*it)();
  EXPECT_EQ(Round(1).state(), v1::ROUND_STATE_QUEUED);
  EXPECT_EQ(Round(1).attempts(), 0);
  EXPECT_TRUE(Board("a1/b0").lease_id.empty());
  EXPECT_EQ(Board("a1/b0").info.state(), v1::BOARD_STATE_IDLE);
}

TEST_F(LeaseTableTest, ALeaseAheadBecomesCurrentWhenTheBoardFrees) {
  Grant(1, "a1/b0", /*ahead=*/false);
  Grant(2, "a1/b0", /*ahead=*/true);
  EXPECT_EQ(Board("a1/b0").lease_id, "sw-000001/1/1");
  ASSERT_EQ(Board("a1/b0").prefetch_lease_ids.size(), 1u);
  clock_.Advance(absl::Seconds(10));
  Txn txn;
  table_.FreeBoard(txn, "a1/b0", "sw-000001/1/1");
  EXPECT_EQ(Board("a1/b0").lease_id, "sw-000001/2/1");
  EXPECT_TRUE(Board("a1/b0").prefetch_lease_ids.empty());
  EXPECT_EQ(Board("a1/b0").info.state(), v1::BOARD_STATE_BUSY);
  // Its board time and expiry start now, not when it was granted.
  EXPECT_EQ(Round(2).lease().granted_unix_ms(),
            absl::ToUnixMillis(clock_.Now()));
  EXPECT_EQ(Round(2).lease().expires_unix_ms(),
            absl::ToUnixMillis(clock_.Now() + kLease));
  table_.FreeBoard(txn, "a1/b0", "sw-000001/2/1");
  EXPECT_TRUE(Board("a1/b0").lease_id.empty());
  EXPECT_EQ(Board("a1/b0").info.state(), v1::BOARD_STATE_IDLE);
}

TEST_F(LeaseTableTest, RenewalExtendsOnlyALiveLeaseAtItsEpoch) {
  Grant(1, "a1/b0", /*ahead=*/false);
  clock_.Advance(absl::Seconds(20));
  const LeaseId id{"sw-000001", 1, 1};
  EXPECT_EQ(table_.Renew(id, "sw-000001/1/1", 2), std::nullopt);
  const std::optional<int64_t> renewed = table_.Renew(id, "sw-000001/1/1", 1);
  ASSERT_TRUE(renewed.has_value());
  EXPECT_EQ(*renewed, absl::ToUnixMillis(clock_.Now() + kLease));
  EXPECT_EQ(Round(1).lease().expires_unix_ms(), *renewed);
  EXPECT_EQ(table_.Renew(LeaseId{"sw-000404", 1, 1}, "sw-000404/1/1", 1),
            std::nullopt)
      << "a sweep that ended";
}

TEST_F(LeaseTableTest, ExpiredLeasesGoBackToTheQueue) {
  Grant(1, "a1/b0", /*ahead=*/false);
  clock_.Advance(absl::Seconds(20));
  Grant(2, "a1/b1", /*ahead=*/false);
  clock_.Advance(absl::Seconds(15));  // round 1 expired, round 2 not
  Txn txn;
  EXPECT_TRUE(table_.RequeueExpired(txn, *s_, clock_.Now()));
  EXPECT_EQ(Round(1).state(), v1::ROUND_STATE_QUEUED);
  EXPECT_EQ(Round(2).state(), v1::ROUND_STATE_LEASED);
  EXPECT_TRUE(Board("a1/b0").lease_id.empty());
  EXPECT_EQ(Board("a1/b1").lease_id, "sw-000001/2/1");
  EXPECT_EQ(s_->queued_from, 0u);
  Txn again;
  EXPECT_FALSE(table_.RequeueExpired(again, *s_, clock_.Now()));
  // Leased again, at the next epoch: the old lease stays over.
  const v1::WorkItem work = Grant(1, "a1/b0", /*ahead=*/false);
  EXPECT_EQ(work.epoch(), 2);
  EXPECT_EQ(table_.Live("sw-000001/1/1"), nullptr);
  EXPECT_NE(table_.Live("sw-000001/1/2"), nullptr);
}

TEST_F(LeaseTableTest, RequeueingWhatABoardHoldsAheadKeepsItsCurrent) {
  Grant(0, "a1/b0", /*ahead=*/false);
  Grant(1, "a1/b0", /*ahead=*/true);
  Grant(2, "a1/b0", /*ahead=*/true);
  Txn txn;
  table_.RequeueAhead(txn, Board("a1/b0"), "drained");
  EXPECT_EQ(Round(1).state(), v1::ROUND_STATE_QUEUED);
  EXPECT_EQ(Round(2).state(), v1::ROUND_STATE_QUEUED);
  EXPECT_EQ(Round(0).state(), v1::ROUND_STATE_LEASED);
  EXPECT_EQ(Board("a1/b0").lease_id, "sw-000001/0/1");
  EXPECT_TRUE(Board("a1/b0").prefetch_lease_ids.empty());
}

}  // namespace
}  // namespace tunefarm
