// Placement (coordinator/placement.h) on its own: which team a board is
// reserved for, which reservation changes are allowed, and the quotas, each
// through the stored form a restarted coordinator loads.
#include "coordinator/placement.h"

#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace tunefarm {
namespace {

v1::BoardReservation ForBoard(const std::string& board,
                              const std::string& team) {
  v1::BoardReservation r;
  r.set_board_id(board);
  r.set_team(team);
  return r;
}

v1::BoardReservation ForPool(const std::map<std::string, std::string>& labels,
                             const std::string& team) {
  v1::BoardReservation r;
  for (const auto& [key, value] : labels) (*r.mutable_labels())[key] = value;
  r.set_team(team);
  return r;
}

v1::BoardInfo Board(const std::string& id,
                    const std::map<std::string, std::string>& labels) {
  v1::BoardInfo b;
  b.set_board_id(id);
  for (const auto& [key, value] : labels) (*b.mutable_labels())[key] = value;
  return b;
}

v1::TeamQuota Quota(const std::string& team, double weight, int max_boards) {
  v1::TeamQuota q;
  q.set_team(team);
  q.set_weight(weight);
  q.set_max_boards(max_boards);
  return q;
}

TEST(PlacementTest, ABoardReservationWinsOverAPoolAndTheFirstPoolWins) {
  Placement p(v1::TeamQuota(), {},
              {ForPool({{"pool", "x"}}, "pool-team"),
               ForPool({{"pool", "x"}, {"rack", "1"}}, "rack-team"),
               ForBoard("a1/b0", "board-team")});
  EXPECT_EQ(p.ReservedFor(Board("a1/b0", {{"pool", "x"}})), "board-team");
  EXPECT_EQ(p.ReservedFor(Board("a1/b1", {{"pool", "x"}, {"rack", "1"}})),
            "pool-team");
  EXPECT_EQ(p.ReservedFor(Board("a1/b2", {{"pool", "y"}})), "");
  for (const v1::BoardReservation& r : p.reservations()) {
    EXPECT_TRUE(r.from_policy()) << r.ShortDebugString();
  }
}

TEST(PlacementTest, AReservedBoardServesItsTeamOnly) {
  v1::BoardInfo board = Board("a1/b0", {});
  v1::BoardSelector any, reserved_only;
  reserved_only.set_reserved_only(true);
  EXPECT_TRUE(Placement::Allows(board, "qa", any));
  EXPECT_FALSE(Placement::Allows(board, "qa", reserved_only));
  board.set_reserved_for("qa");
  EXPECT_TRUE(Placement::Allows(board, "qa", reserved_only));
  EXPECT_FALSE(Placement::Allows(board, "perf", any));
}

TEST(PlacementTest, AdminsChangeTheirReservationsNotThePolicyFiles) {
  Placement p(v1::TeamQuota(), {}, {ForBoard("a1/b0", "qa")});
  v1::BoardReservation both = ForPool({{"pool", "x"}}, "qa");
  both.set_board_id("a1/b1");
  EXPECT_TRUE(absl::IsInvalidArgument(p.With(both).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(p.With(v1::BoardReservation()).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(p.With(ForBoard("a1/b1", "")).status()));
  EXPECT_TRUE(
      absl::IsFailedPrecondition(p.With(ForBoard("a1/b0", "perf")).status()));
  EXPECT_TRUE(
      absl::IsFailedPrecondition(p.Without(ForBoard("a1/b0", "")).status()));
  EXPECT_TRUE(absl::IsNotFound(p.Without(ForBoard("a1/b9", "")).status()));

  // Reserving the same label set again changes its team, in place.
  auto next = p.With(ForPool({{"pool", "x"}, {"rack", "1"}}, "qa"));
  ASSERT_TRUE(next.ok()) << next.status();
  p.SetReservations(*next);
  next = p.With(ForPool({{"rack", "1"}, {"pool", "x"}}, "perf"));
  ASSERT_TRUE(next.ok()) << next.status();
  ASSERT_EQ(next->size(), 2u);
  EXPECT_EQ((*next)[1].team(), "perf");
  EXPECT_FALSE((*next)[1].from_policy());
  p.SetReservations(*next);

  // Stored: the admins' only; loaded after the policy file's.
  Placement restarted(v1::TeamQuota(), {}, {ForBoard("a1/b0", "qa")});
  ASSERT_TRUE(restarted
                  .LoadStored(Placement::StoredReservations(p.reservations()),
                              std::nullopt)
                  .ok());
  ASSERT_EQ(restarted.reservations().size(), 2u);
  EXPECT_EQ(
      restarted.ReservedFor(Board("a1/b3", {{"pool", "x"}, {"rack", "1"}})),
      "perf");

  next = p.Without(ForPool({{"pool", "x"}, {"rack", "1"}}, ""));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->size(), 1u);
}

TEST(PlacementTest, QuotasAreValidatedAndStoredQuotasWin) {
  v1::TeamQuota fallback = Quota("", 1, 0);
  Placement p(fallback, {{"qa", Quota("qa", 2, 4)}}, {});
  EXPECT_EQ(p.QuotaOf("qa").max_boards(), 4);
  EXPECT_EQ(p.QuotaOf("nobody").weight(), 1);
  EXPECT_TRUE(
      absl::IsInvalidArgument(p.StoredQuotasWith(Quota("", 1, 0)).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      p.StoredQuotasWith(Quota("perf", -1, 0)).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      p.StoredQuotasWith(Quota("perf", 1, -2)).status()));
  absl::StatusOr<std::string> stored = p.StoredQuotasWith(Quota("qa", 3, 8));
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(p.QuotaOf("qa").max_boards(), 4) << "validating set it";

  Placement restarted(fallback, {{"qa", Quota("qa", 2, 4)}}, {});
  ASSERT_TRUE(restarted.LoadStored(std::nullopt, *stored).ok());
  EXPECT_EQ(restarted.QuotaOf("qa").max_boards(), 8);
  EXPECT_EQ(restarted.QuotaOf("qa").weight(), 3);
}

TEST(PlacementTest, ACorruptStoredListIsDataLoss) {
  Placement p(v1::TeamQuota(), {}, {});
  absl::Status st = p.LoadStored(std::string("\xff\xff\xff"), std::nullopt);
  EXPECT_TRUE(absl::IsDataLoss(st)) << st;
  EXPECT_NE(st.message().find(Placement::kReservationsKey), std::string::npos);
  st = p.LoadStored(std::nullopt, std::string("\xff\xff\xff"));
  EXPECT_TRUE(absl::IsDataLoss(st)) << st;
  EXPECT_NE(st.message().find(Placement::kQuotasKey), std::string::npos);
}

}  // namespace
}  // namespace tunefarm
