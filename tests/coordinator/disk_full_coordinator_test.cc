// The coordinator core over a real RocksDB store on a data disk that runs
// full (a small tmpfs, SmallDisk). While it is full the core refuses new
// leases and submissions with RESOURCE_EXHAUSTED "data disk full (…)",
// answers reads, and acknowledges no result; when the space returns it
// takes work again by itself, and after a restart every result it said it
// accepted is in the store. Skipped, with the reason, where no tmpfs can be
// mounted.
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "coordinator/coordinator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/catalog.h"
#include "storage/rocksdb_store.h"
#include "storage/store.h"
#include "tests/coordinator/coordinator_harness.h"
#include "tests/storage/small_disk.h"

namespace tunefarm {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kReserve = 8 << 20;

class DiskFullCoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (absl::Status st = disk_.Mount(64 << 20); !st.ok()) {
      GTEST_SKIP() << st.message();
    }
    ASSERT_TRUE(AddOperator(&catalog_, ToyOperatorYaml(8, 8)).ok());
    options_.lease_duration = absl::Seconds(60);
    options_.agent_timeout = absl::Seconds(60);
    core_.UseDir(disk_.dir());
    RocksDbStoreOptions store_options;
    store_options.min_free_bytes = kReserve;
    core_.set_store_options(store_options);
    Open();
  }

  // A new store and core from what is on disk, as a restart would.
  void Open() {
    absl::Status st = core_.Open(&catalog_, &clock_, options_);
    ASSERT_TRUE(st.ok()) << st;
  }

  Coordinator* coord() { return core_.coordinator(); }
  Store* store() { return core_.store(); }

  static std::string Board(int b) { return absl::StrCat("a1/b", b); }
  static v1::LeaseWorkRequest LeaseRequest(int board) {
    return LeaseFor(Board(board));
  }
  static v1::ReportResultRequest Result(int board, const v1::WorkItem& work) {
    return ResultFor(Board(board), work, 100 - work.round_id() * 0.1);
  }

  SmallDisk disk_;  // outlives core_, whose store is on it
  OperatorCatalog catalog_;
  FakeClock clock_;
  CoordinatorOptions options_;
  CoordinatorOnDisk core_;
};

TEST_F(DiskFullCoordinatorTest, RefusesWorkWhileFullAndLosesNoAcceptedResult) {
  constexpr int kBoards = 4;
  v1::SubmitSweepRequest submit;
  submit.set_spec_yaml(ToySpecYaml("full-disk", "grid", 60));
  auto sweep = coord()->SubmitSweep(submit, AnonymousAdmin());
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  const std::string id = sweep->sweep().sweep_id();
  ASSERT_TRUE(coord()->RegisterAgent(SimAgent("a1", kBoards)).ok());

  std::set<int64_t> accepted;  // rounds the core said it recorded
  auto report = [&](int board, const v1::WorkItem& work) {
    auto r = coord()->ReportResult(Result(board, work));
    if (r.ok() && r->accepted()) accepted.insert(work.round_id());
    return r;
  };
  auto base = coord()->LeaseWork(LeaseRequest(0));
  ASSERT_TRUE(base.ok() && base->granted()) << base.status();
  ASSERT_TRUE(report(0, base->work()).ok());
  std::vector<v1::WorkItem> held(kBoards);
  for (int b = 0; b < kBoards; ++b) {
    auto lease = coord()->LeaseWork(LeaseRequest(b));
    ASSERT_TRUE(lease.ok() && lease->granted()) << lease.status();
    held[b] = lease->work();
  }

  ASSERT_TRUE(disk_.FillLeaving(kReserve / 2).ok());
  // New work is refused, clearly.
  auto refused = coord()->LeaseWork(LeaseRequest(0));
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("data disk full ("));
  auto refused_submit = coord()->SubmitSweep(submit, AnonymousAdmin());
  ASSERT_FALSE(refused_submit.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(refused_submit.status()));
  EXPECT_THAT(refused_submit.status().message(), HasSubstr("data disk full ("));
  // Results are not acknowledged, and nothing changes in memory.
  const std::string before = coord()->DescribeState();
  for (int b = 0; b < kBoards; ++b) {
    auto r = report(b, held[b]);
    EXPECT_FALSE(r.ok()) << "result of round " << held[b].round_id()
                         << " acknowledged on a full disk";
    if (!r.ok()) {
      EXPECT_TRUE(absl::IsResourceExhausted(r.status())) << r.status();
    }
  }
  clock_.Advance(absl::Seconds(1));
  (void)coord()->Tick();  // ticks go on (and must not abort)
  EXPECT_EQ(coord()->DescribeState(), before);
  // Reads go on.
  auto stored = store()->GetSweep(id);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->state(), v1::SWEEP_STATE_RUNNING);
  EXPECT_EQ(coord()->ListBoards({}).size(), static_cast<size_t>(kBoards));

  disk_.Unfill();
  // The agents' retries now land, and new work flows again by itself.
  for (int b = 0; b < kBoards; ++b) {
    auto r = report(b, held[b]);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->accepted());
    EXPECT_FALSE(r->duplicate());
  }
  auto again = coord()->LeaseWork(LeaseRequest(1));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->granted());

  Open();  // a restart reads only what is on disk
  EXPECT_EQ(accepted.size(), static_cast<size_t>(kBoards + 1));
  for (int64_t round_id : accepted) {
    auto round = store()->GetRound(id, round_id);
    ASSERT_TRUE(round.ok()) << round.status();
    EXPECT_EQ(round->state(), v1::ROUND_STATE_DONE)
        << "round " << round_id << " was acknowledged but is not stored";
  }
}

}  // namespace
}  // namespace tunefarm
