#include "coordinator/strategy.h"

#include <algorithm>
#include <optional>
#include <random>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "coordinator/guided_strategy.h"
#include "coordinator/hybrid_strategy.h"
#include "coordinator/seed_seq.h"
#include "coordinator/strategy_util.h"
#include "ops/catalog.h"
#include "ops/constraints.h"

namespace tunefarm {
namespace {

using KeySet = absl::flat_hash_set<std::string>;

// Random enumerates the unvisited configurations (exact uniform choice)
// when the space is this small, or when it is at most kEnumerateMostlyVisited
// large and half visited or more (rejection sampling would mostly miss).
constexpr uint64_t kEnumerateLimit = uint64_t{1} << 16;
constexpr uint64_t kEnumerateMostlyVisited = uint64_t{1} << 22;
// Draws per candidate before rejection sampling gives up. With at most half
// the space visited, failing this often has probability 2^-10000.
constexpr int kMaxDrawsPerCandidate = 10000;

// The history's configurations (ParamsKey), kept across Propose calls
// (HistoryCursor), so a proposal costs O(new rounds) rather than
// O(history). Derived from the history alone, so Propose stays a function
// of it.
class VisitedCache {
 public:
  const KeySet& Keys(const SearchHistory& h) {
    size_t i = cursor_.Resume(h);
    if (i == 0) keys_.clear();
    for (; h.rounds != nullptr && i < h.rounds->size(); ++i) {
      keys_.insert(ParamsKey((*h.rounds)[i].params()));
    }
    cursor_.ReadAll(h);
    return keys_;
  }
  // How many times the set was rebuilt (what was derived from it is stale
  // when this changed).
  int64_t rebuilds() const { return cursor_.starts(); }

 private:
  HistoryCursor cursor_;
  KeySet keys_;
};

// The parameters candidates are diffed against: the best round's, or the
// baseline's before one passed.
ParamMap ParentParams(const SearchHistory& h) {
  if (const v1::Round* best = FindRound(h, h.best_round); best != nullptr) {
    return best->params();
  }
  if (h.spec != nullptr && !h.spec->baseline_params().empty()) {
    return h.spec->baseline_params();
  }
  return DefaultParams(*h.op);
}

Candidate MakeCandidate(const SearchHistory& h, const ParamMap& parent,
                        ParamMap params, std::string rationale) {
  Candidate c;
  c.parent_round = h.best_round;
  c.changes = DiffParams(parent, params);
  c.params = std::move(params);
  c.rationale = std::move(rationale);
  return c;
}

bool AnyEmptyDomain(const v1::OperatorManifest& op) {
  return std::any_of(
      op.parameters().begin(), op.parameters().end(),
      [](const v1::ParameterDomain& p) { return p.values().empty(); });
}

// The configuration with one value index per parameter.
ParamMap ParamsAt(const v1::OperatorManifest& op,
                  const std::vector<uint32_t>& digits) {
  ParamMap params;
  for (int i = 0; i < op.parameters_size(); ++i) {
    const v1::ParameterDomain& p = op.parameters(i);
    params[p.name()] = p.values(static_cast<int>(digits[i]));
  }
  return params;
}

// Mixed-radix decoding, last parameter fastest (the grid order). Requires
// index < SpaceSize(op) and an unsaturated space size.
std::vector<uint32_t> DigitsOf(const v1::OperatorManifest& op, uint64_t index) {
  std::vector<uint32_t> digits(op.parameters_size());
  for (int i = op.parameters_size() - 1; i >= 0; --i) {
    const uint64_t radix = op.parameters(i).values_size();
    digits[i] = static_cast<uint32_t>(index % radix);
    index /= radix;
  }
  return digits;
}

// Advances `digits` to the next grid point; false after the last one.
bool Increment(const v1::OperatorManifest& op, std::vector<uint32_t>* digits) {
  for (int i = op.parameters_size() - 1; i >= 0; --i) {
    if (++(*digits)[i] <
        static_cast<uint32_t>(op.parameters(i).values_size())) {
      return true;
    }
    (*digits)[i] = 0;
  }
  return false;
}

std::string SpaceText(uint64_t size) {
  return size == UINT64_MAX ? std::string(">= 2^64") : absl::StrCat(size);
}

// Uniform in [0, bound), bound > 0, independent of the standard library's
// distributions (whose algorithms vary between implementations; resumed
// sweeps must draw the same numbers).
uint64_t UniformBelow(std::mt19937_64& rng, uint64_t bound) {
  const uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound
  while (true) {
    const uint64_t x = rng();
    if (x >= threshold) return x % bound;
  }
}

// Each parameter's value positions in its domain (by the value's text;
// the first of equal values wins).
std::vector<absl::flat_hash_map<std::string, uint64_t>> ValuePositions(
    const v1::OperatorManifest& op) {
  std::vector<absl::flat_hash_map<std::string, uint64_t>> pos(
      op.parameters_size());
  for (int i = 0; i < op.parameters_size(); ++i) {
    const v1::ParameterDomain& p = op.parameters(i);
    for (int v = 0; v < p.values_size(); ++v) {
      pos[i].emplace(ParamValueToString(p.values(v)), v);
    }
  }
  return pos;
}

// The grid index of a round's configuration, if it lies in the grid.
// Requires an unsaturated space size.
std::optional<uint64_t> GridIndex(
    const v1::OperatorManifest& op,
    const std::vector<absl::flat_hash_map<std::string, uint64_t>>& pos,
    const v1::Round& r) {
  if (r.params_size() != op.parameters_size()) return std::nullopt;
  uint64_t index = 0;
  for (int i = 0; i < op.parameters_size(); ++i) {
    const v1::ParameterDomain& p = op.parameters(i);
    auto v = r.params().find(p.name());
    if (v == r.params().end()) return std::nullopt;
    auto at = pos[i].find(ParamValueToString(v->second));
    if (at == pos[i].end()) return std::nullopt;
    index = index * p.values_size() + at->second;
  }
  // The same configuration, not just the same values (as VisitedCache
  // tells them apart).
  if (ParamsKey(ParamsAt(op, DigitsOf(op, index))) != ParamsKey(r.params())) {
    return std::nullopt;
  }
  return index;
}

// The grid indices of the history's configurations that lie in the grid,
// sorted and distinct, kept across Propose calls as VisitedCache keeps its
// keys, so a proposal costs O(new rounds) rather than O(history).
class TriedCache {
 public:
  // Requires h.op.
  const std::vector<uint64_t>& Tried(const SearchHistory& h) {
    size_t i = cursor_.Resume(h);
    if (i == 0) {
      tried_.clear();
      pos_ = ValuePositions(*h.op);
    }
    for (; h.rounds != nullptr && i < h.rounds->size(); ++i) {
      const std::optional<uint64_t> index =
          GridIndex(*h.op, pos_, (*h.rounds)[i]);
      if (!index.has_value()) continue;
      auto at = std::lower_bound(tried_.begin(), tried_.end(), *index);
      if (at == tried_.end() || *at != *index) tried_.insert(at, *index);
    }
    cursor_.ReadAll(h);
    return tried_;
  }

 private:
  HistoryCursor cursor_;
  std::vector<absl::flat_hash_map<std::string, uint64_t>> pos_;
  std::vector<uint64_t> tried_;
};

// The pos-th (0-based) grid index not in `tried` (sorted), in ascending
// order. Requires pos < space - tried.size().
uint64_t UntriedAt(const std::vector<uint64_t>& tried, uint64_t pos) {
  // Smallest x with x + 1 - |tried <= x| == pos + 1 (x itself untried).
  uint64_t lo = pos, hi = pos + tried.size();
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    const uint64_t below = static_cast<uint64_t>(
        std::upper_bound(tried.begin(), tried.end(), mid) - tried.begin());
    if (mid + 1 - below >= pos + 1) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

class GridStrategy : public Strategy {
 public:
  std::string_view name() const override { return "grid"; }

  std::vector<Candidate> Propose(const SearchHistory& h, int n) override {
    std::vector<Candidate> out;
    if (n <= 0 || h.op == nullptr || AnyEmptyDomain(*h.op)) return out;
    const v1::OperatorManifest& op = *h.op;
    const KeySet& visited = visited_.Keys(h);
    // Grid points only ever become visited (the history grows) and stay
    // infeasible, so the walk resumes after the leading run of such points
    // the last call found, unless the history was replaced or cut short:
    // the same proposals as a walk from the first point, without its
    // O(history) steps per call.
    if (visited_.rebuilds() != rebuilds_) {
      rebuilds_ = visited_.rebuilds();
      start_ = 0;
      start_digits_.assign(op.parameters_size(), 0);
      walked_all_ = false;
    }
    if (walked_all_) return out;
    const ParamMap parent = ParentParams(h);
    const std::string total = SpaceText(SpaceSize(op));
    const ConstraintSet constraints = ConstraintsOf(op);
    std::vector<uint32_t> digits = start_digits_;
    uint64_t index = start_;
    bool closed = true;  // every point walked so far: visited or infeasible
    bool more = true;
    do {
      ParamMap params = ParamsAt(op, digits);
      if (!visited.contains(ParamsKey(params)) &&
          constraints.Feasible(params)) {
        // Grid points are distinct, so the batch cannot repeat itself.
        out.push_back(MakeCandidate(
            h, parent, std::move(params),
            absl::StrCat("grid point ", index + 1, " of ", total)));
        closed = false;
      }
      ++index;
      more = Increment(op, &digits);
      if (closed) {
        start_ = index;
        start_digits_ = digits;
        walked_all_ = !more;
      }
    } while (static_cast<int>(out.size()) < n && more);
    return out;
  }

 private:
  VisitedCache visited_;
  // Where the walk resumes (below it every point is visited or infeasible)
  // for the history visited_ holds (as of its rebuild count rebuilds_).
  int64_t rebuilds_ = -1;
  uint64_t start_ = 0;
  std::vector<uint32_t> start_digits_;
  bool walked_all_ = false;
};

class RandomStrategy : public Strategy {
 public:
  std::string_view name() const override { return "random"; }

  std::vector<Candidate> Propose(const SearchHistory& h, int n) override {
    std::vector<Candidate> out;
    if (n <= 0 || h.op == nullptr || AnyEmptyDomain(*h.op)) return out;
    const v1::OperatorManifest& op = *h.op;
    const uint64_t seed = h.spec != nullptr ? h.spec->strategy().seed() : 1;
    const uint64_t count = h.rounds != nullptr ? h.rounds->size() : 0;
    // The seed sequence and mt19937_64 are fully specified by the standard,
    // so the same (seed, history length) draws the same numbers everywhere
    // (SeedSeq: std::seed_seq's algorithm, cheaper).
    SeedSeq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                static_cast<uint32_t>(count),
                static_cast<uint32_t>(count >> 32), 0x7f4a7c15u};
    std::mt19937_64 rng(seq);

    const KeySet& visited = visited_.Keys(h);
    KeySet batch;  // this call's picks: no repeats within the batch
    const ParamMap parent = ParentParams(h);
    const uint64_t space = SpaceSize(op);
    const ConstraintSet constraints = ConstraintsOf(op);
    const bool enumerate =
        space <= kEnumerateLimit ||
        (space <= kEnumerateMostlyVisited && visited.size() * 2 >= space);
    if (enumerate) {
      // The untried grid indices in ascending order, as a virtual array
      // (`UntriedAt`), so that a pick costs O(log) instead of a walk over
      // the whole space.
      const std::vector<uint64_t>& tried = tried_.Tried(h);
      const uint64_t pool = space - tried.size();
      // Partial Fisher-Yates over the virtual array: the first n picks of a
      // uniform shuffle (a smaller n gives a prefix of a larger one).
      absl::flat_hash_map<uint64_t, uint64_t> swapped;
      auto at = [&](uint64_t pos) {
        auto it = swapped.find(pos);
        return it != swapped.end() ? it->second : UntriedAt(tried, pos);
      };
      for (uint64_t i = 0; i < pool && static_cast<int>(out.size()) < n; ++i) {
        const uint64_t j = i + UniformBelow(rng, pool - i);
        const uint64_t picked = at(j);
        swapped[j] = at(i);
        ParamMap params = ParamsAt(op, DigitsOf(op, picked));
        if (!constraints.Feasible(params)) continue;
        out.push_back(MakeCandidate(
            h, parent, std::move(params),
            absl::StrCat("random pick among ", pool,
                         " untried configurations (seed ", seed, ")")));
      }
      return out;
    }
    // Large space: a uniform configuration is a uniform value per parameter;
    // redraw on a visited one.
    std::vector<uint32_t> digits(op.parameters_size());
    while (static_cast<int>(out.size()) < n) {
      bool found = false;
      for (int attempt = 0; attempt < kMaxDrawsPerCandidate && !found;
           ++attempt) {
        for (int i = 0; i < op.parameters_size(); ++i) {
          digits[i] = static_cast<uint32_t>(UniformBelow(
              rng, static_cast<uint64_t>(op.parameters(i).values_size())));
        }
        ParamMap params = ParamsAt(op, digits);
        std::string key = ParamsKey(params);
        if (visited.contains(key) || batch.contains(key) ||
            !constraints.Feasible(params)) {
          continue;
        }
        batch.insert(std::move(key));  // no repeats within the batch
        out.push_back(
            MakeCandidate(h, parent, std::move(params),
                          absl::StrCat("random draw from ", SpaceText(space),
                                       " configurations (seed ", seed, ")")));
        found = true;
      }
      if (!found) break;
    }
    return out;
  }

 private:
  VisitedCache visited_;
  TriedCache tried_;
};

}  // namespace

ConstraintSet ConstraintsOf(const v1::OperatorManifest& op) {
  absl::StatusOr<ConstraintSet> c = ConstraintSet::ForManifest(op);
  return c.ok() ? *std::move(c) : ConstraintSet();
}

Exhaustion Strategy::Exhausted(const SearchHistory& /*history*/) const {
  return {v1::TERMINATION_SPACE_EXHAUSTED,
          absl::StrCat("strategy ", std::string(name()),
                       " has no untried configuration left")};
}

NextCandidate ProposeNextCandidate(Strategy& strategy,
                                   const SearchHistory& history,
                                   int64_t max_candidates, int64_t in_flight) {
  NextCandidate next;
  const std::vector<v1::Round>* rounds = history.rounds;
  if (rounds == nullptr || rounds->empty()) return next;
  const v1::RoundState baseline = rounds->front().state();
  const bool baseline_done = baseline == v1::ROUND_STATE_DONE;
  // Candidates need the baseline's measurement, except a strategy's draws
  // over the whole space, which go to the free boards while it runs.
  if (!baseline_done && (baseline != v1::ROUND_STATE_LEASED ||
                         !strategy.ProposesWhileBaselineRuns())) {
    return next;
  }
  const int64_t candidates = static_cast<int64_t>(rounds->size()) - 1;
  if (candidates >= max_candidates) return next;
  std::vector<Candidate> proposed = strategy.Propose(history, 1);
  if (proposed.empty()) {
    if (baseline_done && in_flight == 0) {
      next.kind = NextCandidate::Kind::kExhausted;
      next.why = strategy.Exhausted(history);
    }
    return next;
  }
  next.kind = NextCandidate::Kind::kPropose;
  next.candidate = std::move(proposed.front());
  if (next.candidate.parent_round < 0) next.candidate.parent_round = 0;
  return next;
}

std::unique_ptr<Strategy> NewGridStrategy() {
  return std::make_unique<GridStrategy>();
}

std::unique_ptr<Strategy> NewRandomStrategy() {
  return std::make_unique<RandomStrategy>();
}

absl::StatusOr<std::unique_ptr<Strategy>> NewStrategy(
    const v1::SweepSpec& spec, const v1::OperatorManifest& op) {
  const std::string name = spec.strategy().name().empty()
                               ? std::string(kDefaultStrategyName)
                               : spec.strategy().name();
  if (name == "grid") return NewGridStrategy();
  if (name == "random") return NewRandomStrategy();
  if (name == kHybridStrategyName || name == kTpeStrategyName) {
    absl::StatusOr<HybridOptions> options = HybridOptionsFromSpec(
        spec.strategy(), /*walk=*/name == kHybridStrategyName);
    if (!options.ok()) return options.status();
    return NewHybridStrategy(*options);
  }
  if (name == kGuidedStrategyName) {
    absl::StatusOr<GuidedOptions> options =
        GuidedOptionsFromSpec(spec.strategy());
    if (!options.ok()) return options.status();
    return NewGuidedStrategy(*options);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("strategy '", absl::CHexEscape(name.substr(0, 64)), "' ",
                   "is unknown", "; known: grid, guided, hybrid, random, tpe"));
}

}  // namespace tunefarm
