// BoardRegistry (coordinator/board_registry.h) on its own: which boards fit
// a selector, and the boards per state that /metrics shows.
#include "coordinator/board_registry.h"

#include <map>
#include <string>

#include "gtest/gtest.h"

namespace tunefarm {
namespace {

void Add(BoardRegistry& r, const std::string& id, const std::string& kind,
         const std::string& chip,
         const std::map<std::string, std::string>& labels,
         v1::BoardState state) {
  BoardRuntime& b = r.boards()[id];
  b.info.set_board_id(id);
  b.info.set_kind(kind);
  b.info.set_chip(chip);
  b.info.set_state(state);
  for (const auto& [key, value] : labels)
    (*b.info.mutable_labels())[key] = value;
}

TEST(BoardRegistryTest, ASelectorMatchesKindChipAndEveryLabel) {
  BoardRegistry r;
  Add(r, "a1/b0", "sim", "A", {{"pool", "x"}, {"rack", "1"}},
      v1::BOARD_STATE_IDLE);
  Add(r, "a1/b1", "sim", "B", {{"pool", "x"}}, v1::BOARD_STATE_BUSY);
  Add(r, "a2/b0", "cpu", "A", {}, v1::BOARD_STATE_IDLE);
  v1::BoardSelector any;
  EXPECT_EQ(r.List(any).size(), 3u);
  v1::BoardSelector sim;
  sim.set_kind("sim");
  EXPECT_EQ(r.List(sim).size(), 2u);
  v1::BoardSelector sim_a = sim;
  sim_a.set_chip("A");
  ASSERT_EQ(r.List(sim_a).size(), 1u);
  EXPECT_EQ(r.List(sim_a)[0].board_id(), "a1/b0");
  v1::BoardSelector pool_rack;
  (*pool_rack.mutable_labels())["pool"] = "x";
  (*pool_rack.mutable_labels())["rack"] = "1";
  ASSERT_EQ(r.List(pool_rack).size(), 1u);
  EXPECT_EQ(r.List(pool_rack)[0].board_id(), "a1/b0");
  (*pool_rack.mutable_labels())["rack"] = "2";
  EXPECT_TRUE(r.List(pool_rack).empty());
}

TEST(BoardRegistryTest, EveryStateIsCountedZeroIncluded) {
  BoardRegistry r;
  Add(r, "a1/b0", "sim", "A", {}, v1::BOARD_STATE_IDLE);
  Add(r, "a1/b1", "sim", "A", {}, v1::BOARD_STATE_IDLE);
  Add(r, "a1/b2", "sim", "A", {}, v1::BOARD_STATE_QUARANTINED);
  const std::map<std::string, int> counts = r.CountByState();
  EXPECT_EQ(counts, (std::map<std::string, int>{{"busy", 0},
                                                {"draining", 0},
                                                {"idle", 2},
                                                {"lost", 0},
                                                {"quarantined", 1}}));
  EXPECT_EQ(r.Infos().size(), 3u);
  EXPECT_EQ(BoardRegistry::StateName(v1::BOARD_STATE_UNSPECIFIED), "unknown");
}

}  // namespace
}  // namespace tunefarm
