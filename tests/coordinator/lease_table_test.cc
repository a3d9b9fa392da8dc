// LeaseTable (coordinator/lease_table.h) on its own (SweepPartsTest): grants
// and the work they carry, leases ahead promoted when the current one ends,
// renewal, expiry, re-queueing, and undo of everything a grant changed.
#include "coordinator/lease_table.h"

#include <optional>
#include <string>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/coordinator/sweep_parts_fixture.h"

namespace tunefarm {
namespace {

class LeaseTableTest : public SweepPartsTest {};

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
