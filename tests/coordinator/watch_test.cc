// WatchSweep is a callback-API stream: a watcher that has caught up parks
// without a thread. Many watchers over loopback gRPC leave the server's
// thread count flat, each gets every event once (replay first, then live
// ones, up to FINISHED), and a watcher that goes away is let go.
#include <dirent.h>

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "gtest/gtest.h"
#include "ops/catalog.h"
#include "tests/coordinator/coordinator_harness.h"

namespace tunefarm {
namespace {

constexpr int kWatchers = 64;

int ThreadCount() {
  int n = 0;
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

// One watch stream on the client's completion queue.
struct Watcher {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientAsyncReader<v1::SweepEvent>> reader;
  v1::SweepEvent event;
  std::vector<v1::SweepEvent> got;
  grpc::Status status;
  bool done = false;
};

class WatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto catalog = OperatorCatalog::LoadFromDirs({TUNEFARM_SOURCE_DIR "/ops"});
    ASSERT_TRUE(catalog.ok()) << catalog.status();
    catalog_ = std::make_unique<OperatorCatalog>(std::move(*catalog));
    ASSERT_TRUE(disk_.MakeDir("watch_test").ok());
    ASSERT_TRUE(disk_.Open(catalog_.get(), &SystemClock(), {}).ok());
    ASSERT_TRUE(
        services_.Start(disk_.coordinator(), disk_.store(), nullptr).ok());
    v1::SubmitSweepRequest req;
    req.set_spec_yaml(
        "name: watch-test\nteam: qa\noperator: sim_matmul\n"
        "workload: square_2k\ngoal: {speedup: 1000}\n"
        "budget: {max_rounds: 3}\n");
    v1::SubmitSweepResponse resp;
    grpc::Status st = services_.farm()->SubmitSweep(
        LoopbackServices::As("").get(), req, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
    sweep_id_ = resp.sweep().sweep_id();
  }

  // Starts a stream and its first read; the tag is the watcher.
  void Open(Watcher& w) {
    v1::WatchSweepRequest req;
    req.set_sweep_id(sweep_id_);
    w.reader = services_.farm()->PrepareAsyncWatchSweep(&w.context, req, &cq_);
    w.reader->StartCall(&w);
  }

  // Runs the completion queue until `until` holds or 30 s pass. A read
  // that completes keeps its event and starts the next; a failed one asks
  // for the stream's status.
  bool Drive(const std::function<bool()>& until) {
    const absl::Time end = absl::Now() + absl::Seconds(30);
    while (!until()) {
      void* tag = nullptr;
      bool ok = false;
      const auto deadline = absl::ToChronoTime(end);
      if (cq_.AsyncNext(&tag, &ok, deadline) !=
          grpc::CompletionQueue::GOT_EVENT) {
        return until();
      }
      auto* w = static_cast<Watcher*>(static_cast<void*>(tag));
      if (w == nullptr) continue;
      if (finishing_.count(w) > 0) {
        finishing_.erase(w);
        w->done = true;
        continue;
      }
      if (started_.insert(w).second) {  // StartCall done
        w->reader->Read(&w->event, w);
        continue;
      }
      if (ok) {
        w->got.push_back(w->event);
        w->reader->Read(&w->event, w);
      } else {
        finishing_.insert(w);
        w->reader->Finish(&w->status, w);
      }
    }
    return true;
  }

  void TearDown() override {
    cq_.Shutdown();
    void* tag;
    bool ok;
    while (cq_.Next(&tag, &ok)) {
    }
  }

  std::unique_ptr<OperatorCatalog> catalog_;
  CoordinatorOnDisk disk_;
  LoopbackServices services_;
  std::string sweep_id_;
  grpc::CompletionQueue cq_;
  std::set<Watcher*> started_, finishing_;
};

TEST_F(WatchTest, ManyWatchersParkWithoutThreadsAndGetEveryEventOnce) {
  std::vector<std::unique_ptr<Watcher>> watchers;
  for (int i = 0; i < kWatchers; ++i) {
    watchers.push_back(std::make_unique<Watcher>());
  }
  // One stream first, so that gRPC's own threads are up before counting.
  Open(*watchers[0]);
  ASSERT_TRUE(Drive([&] { return !watchers[0]->got.empty(); }));
  const int threads_before = ThreadCount();
  for (int i = 1; i < kWatchers; ++i) Open(*watchers[i]);
  // Every stream replayed what is stored and parked, waiting for more.
  ASSERT_TRUE(Drive([&] {
    for (auto& w : watchers) {
      if (w->got.empty()) return false;
    }
    return true;
  }));
  // Each stream has written its first event: a synchronous handler would
  // hold a thread by now, blocked until the next one.
  const int threads_parked = ThreadCount();
  EXPECT_LE(threads_parked - threads_before, 8)
      << kWatchers << " parked watch streams took "
      << threads_parked - threads_before << " threads";

  // A live event (cancel: CANCELLED and FINISHED) reaches every watcher,
  // which then ends with OK.
  v1::CancelSweepRequest cancel;
  cancel.set_sweep_id(sweep_id_);
  v1::Sweep cancelled;
  grpc::Status st = services_.farm()->CancelSweep(
      LoopbackServices::As("").get(), cancel, &cancelled);
  ASSERT_TRUE(st.ok()) << st.error_message();
  ASSERT_TRUE(Drive([&] {
    for (auto& w : watchers) {
      if (!w->done) return false;
    }
    return true;
  }));
  for (auto& w : watchers) {
    EXPECT_TRUE(w->status.ok()) << w->status.error_message();
    ASSERT_FALSE(w->got.empty());
    EXPECT_EQ(w->got.back().kind(), v1::EVENT_KIND_FINISHED);
    for (size_t i = 0; i < w->got.size(); ++i) {
      EXPECT_EQ(w->got[i].seq(), static_cast<int64_t>(i) + 1)
          << "an event missed or repeated";
    }
    EXPECT_EQ(w->got.size(), watchers[0]->got.size());
  }
}

TEST_F(WatchTest, AWatcherThatGoesAwayIsLetGo) {
  Watcher w;
  Open(w);
  ASSERT_TRUE(Drive([&] { return !w.got.empty(); }));
  w.context.TryCancel();
  ASSERT_TRUE(Drive([&] { return w.done; }));
  EXPECT_EQ(w.status.error_code(), grpc::StatusCode::CANCELLED);
  // The service still serves new watchers.
  Watcher again;
  Open(again);
  ASSERT_TRUE(Drive([&] { return !again.got.empty(); }));
  EXPECT_EQ(again.got.front().seq(), 1);
  again.context.TryCancel();
  ASSERT_TRUE(Drive([&] { return again.done; }));
}

TEST_F(WatchTest, AnUnknownSweepIsNotFound) {
  Watcher w;
  v1::WatchSweepRequest req;
  req.set_sweep_id("sw-nope");
  w.reader = services_.farm()->PrepareAsyncWatchSweep(&w.context, req, &cq_);
  w.reader->StartCall(&w);
  ASSERT_TRUE(Drive([&] { return w.done; }));
  EXPECT_EQ(w.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(w.got.empty());
}

}  // namespace
}  // namespace tunefarm
