// The RocksDB store on a data disk that runs full (a small tmpfs): commits
// and Writable() say "data disk full" with RESOURCE_EXHAUSTED and write
// nothing, reads go on, and once the space is back commits succeed again
// without reopening. Opening on a full disk is refused the same way.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/rocksdb_store.h"
#include "storage/store.h"
#include "tests/storage/small_disk.h"

namespace tunefarm {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kDisk = 48 << 20;
constexpr uint64_t kReserve = 8 << 20;

WriteSet Meta(const std::string& key) {
  WriteSet ws;
  ws.PutMeta(key, std::string(1000, 'v'));
  return ws;
}

TEST(DiskFullTest, RefusesCommitsWhileFullAndRecoversWhenSpaceReturns) {
  SmallDisk disk;
  if (absl::Status st = disk.Mount(kDisk); !st.ok()) {
    GTEST_SKIP() << st.message();
  }
  RocksDbStoreOptions options;
  options.min_free_bytes = kReserve;
  auto store = OpenRocksDbStore(disk.dir() + "/db", options);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->Commit(Meta("before")).ok());
  EXPECT_TRUE((*store)->Writable().ok());

  ASSERT_TRUE(disk.FillLeaving(kReserve / 2).ok());
  absl::Status writable = (*store)->Writable();
  EXPECT_TRUE(absl::IsResourceExhausted(writable)) << writable;
  EXPECT_THAT(writable.message(), HasSubstr("data disk full ("));
  absl::Status full = (*store)->Commit(Meta("during"));
  EXPECT_TRUE(absl::IsResourceExhausted(full)) << full;
  EXPECT_THAT(full.message(), HasSubstr("data disk full ("));
  // Reads go on.
  auto before = (*store)->GetMeta("before");
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_TRUE(before->has_value());

  disk.Unfill();
  EXPECT_TRUE((*store)->Writable().ok());
  ASSERT_TRUE((*store)->Commit(Meta("after")).ok());
  auto during = (*store)->GetMeta("during");
  ASSERT_TRUE(during.ok());
  EXPECT_FALSE(during->has_value()) << "a refused commit wrote something";
  auto after = (*store)->GetMeta("after");
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->has_value());
}

TEST(DiskFullTest, OpeningOnAFullDiskIsRefusedClearly) {
  SmallDisk disk;
  if (absl::Status st = disk.Mount(kDisk); !st.ok()) {
    GTEST_SKIP() << st.message();
  }
  ASSERT_TRUE(disk.FillLeaving(kReserve / 2).ok());
  RocksDbStoreOptions options;
  options.min_free_bytes = kReserve;
  auto store = OpenRocksDbStore(disk.dir() + "/db", options);
  ASSERT_FALSE(store.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(store.status())) << store.status();
  EXPECT_THAT(store.status().message(), HasSubstr("data disk full ("));
  disk.Unfill();
  EXPECT_TRUE(OpenRocksDbStore(disk.dir() + "/db", options).ok());
}

}  // namespace
}  // namespace tunefarm

namespace tunefarm {
namespace {

// The store's own writes fill the disk: the reserve stops them with "data
// disk full" before RocksDB meets a full disk (RocksDB 7.8 aborts on a
// failed log write: `sync_without_flush_called_`), and commits go on once
// space returns. Runs in a child process (a death-test fork), so an abort
// is reported as a failure instead of killing the test binary.
void FillThroughTheStoreThenRecover(const std::string& dir,
                                    const std::string& filler) {
  RocksDbStoreOptions options;
  options.min_free_bytes = kReserve;
  auto store = OpenRocksDbStore(dir + "/db", options);
  if (!store.ok()) {
    std::fprintf(stderr, "open: %s\n", store.status().ToString().c_str());
    std::exit(10);
  }
  int refused = 0;
  for (int i = 0; i < 10000 && refused == 0; ++i) {
    WriteSet ws;
    // Random-looking bytes: compression must not make the fill easy.
    std::string value(64 << 10, '\0');
    for (size_t j = 0; j < value.size(); ++j) {
      value[j] = static_cast<char>((j * 2654435761u + i * 40503u) >> 13);
    }
    ws.PutMeta(absl::StrCat("k", i), value);
    absl::Status st = (*store)->Commit(ws);
    if (!st.ok()) {
      if (!absl::IsResourceExhausted(st) ||
          !absl::StrContains(st.message(), "data disk full (")) {
        std::fprintf(stderr, "unexpected: %s\n", st.ToString().c_str());
        std::exit(11);
      }
      ++refused;
    }
  }
  if (refused == 0) std::exit(12);
  unlink(filler.c_str());  // the space returns
  WriteSet ws;
  ws.PutMeta("after", "v");
  absl::Status st = (*store)->Commit(ws);
  if (!st.ok()) {
    std::fprintf(stderr, "no recovery: %s\n", st.ToString().c_str());
    std::exit(13);
  }
  std::exit(0);
}

TEST(DiskFullTest, TheReserveStopsTheStoresOwnWritesBeforeTheDiskIsFull) {
  SmallDisk disk;
  if (absl::Status st = disk.Mount(kDisk); !st.ok()) {
    GTEST_SKIP() << st.message();
  }
  ASSERT_TRUE(disk.FillLeaving(kReserve + (12 << 20)).ok());
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      FillThroughTheStoreThenRecover(disk.dir(), disk.dir() + "/filler-0"),
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace tunefarm
