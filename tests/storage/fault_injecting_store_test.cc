// FaultInjectingStore: each cue fails exactly the commits it names, a
// refused commit writes nothing underneath, Heal restores normal commits,
// and a delay slows commits without failing them.
#include "storage/fault_injecting_store.h"

#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "storage/memory_store.h"

namespace tunefarm {
namespace {

WriteSet PutMeta(const std::string& key) {
  WriteSet ws;
  ws.PutMeta(key, "v");
  return ws;
}

bool Has(Store& store, const std::string& key) {
  auto v = store.GetMeta(key);
  return v.ok() && v->has_value();
}

TEST(FaultInjectingStoreTest, FailsOnlyTheNthCommitAndWritesNothing) {
  std::unique_ptr<Store> base = NewMemoryStore();
  FaultInjectingStore store(base.get());
  store.FailNthCommit(2);
  EXPECT_TRUE(store.Commit(PutMeta("a")).ok());
  absl::Status second = store.Commit(PutMeta("b"));
  EXPECT_TRUE(absl::IsUnavailable(second)) << second;
  EXPECT_TRUE(store.Commit(PutMeta("c")).ok());
  EXPECT_TRUE(Has(*base, "a"));
  EXPECT_FALSE(Has(*base, "b"));
  EXPECT_TRUE(Has(store, "c"));  // reads pass through
  EXPECT_EQ(store.commits(), 2);
  EXPECT_EQ(store.failed_commits(), 1);
}

TEST(FaultInjectingStoreTest, FailsEveryCommitAfterAPointUntilHealed) {
  std::unique_ptr<Store> base = NewMemoryStore();
  FaultInjectingStore store(base.get());
  store.FailCommitsAfter(1, absl::ResourceExhaustedError("data disk full"));
  EXPECT_TRUE(store.Commit(PutMeta("a")).ok());
  for (const char* key : {"b", "c", "d"}) {
    absl::Status st = store.Commit(PutMeta(key));
    EXPECT_TRUE(absl::IsResourceExhausted(st)) << key << ": " << st;
    EXPECT_FALSE(Has(*base, key));
  }
  store.Heal();
  EXPECT_TRUE(store.Commit(PutMeta("e")).ok());
  EXPECT_TRUE(Has(*base, "e"));
  EXPECT_EQ(store.failed_commits(), 3);
}

TEST(FaultInjectingStoreTest, WritableAnswersTheCueAndHealClearsIt) {
  std::unique_ptr<Store> base = NewMemoryStore();
  FaultInjectingStore store(base.get());
  EXPECT_TRUE(store.Writable().ok());
  store.SetWritable(absl::ResourceExhaustedError("data disk full (test)"));
  EXPECT_TRUE(absl::IsResourceExhausted(store.Writable()));
  store.Heal();
  EXPECT_TRUE(store.Writable().ok());
}

TEST(FaultInjectingStoreTest, DelaySlowsCommitsWithoutFailingThem) {
  std::unique_ptr<Store> base = NewMemoryStore();
  FaultInjectingStore store(base.get());
  store.SetCommitDelay(absl::Milliseconds(30));
  const absl::Time start = absl::Now();
  EXPECT_TRUE(store.Commit(PutMeta("a")).ok());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(30));
  EXPECT_TRUE(Has(*base, "a"));
}

TEST(FaultInjectingStoreTest, DelaySlowsFailingCommitsToo) {
  std::unique_ptr<Store> base = NewMemoryStore();
  FaultInjectingStore store(base.get());
  store.SetCommitDelay(absl::Milliseconds(30));
  store.FailNthCommit(1);
  const absl::Time start = absl::Now();
  EXPECT_FALSE(store.Commit(PutMeta("a")).ok());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(30));
  EXPECT_FALSE(Has(*base, "a"));
}

}  // namespace
}  // namespace tunefarm
