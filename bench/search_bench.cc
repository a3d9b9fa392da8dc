// search_bench: grid-order, random and guided search on measured search
// spaces (ops/spaces), many seeds each, answered by the replay board.
//
// The coordinator's keep / roll-back loop is simulated in-process (one
// board, one candidate at a time, the same decision rule as
// Coordinator::Decide: kept when the median beats the parent by min_gain
// and beats the current best) over the real Strategy implementations and
// the real replay board: no processes, no RocksDB, so thousands of sweeps
// run in minutes.
//
// Every run of a seed starts from the same baseline for all strategies: a
// configuration drawn uniformly (by the seed) among the space's valid ones.
// An evaluation is one round, the baseline included; failed and
// out-of-space configurations count (a farm would have built them).
//
// Output: a Markdown table per figure (docs/benchmarks.md), on stdout.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/replay_board.h"
#include "coordinator/guided_strategy.h"
#include "coordinator/strategy.h"
#include "ops/spaces/space_file.h"

namespace tunefarm {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct RunTrace {
  std::vector<double> best_after;  // best_after[i] = best after i+1 evals
};

// One sweep: baseline then candidates until the budget or an empty proposal.
RunTrace RunSweep(const v1::OperatorManifest& op, Board& board,
                  Strategy& strategy, const ParamMap& baseline, uint64_t seed,
                  int budget, double min_gain) {
  v1::SweepSpec spec;
  spec.mutable_strategy()->set_seed(seed);
  spec.set_min_gain(min_gain);
  *spec.mutable_baseline_params() = baseline;
  std::vector<v1::Round> rounds;
  RunTrace trace;
  double best_us = kInf;
  int64_t best_round = -1;
  std::atomic<bool> cancel{false};
  auto evaluate = [&](v1::Round& r) {
    v1::WorkItem work;
    work.set_sweep_id("bench");
    work.set_round_id(r.round_id());
    work.set_epoch(1);
    *work.mutable_params() = r.params();
    absl::StatusOr<Evaluation> ev = board.Evaluate(work, cancel);
    if (!ev.ok()) {
      std::fprintf(stderr, "board failed: %s\n",
                   ev.status().ToString().c_str());
      std::exit(1);
    }
    *r.mutable_result() = ev->result;
    r.set_state(v1::ROUND_STATE_DONE);
  };
  v1::Round base;
  base.set_round_id(0);
  base.set_parent_round(-1);
  base.set_stage("baseline");
  *base.mutable_params() = baseline;
  evaluate(base);
  base.set_decision(v1::DECISION_BASELINE);
  best_us = base.result().measurement().median_us();
  best_round = 0;
  rounds.push_back(base);
  trace.best_after.push_back(best_us);
  while (static_cast<int>(rounds.size()) < budget) {
    SearchHistory h{&op, &spec, &rounds, best_round};
    std::vector<Candidate> c = strategy.Propose(h, 1);
    if (c.empty()) break;
    v1::Round r;
    r.set_round_id(static_cast<int64_t>(rounds.size()));
    r.set_parent_round(c[0].parent_round);
    *r.mutable_params() = c[0].params;
    for (auto& ch : c[0].changes) *r.add_changes() = ch;
    r.set_stage(c[0].stage);
    evaluate(r);
    // Coordinator::Decide's rule.
    if (r.result().outcome() != v1::OUTCOME_OK) {
      r.set_decision(v1::DECISION_REJECTED);
    } else {
      const double median = r.result().measurement().median_us();
      const double parent_us =
          rounds[r.parent_round()].result().measurement().median_us();
      if (median <= parent_us * (1.0 - min_gain) && median < best_us) {
        r.set_decision(v1::DECISION_KEPT);
        best_us = median;
        best_round = r.round_id();
      } else {
        r.set_decision(v1::DECISION_ROLLED_BACK);
      }
    }
    rounds.push_back(std::move(r));
    trace.best_after.push_back(best_us);
  }
  return trace;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  if (n == 0) return kInf;
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Evaluations until best <= target; inf when never within the budget.
double EvalsTo(const RunTrace& t, double target) {
  for (size_t i = 0; i < t.best_after.size(); ++i) {
    if (t.best_after[i] <= target) return static_cast<double>(i + 1);
  }
  return kInf;
}

// Best after `n` evaluations (a sweep that stopped earlier keeps its best).
double BestAfter(const RunTrace& t, int n) {
  return t.best_after[std::min<size_t>(n, t.best_after.size()) - 1];
}

std::string Evals(double v, int budget) {
  return std::isinf(v) ? absl::StrCat(">", budget) : absl::StrFormat("%.0f", v);
}

struct Row {
  std::string space, strategy;
  double e5, e1, b50, b200, reach5, reach1, evals;
};

}  // namespace
}  // namespace tunefarm

int main(int argc, char** argv) {
  using namespace tunefarm;
  CLI::App app{"grid / random / guided search on measured search spaces"};
  std::vector<std::string> files;
  int seeds = 20, budget = 200;
  double min_gain = 0;
  int max_passes = 0;
  int escapes = GuidedOptions().escapes;
  app.add_option("spaces", files,
                 "space files (.kt.json[.gz], .t4.json.gz, .ktt.json[.gz])")
      ->required();
  app.add_option("--seeds", seeds, "runs per strategy and space");
  app.add_option("--budget", budget, "evaluations per run, baseline included");
  app.add_option("--min_gain", min_gain, "the sweeps' minimum gain");
  app.add_option("--max_passes", max_passes,
                 "guided max_passes (0 = unlimited)");
  app.add_option(
      "--escapes", escapes,
      "guided escapes (escape rounds in a row without gain; 0 = none)");
  CLI11_PARSE(app, argc, argv);

  std::vector<Row> rows;
  for (const std::string& file : files) {
    absl::StatusOr<Space> loaded = LoadSpaceFile(file);
    if (!loaded.ok()) {
      std::fprintf(stderr, "%s\n", loaded.status().ToString().c_str());
      return 1;
    }
    auto space = std::make_shared<const Space>(*std::move(loaded));
    const v1::OperatorManifest op = ManifestFromSpace(*space);
    ReplayBoardOptions bo;
    bo.board_id = "bench/replay";
    bo.space = space;
    std::unique_ptr<Board> board = *NewReplayBoard(bo);
    std::vector<size_t> valid;
    for (size_t i = 0; i < space->configs.size(); ++i) {
      if (space->configs[i].outcome == SpaceOutcome::kOk) valid.push_back(i);
    }
    const std::string name = file.substr(file.find_last_of('/') + 1);
    for (const std::string strategy_name : {"grid", "random", "guided"}) {
      std::vector<double> e5, e1, b50, b200, evals;
      int reach5 = 0, reach1 = 0;
      const auto start = std::chrono::steady_clock::now();
      for (int seed = 1; seed <= seeds; ++seed) {
        std::seed_seq seq{static_cast<uint32_t>(seed), 0x9e3779b9u,
                          0x85ebca6bu};
        std::mt19937_64 rng(seq);
        const ParamMap baseline =
            space->configs[valid[rng() % valid.size()]].params;
        std::unique_ptr<Strategy> s;
        if (strategy_name == std::string("grid")) s = NewGridStrategy();
        if (strategy_name == std::string("random")) s = NewRandomStrategy();
        if (strategy_name == std::string("guided")) {
          GuidedOptions o;
          o.seed = seed;
          o.max_passes = max_passes;
          o.escapes = escapes;
          s = NewGuidedStrategy(o);
        }
        const RunTrace t =
            RunSweep(op, *board, *s, baseline, seed, budget, min_gain);
        if (getenv("SEARCH_BENCH_DEBUG"))
          std::fprintf(stderr, "seed %d baseline %s: %.1f us (opt %.1f)\n",
                       seed, ParamsKey(baseline).c_str(), t.best_after[0],
                       space->best_us);
        e5.push_back(EvalsTo(t, space->best_us * 1.05));
        e1.push_back(EvalsTo(t, space->best_us * 1.01));
        reach5 += !std::isinf(e5.back());
        reach1 += !std::isinf(e1.back());
        b50.push_back(BestAfter(t, 50) / space->best_us);
        b200.push_back(BestAfter(t, 200) / space->best_us);
        evals.push_back(static_cast<double>(t.best_after.size()));
      }
      const double secs = std::chrono::duration<double>(
                              std::chrono::steady_clock::now() - start)
                              .count();
      std::fprintf(stderr, "%s %s: %.1f s\n", name.c_str(),
                   strategy_name.c_str(), secs);
      rows.push_back(Row{name, strategy_name, Median(e5), Median(e1),
                         Median(b50), Median(b200), 100.0 * reach5 / seeds,
                         100.0 * reach1 / seeds, Median(evals)});
    }
  }
  std::printf(
      "Budget %d evaluations per run, %d seeds, min_gain %.3f, guided "
      "max_passes %d, escapes %d.\n\n",
      budget, seeds, min_gain, max_passes, escapes);
  std::printf(
      "| space | strategy | median evals to 5%% | reached 5%% | median "
      "evals to 1%% | reached 1%% | best after 50 (x opt) | best after "
      "200 (x opt) | median evals used |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Row& r : rows) {
    std::printf(
        "| %s | %s | %s | %.0f%% | %s | %.0f%% | %.3f | %.3f | %.0f |\n",
        r.space.c_str(), r.strategy.c_str(), Evals(r.e5, budget).c_str(),
        r.reach5, Evals(r.e1, budget).c_str(), r.reach1, r.b50, r.b200,
        r.evals);
  }
  // Guided against random, per space: the four figures above (lower is
  // better for each); guided beats random when it wins more than it loses.
  std::printf(
      "\n| space | guided vs random: wins / ties / losses (evals to 5%%, "
      "evals to 1%%, best after 50, best after 200) | verdict |\n");
  std::printf("|---|---|---|\n");
  int beats = 0, spaces = 0;
  for (size_t i = 0; i + 2 < rows.size(); i += 3) {
    const Row& r = rows[i + 1];
    const Row& g = rows[i + 2];
    int win = 0, tie = 0, loss = 0;
    for (auto [a, b] : {std::pair{g.e5, r.e5}, std::pair{g.e1, r.e1},
                        std::pair{g.b50, r.b50}, std::pair{g.b200, r.b200}}) {
      // Within 0.5% (or both out of the budget) is a tie.
      if (a == b || std::abs(a - b) <= 0.005 * std::min(a, b)) {
        ++tie;
      } else if (a < b) {
        ++win;
      } else {
        ++loss;
      }
    }
    ++spaces;
    beats += win > loss;
    std::printf("| %s | %d / %d / %d | %s |\n", g.space.c_str(), win, tie, loss,
                win > loss    ? "guided better"
                : win == loss ? "even"
                              : "random better");
  }
  std::printf("\nGuided beats random on %d of %d spaces.\n", beats, spaces);
  return 0;
}
