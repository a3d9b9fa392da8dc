// storage/lineage.h: ancestors, children, kept path, and the broken-lineage
// errors (cycle, missing parent, unknown round, duplicate ids).
#include "storage/lineage.h"

#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tunefarm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

v1::Round R(int64_t id, int64_t parent) {
  v1::Round r;
  r.set_sweep_id("s");
  r.set_round_id(id);
  r.set_parent_round(parent);
  return r;
}

// 0 (baseline) ─┬─ 1 ─┬─ 3 ── 5
//               │     └─ 4
//               └─ 2
std::vector<v1::Round> Tree() {
  // Deliberately out of order: callers need not sort.
  return {R(4, 1), R(0, -1), R(5, 3), R(2, 0), R(1, 0), R(3, 1)};
}

TEST(LineageTest, AncestorsParentFirstUpToBaseline) {
  auto a = AncestorsOf(Tree(), 5);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(*a, ElementsAre(3, 1, 0));
  auto b = AncestorsOf(Tree(), 2);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_THAT(*b, ElementsAre(0));
  auto base = AncestorsOf(Tree(), 0);
  ASSERT_TRUE(base.ok()) << base.status();
  EXPECT_THAT(*base, IsEmpty());
}

TEST(LineageTest, ChildrenAscending) {
  EXPECT_THAT(ChildrenOf(Tree(), 0), ElementsAre(1, 2));
  EXPECT_THAT(ChildrenOf(Tree(), 1), ElementsAre(3, 4));
  EXPECT_THAT(ChildrenOf(Tree(), 5), IsEmpty());
  EXPECT_THAT(ChildrenOf(Tree(), 42), IsEmpty());
}

TEST(LineageTest, KeptPathBaselineFirst) {
  auto p = KeptPathTo(Tree(), 5);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_THAT(*p, ElementsAre(0, 1, 3, 5));
  auto base = KeptPathTo(Tree(), 0);
  ASSERT_TRUE(base.ok()) << base.status();
  EXPECT_THAT(*base, ElementsAre(0));
  auto none = KeptPathTo(Tree(), -1);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_THAT(*none, IsEmpty());
  auto none_empty = KeptPathTo({}, -1);
  ASSERT_TRUE(none_empty.ok());
  EXPECT_THAT(*none_empty, IsEmpty());
}

TEST(LineageTest, CycleIsDataLoss) {
  // 0 is the baseline; 1 -> 3 -> 2 -> 1 loops, 4 hangs off the loop.
  std::vector<v1::Round> rounds = {R(0, -1), R(1, 3), R(2, 1), R(3, 2),
                                   R(4, 2)};
  auto a = AncestorsOf(rounds, 4);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(a.status().message(), HasSubstr("cycle"));
  EXPECT_THAT(a.status().message(), HasSubstr("4 -> 2 -> 1 -> 3 -> 2"));
  auto p = KeptPathTo(rounds, 3);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kDataLoss);
}

TEST(LineageTest, SelfParentIsACycle) {
  std::vector<v1::Round> rounds = {R(0, -1), R(1, 1)};
  auto a = AncestorsOf(rounds, 1);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(ChildrenOf(rounds, 1), IsEmpty());
}

TEST(LineageTest, MissingParentIsFailedPrecondition) {
  std::vector<v1::Round> rounds = {R(0, -1), R(2, 7), R(3, 2)};
  auto a = AncestorsOf(rounds, 3);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(a.status().message(), HasSubstr("round 2 names parent round 7"));
  // A parent id below -1 is just as missing.
  auto b = AncestorsOf({R(0, -5)}, 0);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(LineageTest, UnknownRoundIsNotFound) {
  auto a = AncestorsOf(Tree(), 99);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(a.status().message(), HasSubstr("99"));
  auto p = KeptPathTo(Tree(), 99);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound);
}

TEST(LineageTest, DuplicateRoundIdIsInvalidArgument) {
  auto a = AncestorsOf({R(0, -1), R(1, 0), R(1, 0)}, 1);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(a.status().message(), HasSubstr("round 1"));
}

}  // namespace
}  // namespace tunefarm
