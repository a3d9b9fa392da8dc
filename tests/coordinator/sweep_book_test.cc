// SweepBook (coordinator/sweep_book.h) on its own, over the shipped
// operators: sweep numbering through its stored form, building a sweep's
// runtime, and resuming one from its stored rounds.
#include "coordinator/sweep_book.h"

#include <string>
#include <utility>
#include <vector>

#include "coordinator/spec.h"
#include "gtest/gtest.h"
#include "ops/catalog.h"

namespace tunefarm {
namespace {

class SweepBookTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto catalog = OperatorCatalog::LoadFromDirs({TUNEFARM_SOURCE_DIR "/ops"});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = std::move(*catalog);
  }
  v1::Sweep Sweep(const std::string& id, const std::string& team,
                  const std::string& op) {
    auto spec = ParseSweepSpec(
        "name: book\nteam: " + team + "\noperator: " + op +
        "\nworkload: square_2k\ngoal: {speedup: 100}\nstrategy: grid\n"
        "budget: {max_rounds: 5}\n"
        "boards: {kind: sim}\n");
    EXPECT_TRUE(spec.ok()) << spec.status();
    v1::Sweep sweep;
    sweep.set_sweep_id(id);
    if (!spec.ok()) return sweep;
    if (op == "sim_matmul") {
      auto valid = ValidateSweepSpec(*spec, catalog_);
      EXPECT_TRUE(valid.ok()) << valid.status();
      if (valid.ok()) *sweep.mutable_spec() = *valid;
    } else {
      *sweep.mutable_spec() = *spec;
    }
    return sweep;
  }
  static v1::Round Round(int64_t id, v1::RoundState state, int64_t expires_ms) {
    v1::Round r;
    r.set_round_id(id);
    r.set_state(state);
    r.mutable_lease()->set_expires_unix_ms(expires_ms);
    return r;
  }

  OperatorCatalog catalog_;
};

TEST_F(SweepBookTest, NumbersContinueFromWhatIsStored) {
  SweepBook book(&catalog_);
  ASSERT_TRUE(book.LoadNextNumber(std::nullopt).ok());
  EXPECT_EQ(book.NextId(), "sw-000001");
  SweepBook restarted(&catalog_);
  ASSERT_TRUE(restarted.LoadNextNumber(book.StoredNextNumber()).ok());
  EXPECT_EQ(restarted.NextId(), "sw-000002");
  restarted.Advance();
  EXPECT_EQ(restarted.NextId(), "sw-000003");
  absl::Status st = book.LoadNextNumber(std::string("twelve"));
  EXPECT_TRUE(absl::IsDataLoss(st)) << st;
  EXPECT_NE(st.message().find(SweepBook::kNextSweepKey), std::string::npos);
  EXPECT_NE(SweepBook::IdempotencyKey("qa", "k1"),
            SweepBook::IdempotencyKey("perf", "k1"))
      << "idempotency keys are per team";
}

TEST_F(SweepBookTest, ASweepIsLoadedWithItsOperatorAndStrategy) {
  SweepBook book(&catalog_);
  absl::StatusOr<SweepRuntime*> s =
      book.Load(Sweep("sw-000001", "qa", "sim_matmul"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(book.Find("sw-000001"), *s);
  EXPECT_EQ((*s)->op->name(), "sim_matmul");
  EXPECT_NE((*s)->strategy, nullptr);
  ASSERT_TRUE(book.Load(Sweep("sw-000002", "qa", "sim_matmul")).ok());
  ASSERT_TRUE(book.Load(Sweep("sw-000003", "perf", "sim_matmul")).ok());
  EXPECT_EQ(book.size(), 3);
  EXPECT_EQ(book.ActiveOf("qa"), 2);
  EXPECT_EQ(book.ActiveOf("perf"), 1);
  book.Erase("sw-000002");
  EXPECT_EQ(book.Find("sw-000002"), nullptr);
  EXPECT_EQ(book.ActiveOf("qa"), 1);

  // Its operator gone: not loaded, and kept only as unrunnable.
  const v1::Sweep orphan = Sweep("sw-000004", "qa", "no_such_operator");
  EXPECT_FALSE(book.Load(orphan).ok());
  EXPECT_EQ(book.Find("sw-000004"), nullptr);
  SweepRuntime* u =
      book.AddUnrunnable(orphan, {Round(0, v1::ROUND_STATE_DONE, 0)});
  EXPECT_EQ(book.Find("sw-000004"), u);
  EXPECT_EQ(u->rounds.size(), 1u);
  EXPECT_EQ(u->strategy, nullptr);
}

TEST_F(SweepBookTest, ResumingGivesLeasesGraceAndRefusesGaps) {
  SweepRuntime s;
  s.sweep.set_sweep_id("sw-000001");
  const absl::Time grace = absl::FromUnixMillis(50'000);
  std::vector<v1::Round> rounds = {Round(0, v1::ROUND_STATE_DONE, 1'000),
                                   Round(1, v1::ROUND_STATE_LEASED, 10'000),
                                   Round(2, v1::ROUND_STATE_LEASED, 90'000),
                                   Round(3, v1::ROUND_STATE_QUEUED, 1'000)};
  ASSERT_TRUE(SweepBook::Resume(s, rounds, grace).ok());
  ASSERT_EQ(s.rounds.size(), 4u);
  EXPECT_EQ(s.rounds[0].lease().expires_unix_ms(), 1'000) << "not leased";
  EXPECT_EQ(s.rounds[1].lease().expires_unix_ms(), 50'000);
  EXPECT_EQ(s.rounds[2].lease().expires_unix_ms(), 90'000) << "never cut";
  EXPECT_EQ(s.rounds[3].lease().expires_unix_ms(), 1'000) << "not leased";

  rounds.erase(rounds.begin() + 1);
  absl::Status st = SweepBook::Resume(s, rounds, grace);
  EXPECT_TRUE(absl::IsDataLoss(st)) << st;
  EXPECT_NE(st.message().find("sw-000001"), std::string::npos) << st;
}

TEST_F(SweepBookTest, AnEndedSweepIsFreedASliceAtATime) {
  SweepBook book(&catalog_);
  absl::StatusOr<SweepRuntime*> a =
      book.Load(Sweep("sw-000001", "qa", "sim_matmul"));
  ASSERT_TRUE(a.ok()) << a.status();
  for (int i = 0; i < 100; ++i) {
    (*a)->rounds.push_back(Round(i, v1::ROUND_STATE_DONE, 0));
  }
  ASSERT_TRUE(book.Load(Sweep("sw-000002", "qa", "sim_matmul")).ok());
  absl::StatusOr<SweepRuntime*> empty =
      book.Load(Sweep("sw-000003", "qa", "sim_matmul"));
  ASSERT_TRUE(empty.ok()) << empty.status();

  book.Retire("sw-000001");
  book.Retire("sw-000003");  // no rounds
  book.Retire("sw-000404");  // not in the book: nothing
  EXPECT_EQ(book.Find("sw-000001"), nullptr) << "out of the book at once";
  EXPECT_EQ(book.Find("sw-000003"), nullptr);
  EXPECT_EQ(book.size(), 1);
  EXPECT_EQ(book.ActiveOf("qa"), 1);
  EXPECT_EQ(book.FreeRetired(30), 70);
  EXPECT_EQ(book.FreeRetired(30), 40);
  EXPECT_EQ(book.FreeRetired(1000), 0);
  EXPECT_EQ(book.FreeRetired(1000), 0);
  EXPECT_NE(book.Find("sw-000002"), nullptr) << "a live sweep is kept";
}

}  // namespace
}  // namespace tunefarm
