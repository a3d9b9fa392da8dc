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
#include "storage/store.h"
#include "tests/storage/small_disk.h"

namespace tunefarm {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kReserve = 8 << 20;

constexpr char kOperator[] = R"(
name: toy
parameters:
  - {name: a, values: [1, 2, 3, 4, 5, 6, 7, 8], default: 1}
  - {name: b, values: [1, 2, 3, 4, 5, 6, 7, 8], default: 1}
workloads:
  - {name: small, dtype: fp16, dims: {m: 64, n: 64, k: 64}}
tolerances: {rtol: 0.01, atol: 0.001}
backends:
  sim: {command: ["{bin}/toy"]}
)";

constexpr char kSpec[] = R"(
name: full-disk
team: qa
operator: toy
goal: {speedup: 100}
strategy: grid
budget: {max_rounds: 60, max_rounds_without_gain: 60}
min_gain: 0.02
boards: {kind: sim}
measurement: {warmup: 1, samples: 5}
)";

class DiskFullCoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (absl::Status st = disk_.Mount(64 << 20); !st.ok()) {
      GTEST_SKIP() << st.message();
    }
    auto op = ParseOperatorManifest(kOperator, "test/toy.yaml");
    ASSERT_TRUE(op.ok()) << op.status();
    catalog_.Add(*op);
    options_.lease_duration = absl::Seconds(60);
    options_.agent_timeout = absl::Seconds(60);
    Open();
  }

  void Open() {
    coord_.reset();
    store_.reset();
    RocksDbStoreOptions store_options;
    store_options.min_free_bytes = kReserve;
    auto store = OpenRocksDbStore(disk_.dir() + "/db", store_options);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    coord_ = std::make_unique<Coordinator>(store_.get(), &catalog_, &clock_,
                                           options_, nullptr);
    absl::Status st = coord_->Recover();
    ASSERT_TRUE(st.ok()) << st;
  }

  v1::LeaseWorkRequest LeaseRequest(int board) {
    v1::LeaseWorkRequest request;
    request.set_agent_id("a1");
    request.set_board_id(absl::StrCat("a1/b", board));
    return request;
  }

  v1::ReportResultRequest Result(int board, const v1::WorkItem& work) {
    v1::ReportResultRequest request;
    request.set_agent_id("a1");
    request.set_board_id(absl::StrCat("a1/b", board));
    request.set_lease_id(work.lease_id());
    request.set_epoch(work.epoch());
    request.set_sweep_id(work.sweep_id());
    request.set_round_id(work.round_id());
    request.mutable_result()->set_outcome(v1::OUTCOME_OK);
    request.mutable_result()->mutable_precision()->set_passed(true);
    v1::Measurement* m = request.mutable_result()->mutable_measurement();
    m->set_median_us(100 - work.round_id() * 0.1);
    m->set_samples(5);
    m->set_simulated(true);
    return request;
  }

  SmallDisk disk_;
  OperatorCatalog catalog_;
  FakeClock clock_;
  CoordinatorOptions options_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Coordinator> coord_;
};

TEST_F(DiskFullCoordinatorTest, RefusesWorkWhileFullAndLosesNoAcceptedResult) {
  constexpr int kBoards = 4;
  v1::SubmitSweepRequest submit;
  submit.set_spec_yaml(kSpec);
  auto sweep = coord_->SubmitSweep(submit, AnonymousAdmin());
  ASSERT_TRUE(sweep.ok()) << sweep.status();
  const std::string id = sweep->sweep().sweep_id();
  v1::RegisterAgentRequest reg;
  reg.set_agent_id("a1");
  for (int b = 0; b < kBoards; ++b) {
    v1::BoardInfo* info = reg.add_boards();
    info->set_board_id(absl::StrCat("a1/b", b));
    info->set_kind("sim");
  }
  ASSERT_TRUE(coord_->RegisterAgent(reg).ok());

  std::set<int64_t> accepted;  // rounds the core said it recorded
  auto report = [&](int board, const v1::WorkItem& work) {
    auto r = coord_->ReportResult(Result(board, work));
    if (r.ok() && r->accepted()) accepted.insert(work.round_id());
    return r;
  };
  auto base = coord_->LeaseWork(LeaseRequest(0));
  ASSERT_TRUE(base.ok() && base->granted()) << base.status();
  ASSERT_TRUE(report(0, base->work()).ok());
  std::vector<v1::WorkItem> held(kBoards);
  for (int b = 0; b < kBoards; ++b) {
    auto lease = coord_->LeaseWork(LeaseRequest(b));
    ASSERT_TRUE(lease.ok() && lease->granted()) << lease.status();
    held[b] = lease->work();
  }

  ASSERT_TRUE(disk_.FillLeaving(kReserve / 2).ok());
  // New work is refused, clearly.
  auto refused = coord_->LeaseWork(LeaseRequest(0));
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("data disk full ("));
  auto refused_submit = coord_->SubmitSweep(submit, AnonymousAdmin());
  ASSERT_FALSE(refused_submit.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(refused_submit.status()));
  EXPECT_THAT(refused_submit.status().message(), HasSubstr("data disk full ("));
  // Results are not acknowledged, and nothing changes in memory.
  const std::string before = coord_->DescribeState();
  for (int b = 0; b < kBoards; ++b) {
    auto r = report(b, held[b]);
    EXPECT_FALSE(r.ok()) << "result of round " << held[b].round_id()
                         << " acknowledged on a full disk";
    if (!r.ok()) {
      EXPECT_TRUE(absl::IsResourceExhausted(r.status())) << r.status();
    }
  }
  clock_.Advance(absl::Seconds(1));
  (void)coord_->Tick();  // ticks go on (and must not abort)
  EXPECT_EQ(coord_->DescribeState(), before);
  // Reads go on.
  auto stored = store_->GetSweep(id);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->state(), v1::SWEEP_STATE_RUNNING);
  EXPECT_EQ(coord_->ListBoards({}).size(), static_cast<size_t>(kBoards));

  disk_.Unfill();
  // The agents' retries now land, and new work flows again by itself.
  for (int b = 0; b < kBoards; ++b) {
    auto r = report(b, held[b]);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->accepted());
    EXPECT_FALSE(r->duplicate());
  }
  auto again = coord_->LeaseWork(LeaseRequest(1));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->granted());

  Open();  // a restart reads only what is on disk
  EXPECT_EQ(accepted.size(), static_cast<size_t>(kBoards + 1));
  for (int64_t round_id : accepted) {
    auto round = store_->GetRound(id, round_id);
    ASSERT_TRUE(round.ok()) << round.status();
    EXPECT_EQ(round->state(), v1::ROUND_STATE_DONE)
        << "round " << round_id << " was acknowledged but is not stored";
  }
}

}  // namespace
}  // namespace tunefarm
