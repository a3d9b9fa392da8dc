// Placement (coordinator/placement.h) on its own: which team a board is
// reserved for, which reservation changes are allowed, and the quotas, each
// through the stored form a restarted coordinator loads; usage and the
// weighted fair-share order.
#include "coordinator/placement.h"

#include <map>
#include <memory>
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

// A sweep of `team` with `priority` whose rounds are leased at these times.
void AddSweep(SweepBook::Sweeps& sweeps, const std::string& id,
              const std::string& team, int priority,
              const std::vector<int64_t>& leased_at_ms) {
  auto s = std::make_unique<SweepRuntime>();
  s->sweep.set_sweep_id(id);
  s->sweep.mutable_spec()->set_team(team);
  s->sweep.mutable_spec()->set_priority(priority);
  for (int64_t at : leased_at_ms) {
    v1::Round& r = s->rounds.emplace_back();
    r.set_state(v1::ROUND_STATE_LEASED);
    r.mutable_lease()->set_granted_unix_ms(at);
    // Indexed as a grant indexes it (SweepRuntime::leased).
    s->leased.insert(static_cast<int64_t>(s->rounds.size()) - 1);
  }
  s->rounds.emplace_back().set_state(v1::ROUND_STATE_DONE);
  // A stale id (a round leased once, done since) counts for nothing.
  s->leased.insert(static_cast<int64_t>(s->rounds.size()) - 1);
  sweeps[id] = std::move(s);
}

std::vector<std::string> Ids(const std::vector<SweepRuntime*>& order) {
  std::vector<std::string> ids;
  for (const SweepRuntime* s : order) ids.push_back(s->sweep.sweep_id());
  return ids;
}

TEST(PlacementTest, TheTeamWithLeastBoardTimePerWeightGoesFirst) {
  Placement p(Quota("", 1, 0), {{"perf", Quota("perf", 2, 0)}}, {});
  p.AddRecordedSeconds("qa", 10);
  p.AddRecordedSeconds("perf", 10);
  SweepBook::Sweeps sweeps;
  AddSweep(sweeps, "sw-000001", "qa", 0, {});
  AddSweep(sweeps, "sw-000002", "qa", 5, {});
  AddSweep(sweeps, "sw-000003", "perf", 0, {});
  const int64_t now_ms = 100'000;
  // qa 10 s / 1, perf 10 s / 2: perf first; within qa, priority first.
  EXPECT_EQ(Ids(p.FairShareOrder(sweeps, now_ms)),
            (std::vector<std::string>{"sw-000003", "sw-000002", "sw-000001"}));

  // A perf lease running for 30 s: perf (10 + 30) / 2 = 20 > qa 10.
  AddSweep(sweeps, "sw-000004", "perf", 0, {now_ms - 30'000});
  EXPECT_DOUBLE_EQ(p.BoardSeconds("perf", sweeps, now_ms), 40);
  EXPECT_EQ(Placement::BoardsInUse("perf", sweeps), 1);
  EXPECT_EQ(Placement::BoardsInUse("qa", sweeps), 0);
  EXPECT_EQ(Ids(p.FairShareOrder(sweeps, now_ms)),
            (std::vector<std::string>{"sw-000002", "sw-000001", "sw-000003",
                                      "sw-000004"}));

  // Undo puts a team's recorded time back as it was, absent included.
  const std::optional<double> before = p.RecordedSeconds("ops");
  p.AddRecordedSeconds("ops", 3);
  p.RestoreRecordedSeconds("ops", before);
  EXPECT_FALSE(p.RecordedSeconds("ops").has_value());
  EXPECT_EQ(p.recorded_seconds().size(), 2u);
}

}  // namespace
}  // namespace tunefarm
