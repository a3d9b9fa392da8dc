// search_bench: search strategies on measured search spaces (ops/spaces),
// answered by the replay board, on K simulated boards, against Optuna's TPE
// run on the same spaces in the same run (bench/search/optuna_bridge.py)
// and Kernel Tuner's published figures (issue 18).
//
// Accounting (the issue's): every run of a seed starts from the same
// baseline for every strategy, a configuration drawn uniformly (by the
// seed) among the space's valid ones, and that baseline is evaluation 1. A
// budget of `budget` evaluations; each distinct configuration proposed costs
// one (failed or out-of-space ones included).
//
// The farm is simulated asynchronously: K boards, each evaluation taking the
// replayed time x the sweep's samples plus a fixed round overhead (a failed
// one: the overhead), results arriving in completion order, so later
// proposals see earlier rounds still in flight. The proposal path is the
// coordinator's (NextRound's ProposeNextCandidate: one candidate per free
// board, budget counted in candidates; while the baseline runs, the free
// boards get candidates only from a strategy that proposes then, hybrid
// and tpe) and the decision is its keep rule (JudgeGain, as the Decider
// calls it; a result whose parent has none yet is judged once it has).
// The best is the sweep's best: kept rounds only. --baseline_first is a
// what-if against that path: nothing before the baseline's result, for any
// strategy (what the earlier rule cost K boards).
//
// Output: Markdown tables (docs/benchmarks.md), then one line
//   search_bench: spaces=N wins_e5=W wins_b200=W wins_constrained=W
//   unspent_off5=U eff16=E ...
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <queue>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "agent/replay_board.h"
#include "coordinator/guided_strategy.h"
#include "coordinator/hybrid_strategy.h"
#include "coordinator/keep_rule.h"
#include "coordinator/strategy.h"
#include "nlohmann/json.hpp"
#include "ops/spaces/space_file.h"

namespace tunefarm {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct SimOptions {
  int budget = 200;
  int boards = 1;
  int samples = 30;       // timed runs per evaluation
  double overhead_s = 5;  // build, transfers, reference per round
  double min_gain = 0;
  // What-if: no strategy proposes while the baseline runs (BaselineFirst).
  bool baseline_first = false;
};

// One sweep's course: after each finished evaluation, the time and the
// sweep's best.
struct Trace {
  std::vector<double> best;     // best[i]: after i+1 finished evaluations
  std::vector<double> time;     // time[i]: when evaluation i+1 finished (s)
  int proposed = 0;             // evaluations proposed (baseline included)
  bool exhausted = false;       // the strategy stopped before the budget
  double measured_best = kInf;  // fastest OK round, kept or not
  // Per stage tag: rounds finished and rounds kept (which technique paid).
  std::map<std::string, std::pair<int, int>> stages;
  // propose_us[i]: CPU microseconds of the call that proposed round i + 1
  // (the coordinator's ProposeNextCandidate, with a history of i + 1
  // rounds or more).
  std::vector<double> propose_us;
};

// This thread's CPU time in microseconds: the jobs run side by side, and
// only a proposal's own work should count.
double ThreadCpuUs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 +
         static_cast<double>(ts.tv_nsec) * 1e-3;
}

double EvalSeconds(const v1::RoundResult& r, const SimOptions& o) {
  if (r.outcome() != v1::OUTCOME_OK) return o.overhead_s;
  return r.measurement().median_us() * 1e-6 * o.samples + o.overhead_s;
}

// A strategy as it is, except that it never proposes while the baseline
// runs (--baseline_first).
class BaselineFirst : public Strategy {
 public:
  explicit BaselineFirst(Strategy& s) : s_(s) {}
  std::string_view name() const override { return s_.name(); }
  std::vector<Candidate> Propose(const SearchHistory& h, int n) override {
    return s_.Propose(h, n);
  }
  Exhaustion Exhausted(const SearchHistory& h) const override {
    return s_.Exhausted(h);
  }

 private:
  Strategy& s_;
};

Trace Simulate(const v1::OperatorManifest& op, Board& board, Strategy& strategy,
               const ParamMap& baseline, uint64_t seed, const SimOptions& o) {
  v1::SweepSpec spec;
  spec.mutable_strategy()->set_seed(seed);
  spec.set_min_gain(o.min_gain);
  *spec.mutable_baseline_params() = baseline;
  std::vector<v1::Round> rounds;
  Trace t;
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
  };
  // (finish time, round id): earliest first, ties by round id.
  using Event = std::pair<double, int64_t>;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  double now = 0;
  int64_t best_round = -1;
  double best_us = kInf;
  int free_boards = o.boards;
  int in_flight = 0;  // candidates leased, not yet recorded
  BaselineFirst first(strategy);

  v1::Round base;
  base.set_round_id(0);
  base.set_parent_round(-1);
  base.set_stage("baseline");
  *base.mutable_params() = baseline;
  base.set_state(v1::ROUND_STATE_LEASED);
  evaluate(base);
  events.push({EvalSeconds(base.result(), o), 0});
  rounds.push_back(base);
  std::vector<double> proposed_at = {0};
  --free_boards;
  t.proposed = 1;
  // NextRound for every free board: the coordinator's ProposeNextCandidate
  // (a strategy that proposes while the baseline runs gets the free boards
  // then; the others wait for its result).
  auto propose = [&] {
    while (free_boards > 0) {
      SearchHistory h{&op, &spec, &rounds, best_round};
      const double cpu0 = ThreadCpuUs();
      NextCandidate next =
          o.baseline_first
              ? ProposeNextCandidate(first, h, o.budget - 1, in_flight)
              : ProposeNextCandidate(strategy, h, o.budget - 1, in_flight);
      const double cpu_us = ThreadCpuUs() - cpu0;
      if (next.kind == NextCandidate::Kind::kExhausted) t.exhausted = true;
      if (next.kind != NextCandidate::Kind::kPropose) break;
      t.propose_us.push_back(cpu_us);
      Candidate& c = next.candidate;
      v1::Round n;
      n.set_round_id(static_cast<int64_t>(rounds.size()));
      n.set_parent_round(c.parent_round);
      *n.mutable_params() = c.params;
      for (auto& ch : c.changes) *n.add_changes() = ch;
      n.set_stage(c.stage);
      n.set_state(v1::ROUND_STATE_LEASED);
      evaluate(n);
      events.push({now + EvalSeconds(n.result(), o), n.round_id()});
      rounds.push_back(std::move(n));
      proposed_at.push_back(now);
      --free_boards;
      ++in_flight;
      ++t.proposed;
    }
  };
  // The keep rule on a recorded candidate whose parent has its result (the
  // Decider's DecideCandidate).
  auto judge = [&](v1::Round& r) {
    if (r.result().outcome() != v1::OUTCOME_OK) {
      r.set_decision(v1::DECISION_REJECTED);
      return;
    }
    const v1::Round& parent = rounds[r.parent_round()];
    const GainVerdict v =
        JudgeGain(r.result().measurement(), parent.result().measurement(),
                  o.min_gain, r.parent_round(), best_round, best_us);
    if (v.keep) {
      r.set_decision(v1::DECISION_KEPT);
      best_round = r.round_id();
      best_us = r.result().measurement().median_us();
      ++t.stages[r.stage()].second;
    } else {
      r.set_decision(v1::DECISION_ROLLED_BACK);
    }
  };
  propose();
  while (!events.empty()) {
    const auto [at, id] = events.top();
    events.pop();
    now = at;
    ++free_boards;
    v1::Round& r = rounds[id];
    r.set_state(v1::ROUND_STATE_DONE);
    if (id != 0) {
      --in_flight;
      ++t.stages[r.stage()].first;
    }
    if (id == 0) {
      r.set_decision(v1::DECISION_BASELINE);
      best_round = 0;
      best_us = r.result().measurement().median_us();
      // The results that waited for it, in round order (DecideWaiting).
      for (v1::Round& w : rounds) {
        if (w.round_id() != 0 && w.state() == v1::ROUND_STATE_DONE &&
            w.decision() == v1::DECISION_UNSPECIFIED) {
          judge(w);
        }
      }
    } else if (r.result().outcome() != v1::OUTCOME_OK ||
               rounds[r.parent_round()].state() == v1::ROUND_STATE_DONE) {
      judge(r);
    }  // else: judged once its parent (the baseline) has its result
    t.best.push_back(best_us);
    t.time.push_back(now);
    if (r.result().outcome() == v1::OUTCOME_OK) {
      t.measured_best =
          std::min(t.measured_best, r.result().measurement().median_us());
    }
    propose();
  }
  // SEARCH_BENCH_TRACE=<seed>|all: every round of that seed, in order, at
  // every K (for diagnosing a strategy: which technique found what, where
  // a sweep stalls, what a batch proposed before which results).
  if (const char* trace = getenv("SEARCH_BENCH_TRACE");
      trace != nullptr && (std::string(trace) == "all" ||
                           std::to_string(seed) == std::string(trace))) {
    for (const v1::Round& r : rounds) {
      std::fprintf(
          stderr,
          "trace %s K=%d seed %llu round %lld %s %s %.1f %s proposed at "
          "%.1f s\n",
          absl::StrReplaceAll(op.name(), {{" ", "_"}}).c_str(), o.boards,
          static_cast<unsigned long long>(seed),
          static_cast<long long>(r.round_id()), r.stage().c_str(),
          ParamsKey(r.params()).c_str(),
          r.result().outcome() == v1::OUTCOME_OK
              ? r.result().measurement().median_us()
              : -1.0,
          v1::Decision_Name(r.decision()).c_str(), proposed_at[r.round_id()]);
    }
  }
  return t;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  if (n == 0) return kInf;
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Finished evaluations until best <= target; inf when never.
double EvalsTo(const Trace& t, double target) {
  for (size_t i = 0; i < t.best.size(); ++i) {
    if (t.best[i] <= target) return static_cast<double>(i + 1);
  }
  return kInf;
}
double TimeTo(const Trace& t, double target) {
  for (size_t i = 0; i < t.best.size(); ++i) {
    if (t.best[i] <= target) return t.time[i];
  }
  return kInf;
}
double BestAfter(const Trace& t, int n) {
  return t.best[std::min<size_t>(n, t.best.size()) - 1];
}
double BestAtTime(const Trace& t, double at) {
  double b = kInf;
  for (size_t i = 0; i < t.best.size() && t.time[i] <= at; ++i) b = t.best[i];
  return b;
}

// A median of evaluations: of an even number of seeds it can end in .5,
// which is printed (rounded, 2.5 would read as a tie with 2).
std::string Evals(double v, int budget) {
  if (std::isinf(v)) return absl::StrCat(">", budget);
  return absl::StrFormat(v == std::floor(v) ? "%.0f" : "%.1f", v);
}
std::string Secs(double v) {
  return std::isinf(v) ? std::string("never") : absl::StrFormat("%.0f", v);
}

// A strategy run: name as printed, how to make it, and whether the
// manifest's constraints are given.
struct Variant {
  std::string label;
  std::string strategy;  // grid | random | guided | tpe | hybrid
  bool constraints = false;
  std::vector<int> boards;
};

std::unique_ptr<Strategy> Make(const std::string& name, uint64_t seed,
                               const std::map<std::string, std::string>& opts) {
  v1::StrategySpec s;
  s.set_name(name);
  s.set_seed(seed);
  for (const auto& [k, v] : opts) (*s.mutable_options())[k] = v;
  if (name == "grid") return NewGridStrategy();
  if (name == "random") return NewRandomStrategy();
  if (name == "guided") {
    GuidedOptions o = *GuidedOptionsFromSpec(s);
    return NewGuidedStrategy(o);
  }
  absl::StatusOr<HybridOptions> o = HybridOptionsFromSpec(s, name == "hybrid");
  if (!o.ok()) {
    std::fprintf(stderr, "%s\n", o.status().ToString().c_str());
    std::exit(2);
  }
  return NewHybridStrategy(*o);
}

// Kernel Tuner 1.4 and Optuna 3.1 as published in issue 18 (median evals to
// 5%, best after 200 as time over optimum; inf = >200).
struct Published {
  const char* prefix;
  double ga_e5, ga_b, gac_e5, gac_b, tpe_e5, tpe_b, mv_e5, mv_b;
};
const Published kPublished[] = {
    {"convolution_A100", kInf, 1.074, kInf, 1.074, kInf, 1.074, kInf, 1.128},
    {"convolution_MI250X", 167, 1.016, 106, 1.000, 103, 1.000, 84, 1.000},
    {"coulomb3d", 10, 1.000, 6, 1.000, 11, 1.000, 10, 1.000},
    {"dedispersion_A100", 2, 1.003, 2, 1.001, 2, 1.003, 2, 1.003},
    {"dedispersion_MI250X", 146, 1.009, 114, 1.002, 168, 1.018, 168, 1.000},
    {"gemm_RTX_2080_Ti", kInf, 1.095, 128, 1.006, kInf, 1.085, kInf, 1.080},
    {"gemm_RTX_3090", kInf, 1.178, kInf, 1.061, kInf, 1.116, 188, 1.018},
    {"pnpoly_RTX_3090.kt.", 58, 1.000, 58, 1.000, 51, 1.000, 19, 1.000},
    {"pnpoly_RTX_3090.ktt", 52, 1.000, 52, 1.000, 36, 1.000, 24, 1.000},
};
const Published* FindPublished(const std::string& name) {
  for (const Published& p : kPublished) {
    if (absl::StartsWith(name, p.prefix)) return &p;
  }
  return nullptr;
}

struct Cell {
  double e5 = kInf, e1 = kInf, b50 = kInf, b200 = kInf, used = 0;
  double reach5 = 0;
  bool unspent_off5 = false;         // some seed stopped early while > 5% off
  std::map<int, double> t5, t1, bw;  // per K: median wall time, best at W
  // K = 1: CPU microseconds per proposal, the mean over a run's first and
  // last kProposalWindow proposals (median over seeds).
  double propose_first_us = 0, propose_last_us = 0;
};

constexpr size_t kProposalWindow = 100;

// Runs bench/search/optuna_bridge.py on one space; per seed, the best
// after each evaluation, for "tpe" and "tpe_mv". Empty when it fails.
std::map<std::string, std::vector<std::vector<double>>> RunOptuna(
    const std::string& python, const std::string& bridge, const Space& space,
    const std::vector<ParamMap>& baselines, int budget, int jobs) {
  nlohmann::json in;
  in["budget"] = budget;
  in["jobs"] = jobs;
  for (const SpaceParameter& p : space.parameters) {
    nlohmann::json values = nlohmann::json::array();
    for (const v1::ParamValue& v : p.values) {
      values.push_back(ParamValueToString(v));
    }
    in["params"].push_back({{"name", p.name}, {"values", values}});
  }
  nlohmann::json table = nlohmann::json::object();
  for (const SpaceConfig& c : space.configs) {
    std::vector<std::string> key;
    for (const SpaceParameter& p : space.parameters) {
      key.push_back(ParamValueToString(c.params.at(p.name)));
    }
    table[absl::StrJoin(key, ",")] = c.outcome == SpaceOutcome::kOk
                                         ? nlohmann::json(c.time_us)
                                         : nlohmann::json(nullptr);
  }
  in["table"] = std::move(table);
  for (const ParamMap& b : baselines) {
    std::vector<std::string> key;
    for (const SpaceParameter& p : space.parameters) {
      key.push_back(ParamValueToString(b.at(p.name)));
    }
    in["baselines"].push_back(absl::StrJoin(key, ","));
  }
  char tmpl[] = "/tmp/search_bench_XXXXXX";
  const int fd = mkstemp(tmpl);
  if (fd < 0) return {};
  close(fd);
  const std::string in_path = tmpl, out_path = in_path + ".out";
  {
    std::ofstream f(in_path);
    f << in.dump();
  }
  const std::string cmd =
      absl::StrCat(python, " ", bridge, " ", in_path, " ", out_path);
  const int rc = std::system(cmd.c_str());
  std::map<std::string, std::vector<std::vector<double>>> out;
  std::ifstream f(out_path);
  if (rc == 0 && f) {
    nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
    if (!j.is_discarded()) {
      for (auto& [k, v] : j.items()) {
        out[k] = v.get<std::vector<std::vector<double>>>();
      }
    }
  }
  std::remove(in_path.c_str());
  std::remove(out_path.c_str());
  return out;
}

}  // namespace
}  // namespace tunefarm

int main(int argc, char** argv) {
  using namespace tunefarm;
  CLI::App app{"search strategies on measured search spaces, K boards"};
  std::vector<std::string> files;
  int seeds = 20, jobs = 2;
  int k_seeds = 0;
  std::string boards_text = "1,4,16,64";
  std::string main_strategy = "hybrid";
  std::string others = "random,guided,tpe";
  std::string python = "/usr/bin/python3";
  std::string bridge;
  std::string options_text;
  std::string optuna_cache;
  double wall_evals = 50;
  bool smoke = false;
  SimOptions so;
  app.add_option("spaces", files,
                 "space files (.kt.json[.gz], .t4.json.gz, .ktt.json[.gz])")
      ->required();
  app.add_option("--seeds", seeds, "runs per strategy and space");
  app.add_option("--k_seeds", k_seeds,
                 "runs per space of the judged strategy's K-board table "
                 "and eff16, when more than --seeds (the median time to 5% "
                 "at K = 16 swings by about 0.1 at 20 seeds); the other "
                 "tables stay at --seeds");
  app.add_option("--budget", so.budget, "evaluations per run");
  app.add_option("--boards", boards_text, "simulated farm sizes K");
  app.add_option("--samples", so.samples, "timed runs per evaluation");
  app.add_option("--overhead_s", so.overhead_s, "fixed seconds per round");
  app.add_option("--min_gain", so.min_gain, "the sweeps' minimum gain");
  app.add_flag("--baseline_first", so.baseline_first,
               "what-if: no candidate before the baseline's result, for any "
               "strategy (the coordinator proposes hybrid's and tpe's "
               "while it runs)");
  app.add_option("--strategy", main_strategy, "the strategy judged");
  app.add_option("--others", others, "strategies shown for reference (K=1)");
  app.add_option("--options", options_text,
                 "strategy options for the judged one, k=v,k=v");
  app.add_option("--python", python, "python with optuna ('' = skip)");
  app.add_option("--bridge", bridge, "path of optuna_bridge.py");
  app.add_option("--optuna_cache", optuna_cache,
                 "JSON file keeping the bridge's traces per space (same "
                 "seeds and budget): read when it has the space, else "
                 "written after the bridge ran");
  app.add_option("--wall_evals", wall_evals,
                 "the fixed wall time, in sequential evaluations of the "
                 "baseline's duration");
  app.add_option("--jobs", jobs, "threads");
  app.add_flag("--smoke", smoke, "CI: 2 seeds, budget 40, K=1,4, no Optuna");
  CLI11_PARSE(app, argc, argv);
  if (smoke) {
    seeds = std::min(seeds, 2);
    so.budget = std::min(so.budget, 40);
    boards_text = "1,4";
    python.clear();
  }
  std::vector<int> ks;
  for (absl::string_view k : absl::StrSplit(boards_text, ',')) {
    int v = 0;
    if (!absl::SimpleAtoi(k, &v) || v < 1) {
      std::fprintf(stderr, "--boards: '%s' is not a board count\n",
                   std::string(k).c_str());
      return 2;
    }
    ks.push_back(v);
  }
  std::map<std::string, std::string> opts;
  for (absl::string_view kv :
       absl::StrSplit(options_text, ',', absl::SkipEmpty())) {
    std::pair<std::string, std::string> p = absl::StrSplit(kv, '=');
    opts[p.first] = p.second;
  }
  std::vector<Variant> variants;
  variants.push_back({main_strategy, main_strategy, false, ks});
  variants.push_back(
      {main_strategy + "+constraints", main_strategy, true, {1}});
  for (absl::string_view o : absl::StrSplit(others, ',', absl::SkipEmpty())) {
    variants.push_back({std::string(o), std::string(o), false, {1}});
  }
  if (bridge.empty()) {
    bridge =
        std::string(TUNEFARM_SOURCE_DIR) + "/bench/search/optuna_bridge.py";
  }
  bool have_optuna = false;
  if (!python.empty()) {
    have_optuna =
        std::system(
            absl::StrCat(python, " -c 'import optuna' 2>/dev/null").c_str()) ==
        0;
    if (!have_optuna) {
      std::fprintf(stderr,
                   "optuna not importable by %s: Optuna columns are the "
                   "published ones\n",
                   python.c_str());
    }
  }

  struct SpaceResult {
    std::string name;
    std::map<std::string, Cell> cells;  // by variant label
    std::map<std::string, Cell> optuna;
    const Published* published = nullptr;
    double random_e5 = kInf;
    double wall = 0;
  };
  std::vector<SpaceResult> results;
  const auto bench_start = std::chrono::steady_clock::now();
  for (const std::string& file : files) {
    absl::StatusOr<Space> loaded = LoadSpaceFile(file);
    if (!loaded.ok()) {
      std::fprintf(stderr, "%s\n", loaded.status().ToString().c_str());
      return 1;
    }
    auto space = std::make_shared<const Space>(*std::move(loaded));
    const v1::OperatorManifest constrained = ManifestFromSpace(*space);
    v1::OperatorManifest unconstrained = constrained;
    unconstrained.clear_constraints();
    std::vector<size_t> valid;
    for (size_t i = 0; i < space->configs.size(); ++i) {
      if (space->configs[i].outcome == SpaceOutcome::kOk) valid.push_back(i);
    }
    std::vector<ParamMap> baselines;
    for (int seed = 1; seed <= std::max(seeds, k_seeds); ++seed) {
      std::seed_seq seq{static_cast<uint32_t>(seed), 0x9e3779b9u, 0x85ebca6bu};
      std::mt19937_64 rng(seq);
      baselines.push_back(space->configs[valid[rng() % valid.size()]].params);
    }
    SpaceResult res;
    res.name = file.substr(file.find_last_of('/') + 1);
    res.published = FindPublished(res.name);
    const double opt = space->best_us;
    // The fixed wall time: wall_evals sequential rounds of the median
    // configuration.
    std::vector<double> times;
    for (size_t i : valid) times.push_back(space->configs[i].time_us);
    res.wall = wall_evals * (Median(times) * 1e-6 * so.samples + so.overhead_s);

    // Jobs: (variant, K, seed).
    struct Job {
      size_t variant;
      int k, seed;
      Trace trace;
    };
    std::vector<Job> work;
    for (size_t v = 0; v < variants.size(); ++v) {
      // The judged strategy's K-board runs (variant 0) over k_seeds.
      const int n = v == 0 ? std::max(seeds, k_seeds) : seeds;
      for (int k : variants[v].boards) {
        for (int seed = 1; seed <= n; ++seed) work.push_back({v, k, seed, {}});
      }
    }
    std::atomic<size_t> next{0};
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (int j = 0; j < std::max(1, jobs); ++j) {
      threads.emplace_back([&] {
        ReplayBoardOptions bo;
        bo.board_id = "bench/replay";
        bo.space = space;
        std::unique_ptr<Board> board = *NewReplayBoard(bo);
        for (size_t i = next++; i < work.size(); i = next++) {
          Job& job = work[i];
          const Variant& var = variants[job.variant];
          std::unique_ptr<Strategy> s =
              Make(var.strategy, job.seed,
                   var.strategy == main_strategy
                       ? opts
                       : std::map<std::string, std::string>{});
          SimOptions o = so;
          o.boards = job.k;
          job.trace =
              Simulate(var.constraints ? constrained : unconstrained, *board,
                       *s, baselines[job.seed - 1], job.seed, o);
        }
      });
    }
    for (std::thread& t : threads) t.join();
    std::fprintf(
        stderr, "%s: %zu runs in %.1f s\n", res.name.c_str(), work.size(),
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count());
    for (size_t v = 0; v < variants.size(); ++v) {
      Cell& cell = res.cells[variants[v].label];
      for (int k : variants[v].boards) {
        std::vector<double> e5, e1, b50, b200, used, t5, t1, bw, first_us,
            last_us;
        int reach5 = 0;
        for (const Job& job : work) {
          if (job.variant != v || job.k != k) continue;
          const Trace& t = job.trace;
          t5.push_back(TimeTo(t, opt * 1.05));
          t1.push_back(TimeTo(t, opt * 1.01));
          bw.push_back(BestAtTime(t, res.wall) / opt);
          if (k != 1 || job.seed > seeds) continue;
          if (getenv("SEARCH_BENCH_DEBUG") != nullptr) {
            std::fprintf(
                stderr,
                "%s %s seed %d: kept best %.3f, measured %.3f, %d proposed\n",
                res.name.c_str(), variants[v].label.c_str(), job.seed,
                t.best.back() / opt, t.measured_best / opt, t.proposed);
          }
          e5.push_back(EvalsTo(t, opt * 1.05));
          e1.push_back(EvalsTo(t, opt * 1.01));
          reach5 += !std::isinf(e5.back());
          b50.push_back(BestAfter(t, 50) / opt);
          b200.push_back(BestAfter(t, so.budget) / opt);
          used.push_back(t.proposed);
          if (const size_t n = t.propose_us.size(); n > 0) {
            const size_t w = std::min(n, kProposalWindow);
            auto mean = [&](size_t from) {
              double sum = 0;
              for (size_t i = from; i < from + w; ++i) sum += t.propose_us[i];
              return sum / static_cast<double>(w);
            };
            first_us.push_back(mean(0));
            last_us.push_back(mean(n - w));
          }
          if (t.proposed < so.budget && t.best.back() > opt * 1.05) {
            cell.unspent_off5 = true;
          }
        }
        if (getenv("SEARCH_BENCH_DEBUG") != nullptr) {
          std::map<std::string, std::pair<int, int>> sum;
          for (const Job& job : work) {
            if (job.variant != v || job.k != k) continue;
            for (const auto& [stage, fk] : job.trace.stages) {
              sum[stage].first += fk.first;
              sum[stage].second += fk.second;
            }
          }
          std::string line;
          for (const auto& [stage, fk] : sum) {
            absl::StrAppend(&line, " ", stage, " ", fk.first, "/", fk.second);
          }
          std::vector<double> k_e5;
          for (const Job& job : work) {
            if (job.variant != v || job.k != k) continue;
            k_e5.push_back(EvalsTo(job.trace, opt * 1.05));
          }
          const int reached = static_cast<int>(
              std::count_if(k_e5.begin(), k_e5.end(),
                            [](double e) { return std::isfinite(e); }));
          std::vector<double> sorted = k_e5;
          std::sort(sorted.begin(), sorted.end());
          std::string per_seed;
          for (double e : sorted) {
            absl::StrAppend(&per_seed, per_seed.empty() ? "" : ",",
                            Evals(e, so.budget));
          }
          std::fprintf(stderr,
                       "%s %s K=%d reached 5%% %d/%zu, median evals to 5%% "
                       "%s (per seed, sorted: %s), t5 %s; rounds/kept by "
                       "stage:%s\n",
                       res.name.c_str(), variants[v].label.c_str(), k, reached,
                       k_e5.size(), Evals(Median(k_e5), so.budget).c_str(),
                       per_seed.c_str(), Secs(Median(t5)).c_str(),
                       line.c_str());
        }
        cell.t5[k] = Median(t5);
        cell.t1[k] = Median(t1);
        cell.bw[k] = Median(bw);
        if (k == 1) {
          cell.e5 = Median(e5);
          cell.e1 = Median(e1);
          cell.b50 = Median(b50);
          cell.b200 = Median(b200);
          cell.used = Median(used);
          cell.reach5 = 100.0 * reach5 / seeds;
          if (!first_us.empty()) {
            cell.propose_first_us = Median(first_us);
            cell.propose_last_us = Median(last_us);
          }
        }
      }
    }
    if (res.cells.count("random")) res.random_e5 = res.cells["random"].e5;
    nlohmann::json cache = nlohmann::json::object();
    if (!optuna_cache.empty()) {
      std::ifstream f(optuna_cache);
      if (f) cache = nlohmann::json::parse(f, nullptr, false);
      if (cache.is_discarded()) cache = nlohmann::json::object();
    }
    std::map<std::string, std::vector<std::vector<double>>> runs;
    const std::string cache_key =
        absl::StrCat(res.name, "/seeds=", seeds, "/budget=", so.budget);
    if (cache.contains(cache_key)) {
      for (auto& [k, v] : cache[cache_key].items()) {
        runs[k] = v.get<std::vector<std::vector<double>>>();
      }
      std::fprintf(stderr, "%s: optuna traces from %s\n", res.name.c_str(),
                   optuna_cache.c_str());
    } else if (have_optuna) {
      const auto t0 = std::chrono::steady_clock::now();
      runs = RunOptuna(
          python, bridge, *space,
          std::vector<ParamMap>(baselines.begin(), baselines.begin() + seeds),
          so.budget, jobs);
      if (!optuna_cache.empty() && !runs.empty()) {
        cache[cache_key] = runs;
        std::ofstream f(optuna_cache);
        f << cache.dump();
      }
      std::fprintf(
          stderr, "%s: optuna in %.1f s\n", res.name.c_str(),
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
              .count());
    }
    {
      for (auto& [label, traces] : runs) {
        std::vector<double> e5, e1, b50, b200;
        for (const std::vector<double>& best : traces) {
          Trace t;
          t.best = best;
          t.time.assign(best.size(), 0);
          e5.push_back(EvalsTo(t, opt * 1.05));
          e1.push_back(EvalsTo(t, opt * 1.01));
          b50.push_back(BestAfter(t, 50) / opt);
          b200.push_back(BestAfter(t, so.budget) / opt);
        }
        Cell& c = res.optuna[label];
        c.e5 = Median(e5);
        c.e1 = Median(e1);
        c.b50 = Median(b50);
        c.b200 = Median(b200);
      }
    }
    results.push_back(std::move(res));
  }

  // Table 1: every strategy at K = 1.
  std::printf(
      "Budget %d evaluations, %d seeds, min_gain %.3f, %d samples + %.1f s "
      "per round; judged strategy %s%s%s.\n\n",
      so.budget, seeds, so.min_gain, so.samples, so.overhead_s,
      main_strategy.c_str(), options_text.empty() ? "" : " ",
      options_text.c_str());
  std::printf(
      "| space | strategy | median evals to 5%% | reached 5%% | median evals "
      "to 1%% | best after 50 (x opt) | best after %d (x opt) | median evals "
      "used |\n|---|---|---:|---:|---:|---:|---:|---:|\n",
      so.budget);
  for (const SpaceResult& r : results) {
    for (const Variant& v : variants) {
      const Cell& c = r.cells.at(v.label);
      std::printf("| %s | %s | %s | %.0f%% | %s | %.3f | %.3f | %.0f |\n",
                  r.name.c_str(), v.label.c_str(),
                  Evals(c.e5, so.budget).c_str(), c.reach5,
                  Evals(c.e1, so.budget).c_str(), c.b50, c.b200, c.used);
    }
    for (const auto& [label, c] : r.optuna) {
      std::printf("| %s | optuna %s (bridge) | %s | | %s | %.3f | %.3f | |\n",
                  r.name.c_str(), label.c_str(), Evals(c.e5, so.budget).c_str(),
                  Evals(c.e1, so.budget).c_str(), c.b50, c.b200);
    }
  }

  // Table 2: against the peers. Ours: no constraints against the peers
  // without them, given constraints against KT GA given them.
  int wins_e5 = 0, wins_b = 0, wins_c = 0, unspent = 0;
  auto at_least = [](double ours, double peer) { return ours <= peer; };
  auto at_least_b = [](double ours, double peer) {
    return ours <= peer + 0.0005;  // the peers' figures have 3 decimals
  };
  std::printf(
      "\n| space | %s e5 / b%d | %s+constraints | Optuna TPE | Optuna TPE "
      "(multivariate) | KT GA | KT GA, constraints | verdict |\n"
      "|---|---|---|---|---|---|---|---|\n",
      main_strategy.c_str(), so.budget, main_strategy.c_str());
  for (const SpaceResult& r : results) {
    const Cell& ours = r.cells.at(main_strategy);
    const Cell& ourc = r.cells.at(main_strategy + "+constraints");
    const Published* p = r.published;
    auto peer = [&](const char* label, double pub_e5, double pub_b,
                    bool* live) {
      auto it = r.optuna.find(label);
      *live = it != r.optuna.end();
      return *live ? std::pair{it->second.e5, it->second.b200}
                   : std::pair{pub_e5, pub_b};
    };
    bool live_tpe = false, live_mv = false;
    const auto tpe =
        peer("tpe", p ? p->tpe_e5 : kInf, p ? p->tpe_b : kInf, &live_tpe);
    const auto mv =
        peer("tpe_mv", p ? p->mv_e5 : kInf, p ? p->mv_b : kInf, &live_mv);
    const double ga_e5 = p ? p->ga_e5 : kInf, ga_b = p ? p->ga_b : kInf;
    const double gac_e5 = p ? p->gac_e5 : kInf, gac_b = p ? p->gac_b : kInf;
    const bool e5_ok = at_least(ours.e5, tpe.first) &&
                       at_least(ours.e5, mv.first) && at_least(ours.e5, ga_e5);
    const bool b_ok = at_least_b(ours.b200, tpe.second) &&
                      at_least_b(ours.b200, mv.second) &&
                      at_least_b(ours.b200, ga_b);
    const bool c_ok = at_least(ourc.e5, gac_e5) && at_least_b(ourc.b200, gac_b);
    wins_e5 += e5_ok;
    wins_b += b_ok;
    wins_c += c_ok;
    unspent += ours.unspent_off5 || ourc.unspent_off5;
    auto cell = [&](double e5, double b, const char* note) {
      return absl::StrFormat("%s / %.3f%s", Evals(e5, so.budget), b, note);
    };
    std::printf("| %s | %s | %s | %s | %s | %s | %s | %s%s%s |\n",
                r.name.c_str(), cell(ours.e5, ours.b200, "").c_str(),
                cell(ourc.e5, ourc.b200, "").c_str(),
                cell(tpe.first, tpe.second, live_tpe ? "" : " (pub.)").c_str(),
                cell(mv.first, mv.second, live_mv ? "" : " (pub.)").c_str(),
                cell(ga_e5, ga_b, " (pub.)").c_str(),
                cell(gac_e5, gac_b, " (pub.)").c_str(),
                e5_ok ? "e5 ok" : "e5 LOSES", b_ok ? ", b ok" : ", b LOSES",
                c_ok ? ", constrained ok" : ", constrained LOSES");
  }

  // Table 3: K boards.
  std::printf(
      "\nSimulated wall time (s) of %s to within 5%% / 1%% of the "
      "optimum, and best (x opt) after the fixed wall time; parallel "
      "efficiency T(1)/(K T(K)) for 5%%; medians over %d seeds.\n\n| "
      "space | fixed wall (s) |",
      main_strategy.c_str(), std::max(seeds, k_seeds));
  for (int k : ks) std::printf(" K=%d: t5 / t1 / best |", k);
  std::printf(" eff at 16 |\n|---|---:|");
  for (size_t i = 0; i < ks.size(); ++i) std::printf("---|");
  std::printf("---:|\n");
  std::vector<double> effs;
  for (const SpaceResult& r : results) {
    const Cell& c = r.cells.at(main_strategy);
    std::printf("| %s | %.0f |", r.name.c_str(), r.wall);
    for (int k : ks) {
      std::printf(" %s / %s / %.3f |", Secs(c.t5.at(k)).c_str(),
                  Secs(c.t1.at(k)).c_str(), c.bw.at(k));
    }
    double eff = kInf;
    if (c.t5.count(1) && c.t5.count(16) && std::isfinite(c.t5.at(1)) &&
        std::isfinite(c.t5.at(16)) && c.t5.at(16) > 0) {
      eff = c.t5.at(1) / (16 * c.t5.at(16));
    }
    // Trivial spaces (random within 5% in 20 evaluations) do not count.
    const bool trivial = r.random_e5 <= 20;
    if (std::isfinite(eff) && !trivial) effs.push_back(eff);
    std::printf(
        " %s%s |\n",
        std::isfinite(eff) ? absl::StrFormat("%.2f", eff).c_str() : "n/a",
        trivial ? " (trivial)" : "");
  }
  const double eff16 = effs.empty() ? 0 : Median(effs);

  // Table 4: what a proposal costs the coordinator's control loop, early
  // and late in a sweep (does it grow with the history?).
  std::printf(
      "\nCPU per proposal of %s at K = 1 (us, one thread): the mean over a "
      "run's first and last %zu proposals, median over %d seeds.\n\n| space "
      "| first %zu | last %zu | last / first |\n|---|---:|---:|---:|\n",
      main_strategy.c_str(), kProposalWindow, seeds, kProposalWindow,
      kProposalWindow);
  std::vector<double> firsts, lasts;
  for (const SpaceResult& r : results) {
    const Cell& c = r.cells.at(main_strategy);
    if (c.propose_first_us <= 0) continue;
    firsts.push_back(c.propose_first_us);
    lasts.push_back(c.propose_last_us);
    std::printf("| %s | %.0f | %.0f | %.2f |\n", r.name.c_str(),
                c.propose_first_us, c.propose_last_us,
                c.propose_last_us / c.propose_first_us);
  }
  const double propose_first = firsts.empty() ? 0 : Median(firsts);
  const double propose_last = lasts.empty() ? 0 : Median(lasts);
  bool any_live = false;
  for (const SpaceResult& r : results) any_live |= !r.optuna.empty();
  std::printf(
      "\nsearch_bench: spaces=%zu wins_e5=%d wins_b200=%d "
      "wins_constrained=%d unspent_off5=%d eff16=%.2f optuna=%s seeds=%d "
      "k_seeds=%d budget=%d propose_us_first=%.0f propose_us_last=%.0f "
      "wall_s=%.0f\n",
      results.size(), wins_e5, wins_b, wins_c, unspent, eff16,
      any_live ? "bridge" : "published", seeds, std::max(seeds, k_seeds),
      so.budget, propose_first, propose_last,
      std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                    bench_start)
          .count());
  return 0;
}
