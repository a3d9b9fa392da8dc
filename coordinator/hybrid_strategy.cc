#include "coordinator/hybrid_strategy.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "coordinator/strategy_util.h"
#include "ops/catalog.h"

namespace tunefarm {
namespace {

constexpr uint64_t kEnumerateLimit = uint64_t{1} << 22;
constexpr int kUniformDraws = 4000;
constexpr int kMaxGood = 25;

double Uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

// rng() % bound; the bias is negligible for domain-sized bounds and, unlike
// std::uniform_int_distribution, the same on every platform.
int Below(std::mt19937_64& rng, int bound) {
  return static_cast<int>(rng() % static_cast<uint64_t>(bound));
}

struct Dim {
  std::string name;
  std::string stage;  // tiling | pipeline | in_core
  std::vector<v1::ParamValue> ordered;
  absl::flat_hash_map<std::string, int> pos;
  // kernel[c][j]: probability of value j around centre c, and its CDF.
  std::vector<std::vector<double>> kernel, cdf;
};

using Config = std::vector<int>;  // one position per Dim

struct Model {
  std::vector<Dim> dims;
  // Every round's configuration: a mixed-radix code when it lies on the grid
  // (and the space has fewer than 2^62 points), its ParamsKey otherwise.
  absl::flat_hash_set<uint64_t> visited_codes;
  absl::flat_hash_set<std::string> visited;
  bool codable = true;
  std::vector<std::pair<double, Config>> ok;  // (log median, config)
  std::vector<Config> failed;
  std::vector<Config> good, bad;
  Config best;  // empty when the best is not on the grid
  ParamMap parent;
  const v1::Diagnosis* diagnosis = nullptr;
  ConstraintSet constraints;
  int walk_used = 0;  // walk rounds from the current best (not cancelled)
  int global_since_best = 0;  // other rounds proposed after the best
  int rounds = 0;             // rounds other than cancelled ones
};

ParamMap ToParams(const Model& m, const Config& c) {
  ParamMap p = m.parent;  // keeps parameters outside the grid, if any
  for (size_t i = 0; i < m.dims.size(); ++i) {
    p[m.dims[i].name] = m.dims[i].ordered[c[i]];
  }
  return p;
}

bool ToConfig(const Model& m, const ParamMap& p, Config* c) {
  c->assign(m.dims.size(), 0);
  for (size_t i = 0; i < m.dims.size(); ++i) {
    auto v = p.find(m.dims[i].name);
    if (v == p.end()) return false;
    auto at = m.dims[i].pos.find(ParamValueToString(v->second));
    if (at == m.dims[i].pos.end()) return false;
    (*c)[i] = at->second;
  }
  return true;
}

uint64_t Code(const Model& m, const Config& c) {
  uint64_t code = 0;
  for (size_t i = 0; i < m.dims.size(); ++i) {
    code = code * m.dims[i].ordered.size() + static_cast<uint64_t>(c[i]);
  }
  return code;
}

// Not tried yet, and feasible.
bool Fresh(const Model& m, const Config& c) {
  if (m.codable) {
    if (m.visited_codes.contains(Code(m, c))) return false;
    if (m.visited.empty() && m.constraints.empty()) return true;
  }
  const ParamMap p = ToParams(m, c);
  return (m.codable || !m.visited.contains(ParamsKey(p))) &&
         m.constraints.Feasible(p);
}

bool IsWalkStage(const std::string& s) {
  return s == "tiling" || s == "pipeline" || s == "in_core";
}

void BuildKernels(Dim& d, bool ordinal, int components) {
  const int k = static_cast<int>(d.ordered.size());
  // The bandwidth narrows slowly as good configurations accumulate (Scott's
  // rule's n^-1/5), never below half a step.
  const double bw =
      std::max(0.5, 0.25 * k * std::pow(std::max(1, components), -0.2));
  d.kernel.assign(k, std::vector<double>(k));
  d.cdf.assign(k, std::vector<double>(k));
  for (int c = 0; c < k; ++c) {
    double sum = 0;
    for (int j = 0; j < k; ++j) {
      const double w = ordinal
                           ? std::exp(-0.5 * ((j - c) / bw) * ((j - c) / bw))
                           : (j == c ? 1.0 : 1.0 / k);
      d.kernel[c][j] = w;
      sum += w;
    }
    double acc = 0;
    for (int j = 0; j < k; ++j) {
      d.kernel[c][j] /= sum;
      acc += d.kernel[c][j];
      d.cdf[c][j] = acc;
    }
  }
}

Model Learn(const HybridOptions& o, const SearchHistory& h) {
  Model m;
  const v1::OperatorManifest& op = *h.op;
  m.constraints = ConstraintsOf(op);
  std::vector<bool> ordinal;
  for (const v1::ParameterDomain& p : op.parameters()) {
    Dim d;
    d.name = p.name();
    d.stage = p.stage().empty() ? "tiling" : p.stage();
    if (!IsWalkStage(d.stage)) d.stage = "in_core";
    d.ordered = OrderedValues(p);
    ordinal.push_back(
        std::all_of(d.ordered.begin(), d.ordered.end(), IsNumber));
    for (int i = 0; i < static_cast<int>(d.ordered.size()); ++i) {
      d.pos.emplace(ParamValueToString(d.ordered[i]), i);
    }
    m.dims.push_back(std::move(d));
  }
  // The parent: the best round, else the baseline parameters.
  const v1::Round* best = nullptr;
  if (h.rounds != nullptr) {
    for (const v1::Round& r : *h.rounds) {
      if (r.round_id() == h.best_round) best = &r;
    }
  }
  if (best != nullptr) {
    m.parent = best->params();
    if (best->diagnosis().suggestions_size() > 0 && o.use_diagnosis) {
      m.diagnosis = &best->diagnosis();
    }
  } else {
    m.parent = DefaultParams(op);
    if (h.spec != nullptr) {
      for (const auto& [k, v] : h.spec->baseline_params()) m.parent[k] = v;
    }
  }
  if (!ToConfig(m, m.parent, &m.best)) m.best.clear();
  m.codable = SpaceSize(op) < (uint64_t{1} << 62);
  if (h.rounds != nullptr) {
    for (const v1::Round& r : *h.rounds) {
      Config on_grid;
      if (m.codable && ToConfig(m, r.params(), &on_grid)) {
        m.visited_codes.insert(Code(m, on_grid));
      } else {
        m.visited.insert(ParamsKey(r.params()));
      }
      if (r.state() == v1::ROUND_STATE_CANCELLED) continue;
      ++m.rounds;
      if (r.parent_round() == h.best_round && h.best_round >= 0 &&
          IsWalkStage(r.stage()) && r.changes_size() == 1) {
        ++m.walk_used;
      } else if (r.round_id() > h.best_round) {
        ++m.global_since_best;
      }
      if (r.state() != v1::ROUND_STATE_DONE) continue;
      Config c;
      if (!ToConfig(m, r.params(), &c)) continue;
      const double median = r.result().measurement().median_us();
      if (r.result().outcome() == v1::OUTCOME_OK && median > 0) {
        m.ok.emplace_back(std::log(median), std::move(c));
      } else {
        m.failed.push_back(std::move(c));
      }
    }
  }
  std::stable_sort(m.ok.begin(), m.ok.end(), [](const auto& a, const auto& b) {
    return a.first < b.first;
  });
  const int n_ok = static_cast<int>(m.ok.size());
  const int n_good =
      n_ok == 0
          ? 0
          : std::clamp(static_cast<int>(std::ceil(o.gamma_pct / 100.0 * n_ok)),
                       1, kMaxGood);
  for (int i = 0; i < n_ok; ++i) {
    (i < n_good ? m.good : m.bad).push_back(m.ok[i].second);
  }
  for (const Config& c : m.failed) m.bad.push_back(c);
  for (size_t i = 0; i < m.dims.size(); ++i) {
    BuildKernels(m.dims[i], ordinal[i], static_cast<int>(m.good.size()));
  }
  return m;
}

// log of the mixture density of `c` around `centres` (plus a uniform prior
// component of the same weight as one centre).
double LogDensity(const Model& m, const std::vector<Config>& centres,
                  const Config& c) {
  double prior = 1;
  for (const Dim& d : m.dims) prior /= static_cast<double>(d.ordered.size());
  double sum = prior;
  for (const Config& g : centres) {
    double p = 1;
    for (size_t i = 0; i < m.dims.size(); ++i)
      p *= m.dims[i].kernel[g[i]][c[i]];
    sum += p;
  }
  return std::log(sum / static_cast<double>(centres.size() + 1));
}

Config SampleAround(const Model& m, std::mt19937_64& rng) {
  Config c(m.dims.size());
  const int pick = Below(rng, static_cast<int>(m.good.size()) + 1);
  for (size_t i = 0; i < m.dims.size(); ++i) {
    const Dim& d = m.dims[i];
    if (pick == static_cast<int>(m.good.size())) {
      c[i] = Below(rng, static_cast<int>(d.ordered.size()));
      continue;
    }
    const std::vector<double>& cdf = d.cdf[m.good[pick][i]];
    const double u = Uniform01(rng) * cdf.back();
    c[i] = static_cast<int>(std::lower_bound(cdf.begin(), cdf.end(), u) -
                            cdf.begin());
    c[i] = std::min(c[i], static_cast<int>(d.ordered.size()) - 1);
  }
  return c;
}

class HybridStrategy : public Strategy {
 public:
  explicit HybridStrategy(HybridOptions o) : o_(o) {}
  std::string_view name() const override {
    return o_.walk > 0 ? kHybridStrategyName : kTpeStrategyName;
  }

  std::vector<Candidate> Propose(const SearchHistory& h, int n) override {
    std::vector<Candidate> out;
    if (n <= 0 || h.op == nullptr || h.op->parameters_size() == 0) return out;
    for (const v1::ParameterDomain& p : h.op->parameters()) {
      if (p.values().empty()) return out;
    }
    Model m = Learn(o_, h);
    const uint64_t count = h.rounds != nullptr ? h.rounds->size() : 0;
    std::seed_seq seq{static_cast<uint32_t>(o_.seed),
                      static_cast<uint32_t>(o_.seed >> 32),
                      static_cast<uint32_t>(count),
                      static_cast<uint32_t>(count >> 32), 0x7b9e1d2fu};
    std::mt19937_64 rng(seq);
    while (static_cast<int>(out.size()) < n) {
      std::optional<Candidate> c = ProposeOne(h, m, rng);
      if (!c.has_value()) break;
      Config on_grid;
      if (m.codable && ToConfig(m, c->params, &on_grid)) {
        m.visited_codes.insert(Code(m, on_grid));
      } else {
        m.visited.insert(ParamsKey(c->params));
      }
      ++m.rounds;
      out.push_back(*std::move(c));
    }
    return out;
  }

 private:
  Candidate Make(const SearchHistory& h, const Model& m, ParamMap params,
                 std::string stage, std::string why) const {
    Candidate c;
    c.parent_round = h.best_round;
    c.changes = DiffParams(m.parent, params);
    c.params = std::move(params);
    c.stage = std::move(stage);
    const size_t k = c.changes.size();
    c.rationale =
        absl::StrCat(why, k == 1 ? std::string("; 1 parameter changed")
                                 : absl::StrCat("; multi-parameter move: ", k,
                                                " parameters at once"));
    return c;
  }

  bool ModelReady(const Model& m) const {
    return static_cast<int>(m.ok.size()) >= std::max(1, o_.startup) &&
           !m.good.empty();
  }

  double Score(const Model& m, const Config& c) const {
    return LogDensity(m, m.good, c) - LogDensity(m, m.bad, c);
  }

  std::optional<Candidate> ProposeOne(const SearchHistory& h, Model& m,
                                      std::mt19937_64& rng) const {
    // The walk: a burst right after each new best, then its share of the
    // rounds until every single change of the best has been tried.
    const bool walk_turn =
        o_.walk > 0 && !m.best.empty() &&
        (m.walk_used < o_.walk ||
         (o_.walk_share_pct > 0 &&
          (m.walk_used - o_.walk) * (100 - o_.walk_share_pct) <
              m.global_since_best * o_.walk_share_pct));
    if (walk_turn) {
      if (std::optional<Candidate> c = Walk(h, m)) {
        ++m.walk_used;
        return c;
      }
    }
    if (ModelReady(m) && m.rounds >= o_.startup) {
      if (std::optional<Candidate> c = Tpe(h, m, rng)) {
        ++m.global_since_best;
        return c;
      }
    }
    ++m.global_since_best;
    return Uniform(h, m, rng);
  }

  // One change from the best: the diagnosis' suggestions first, then
  // neighbours one or two steps away, by the model's score when it is
  // ready, nearest first otherwise.
  std::optional<Candidate> Walk(const SearchHistory& h, const Model& m) const {
    if (m.diagnosis != nullptr) {
      std::vector<const v1::Suggestion*> sorted;
      for (const v1::Suggestion& s : m.diagnosis->suggestions()) {
        sorted.push_back(&s);
      }
      std::stable_sort(sorted.begin(), sorted.end(),
                       [](const v1::Suggestion* a, const v1::Suggestion* b) {
                         return a->confidence() > b->confidence();
                       });
      for (const v1::Suggestion* s : sorted) {
        for (size_t i = 0; i < m.dims.size(); ++i) {
          const Dim& d = m.dims[i];
          if (d.name != s->parameter()) continue;
          const int from = m.best[i];
          int given = -1;
          if (s->has_value()) {
            auto at = d.pos.find(ParamValueToString(s->value()));
            if (at != d.pos.end()) given = at->second;
          }
          const int to = SuggestedPosition(*s, from, given,
                                           static_cast<int>(d.ordered.size()));
          if (to < 0) continue;
          Config c = m.best;
          c[i] = to;
          if (!Fresh(m, c)) continue;
          return Make(h, m, ToParams(m, c), d.stage,
                      absl::StrFormat("walk from the best: analyzer suggests "
                                      "%s %s (rule %s, confidence %.2f: %s)",
                                      s->direction(), s->parameter(), s->rule(),
                                      s->confidence(), s->evidence()));
        }
      }
    }
    const bool model = ModelReady(m);
    int best_i = -1, best_to = 0;
    double best_rank = -INFINITY;
    for (size_t i = 0; i < m.dims.size(); ++i) {
      const Dim& d = m.dims[i];
      for (int to = 0; to < static_cast<int>(d.ordered.size()); ++to) {
        const int step = to - m.best[i];
        if (step == 0) continue;
        Config c = m.best;
        c[i] = to;
        if (!Fresh(m, c)) continue;
        const double tie =
            static_cast<double>(Fnv(absl::StrCat(d.name, to, o_.seed)) >> 12) *
            0x1.0p-52;
        const double rank = model ? Score(m, c) : -std::abs(step) + 0.5 * tie;
        if (best_i < 0 || rank > best_rank) {
          best_rank = rank;
          best_i = static_cast<int>(i);
          best_to = to;
        }
      }
    }
    if (best_i < 0) return std::nullopt;
    const Dim& d = m.dims[best_i];
    const int step = best_to - m.best[best_i];
    Config c = m.best;
    c[best_i] = best_to;
    const std::string move = absl::StrFormat(
        "%s %d step%s %s", d.name, std::abs(step),
        std::abs(step) > 1 ? "s" : "", step > 0 ? "up" : "down");
    return Make(h, m, ToParams(m, c), d.stage,
                model ? absl::StrFormat("walk from the best: %s, the single "
                                        "change the model rates best (score "
                                        "%.2f)",
                                        move, best_rank)
                      : absl::StrCat("walk from the best: ", move));
  }

  std::optional<Candidate> Tpe(const SearchHistory& h, const Model& m,
                               std::mt19937_64& rng) const {
    std::optional<Config> pick;
    double pick_score = -INFINITY;
    int scored = 0;
    const int want = std::max(1, o_.candidates);
    absl::flat_hash_set<uint64_t> seen;
    for (int draw = 0; draw < want * 20 && scored < want; ++draw) {
      Config c = SampleAround(m, rng);
      if (m.codable && !seen.insert(Code(m, c)).second) continue;
      if (!Fresh(m, c)) continue;
      ++scored;
      const double s = Score(m, c);
      if (!pick.has_value() || s > pick_score) {
        pick_score = s;
        pick = std::move(c);
      }
    }
    if (!pick.has_value()) return std::nullopt;
    return Make(
        h, m, ToParams(m, *pick), kGlobalStage,
        absl::StrFormat("model (TPE over %d finished rounds, %d "
                        "good): the best density ratio among %d "
                        "untried draws (log ratio %.2f)",
                        static_cast<int>(m.ok.size() + m.failed.size()),
                        static_cast<int>(m.good.size()), scored, pick_score));
  }

  // Uniform over the untried feasible configurations (rejection sampling,
  // then an enumeration when the space is small enough).
  std::optional<Candidate> Uniform(const SearchHistory& h, const Model& m,
                                   std::mt19937_64& rng) const {
    Config c(m.dims.size());
    for (int draw = 0; draw < kUniformDraws; ++draw) {
      for (size_t i = 0; i < m.dims.size(); ++i) {
        c[i] = Below(rng, static_cast<int>(m.dims[i].ordered.size()));
      }
      if (Fresh(m, c)) {
        return Make(h, m, ToParams(m, c), kExploreStage,
                    "uniform draw among the untried feasible configurations");
      }
    }
    const uint64_t space = SpaceSize(*h.op);
    if (space > kEnumerateLimit) return std::nullopt;
    const uint64_t start = rng() % space;
    for (uint64_t k = 0; k < space; ++k) {
      uint64_t index = (start + k) % space;
      for (int i = static_cast<int>(m.dims.size()) - 1; i >= 0; --i) {
        const uint64_t radix = m.dims[i].ordered.size();
        c[i] = static_cast<int>(index % radix);
        index /= radix;
      }
      if (Fresh(m, c)) {
        return Make(h, m, ToParams(m, c), kExploreStage,
                    "one of the last untried feasible configurations");
      }
    }
    return std::nullopt;
  }

  HybridOptions o_;
};

}  // namespace

const std::vector<std::string>& HybridOptionNames() {
  static const auto* names = new std::vector<std::string>{
      "candidates",    "gamma_pct", "startup",
      "use_diagnosis", "walk",      "walk_share_pct"};
  return *names;
}

absl::StatusOr<HybridOptions> HybridOptionsFromSpec(
    const v1::StrategySpec& spec, bool walk) {
  HybridOptions o;
  o.seed = spec.seed();
  if (!walk) o.walk = 0;
  int use_diagnosis = 1;
  struct Field {
    int* value;
    int lo, hi;
  };
  std::map<std::string, Field> fields = {
      {"startup", {&o.startup, 0, 100000}},
      {"gamma_pct", {&o.gamma_pct, 1, 100}},
      {"candidates", {&o.candidates, 1, 4096}},
      {"use_diagnosis", {&use_diagnosis, 0, 1}}};
  if (walk) {
    fields["walk"] = {&o.walk, 0, 100000};
    fields["walk_share_pct"] = {&o.walk_share_pct, 0, 99};
  }
  const std::map<std::string, std::string> sorted(spec.options().begin(),
                                                  spec.options().end());
  for (const auto& [key, value] : sorted) {
    auto it = fields.find(key);
    if (it == fields.end()) {
      std::string known;
      for (const auto& [k, f] : fields)
        absl::StrAppend(&known, known.empty() ? "" : ", ", k);
      return absl::InvalidArgumentError(absl::StrCat(
          "strategy.options.", key.substr(0, 64),
          ": unknown option for strategy ",
          walk ? kHybridStrategyName : kTpeStrategyName, "; it takes ", known));
    }
    int v = 0;
    if (!absl::SimpleAtoi(value, &v) || v < it->second.lo ||
        v > it->second.hi) {
      return absl::InvalidArgumentError(absl::StrCat(
          "strategy.options.", key, ": '", value.substr(0, 32),
          "' is not an integer in [", it->second.lo, ", ", it->second.hi, "]"));
    }
    *it->second.value = v;
  }
  o.use_diagnosis = use_diagnosis != 0;
  return o;
}

std::unique_ptr<Strategy> NewHybridStrategy(HybridOptions options) {
  return std::make_unique<HybridStrategy>(options);
}

}  // namespace tunefarm
