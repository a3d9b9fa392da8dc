// SweepBook (coordinator/sweep_book.h) on its own (SweepPartsTest, over the
// shipped operators and a memory store): sweep numbering through its stored
// form, building a sweep's runtime, resuming one from its stored rounds, and
// its calls: submitting and cancelling stage into the caller's transaction
// and change nothing when it is undone, and recovery resumes what the store
// holds.
#include "coordinator/sweep_book.h"

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/auth.h"
#include "coordinator/spec.h"
#include "gtest/gtest.h"
#include "ops/catalog.h"
#include "tests/coordinator/sweep_parts_fixture.h"

namespace tunefarm {
namespace {

class SweepBookTest : public SweepPartsTest {
 protected:
  void SetUp() override {
    SweepPartsTest::SetUp();
    // The fixture's sweep is not in the store: these tests start empty.
    book_.Erase("sw-000001");
    s_ = nullptr;
  }
  SweepBook::Parts Parts() {
    return SweepBook::Parts{store_.get(), &clock_, &staging_, &placement_,
                            &decider_};
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
  static v1::SubmitSweepRequest Request(const std::string& team,
                                        const std::string& key,
                                        int max_rounds = 5) {
    v1::SubmitSweepRequest request;
    request.set_spec_yaml(absl::StrCat(
        "name: book\nteam: ", team,
        "\noperator: sim_matmul\nworkload: square_2k\ngoal: {speedup: 100}\n"
        "strategy: grid\nbudget: {max_rounds: ",
        max_rounds, "}\nboards: {kind: sim}\n"));
    request.set_idempotency_key(key);
    return request;
  }
  static Principal User(const std::string& team) {
    return Principal{"u-" + team, team, Role::kUser};
  }
  // Submits and commits `request` as the Coordinator does.
  SweepRuntime* Submitted(const v1::SubmitSweepRequest& request) {
    Txn txn;
    auto sub = book_.Submit(txn, request, User("qa"));
    EXPECT_TRUE(sub.ok()) << sub.status();
    if (!sub.ok()) return nullptr;
    EXPECT_TRUE(CommitToStore(txn).ok());
    book_.Advance();
    return sub->staged;
  }
};

TEST_F(SweepBookTest, NumbersContinueFromWhatIsStored) {
  SweepBook book(&catalog_, Parts());
  ASSERT_TRUE(book.LoadNextNumber(std::nullopt).ok());
  EXPECT_EQ(book.NextId(), "sw-000001");
  SweepBook restarted(&catalog_, Parts());
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
  SweepBook& book = book_;
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
  SweepBook& book = book_;
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

TEST_F(SweepBookTest, ASubmissionIsOnlyStagedUntilTheCallerCommits) {
  Txn txn;
  auto sub = book_.Submit(txn, Request("qa", "k1"), User("qa"));
  ASSERT_TRUE(sub.ok()) << sub.status();
  ASSERT_NE(sub->staged, nullptr);
  EXPECT_FALSE(sub->existing.has_value());
  const SweepRuntime& s = *sub->staged;
  EXPECT_EQ(s.sweep.sweep_id(), "sw-000001");
  EXPECT_EQ(s.sweep.state(), v1::SWEEP_STATE_QUEUED);
  ASSERT_EQ(s.rounds.size(), 1u);
  EXPECT_EQ(s.rounds[0].stage(), "baseline");
  EXPECT_EQ(book_.Find("sw-000001"), &s);
  // Staged, not stored; the number moves on only once committed.
  EXPECT_TRUE(absl::IsNotFound(store_->GetSweep("sw-000001").status()));
  EXPECT_EQ(book_.NextId(), "sw-000001");

  // The commit failed: the sweep is gone from the book.
  Undo(txn);
  EXPECT_EQ(book_.Find("sw-000001"), nullptr);
  EXPECT_EQ(book_.size(), 0);

  // Committed: the record, its baseline, its SUBMITTED event, the next
  // number and the key are all in the one write.
  SweepRuntime* again = Submitted(Request("qa", "k1"));
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->sweep.sweep_id(), "sw-000001");
  EXPECT_EQ(book_.NextId(), "sw-000002");
  auto stored = store_->GetSweep("sw-000001");
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->state(), v1::SWEEP_STATE_QUEUED);
  auto rounds = store_->ListRounds("sw-000001");
  ASSERT_TRUE(rounds.ok());
  EXPECT_EQ(rounds->size(), 1u);
  auto events = store_->ReadEvents("sw-000001", 0, 0);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 1u);
  EXPECT_EQ((*events)[0].kind(), v1::EVENT_KIND_SUBMITTED);
  auto next = store_->GetMeta(SweepBook::kNextSweepKey);
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, std::optional<std::string>("2"));
  auto key = store_->GetMeta(SweepBook::IdempotencyKey("qa", "k1"));
  ASSERT_TRUE(key.ok());
  EXPECT_EQ(*key, std::optional<std::string>("sw-000001"));
}

TEST_F(SweepBookTest, ARetriedSubmissionFindsItsSweepAndStagesNothing) {
  ASSERT_NE(Submitted(Request("qa", "k1")), nullptr);
  Txn txn;
  auto retry = book_.Submit(txn, Request("qa", "k1"), User("qa"));
  ASSERT_TRUE(retry.ok()) << retry.status();
  ASSERT_TRUE(retry->existing.has_value());
  EXPECT_EQ(retry->existing->sweep_id(), "sw-000001");
  EXPECT_EQ(retry->staged, nullptr);
  EXPECT_TRUE(txn.writes.empty());
  EXPECT_TRUE(txn.undo.empty());
  EXPECT_EQ(book_.size(), 1);

  // The same key with another spec is refused, naming both.
  auto other = book_.Submit(txn, Request("qa", "k1", 7), User("qa"));
  EXPECT_TRUE(absl::IsAlreadyExists(other.status())) << other.status();
  EXPECT_NE(other.status().message().find("sw-000001"), std::string::npos);
  // Keys are per team: perf's k1 is a new sweep.
  Txn perf;
  auto fresh = book_.Submit(perf, Request("perf", "k1"), User("perf"));
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_NE(fresh->staged, nullptr);
}

TEST_F(SweepBookTest, ASubmissionNeedsTheTeamAndRoomInItsQuota) {
  Txn txn;
  auto foreign = book_.Submit(txn, Request("qa", ""), User("perf"));
  EXPECT_TRUE(absl::IsPermissionDenied(foreign.status())) << foreign.status();
  v1::TeamQuota quota;
  quota.set_team("qa");
  quota.set_max_active_sweeps(1);
  placement_.SetQuota(quota);
  ASSERT_NE(Submitted(Request("qa", "")), nullptr);
  auto over = book_.Submit(txn, Request("qa", ""), User("qa"));
  EXPECT_TRUE(absl::IsResourceExhausted(over.status())) << over.status();
  EXPECT_NE(over.status().message().find("quota is 1"), std::string::npos)
      << over.status();
  EXPECT_TRUE(txn.writes.empty()) << "a refused submission stages nothing";
  EXPECT_EQ(book_.size(), 1);
}

TEST_F(SweepBookTest, CancellingStagesTheEndAndHidesOtherTeamsSweeps) {
  SweepRuntime* s = Submitted(Request("qa", ""));
  ASSERT_NE(s, nullptr);
  v1::CancelSweepRequest request;
  request.set_sweep_id("sw-000001");
  request.set_reason("wrong workload");
  Txn txn;
  auto foreign = book_.Cancel(txn, request, User("perf"));
  // Word for word what an unknown sweep gets.
  EXPECT_EQ(foreign.status(), SweepNotFound("sw-000001"));
  request.set_sweep_id("sw-000404");
  auto unknown = book_.Cancel(txn, request, User("perf"));
  EXPECT_EQ(unknown.status(), SweepNotFound("sw-000404"));
  EXPECT_TRUE(txn.writes.empty());

  request.set_sweep_id("sw-000001");
  auto cancelled = book_.Cancel(txn, request, User("qa"));
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  EXPECT_EQ(cancelled->state(), v1::SWEEP_STATE_CANCELLED);
  EXPECT_EQ(cancelled->termination_detail(), "cancelled: wrong workload");
  EXPECT_EQ(s->rounds[0].state(), v1::ROUND_STATE_CANCELLED);
  // Undone: the sweep queued as before.
  Undo(txn);
  EXPECT_EQ(s->sweep.state(), v1::SWEEP_STATE_QUEUED);
  EXPECT_EQ(s->rounds[0].state(), v1::ROUND_STATE_QUEUED);
  ASSERT_TRUE(book_.Cancel(txn, request, User("qa")).ok());
  ASSERT_TRUE(CommitToStore(txn).ok());
  book_.Retire("sw-000001");  // as the Coordinator's commit does

  // Once ended, only the store knows it.
  auto again = book_.Cancel(txn, request, User("qa"));
  EXPECT_TRUE(absl::IsFailedPrecondition(again.status())) << again.status();
  EXPECT_NE(again.status().message().find("SWEEP_STATE_CANCELLED"),
            std::string::npos)
      << again.status();
}

TEST_F(SweepBookTest, RecoveryResumesWhatTheStoreHoldsAndEndsTheUnrunnable) {
  // Stored: a running sweep with a leased round, one whose operator is
  // gone, and one that ended.
  WriteSet writes;
  v1::Sweep running = Sweep("sw-000001", "qa", "sim_matmul");
  running.set_state(v1::SWEEP_STATE_RUNNING);
  v1::Sweep orphan = Sweep("sw-000002", "qa", "no_such_operator");
  orphan.set_state(v1::SWEEP_STATE_RUNNING);
  v1::Sweep ended = Sweep("sw-000003", "qa", "sim_matmul");
  ended.set_state(v1::SWEEP_STATE_SUCCEEDED);
  for (const v1::Sweep* sweep : {&running, &orphan, &ended}) {
    writes.PutSweep(*sweep);
    v1::Round r = Round(0, v1::ROUND_STATE_LEASED, 1'000);
    r.set_sweep_id(sweep->sweep_id());
    r.mutable_lease()->set_lease_id(sweep->sweep_id() + "/0/1");
    writes.PutRound(r);
  }
  writes.PutMeta(SweepBook::kNextSweepKey, "4");
  ASSERT_TRUE(store_->Commit(writes).ok());

  const absl::Time grace = clock_.Now() + absl::Seconds(30);
  Txn txn;
  ASSERT_TRUE(book_.Recover(txn, grace).ok());
  EXPECT_EQ(book_.NextId(), "sw-000004");
  SweepRuntime* s = book_.Find("sw-000001");
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(s->rounds.size(), 1u);
  EXPECT_EQ(s->rounds[0].state(), v1::ROUND_STATE_LEASED);
  EXPECT_EQ(s->rounds[0].lease().expires_unix_ms(), absl::ToUnixMillis(grace));
  EXPECT_TRUE(s->leased.contains(0));
  EXPECT_EQ(book_.Find("sw-000003"), nullptr) << "an ended sweep stays ended";
  // The orphan is ended in the caller's transaction, the normal way.
  SweepRuntime* f = book_.Find("sw-000002");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->sweep.state(), v1::SWEEP_STATE_FAILED);
  EXPECT_NE(f->sweep.termination_detail().find("cannot resume"),
            std::string::npos)
      << f->sweep.termination_detail();
  EXPECT_EQ(f->rounds[0].state(), v1::ROUND_STATE_CANCELLED);
  ASSERT_TRUE(CommitToStore(txn).ok());
  auto stored = store_->GetSweep("sw-000002");
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->state(), v1::SWEEP_STATE_FAILED);
}

}  // namespace
}  // namespace tunefarm
