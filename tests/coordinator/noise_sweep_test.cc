// Measurement that can be trusted, end to end in one process: the real
// coordinator core (real RocksDB store in a temp dir, FakeClock) hands
// leases to real sim boards that run the real tunefarm-sim-matmul program
// with injected noise, and the boards' A/B measurements come back through
// ReportResult. With no real differences between variants, no sweep may keep
// anything; with real differences well above the noise, gains are kept.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/sim_board.h"
#include "agent/sim_model.h"
#include "common/clock.h"
#include "common/files.h"
#include "coordinator/auth.h"
#include "coordinator/coordinator.h"
#include "gtest/gtest.h"
#include "ops/catalog.h"
#include "storage/store.h"
#include "tests/coordinator/coordinator_harness.h"

namespace tunefarm {
namespace {

std::string DirOf(const std::string& path) {
  return path.substr(0, path.rfind('/'));
}

struct SweepOutcome {
  int kept = 0, rolled_back = 0, rejected = 0, paired = 0, candidates_ok = 0;
  int inconclusive = 0, remeasures = 0;
  std::vector<v1::Round> rounds;
};

class NoiseSweepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(disk_.MakeDir("noise_sweep_test").ok());
    absl::StatusOr<v1::OperatorManifest> op = LoadOperatorManifest(
        std::string(TUNEFARM_SOURCE_DIR) + "/ops/sim_matmul");
    ASSERT_TRUE(op.ok()) << op.status();
    catalog_.Add(*op);
    CoordinatorOptions options;
    options.lease_duration = absl::Seconds(60);
    options.report_dir = disk_.dir() + "/reports";
    absl::Status st = disk_.Open(&catalog_, &clock_, options);
    ASSERT_TRUE(st.ok()) << st;
  }
  Coordinator* coord() { return disk_.coordinator(); }
  Store* store() { return disk_.store(); }

  // K sim boards of one agent.
  void AddBoards(int k, double noise, double fixed_latency_us) {
    v1::RegisterAgentRequest request;
    request.set_agent_id("agent-n");
    request.set_node("node-n");
    for (int i = 0; i < k; ++i) {
      SimBoardOptions o;
      o.board_id = absl::StrCat("agent-n/sim", i);
      o.agent_id = "agent-n";
      o.node = "node-n";
      o.bin_dir = DirOf(SIM_MATMUL_BIN);
      o.work_root = disk_.dir() + "/work/" + std::to_string(i);
      o.seed = 11 + i;
      o.noise = noise;
      o.fixed_latency_us = fixed_latency_us;
      o.stage_timeout = absl::Seconds(30);
      boards_.push_back(NewSimBoard(o));
      *request.add_boards() = boards_.back()->info();
    }
    ASSERT_TRUE(coord()->RegisterAgent(request).ok());
  }

  // Submits, then runs lease → evaluate → report rounds on every board (all
  // boards leased before any reports: K-board batches) until the sweep ends.
  SweepOutcome RunSweep(const std::string& strategy, int max_rounds,
                        const std::string& extra = "", int seed = 5,
                        const std::string& measurement =
                            "{warmup: 1, samples: 6, max_samples: 6}",
                        double min_gain = 0.02) {
    v1::SubmitSweepRequest submit;
    submit.set_spec_yaml(absl::StrCat(
        "name: noise-", strategy, "\nteam: qa\noperator: sim_matmul\n",
        "goal: {speedup: 100}\nstrategy: {name: ", strategy, ", seed: ", seed,
        "}\n", "budget: {max_rounds: ", max_rounds,
        ", max_rounds_without_gain: 1000}\n", "min_gain: ", min_gain,
        "\nboards: {kind: sim}\n", "measurement: ", measurement, "\n", extra));
    absl::StatusOr<v1::SubmitSweepResponse> s =
        coord()->SubmitSweep(submit, AnonymousAdmin());
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok()) return {};
    const std::string id = s->sweep().sweep_id();
    for (int step = 0; step < 4 * max_rounds + 10; ++step) {
      absl::StatusOr<v1::Sweep> sweep = store()->GetSweep(id);
      if (!sweep.ok() || sweep->state() == v1::SWEEP_STATE_SUCCEEDED ||
          sweep->state() == v1::SWEEP_STATE_FAILED ||
          sweep->state() == v1::SWEEP_STATE_CANCELLED) {
        break;
      }
      std::vector<std::pair<Board*, v1::WorkItem>> batch;
      for (const auto& b : boards_) {
        v1::LeaseWorkRequest lease;
        lease.set_agent_id("agent-n");
        lease.set_board_id(b->info().board_id());
        absl::StatusOr<v1::LeaseWorkResponse> r = coord()->LeaseWork(lease);
        EXPECT_TRUE(r.ok()) << r.status();
        if (r.ok() && r->granted()) batch.push_back({b.get(), r->work()});
      }
      for (auto& [board, work] : batch) {
        std::atomic<bool> cancel{false};
        absl::StatusOr<Evaluation> e = board->Evaluate(work, cancel);
        EXPECT_TRUE(e.ok()) << e.status();
        if (!e.ok()) continue;
        v1::ReportResultRequest report;
        report.set_agent_id("agent-n");
        report.set_board_id(board->info().board_id());
        report.set_lease_id(work.lease_id());
        report.set_epoch(work.epoch());
        report.set_sweep_id(work.sweep_id());
        report.set_round_id(work.round_id());
        *report.mutable_result() = e->result;
        absl::StatusOr<v1::ReportResultResponse> rr =
            coord()->ReportResult(report);
        EXPECT_TRUE(rr.ok()) << rr.status();
      }
      clock_.Advance(absl::Seconds(1));
    }
    SweepOutcome out;
    absl::StatusOr<std::vector<v1::Round>> rounds = store()->ListRounds(id);
    EXPECT_TRUE(rounds.ok()) << rounds.status();
    if (!rounds.ok()) return out;
    out.rounds = *rounds;
    for (const v1::Round& r : out.rounds) {
      if (r.round_id() == 0 || r.state() != v1::ROUND_STATE_DONE) continue;
      if (r.decision() == v1::DECISION_KEPT) ++out.kept;
      if (r.decision() == v1::DECISION_ROLLED_BACK) ++out.rolled_back;
      if (r.decision() == v1::DECISION_REJECTED) ++out.rejected;
      if (r.decision() == v1::DECISION_INCONCLUSIVE) ++out.inconclusive;
      out.remeasures += r.remeasures();
      if (r.result().outcome() == v1::OUTCOME_OK) {
        ++out.candidates_ok;
        if (r.result().measurement().paired()) ++out.paired;
      }
    }
    absl::StatusOr<v1::Sweep> sweep = store()->GetSweep(id);
    EXPECT_TRUE(sweep.ok());
    if (sweep.ok()) {
      EXPECT_EQ(sweep->state(), v1::SWEEP_STATE_SUCCEEDED)
          << sweep->DebugString();
    }
    return out;
  }

  OperatorCatalog catalog_;
  FakeClock clock_;
  CoordinatorOnDisk disk_;
  std::vector<std::unique_ptr<Board>> boards_;
};

TEST_F(NoiseSweepTest, NoRealDifferenceMeansNothingKeptGuidedOrRandom) {
  // ±3% per run and per sample, every variant modelled at 200 µs.
  AddBoards(2, 0.03, 200);
  for (const std::string strategy : {"guided", "random"}) {
    const SweepOutcome o = RunSweep(strategy, 6);
    EXPECT_EQ(o.kept, 0) << strategy;
    EXPECT_GE(o.candidates_ok, 3) << strategy;
    // Every OK candidate was timed A/B against its parent.
    EXPECT_EQ(o.paired, o.candidates_ok) << strategy;
    for (const v1::Round& r : o.rounds) {
      if (r.decision() != v1::DECISION_ROLLED_BACK &&
          r.decision() != v1::DECISION_INCONCLUSIVE) {
        continue;
      }
      EXPECT_NE(r.decision_reason().find("inside noise"), std::string::npos)
          << r.decision_reason();
      EXPECT_TRUE(r.result().measurement().simulated());
    }
  }
}

// A real 3x gain on a very noisy board (±50% per run and per sample, 3
// samples, min_gain 55%): the first A/B interval is too wide for its lower
// bound to clear min_gain, so the round is measured again with a larger cap
// instead of being rolled back, and kept.
TEST_F(NoiseSweepTest, WideIntervalOnARealGainIsRemeasuredAndKept) {
  // Two configurations one change apart (8 or 24 blocks) whose modelled
  // latencies differ several times (about 3x as the board measures them,
  // launch overhead included).
  absl::StatusOr<const v1::OperatorManifest*> full =
      catalog_.Find("sim_matmul");
  ASSERT_TRUE(full.ok());
  v1::OperatorManifest op = **full;
  const v1::Workload& workload = op.workloads(0);
  ParamMap slow = DefaultParams(op);
  slow["tile_m"] = IntParam(16);
  slow["tile_n"] = IntParam(16);
  slow["block_dim"] = IntParam(8);
  ParamMap fast = slow;
  fast["block_dim"] = IntParam(24);
  absl::StatusOr<SimKernelTiming> ts =
      ModelMatmul(DefaultSimChip(), workload, slow);
  absl::StatusOr<SimKernelTiming> tf =
      ModelMatmul(DefaultSimChip(), workload, fast);
  ASSERT_TRUE(ts.ok() && tf.ok());
  ASSERT_GE(ts->latency_us / tf->latency_us, 2.8)
      << ts->latency_us << " vs " << tf->latency_us;
  // Only those two configurations: the sweep's one candidate is the gain.
  for (v1::ParameterDomain& p : *op.mutable_parameters()) {
    p.clear_values();
    *p.add_values() = slow.at(p.name());
    if (ParamValueToString(slow.at(p.name())) !=
        ParamValueToString(fast.at(p.name()))) {
      *p.add_values() = fast.at(p.name());
    }
    *p.mutable_default_value() = slow.at(p.name());
  }
  // The grid of the changed parameters holds more; a constraint keeps the
  // two.
  op.add_constraints("block_dim == 8 or block_dim == 24");
  catalog_.Add(op);
  AddBoards(1, 0.5, 0);
  int remeasured_and_kept = 0;
  for (int seed = 1; seed <= 6; ++seed) {
    const SweepOutcome o =
        RunSweep("grid", 1, "", seed, "{warmup: 1, samples: 3, max_samples: 3}",
                 /*min_gain=*/0.55);
    // A kept candidate is followed by the closing check (round 2).
    ASSERT_GE(o.rounds.size(), 2u);
    const v1::Round& r = o.rounds[1];
    ASSERT_EQ(o.rounds.size(), r.decision() == v1::DECISION_KEPT ? 3u : 2u);
    if (o.rounds.size() == 3) {
      EXPECT_EQ(o.rounds[2].decision(), v1::DECISION_CLOSING_CHECK);
    }
    EXPECT_EQ(ParamsKey(r.params()), ParamsKey(fast));
    // Re-measured rounds (first interval too wide) end kept or, when even
    // 47 pairs leave the bound under min_gain, inconclusive: never rolled
    // back. A first estimate under min_gain is rolled back at once.
    if (r.remeasures() > 0) {
      EXPECT_NE(r.decision(), v1::DECISION_ROLLED_BACK) << r.decision_reason();
      EXPECT_GT(r.result().measurement().pairs(), 6) << r.decision_reason();
      remeasured_and_kept += r.decision() == v1::DECISION_KEPT;
    } else if (r.decision() != v1::DECISION_KEPT) {
      EXPECT_LT(r.result().measurement().gain(), 0.55) << r.decision_reason();
    }
  }
  EXPECT_GE(remeasured_and_kept, 1)
      << "no seed gave a first interval too wide to judge";
}

TEST_F(NoiseSweepTest, RealDifferencesAboveTheNoiseAreKept) {
  AddBoards(2, 0.03, 0);  // the model's real differences, same noise
  const SweepOutcome o = RunSweep("random", 6);
  EXPECT_GE(o.kept, 1);
  for (const v1::Round& r : o.rounds) {
    if (r.decision() != v1::DECISION_KEPT) continue;
    EXPECT_TRUE(r.result().measurement().paired());
    EXPECT_GT(r.result().measurement().gain_lower(), 0.02)
        << r.decision_reason();
  }
}

}  // namespace
}  // namespace tunefarm
