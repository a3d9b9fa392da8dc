// Chaos as a standing test (issue 16), scaled down for CI: a farm of sim
// boards (LocalFarm: real coordinator, analyzer and agent processes on
// loopback, CurveZMQ and tokens on) runs a sweep while agents, the analyzer
// and the coordinator are each SIGKILLed several times at random points and
// started again. Seeded: TUNEFARM_CHAOS_SEED replays a run (the seed is
// printed); TUNEFARM_CHAOS_AGENT_KILLS, _COORDINATOR_KILLS, _ANALYZER_KILLS
// and _ROUNDS scale it up (scripts/chaos.sh is the long version).
//
// At the end: the sweep finished, every round ran exactly once (one
// ROUND_FINISHED event per DONE round, none for the others), none is stuck
// (LEASED or QUEUED), every finished round with a profile bundle has exactly
// one diagnosis (one DIAGNOSIS event), and the kept path leads from the
// baseline to the best round through kept children.
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <random>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "tests/integration/farm_fixture.h"

namespace tunefarm {
namespace {

int64_t EnvInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  int64_t out = 0;
  return v != nullptr && absl::SimpleAtoi(v, &out) ? out : fallback;
}

class ChaosTest : public FarmFixture {
 protected:
  // Every event of the sweep, those after FINISHED included (diagnoses
  // trail it): WatchSweep again from the next seq until nothing more comes.
  std::vector<v1::SweepEvent> AllEvents(const std::string& id) {
    std::vector<v1::SweepEvent> out;
    int64_t next = 1;
    while (true) {
      v1::WatchSweepRequest req;
      req.set_sweep_id(id);
      req.set_from_seq(next);
      grpc::ClientContext ctx;
      Auth(&ctx);
      ctx.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(2));
      auto reader = stub_->WatchSweep(&ctx, req);
      const size_t before = out.size();
      v1::SweepEvent ev;
      while (reader->Read(&ev)) {
        next = ev.seq() + 1;
        out.push_back(ev);
      }
      (void)reader->Finish();
      if (out.size() == before) return out;
    }
  }
};

TEST_F(ChaosTest, KillsEverythingAndEveryRoundLandsExactlyOnce) {
  const uint64_t seed = static_cast<uint64_t>(
      EnvInt("TUNEFARM_CHAOS_SEED", absl::ToUnixSeconds(absl::Now())));
  const int agent_kills = EnvInt("TUNEFARM_CHAOS_AGENT_KILLS", 6);
  const int coordinator_kills = EnvInt("TUNEFARM_CHAOS_COORDINATOR_KILLS", 3);
  const int analyzer_kills = EnvInt("TUNEFARM_CHAOS_ANALYZER_KILLS", 3);
  const int rounds = EnvInt("TUNEFARM_CHAOS_ROUNDS", 24);
  std::cout << "chaos: seed " << seed
            << " (TUNEFARM_CHAOS_SEED replays it): " << agent_kills
            << " agent, " << coordinator_kills << " coordinator, "
            << analyzer_kills << " analyzer kills, " << rounds << " rounds\n";
  std::mt19937_64 rng(seed);

  LocalFarmOptions o;
  o.agents = 3;
  o.boards_per_agent = 1;
  o.sim_delay_ms = 150;  // rounds last long enough to be killed mid-way
  o.lease_ms = 2000;     // a dead agent's lease comes back soon
  o.heartbeat_ms = 200;
  o.agent_timeout_ms = 1500;
  o.agent_flags = {"--bundle_ack_timeout_ms=3000"};
  StartFarm(o);
  const std::string id = Submit(absl::StrCat(
      "name: chaos\nteam: demo\noperator: sim_matmul\nworkload: square_2k\n"
      "goal: {speedup: 1000}\nstrategy: {name: random, seed: 3}\n"
      "budget: {max_rounds: ",
      rounds, ", max_rounds_without_gain: ", rounds,
      "}\nmin_gain: 0.02\nboards: {kind: sim}\n"
      "measurement: {warmup: 1, samples: 5}\n"));
  ASSERT_FALSE(id.empty());

  // The kills, shuffled; each at a random point, its victim back after a
  // random pause.
  std::vector<char> plan;
  plan.insert(plan.end(), agent_kills, 'g');
  plan.insert(plan.end(), coordinator_kills, 'c');
  plan.insert(plan.end(), analyzer_kills, 'z');
  std::shuffle(plan.begin(), plan.end(), rng);
  std::uniform_int_distribution<int> gap_ms(100, 900);
  std::uniform_int_distribution<int> down_ms(50, 600);
  std::uniform_int_distribution<int> which_agent(0, o.agents - 1);
  int step = 0;
  for (char victim : plan) {
    absl::SleepFor(absl::Milliseconds(gap_ms(rng)));
    const int down = down_ms(rng);
    ++step;
    if (victim == 'g') {
      const int i = which_agent(rng);
      std::cout << "chaos " << step << ": SIGKILL agent-" << i + 1 << "\n";
      farm_->KillAgent(i, SIGKILL);
      absl::SleepFor(absl::Milliseconds(down));
      ASSERT_TRUE(farm_->StartAgent(i).ok());
    } else if (victim == 'c') {
      std::cout << "chaos " << step << ": SIGKILL coordinator\n";
      farm_->KillCoordinator(SIGKILL);
      absl::SleepFor(absl::Milliseconds(down));
      absl::Status st = farm_->RestartCoordinator();
      ASSERT_TRUE(st.ok()) << st;
      Connect();
    } else {
      std::cout << "chaos " << step << ": SIGKILL analyzer\n";
      farm_->KillAnalyzer(SIGKILL);
      absl::SleepFor(absl::Milliseconds(down));
      absl::Status st = farm_->RestartAnalyzer();
      ASSERT_TRUE(st.ok()) << st;
    }
  }

  const v1::Sweep sweep = WaitFinished(id, absl::Seconds(120 + 2 * rounds));
  ASSERT_EQ(sweep.state(), v1::SWEEP_STATE_SUCCEEDED)
      << sweep.termination_detail();

  // Diagnoses trail the results (outboxes re-send after kills).
  v1::ListRoundsResponse list;
  auto undiagnosed = [&] {
    list = Rounds(id);
    int n = 0;
    for (const v1::Round& r : list.rounds()) {
      if (r.state() == v1::ROUND_STATE_DONE &&
          !r.result().bundle_id().empty() && !r.has_diagnosis()) {
        ++n;
      }
    }
    return n;
  };
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (undiagnosed() > 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(250));
  }

  std::map<int64_t, int> finished_events, diagnosis_events;
  for (const v1::SweepEvent& ev : AllEvents(id)) {
    if (ev.kind() == v1::EVENT_KIND_ROUND_FINISHED) {
      ++finished_events[ev.round().round_id()];
    }
    if (ev.kind() == v1::EVENT_KIND_DIAGNOSIS) {
      ++diagnosis_events[ev.round().round_id()];
    }
  }
  int done = 0, diagnosed = 0;
  // Finished rounds that name no bundle, by outcome. Only a variant that
  // ran and was profiled has one (agent/stage_runner.cc): an OK round
  // without one would be a lost bundle.
  std::map<std::string, int> no_bundle;
  for (int i = 0; i < list.rounds_size(); ++i) {
    const v1::Round& r = list.rounds(i);
    EXPECT_EQ(r.round_id(), i);
    EXPECT_TRUE(r.state() == v1::ROUND_STATE_DONE ||
                r.state() == v1::ROUND_STATE_CANCELLED)
        << "round " << i << " stuck in " << v1::RoundState_Name(r.state());
    const bool is_done = r.state() == v1::ROUND_STATE_DONE;
    done += is_done ? 1 : 0;
    EXPECT_EQ(finished_events[i], is_done ? 1 : 0)
        << "round " << i << " finished " << finished_events[i] << " times";
    if (is_done && r.result().bundle_id().empty()) {
      ++no_bundle[v1::Outcome_Name(r.result().outcome())];
      EXPECT_NE(r.result().outcome(), v1::OUTCOME_OK)
          << "round " << i << " ran and was profiled but names no bundle";
    }
    if (is_done && !r.result().bundle_id().empty()) {
      EXPECT_TRUE(r.has_diagnosis()) << "round " << i << ": diagnosis lost";
      EXPECT_EQ(diagnosis_events[i], 1)
          << "round " << i << ": " << diagnosis_events[i] << " diagnoses";
      EXPECT_EQ(r.diagnosis().bundle_id(), r.result().bundle_id());
      EXPECT_EQ(r.diagnosis().epoch(), r.lease().epoch());
      diagnosed += r.has_diagnosis() ? 1 : 0;
    }
  }
  EXPECT_GT(done, 1);
  // Kept path: baseline → … → best, each a kept child of the one before.
  ASSERT_FALSE(list.kept_path().empty());
  EXPECT_EQ(list.kept_path(0), 0);
  EXPECT_EQ(*list.kept_path().rbegin(), sweep.best_round());
  for (int i = 1; i < list.kept_path_size(); ++i) {
    const v1::Round& r = list.rounds(list.kept_path(i));
    EXPECT_EQ(r.parent_round(), list.kept_path(i - 1));
    EXPECT_EQ(r.decision(), v1::DECISION_KEPT);
    EXPECT_EQ(r.state(), v1::ROUND_STATE_DONE);
  }
  std::cout << "chaos: seed " << seed << ": " << done << " rounds done, "
            << diagnosed << " diagnosed, " << plan.size() << " kills\n";
  // One machine-readable line for scripts/chaos.sh.
  std::cout << "chaos: seed=" << seed << " agent_kills=" << agent_kills
            << " coordinator_kills=" << coordinator_kills
            << " analyzer_kills=" << analyzer_kills << " rounds_done=" << done
            << " diagnosed=" << diagnosed;
  int no_bundle_total = 0;
  std::string by_outcome;
  for (const auto& [outcome, n] : no_bundle) {
    no_bundle_total += n;
    absl::StrAppend(&by_outcome, by_outcome.empty() ? "" : ",", outcome, ":",
                    n);
  }
  std::cout << " no_bundle=" << no_bundle_total
            << " no_bundle_outcomes=" << (by_outcome.empty() ? "-" : by_outcome)
            << " failures=" << (HasFailure() ? 1 : 0) << "\n";
}

}  // namespace
}  // namespace tunefarm
