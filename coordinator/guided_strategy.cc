#include "coordinator/guided_strategy.h"

#include <algorithm>
#include <climits>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "coordinator/seed_seq.h"
#include "coordinator/strategy_util.h"
#include "ops/catalog.h"

namespace tunefarm {
namespace {

constexpr int kStages = 3;
constexpr int kMaxCount = 1000000;

int StageIndex(const std::string& stage) {
  if (stage.empty() || stage == "tiling") return 0;
  if (stage == "pipeline") return 1;
  return 2;  // in_core, and anything the manifest calls otherwise
}

// Stage index of a round's tag (kStages for escape rounds); -1 for rounds
// not proposed by the guided strategy.
int TagIndex(const std::string& tag) {
  const auto& stages = GuidedStages();
  for (int i = 0; i < kStages; ++i) {
    if (stages[i] == tag) return i;
  }
  if (tag == kGuidedEscapeStage) return kStages;
  return -1;
}

struct ParamInfo {
  const v1::ParameterDomain* domain = nullptr;
  int stage = 0;
  std::vector<v1::ParamValue> ordered;  // "up" = later in this list
  absl::flat_hash_map<std::string, int> pos;
};

// One derived fact per finished round that matters to the choice of moves.
struct Knowledge {
  std::vector<ParamInfo> params;  // manifest order
  ParamMap parent;
  std::string parent_key;
  absl::flat_hash_set<std::string> visited;
  std::set<std::pair<std::string, std::string>> precision_failed;
  // param -> (direction, from position) of failed builds / crashes / timeouts
  std::map<std::string, std::vector<std::pair<int, int>>> failed_moves;
  std::map<std::pair<std::string, int>, int64_t> last_gain_dir;
  std::map<std::string, int64_t> last_gain_param;
  const v1::Diagnosis* diagnosis = nullptr;
  ConstraintSet constraints;
};

int PosOf(const ParamInfo& p, const v1::ParamValue& v) {
  auto it = p.pos.find(ParamValueToString(v));
  return it == p.pos.end() ? -1 : it->second;
}

Knowledge Learn(const SearchHistory& h) {
  Knowledge k;
  const v1::OperatorManifest& op = *h.op;
  k.constraints = ConstraintsOf(op);
  std::map<std::string, int> by_name;
  for (const v1::ParameterDomain& d : op.parameters()) {
    ParamInfo p;
    p.domain = &d;
    p.stage = StageIndex(d.stage());
    p.ordered = OrderedValues(d);
    for (int i = 0; i < static_cast<int>(p.ordered.size()); ++i) {
      p.pos.emplace(ParamValueToString(p.ordered[i]), i);
    }
    by_name[d.name()] = static_cast<int>(k.params.size());
    k.params.push_back(std::move(p));
  }
  const v1::Round* best = FindRound(h, h.best_round);
  if (best != nullptr) {
    k.parent = best->params();
    if (best->diagnosis().suggestions_size() > 0)
      k.diagnosis = &best->diagnosis();
  } else if (h.spec != nullptr && !h.spec->baseline_params().empty()) {
    k.parent = DefaultParams(op);
    for (const auto& [name, v] : h.spec->baseline_params()) k.parent[name] = v;
  } else {
    k.parent = DefaultParams(op);
  }
  k.parent_key = ParamsKey(k.parent);
  if (h.rounds == nullptr) return k;
  for (const v1::Round& r : *h.rounds) {
    k.visited.insert(ParamsKey(r.params()));
    if (r.state() != v1::ROUND_STATE_DONE || r.changes_size() != 1) continue;
    const v1::ParamChange& c = r.changes(0);
    auto it = by_name.find(c.name());
    if (it == by_name.end()) continue;
    const ParamInfo& p = k.params[it->second];
    const int from = PosOf(p, c.from());
    const int to = PosOf(p, c.to());
    const int dir = to > from ? 1 : -1;
    switch (r.result().outcome()) {
      case v1::OUTCOME_PRECISION_FAILED:
        k.precision_failed.emplace(c.name(), ParamValueToString(c.to()));
        break;
      case v1::OUTCOME_BUILD_FAILED:
      case v1::OUTCOME_RUN_CRASHED:
      case v1::OUTCOME_RUN_TIMEOUT:
        if (from >= 0 && to >= 0)
          k.failed_moves[c.name()].emplace_back(dir, from);
        break;
      default:
        break;
    }
    if (r.decision() == v1::DECISION_KEPT && from >= 0 && to >= 0) {
      int64_t& d = k.last_gain_dir[{c.name(), dir}];
      d = std::max(d, r.round_id());
      int64_t& q = k.last_gain_param[c.name()];
      q = std::max(q, r.round_id());
    }
  }
  return k;
}

// The stage run the history ends in.
struct RunState {
  int pass = 1;
  int stage = 0;
  int count = 0;      // finished rounds without gain after the run's last kept
  int in_flight = 0;  // queued or leased rounds of the run
  bool pass_gained = false;
};

RunState LastRun(const SearchHistory& h) {
  RunState s;
  if (h.rounds == nullptr) return s;
  int current = -1;
  for (const v1::Round& r : *h.rounds) {
    const int idx = TagIndex(r.stage());
    if (idx < 0) continue;
    if (idx != current) {
      if (current >= 0 && idx < current) {
        ++s.pass;
        s.pass_gained = false;
      }
      current = idx;
      s.stage = idx;
      s.count = 0;
      s.in_flight = 0;
    }
    if (r.state() == v1::ROUND_STATE_CANCELLED) continue;
    if (r.state() != v1::ROUND_STATE_DONE) {
      ++s.in_flight;
    } else if (r.decision() == v1::DECISION_KEPT) {
      s.count = 0;
      s.pass_gained = true;
    } else {
      ++s.count;
    }
  }
  return s;
}

struct Move {
  int param = 0;
  int to = 0;  // position in ordered
  std::tuple<int, int, double, int, int64_t, int64_t, uint64_t> rank;
  std::string why;
};

std::vector<Move> Moves(const Knowledge& k, int stage, uint64_t seed) {
  std::vector<Move> moves;
  std::set<std::pair<int, int>> seen;
  auto deprioritised = [&](const std::string& name, int from, int dir) {
    auto it = k.failed_moves.find(name);
    if (it == k.failed_moves.end()) return false;
    for (const auto& [d, f] : it->second) {
      if (d == dir && (dir > 0 ? from >= f : from <= f)) return true;
    }
    return false;
  };
  auto usable = [&](int pi, int to) {
    const ParamInfo& p = k.params[pi];
    const std::string& name = p.domain->name();
    if (seen.count({pi, to})) return false;
    if (k.precision_failed.count({name, ParamValueToString(p.ordered[to])})) {
      return false;
    }
    ParamMap params = k.parent;
    params[name] = p.ordered[to];
    return !k.visited.contains(ParamsKey(params)) &&
           k.constraints.Feasible(params);
  };
  auto add = [&](int pi, int from, int to, int source, double confidence,
                 std::string why) {
    const ParamInfo& p = k.params[pi];
    const std::string& name = p.domain->name();
    const int dir = to > from ? 1 : -1;
    auto g = k.last_gain_dir.find({name, dir});
    auto q = k.last_gain_param.find(name);
    const uint64_t tie =
        Fnv(absl::StrCat(name, "=", ParamValueToString(p.ordered[to])),
            Fnv(k.parent_key, Fnv(absl::StrCat(seed))));
    Move m;
    m.param = pi;
    m.to = to;
    m.rank = {deprioritised(name, from, dir) ? 1 : 0,
              source,
              -confidence,
              std::abs(to - from),
              g == k.last_gain_dir.end() ? 1 : -g->second,
              q == k.last_gain_param.end() ? 1 : -q->second,
              tie};
    m.why = std::move(why);
    seen.insert({pi, to});
    moves.push_back(std::move(m));
  };

  // The analyzer's suggestions for this stage's parameters.
  if (k.diagnosis != nullptr) {
    for (const v1::Suggestion& s : k.diagnosis->suggestions()) {
      for (int pi = 0; pi < static_cast<int>(k.params.size()); ++pi) {
        const ParamInfo& p = k.params[pi];
        if (p.domain->name() != s.parameter() || p.stage != stage) continue;
        auto cur = k.parent.find(s.parameter());
        if (cur == k.parent.end()) continue;
        const int from = PosOf(p, cur->second);
        if (from < 0) continue;
        const int given = s.has_value() ? PosOf(p, s.value()) : -1;
        const int to = SuggestedPosition(s, from, given,
                                         static_cast<int>(p.ordered.size()));
        if (to < 0 || !usable(pi, to)) continue;
        add(pi, from, to, 0, s.confidence(),
            absl::StrFormat("analyzer suggests %s %s (rule %s, confidence "
                            "%.2f: %s)",
                            s.direction(), s.parameter(), s.rule(),
                            s.confidence(), s.evidence()));
      }
    }
  }
  // Neighbours: every other value of each stage parameter, nearest first.
  for (int pi = 0; pi < static_cast<int>(k.params.size()); ++pi) {
    const ParamInfo& p = k.params[pi];
    if (p.stage != stage || p.ordered.size() < 2) continue;
    auto cur = k.parent.find(p.domain->name());
    if (cur == k.parent.end()) continue;
    const int from = PosOf(p, cur->second);
    if (from < 0) continue;
    for (int to = 0; to < static_cast<int>(p.ordered.size()); ++to) {
      if (to == from || !usable(pi, to)) continue;
      const int steps = std::abs(to - from);
      add(pi, from, to, 1, 0,
          absl::StrCat("neighbour: ", steps, " step", steps > 1 ? "s " : " ",
                       to > from ? "up" : "down", " in the domain"));
    }
  }
  std::sort(moves.begin(), moves.end(),
            [](const Move& a, const Move& b) { return a.rank < b.rank; });
  return moves;
}

// Escape moves: the best with 2 or 3 parameters each moved 1 to 3 steps
// (uniform, by a generator seeded from the seed, the best and the number of
// rounds so far), never a tried configuration or a value whose precision
// failed. Up to n distinct ones; fewer when draws keep hitting tried ones.
std::vector<std::pair<ParamMap, std::string>> EscapeMoves(
    const Knowledge& k, const SearchHistory& h, uint64_t seed, int n) {
  std::vector<std::pair<ParamMap, std::string>> out;
  std::vector<int> movable;
  for (int pi = 0; pi < static_cast<int>(k.params.size()); ++pi) {
    const ParamInfo& p = k.params[pi];
    if (p.ordered.size() >= 2 && k.parent.contains(p.domain->name()) &&
        PosOf(p, k.parent.at(p.domain->name())) >= 0) {
      movable.push_back(pi);
    }
  }
  if (movable.size() < 2) return out;
  const uint64_t count = h.rounds != nullptr ? h.rounds->size() : 0;
  // SeedSeq: std::seed_seq's algorithm, cheaper.
  SeedSeq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
              static_cast<uint32_t>(count),
              static_cast<uint32_t>(Fnv(k.parent_key)), 0x5eed0e5cu};
  std::mt19937_64 rng(seq);
  // rng() % m: the bias is below 2^-50 for these tiny m, and unlike
  // std::uniform_int_distribution it is the same on every platform.
  absl::flat_hash_set<std::string> taken;
  constexpr int kDraws = 200;
  for (int draw = 0; draw < kDraws * n && static_cast<int>(out.size()) < n;
       ++draw) {
    const int changes = 2 + static_cast<int>(rng() % 2);
    std::vector<int> pool = movable;
    ParamMap params = k.parent;
    std::vector<std::string> what;
    bool ok = true;
    for (int c = 0; c < changes && !pool.empty(); ++c) {
      const size_t at = rng() % pool.size();
      const ParamInfo& p = k.params[pool[at]];
      pool.erase(pool.begin() + static_cast<std::ptrdiff_t>(at));
      const std::string& name = p.domain->name();
      const int from = PosOf(p, k.parent.at(name));
      const int size = static_cast<int>(p.ordered.size());
      const int step = 1 + static_cast<int>(rng() % 3);
      int to = rng() % 2 ? from + step : from - step;
      if (to < 0 || to >= size) to = from + (to < 0 ? step : -step);
      to = std::clamp(to, 0, size - 1);
      if (to == from ||
          k.precision_failed.count({name, ParamValueToString(p.ordered[to])})) {
        ok = false;
        break;
      }
      params[name] = p.ordered[to];
      what.push_back(
          absl::StrCat(name, " ", to > from ? "+" : "-", std::abs(to - from)));
    }
    if (!ok) continue;
    std::string key = ParamsKey(params);
    if (k.visited.contains(key) || !k.constraints.Feasible(params) ||
        !taken.insert(std::move(key)).second) {
      continue;
    }
    std::sort(what.begin(), what.end());
    out.emplace_back(std::move(params),
                     absl::StrCat("escape move: ", what.size(),
                                  " parameters moved at once (",
                                  absl::StrJoin(what, ", "), " steps)"));
  }
  return out;
}

int Patience(const GuidedOptions& o, int stage) {
  return stage == 0   ? o.tiling_patience
         : stage == 1 ? o.pipeline_patience
                      : o.in_core_patience;
}

std::string Limit(int patience) {
  return patience > 0 ? absl::StrCat(patience) : std::string("unlimited");
}

// Walks the stages from where the history ends. Fills `out` with up to n
// candidates (n = 0: only describes).
GuidedProgress Walk(const GuidedOptions& o, const SearchHistory& h, int n,
                    std::vector<Candidate>* out) {
  GuidedProgress g;
  const Knowledge k = Learn(h);
  RunState s = LastRun(h);
  const auto& names = GuidedStages();
  while (true) {
    if (s.stage >= kStages) {
      const bool passes_left = o.max_passes == 0 || s.pass < o.max_passes;
      if (s.pass_gained && passes_left) {
        s = RunState{s.pass + 1, 0, 0, 0, false};
        continue;
      }
      // The pass kept nothing: the best is a local optimum for single
      // changes. Escape moves (several parameters at once) look past it; a
      // kept one starts a new pass from there.
      const std::string where =
          absl::StrCat("every stage exhausted after pass ", s.pass,
                       s.pass_gained ? " (pass limit reached)"
                                     : " (the pass kept no change)");
      std::vector<std::pair<ParamMap, std::string>> escapes;
      const bool escaping = passes_left && o.escapes > 0 && s.count < o.escapes;
      if (escaping) {
        escapes = EscapeMoves(
            k, h, o.seed,
            std::max(1, std::min(n, o.escapes - s.count - s.in_flight)));
      }
      g.pass = s.pass;
      if (escapes.empty() || s.count + s.in_flight >= o.escapes) {
        if (s.in_flight > 0) {
          g.stage = kGuidedEscapeStage;
          g.detail = absl::StrCat(where, "; waiting for ", s.in_flight,
                                  " escape round(s) in flight");
          return g;
        }
        g.exhausted = true;
        g.detail = where;
        if (s.count > 0) {
          absl::StrAppend(&g.detail, "; ", s.count,
                          " escape moves from the best found no gain");
        }
        return g;
      }
      g.stage = kGuidedEscapeStage;
      g.rounds_without_gain = s.count;
      g.in_flight = s.in_flight;
      g.patience = o.escapes;
      g.detail =
          absl::StrCat(where, "; escape ", s.count + 1, " of ", o.escapes);
      if (out == nullptr) return g;
      for (auto& [params, why] : escapes) {
        if (static_cast<int>(out->size()) >= n) break;
        Candidate c;
        c.parent_round = h.best_round;
        c.changes = DiffParams(k.parent, params);
        c.params = std::move(params);
        c.stage = kGuidedEscapeStage;
        c.rationale = absl::StrCat(g.detail, ": ", why);
        out->push_back(std::move(c));
      }
      return g;
    }
    const int patience = Patience(o, s.stage);
    g.pass = s.pass;
    g.stage = names[s.stage];
    g.rounds_without_gain = s.count;
    g.in_flight = s.in_flight;
    g.patience = patience;
    const std::string where =
        absl::StrCat("stage ", names[s.stage], ", pass ", s.pass, ", ", s.count,
                     " of ", Limit(patience), " rounds without gain");
    const bool out_of_patience = patience > 0 && s.count >= patience;
    std::vector<Move> moves;
    if (!out_of_patience) moves = Moves(k, s.stage, o.seed);
    if (out_of_patience || moves.empty()) {
      if (s.in_flight > 0) {  // a round in flight may still gain: wait
        g.detail = absl::StrCat(where, "; waiting for ", s.in_flight,
                                " round(s) in flight");
        return g;
      }
      s = RunState{s.pass, s.stage + 1, 0, 0, s.pass_gained};
      continue;
    }
    int budget = patience > 0 ? patience - s.count - s.in_flight : INT_MAX;
    g.detail = absl::StrCat(where, budget <= 0 ? "; waiting for results" : "");
    if (out == nullptr) return g;
    for (const Move& m : moves) {
      if (static_cast<int>(out->size()) >= std::min(n, budget)) break;
      const ParamInfo& p = k.params[m.param];
      ParamMap params = k.parent;
      params[p.domain->name()] = p.ordered[m.to];
      Candidate c;
      c.parent_round = h.best_round;
      c.changes = DiffParams(k.parent, params);
      c.params = std::move(params);
      c.stage = names[s.stage];
      c.rationale = absl::StrCat(where, ": ", m.why);
      out->push_back(std::move(c));
    }
    return g;
  }
}

class GuidedStrategy : public Strategy {
 public:
  explicit GuidedStrategy(GuidedOptions options) : options_(options) {}
  std::string_view name() const override { return kGuidedStrategyName; }

  std::vector<Candidate> Propose(const SearchHistory& h, int n) override {
    std::vector<Candidate> out;
    if (n <= 0 || h.op == nullptr) return out;
    // Inconclusive rounds that beat the best are raced again first.
    std::vector<std::string> reraced;
    while (static_cast<int>(out.size()) < n) {
      std::optional<Candidate> c = RaceAgainCandidate(h, reraced);
      if (!c.has_value()) break;
      reraced.push_back(ParamsKey(c->params));
      out.push_back(*std::move(c));
    }
    std::vector<Candidate> walk;
    Walk(options_, h, n - static_cast<int>(out.size()), &walk);
    for (Candidate& c : walk) out.push_back(std::move(c));
    return out;
  }

  // STAGES_EXHAUSTED with where the walk ended, unless every configuration
  // of the space has been tried (then the space, not the stages, ran out).
  Exhaustion Exhausted(const SearchHistory& h) const override {
    if (h.op == nullptr) return Strategy::Exhausted(h);
    const GuidedProgress g = Walk(options_, h, 0, nullptr);
    absl::flat_hash_set<std::string> tried;
    if (h.rounds != nullptr) {
      for (const v1::Round& r : *h.rounds) tried.insert(ParamsKey(r.params()));
    }
    if (tried.size() >= SpaceSize(*h.op)) {
      return {v1::TERMINATION_SPACE_EXHAUSTED,
              absl::StrCat("every configuration of the space was tried (",
                           g.detail, ")")};
    }
    return {v1::TERMINATION_STAGES_EXHAUSTED, g.detail};
  }

 private:
  GuidedOptions options_;
};

}  // namespace

const std::vector<std::string>& GuidedStages() {
  static const auto* stages =
      new std::vector<std::string>{"tiling", "pipeline", "in_core"};
  return *stages;
}

const std::vector<std::string>& GuidedOptionNames() {
  static const auto* names =
      new std::vector<std::string>{"escapes", "in_core_patience", "max_passes",
                                   "pipeline_patience", "tiling_patience"};
  return *names;
}

absl::StatusOr<GuidedOptions> GuidedOptionsFromSpec(
    const v1::StrategySpec& spec) {
  GuidedOptions o;
  o.seed = spec.seed();
  const std::map<std::string, int*> fields = {
      {"tiling_patience", &o.tiling_patience},
      {"pipeline_patience", &o.pipeline_patience},
      {"in_core_patience", &o.in_core_patience},
      {"max_passes", &o.max_passes},
      {"escapes", &o.escapes}};
  const std::map<std::string, std::string> sorted(spec.options().begin(),
                                                  spec.options().end());
  for (const auto& [key, value] : sorted) {
    auto it = fields.find(key);
    if (it == fields.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "strategy.options.", key,
          ": unknown option for strategy guided; "
          "it takes escapes, in_core_patience, max_passes, pipeline_patience, "
          "tiling_patience"));
    }
    int v = 0;
    if (value == "unlimited" && key != "escapes") {
      v = 0;
    } else if (!absl::SimpleAtoi(value, &v) || v < 0 || v > kMaxCount) {
      return absl::InvalidArgumentError(
          absl::StrCat("strategy.options.", key, ": '", value.substr(0, 32),
                       "' is not a count in [0, ", kMaxCount, "]",
                       key == "escapes" ? " (0 = no escape moves)"
                                        : " (0 or 'unlimited' = no limit)"));
    }
    *it->second = v;
  }
  return o;
}

GuidedProgress DescribeGuidedProgress(const GuidedOptions& options,
                                      const SearchHistory& history) {
  return Walk(options, history, 0, nullptr);
}

std::unique_ptr<Strategy> NewGuidedStrategy(GuidedOptions options) {
  return std::make_unique<GuidedStrategy>(options);
}

}  // namespace tunefarm
