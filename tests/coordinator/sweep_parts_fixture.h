// The fixture of the coordinator's parts on their own (the sweep book, the
// board registry, the lease table, the decider): one sim_matmul sweep of
// the shipped operators with rounds 0 (the baseline), 1 and 2 queued, two
// idle boards of agent a1, and the parts wired as the Coordinator wires
// them, over a fake clock and a memory store.
#ifndef TUNEFARM_TESTS_COORDINATOR_SWEEP_PARTS_FIXTURE_H_
#define TUNEFARM_TESTS_COORDINATOR_SWEEP_PARTS_FIXTURE_H_

#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/board_registry.h"
#include "coordinator/decider.h"
#include "coordinator/health_checker.h"
#include "coordinator/lease_table.h"
#include "coordinator/placement.h"
#include "coordinator/spec.h"
#include "coordinator/staging.h"
#include "coordinator/sweep_book.h"
#include "gtest/gtest.h"
#include "ops/catalog.h"
#include "storage/memory_store.h"
#include "storage/store.h"

namespace tunefarm {

constexpr absl::Duration kLease = absl::Seconds(30);

class SweepPartsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto catalog = OperatorCatalog::LoadFromDirs({TUNEFARM_SOURCE_DIR "/ops"});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = std::move(*catalog);
    auto spec = ParseSweepSpec(
        "name: leases\nteam: qa\noperator: sim_matmul\n"
        "workload: square_2k\ngoal: {speedup: 100}\nstrategy: random\n"
        "budget: {max_rounds: 2, max_rounds_without_gain: 5}\n"
        "min_gain: 0.02\nboards: {kind: sim}\n");
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
                 ahead, /*held=*/{}, &work);
    return work;
  }

  // What the Coordinator's commit does once the store took `txn`: each
  // touched sweep's record written with the rest, then the after-commit
  // effects; the undo is dropped.
  absl::Status CommitToStore(Txn& txn) {
    for (SweepRuntime* s : txn.touched) txn.writes.PutSweep(s->sweep);
    absl::Status st = store_->Commit(txn.writes);
    if (!st.ok()) return st;
    for (auto& effect : txn.after_commit) effect();
    txn = Txn();
    return absl::OkStatus();
  }
  // What the Coordinator does when the commit failed.
  static void Undo(Txn& txn) {
    for (auto it = txn.undo.rbegin(); it != txn.undo.rend(); ++it) (*it)();
    txn = Txn();
  }

  OperatorCatalog catalog_;
  FakeClock clock_;
  std::unique_ptr<Store> store_ = NewMemoryStore();
  // The parts point at each other as in the Coordinator: the book and the
  // registry use the later ones only in their calls.
  SweepBook book_{&catalog_, SweepBook::Parts{store_.get(), &clock_, &staging_,
                                              &placement_, &decider_}};
  BoardRegistry registry_{BoardRegistry::Parts{
      &book_, &staging_, &table_, &placement_, &health_, &clock_, nullptr}};
  Placement placement_{v1::TeamQuota(), {}, {}};
  HealthChecker health_{&catalog_, HealthCheckerOptions{}};
  Staging staging_{&book_, &registry_, &placement_, &clock_};
  LeaseTable table_{&book_, &registry_, &staging_, &clock_, kLease, nullptr};
  Decider decider_{&staging_, &table_, &clock_, "/reports"};
  SweepRuntime* s_ = nullptr;
};

}  // namespace tunefarm

#endif  // TUNEFARM_TESTS_COORDINATOR_SWEEP_PARTS_FIXTURE_H_
