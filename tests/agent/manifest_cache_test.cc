// OperatorManifestCache (agent/manifest_cache.h): what an agent names as
// held, how it completes (or only admits) a work item that came without its
// manifest, and its bound.
#include "agent/manifest_cache.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tunefarm {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

v1::WorkItem Whole(const std::string& op, const std::string& digest) {
  v1::WorkItem w;
  w.set_lease_id(absl::StrCat("sw-1/", op, "/1"));
  w.mutable_operator_()->set_name(op);
  w.set_operator_digest(digest);
  return w;
}

v1::WorkItem Bare(const std::string& digest) {
  v1::WorkItem w;
  w.set_lease_id("sw-1/7/1");
  w.set_operator_digest(digest);
  return w;
}

std::vector<std::string> Held(const OperatorManifestCache& cache) {
  v1::LeaseWorkRequest req;
  req.add_held_operator_digests("stale");  // replaced, not appended to
  cache.AddHeld(&req);
  return {req.held_operator_digests().begin(),
          req.held_operator_digests().end()};
}

TEST(OperatorManifestCacheTest, KeepsAManifestAndCompletesWorkWithoutIt) {
  OperatorManifestCache cache;
  EXPECT_THAT(Held(cache), IsEmpty());
  v1::WorkItem whole = Whole("gemm", "d1");
  ASSERT_TRUE(cache.Complete(&whole).ok());
  EXPECT_EQ(whole.operator_().name(), "gemm");  // untouched
  EXPECT_THAT(Held(cache), ElementsAre("d1"));

  v1::WorkItem bare = Bare("d1");
  ASSERT_TRUE(cache.Complete(&bare).ok());
  EXPECT_EQ(bare.operator_().name(), "gemm");
  EXPECT_EQ(bare.lease_id(), "sw-1/7/1");
}

TEST(OperatorManifestCacheTest, AManifestItDoesNotHoldIsAnErrorNamingIt) {
  OperatorManifestCache cache;
  v1::WorkItem bare = Bare("d9");
  const absl::Status st = cache.Complete(&bare);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(st.message(), "sw-1/7/1")) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "d9")) << st;
  EXPECT_FALSE(bare.has_operator_());
}

TEST(OperatorManifestCacheTest, AdmitKeepsAndChecksButLeavesWorkBare) {
  OperatorManifestCache cache;
  v1::WorkItem whole = Whole("gemm", "d1");
  ASSERT_TRUE(cache.Admit(&whole).ok());
  EXPECT_EQ(whole.operator_().name(), "gemm");
  EXPECT_THAT(Held(cache), ElementsAre("d1"));

  v1::WorkItem bare = Bare("d1");
  ASSERT_TRUE(cache.Admit(&bare).ok());
  EXPECT_FALSE(bare.has_operator_());  // held, not copied in

  v1::WorkItem unknown = Bare("d9");
  const absl::Status st = cache.Admit(&unknown);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(st.message(), "d9")) << st;
}

TEST(OperatorManifestCacheTest, WorkWithoutADigestIsLeftAsItCame) {
  OperatorManifestCache cache;
  v1::WorkItem check = Whole("golden", "");  // a health check's work
  ASSERT_TRUE(cache.Complete(&check).ok());
  EXPECT_EQ(cache.size(), 0);
  v1::WorkItem none;
  ASSERT_TRUE(cache.Complete(&none).ok());
  EXPECT_FALSE(none.has_operator_());
}

TEST(OperatorManifestCacheTest, PastItsBoundNewManifestsKeepComing) {
  OperatorManifestCache cache;
  for (int i = 0; i < OperatorManifestCache::kMaxManifests + 5; ++i) {
    v1::WorkItem w = Whole(absl::StrCat("op", i), absl::StrCat("d", i));
    ASSERT_TRUE(cache.Complete(&w).ok());
  }
  EXPECT_EQ(cache.size(), OperatorManifestCache::kMaxManifests);
  EXPECT_EQ(Held(cache).size(),
            static_cast<size_t>(OperatorManifestCache::kMaxManifests));
  // None is evicted: the first is still there; the last was never kept, so
  // it is never named and keeps coming whole.
  v1::WorkItem first = Bare("d0");
  EXPECT_TRUE(cache.Complete(&first).ok());
  const std::string last =
      absl::StrCat("d", OperatorManifestCache::kMaxManifests + 4);
  EXPECT_THAT(Held(cache), ::testing::Not(::testing::Contains(last)));
}

}  // namespace
}  // namespace tunefarm
