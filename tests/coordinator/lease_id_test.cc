// Lease ids (coordinator/lease_id.h): the two kinds round-trip through their
// stored text form, and neither is taken for the other.
#include "coordinator/lease_id.h"

#include "gtest/gtest.h"

namespace tunefarm {
namespace {

TEST(LeaseIdTest, ASweepLeaseRoundTripsThroughItsStoredForm) {
  const LeaseId id{"sw-000001", 7, 2};
  EXPECT_EQ(id.ToString(), "sw-000001/7/2");
  std::optional<LeaseId> parsed = LeaseId::Parse("sw-000001/7/2");
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(*parsed, id);
  EXPECT_FALSE(HealthLeaseId::IsHealthLease(id.ToString()));
}

TEST(LeaseIdTest, MalformedSweepLeasesDoNotParse) {
  for (const char* text : {"", "sw-000001", "sw-000001/7", "sw-000001/7/2/1",
                           "sw-000001/x/2", "sw-000001/7/", "health:a1/b0:3"}) {
    EXPECT_FALSE(LeaseId::Parse(text).has_value()) << text;
  }
}

TEST(LeaseIdTest, AHealthLeaseRoundTripsAndIsNeverASweepLease) {
  const HealthLeaseId id{"a1/b0", 3};
  EXPECT_EQ(id.ToString(), "health:a1/b0:3");
  EXPECT_TRUE(HealthLeaseId::IsHealthLease(id.ToString()));
  std::optional<HealthLeaseId> parsed = HealthLeaseId::Parse(id.ToString());
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(*parsed, id);
  EXPECT_FALSE(LeaseId::Parse(id.ToString()).has_value());
  // A board id with a colon keeps it: the check number follows the last.
  parsed = HealthLeaseId::Parse("health:node:2/b0:12");
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->board_id, "node:2/b0");
  EXPECT_EQ(parsed->check, 12);
}

TEST(LeaseIdTest, MalformedHealthLeasesDoNotParse) {
  for (const char* text :
       {"", "health:", "health:a1/b0", "health::3", "health:a1/b0:x",
        "sw-000001/7/2", "Health:a1/b0:3"}) {
    EXPECT_FALSE(HealthLeaseId::Parse(text).has_value()) << text;
  }
}

}  // namespace
}  // namespace tunefarm
