#include "coordinator/hybrid_strategy.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "coordinator/seed_seq.h"
#include "coordinator/strategy_util.h"
#include "ops/catalog.h"

namespace tunefarm {
namespace {

constexpr uint64_t kEnumerateLimit = uint64_t{1} << 22;
constexpr int kUniformDraws = 4000;
constexpr int kMaxGood = 25;
// The most configurations the model's rest group holds (see Learn).
constexpr size_t kMaxRest = 512;
constexpr int kDesignDraws = 4;
constexpr double kUndeterminedOrder = 0.5;

double Uniform01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

// rng() % bound; the bias is negligible for domain-sized bounds and, unlike
// std::uniform_int_distribution, the same on every platform.
int Below(std::mt19937_64& rng, int bound) {
  return static_cast<int>(rng() % static_cast<uint64_t>(bound));
}

// One parameter of the grid. The first fields follow from the manifest
// and are built once per history read (RoundIndex); the rest is the
// model's, set by each Learn.
struct Dim {
  std::string name;
  std::string stage;  // tiling | pipeline | in_core
  std::vector<v1::ParamValue> ordered;
  bool ordinal = false;  // numeric: neighbours are steps along the order
  absl::flat_hash_map<std::string, int> pos;
  // How much the model trusts the order (0 = categorical, 1 = ordered):
  // learned from the finished rounds (OrderWeight).
  double order_weight = 0;
  // With kernel(c, j) the probability of value j around centre c:
  // cdf[c][j] its CDF over j (what draws around a centre read), and
  // at[j][c] = kernel(c, j) (what the scores read: every centre at one
  // value, side by side). Built for kernel_w and kernel_bw (BuildKernels).
  std::vector<std::vector<double>> cdf, at;
  double kernel_w = -1, kernel_bw = -1;
};

using Config = std::vector<int>;  // one position per Dim

// Configurations stored row after row, one position per Dim: the model's
// scores walk every centre of a group, and rows side by side keep that
// walk in cache.
class Centres {
 public:
  explicit Centres(size_t dims = 0) : dims_(dims) {}
  size_t size() const { return dims_ == 0 ? 0 : flat_.size() / dims_; }
  bool empty() const { return flat_.empty(); }
  const int* row(size_t i) const { return flat_.data() + i * dims_; }
  void Add(const Config& c) { flat_.insert(flat_.end(), c.begin(), c.end()); }
  void Reserve(size_t rows) { flat_.reserve(rows * dims_); }

 private:
  size_t dims_;
  std::vector<int> flat_;
};

// The techniques the hybrid's bandit shares the boards between.
enum Technique {
  kWalkTechnique = 0,
  kRestartTechnique,
  kModelTechnique,
  kRecombineTechnique,
  kExploreTechnique
};
constexpr int kTechniques = 5;
constexpr const char* kTechniqueNames[kTechniques] = {
    "walk", "elite restart", "model", "recombine", "exploration"};

// How many of the techniques' last uses the bandit weighs.
size_t BanditWindow(const HybridOptions& o) {
  return static_cast<size_t>(std::max(1, o.bandit_window));
}

bool IsWalkStage(const std::string& s) {
  return s == "tiling" || s == "pipeline" || s == "in_core";
}

// The grid of `op`'s parameters, the model's fields unset.
std::vector<Dim> GridOf(const v1::OperatorManifest& op) {
  std::vector<Dim> dims;
  for (const v1::ParameterDomain& p : op.parameters()) {
    Dim& d = dims.emplace_back();
    d.name = p.name();
    d.stage = p.stage().empty() ? "tiling" : p.stage();
    if (!IsWalkStage(d.stage)) d.stage = "in_core";
    d.ordered = OrderedValues(p);
    d.ordinal = std::all_of(d.ordered.begin(), d.ordered.end(), IsNumber);
    for (int i = 0; i < static_cast<int>(d.ordered.size()); ++i) {
      d.pos.emplace(ParamValueToString(d.ordered[i]), i);
    }
  }
  return dims;
}

// The technique that proposed a round, from its stage tag; -1 for rounds no
// technique proposed (the baseline, other strategies' rounds).
int TechniqueOf(const std::string& stage) {
  if (IsWalkStage(stage)) return kWalkTechnique;
  if (stage == kRestartStage) return kRestartTechnique;
  if (stage == kExploreStage) return kExploreTechnique;
  if (stage == kGlobalStage) return kModelTechnique;
  if (stage == kRecombineStage) return kRecombineTechnique;
  return -1;
}

struct Finished {
  double log_us = 0;
  const Config* config = nullptr;
  int64_t round = -1;
};

class RoundIndex;

// The model of one Propose call. Its configurations point into the
// RoundIndex (rounds of the history).
struct Model {
  std::span<Dim> dims;  // the index's grid, valid until its next Update
  // The configurations tried: the index's, plus this call's proposals, as
  // mixed-radix codes when on the grid (and the space has fewer than 2^62
  // points), as ParamsKeys otherwise.
  const RoundIndex* index = nullptr;
  absl::flat_hash_set<uint64_t> proposed_codes;
  absl::flat_hash_set<std::string> proposed_keys;
  bool codable = true;
  std::span<const Finished> ok;      // finished OK on the grid, fastest first
  std::span<const Finished> failed;  // finished otherwise, in round order
  std::vector<const Config*> in_flight;  // rounds in flight, on the grid
  // The good group, and the rest (a sample past kMaxRest, then this call's
  // proposals on the grid): between them every configuration tried on the
  // grid, until the rest is sampled.
  Centres good, bad;
  Config best;  // empty when the best is not on the grid
  ParamMap parent;
  const v1::Diagnosis* diagnosis = nullptr;
  const ConstraintSet* constraints = nullptr;  // the index's
  // Per constraint slot (ConstraintSet::names()), the Dim it reads, or -1
  // for a parameter off the grid (read from the parent, as ToParams does):
  // the index's.
  std::span<const int> slot_dim;
  int walk_used = 0;   // walk rounds from the current best (not cancelled)
  int rounds = 0;      // rounds other than cancelled ones
  int since_best = 0;  // finished rounds proposed after the best
  int pending = 0;     // rounds in flight (proposals of this call included)
  // Configurations this call already proposed for a re-race.
  std::vector<std::string> reraced;
  // The techniques' last uses in round order (at least the bandit's window;
  // proposals of this call appended), and whether each gave a new best (a
  // kept round; pending ones not yet).
  std::vector<std::pair<int, bool>> uses;
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

// Counts over positions 0..n-1 with O(log n) updates and prefix sums (a
// Fenwick tree) that grows by appending positions.
class PositionCounts {
 public:
  void Clear() { tree_.assign(1, 0); }
  void Append() {  // a new last position, counted 0
    const size_t at = tree_.size();
    tree_.push_back(Prefix(at - 1) - Prefix(at - LowBit(at)));
  }
  void Add(size_t pos, int64_t delta) {
    for (size_t at = pos + 1; at < tree_.size(); at += LowBit(at)) {
      tree_[at] += delta;
    }
  }
  // The sum over positions below `end`.
  int64_t Prefix(size_t end) const {
    int64_t sum = 0;
    for (size_t at = end; at > 0; at -= LowBit(at)) sum += tree_[at];
    return sum;
  }

 private:
  static size_t LowBit(size_t at) { return at & (~at + 1); }
  std::vector<int64_t> tree_ = {0};  // 1-based: tree_[at] sums positions
                                     // [at - LowBit(at), at)
};

// What the model reads from the history, kept between Propose calls
// (HistoryCursor) and brought up to date at the cost of the rounds added or
// still moving, so that a proposal's cost does not grow with the sweep:
//   * each round's position on the grid and the technique that proposed it
//     (a round's parameters and stage never change);
//   * the finished rounds, OK ones sorted fastest first, failed ones in
//     round order, with each value's summed log time per parameter;
//   * which rounds are in flight;
//   * the operator's constraints, compiled (the manifest is the history's).
// A round is final once cancelled, or done and decided; the coordinator
// moves rounds only forward, except that a done round waiting for its
// parent's result may be measured again (it is re-read until decided) and
// an undone commit puts rounds back (SearchHistory.rewinds: read again from
// the start). Owned by the strategy; not thread-safe.
class RoundIndex {
 public:
  // kCounted: done, waiting to be judged (it may be measured again).
  enum class State { kOpen, kCounted, kFinal, kCancelled };
  struct Entry {
    bool grid = false;  // all parameters on the grid
    Config config;      // when on the grid
    int technique = -1;
    State state = State::kOpen;
    // As counted among the finished rounds (kCounted, kFinal).
    bool ok = false;
    double median_us = 0;
    Finished finished;
  };

  // Brings the index up to h's rounds (h.rounds set) and gives `m` the
  // grid of h.op (dims, codable); another history, or the same rounds of
  // another manifest, is read from the start, the grid built again.
  void Update(Model& m, const SearchHistory& h) {
    size_t i = cursor_.Resume(h);
    if (i == 0) Clear(*h.op);
    m.dims = dims_;
    m.codable = codable_;
    const std::vector<v1::Round>& rounds = *h.rounds;
    for (; i < rounds.size(); ++i) {
      const v1::Round& r = rounds[i];
      Entry& e = entries_.emplace_back();
      e.grid = ToConfig(m, r.params(), &e.config);
      if (!e.grid) e.config.clear();
      e.technique = TechniqueOf(r.stage());
      if (m.codable && e.grid) {
        ++codes_[Code(m, e.config)];
      } else {
        ++keys_[ParamsKey(r.params())];
      }
      if (e.technique >= 0) with_technique_.push_back(i);
      if (e.technique == kWalkTechnique && r.changes_size() == 1) {
        walks_from_[r.parent_round()].push_back(i);
      }
      done_.Append();
      open_.push_back(i);
    }
    cursor_.ReadAll(h);
    // Rounds not final yet: in flight (open_) or done but undecided
    // (counted_), both in round order; re-read in round order (a merge of
    // the two), so the lists they go to stay in round order.
    std::vector<size_t> open, counted;
    for (size_t a = 0, b = 0; a < open_.size() || b < counted_.size();) {
      const size_t pos =
          b == counted_.size() || (a < open_.size() && open_[a] < counted_[b])
              ? open_[a++]
              : counted_[b++];
      const State state = Refresh(pos, rounds[pos]);
      if (state == State::kOpen) open.push_back(pos);
      if (state == State::kCounted) counted.push_back(pos);
    }
    open_.swap(open);
    counted_.swap(counted);
  }

  const Entry& entry(size_t pos) const { return entries_[pos]; }
  size_t size() const { return entries_.size(); }
  // The operator's constraints, compiled once per history read.
  const ConstraintSet& constraints() const { return constraints_; }
  // Per constraint slot, the grid dimension it names, or -1.
  const std::vector<int>& slot_dims() const { return slot_dims_; }
  bool Visited(uint64_t code) const { return codes_.contains(code); }
  bool Visited(const std::string& key) const { return keys_.contains(key); }
  // How many rounds of h (the last Update's) have round `pos`'s
  // configuration.
  int Measured(const Model& m, const SearchHistory& h, size_t pos) const {
    const Entry& e = entries_[pos];
    if (m.codable && e.grid) return codes_.at(Code(m, e.config));
    return keys_.at(ParamsKey((*h.rounds)[pos].params()));
  }
  // The done, inconclusive rounds, in round order.
  const std::vector<size_t>& inconclusive() const { return inconclusive_; }

  const std::vector<Finished>& ok() const { return ok_; }
  const std::vector<Finished>& failed() const { return failed_; }
  // Rounds in flight (neither done nor cancelled), in round order.
  const std::vector<size_t>& open() const { return open_; }
  int64_t cancelled() const { return cancelled_; }
  // Done rounds at positions from `pos` on.
  int64_t DoneFrom(size_t pos) const {
    return done_.Prefix(entries_.size()) - done_.Prefix(pos);
  }
  // Rounds with a technique, in round order; walk rounds of one change from
  // round `parent`.
  const std::vector<size_t>& with_technique() const { return with_technique_; }
  const std::vector<size_t>* walks_from(int64_t parent) const {
    auto it = walks_from_.find(parent);
    return it == walks_from_.end() ? nullptr : &it->second;
  }
  // The mean log time of value j of parameter `dim` over the OK rounds;
  // nullopt when none has it.
  std::optional<double> MeanLogUs(size_t dim, size_t j) const {
    if (count_[dim][j] == 0) return std::nullopt;
    return static_cast<double>(sum_[dim][j]) * kLogScale /
           static_cast<double>(count_[dim][j]);
  }

 private:
  // Log times summed in fixed point: integer sums are exact whatever the
  // order rounds finish in, and a round taken out again leaves no residue.
  static constexpr double kLogScale = 0x1.0p-32;

  void Clear(const v1::OperatorManifest& op) {
    dims_ = GridOf(op);
    codable_ = SpaceSize(op) < (uint64_t{1} << 62);
    constraints_ = ConstraintsOf(op);
    slot_dims_.clear();
    for (const std::string& name : constraints_.names()) {
      int dim = -1;
      for (size_t i = 0; i < dims_.size() && dim < 0; ++i) {
        if (dims_[i].name == name) dim = static_cast<int>(i);
      }
      slot_dims_.push_back(dim);
    }
    entries_.clear();
    codes_.clear();
    keys_.clear();
    ok_.clear();
    failed_.clear();
    open_.clear();
    counted_.clear();
    inconclusive_.clear();
    with_technique_.clear();
    walks_from_.clear();
    done_.Clear();
    cancelled_ = 0;
    sum_.assign(dims_.size(), {});
    count_.assign(dims_.size(), {});
    for (size_t d = 0; d < dims_.size(); ++d) {
      sum_[d].assign(dims_[d].ordered.size(), 0);
      count_[d].assign(dims_[d].ordered.size(), 0);
    }
  }

  // Re-reads a round that was not final: counts it among the finished
  // rounds when it is done (again, if its result changed), takes it out
  // when it is not any more. Its new state.
  State Refresh(size_t pos, const v1::Round& r) {
    Entry& e = entries_[pos];
    State now = State::kOpen;
    if (r.state() == v1::ROUND_STATE_CANCELLED) {
      now = State::kCancelled;
    } else if (r.state() == v1::ROUND_STATE_DONE) {
      now = r.decision() == v1::DECISION_UNSPECIFIED ? State::kCounted
                                                     : State::kFinal;
    }
    const bool done = now == State::kCounted || now == State::kFinal;
    const double median = done ? r.result().measurement().median_us() : 0;
    const bool ok =
        done && r.result().outcome() == v1::OUTCOME_OK && median > 0;
    if (e.state == State::kCounted &&
        (!done || ok != e.ok || median != e.median_us)) {
      Count(pos, -1);
      e.state = State::kOpen;
    }
    if (done && e.state == State::kOpen) {
      e.ok = ok;
      e.median_us = median;
      e.finished = {ok ? std::log(median) : 0, &e.config, r.round_id()};
      Count(pos, +1);
    }
    if (now == State::kCancelled) ++cancelled_;
    if (now == State::kFinal && r.decision() == v1::DECISION_INCONCLUSIVE) {
      inconclusive_.insert(
          std::upper_bound(inconclusive_.begin(), inconclusive_.end(), pos),
          pos);
    }
    e.state = now;
    return now;
  }

  // Adds (+1) or removes (-1) a done round from the finished rounds.
  void Count(size_t pos, int sign) {
    const Entry& e = entries_[pos];
    done_.Add(pos, sign);
    if (!e.grid) return;
    const Finished& f = e.finished;
    if (!e.ok) {
      auto at = std::lower_bound(
          failed_.begin(), failed_.end(), f.round,
          [](const Finished& a, int64_t round) { return a.round < round; });
      if (sign > 0) {
        failed_.insert(at, f);
      } else {
        failed_.erase(at);
      }
      return;
    }
    // Fastest first; equal times in round order.
    auto at = std::lower_bound(
        ok_.begin(), ok_.end(), f, [](const Finished& a, const Finished& b) {
          return a.log_us != b.log_us ? a.log_us < b.log_us : a.round < b.round;
        });
    if (sign > 0) {
      ok_.insert(at, f);
    } else {
      ok_.erase(at);
    }
    const int64_t fixed = std::llround(f.log_us / kLogScale);
    for (size_t d = 0; d < e.config.size(); ++d) {
      sum_[d][e.config[d]] += sign * fixed;
      count_[d][e.config[d]] += sign;
    }
  }

  HistoryCursor cursor_;
  std::vector<Dim> dims_;
  bool codable_ = true;
  ConstraintSet constraints_;
  std::vector<int> slot_dims_;
  // One per round of the history, in its order (a deque: the finished
  // rounds point at their configurations).
  std::deque<Entry> entries_;
  // How many rounds have each configuration.
  absl::flat_hash_map<uint64_t, int> codes_;
  absl::flat_hash_map<std::string, int> keys_;
  std::vector<Finished> ok_, failed_;
  std::vector<size_t> open_, counted_, inconclusive_;
  std::vector<size_t> with_technique_;
  absl::flat_hash_map<int64_t, std::vector<size_t>> walks_from_;
  PositionCounts done_;
  int64_t cancelled_ = 0;
  std::vector<std::vector<int64_t>> sum_;
  std::vector<std::vector<int64_t>> count_;
};

// Whether ToParams(m, c) satisfies the constraints, read from the
// positions (no ParamMap built: this runs for every candidate draw).
bool Feasible(const Model& m, const Config& c) {
  if (m.constraints->empty()) return true;
  absl::InlinedVector<const v1::ParamValue*, 16> values(m.slot_dim.size());
  for (size_t s = 0; s < values.size(); ++s) {
    if (const int d = m.slot_dim[s]; d >= 0) {
      values[s] = &m.dims[d].ordered[c[d]];
    } else if (auto it = m.parent.find(m.constraints->names()[s]);
               it != m.parent.end()) {
      values[s] = &it->second;
    }
  }
  return m.constraints->FeasibleBySlot(values);
}

// Not tried yet, and feasible.
bool Fresh(const Model& m, const Config& c) {
  if (m.codable) {
    const uint64_t code = Code(m, c);
    if (m.index->Visited(code) || m.proposed_codes.contains(code)) {
      return false;
    }
  } else {
    // A configuration on the grid can equal no round off it: only without
    // codes are keys compared.
    const std::string key = ParamsKey(ToParams(m, c));
    if (m.index->Visited(key) || m.proposed_keys.contains(key)) return false;
  }
  return Feasible(m, c);
}

// Records a proposal of this call as tried (and, on the grid, as slow: the
// constant liar).
void AddProposal(Model& m, const ParamMap& params) {
  Config on_grid;
  const bool grid = ToConfig(m, params, &on_grid);
  if (m.codable && grid) {
    m.proposed_codes.insert(Code(m, on_grid));
  } else {
    m.proposed_keys.insert(ParamsKey(params));
  }
  if (grid) m.bad.Add(on_grid);
}

int Distance(const Config& a, const Config& b) {
  int d = 0;
  for (size_t i = 0; i < a.size(); ++i) d += a[i] != b[i];
  return d;
}

void BuildKernels(Dim& d, int components) {
  const int k = static_cast<int>(d.ordered.size());
  // The bandwidth narrows slowly as good configurations accumulate (Scott's
  // rule's n^-1/5), never below half a step.
  const double bw =
      std::max(0.5, 0.25 * k * std::pow(std::max(1, components), -0.2));
  // A mixture of an ordered kernel (Gaussian in steps) and a categorical
  // one (the centre plus a uniform floor, as Optuna's categorical kernel),
  // weighted by how much the order explains the times so far.
  const double w = d.ordinal ? d.order_weight : 0.0;
  // Unchanged since the last call (often: a proposal's result moves them
  // only when it changes the good group's size or a value's mean).
  if (w == d.kernel_w && bw == d.kernel_bw) return;
  d.kernel_w = w;
  d.kernel_bw = bw;
  d.cdf.assign(k, std::vector<double>(k));
  d.at.assign(k, std::vector<double>(k));
  // The Gaussian depends on the distance in steps only: k values, not k^2.
  std::vector<double> gauss(k);
  for (int t = 0; t < k; ++t) {
    gauss[t] = std::exp(-0.5 * (t / bw) * (t / bw));
  }
  std::vector<double> ordered(k), categorical(k);
  for (int c = 0; c < k; ++c) {
    double sum_o = 0, sum_c = 0;
    for (int j = 0; j < k; ++j) {
      ordered[j] = gauss[std::abs(j - c)];
      categorical[j] = j == c ? 1.0 : 1.0 / k;
      sum_o += ordered[j];
      sum_c += categorical[j];
    }
    double acc = 0;
    for (int j = 0; j < k; ++j) {
      const double kernel =
          w * ordered[j] / sum_o + (1 - w) * categorical[j] / sum_c;
      acc += kernel;
      d.cdf[c][j] = acc;
      d.at[j][c] = kernel;
    }
  }
}

Model Learn(const HybridOptions& o, const SearchHistory& h, RoundIndex& index) {
  Model m;
  const v1::OperatorManifest& op = *h.op;
  index.Update(m, h);
  m.index = &index;
  // The parent: the best round, else the baseline parameters.
  if (const v1::Round* best = FindRound(h, h.best_round); best != nullptr) {
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
  m.constraints = &index.constraints();
  m.slot_dim = index.slot_dims();
  const std::vector<v1::Round>& rounds = *h.rounds;
  m.rounds =
      static_cast<int>(static_cast<int64_t>(index.size()) - index.cancelled());
  m.pending = static_cast<int>(index.open().size());
  for (size_t pos : index.open()) {
    if (index.entry(pos).grid) m.in_flight.push_back(&index.entry(pos).config);
  }
  // Done rounds after the best (round ids ascend with positions).
  const auto after_best = std::upper_bound(
      rounds.begin(), rounds.end(), h.best_round,
      [](int64_t id, const v1::Round& r) { return id < r.round_id(); });
  m.since_best = static_cast<int>(
      index.DoneFrom(static_cast<size_t>(after_best - rounds.begin())));
  // The bandit reads its window of the techniques' last uses.
  const size_t window = BanditWindow(o);
  const std::vector<size_t>& used = index.with_technique();
  for (auto it = used.rbegin(); it != used.rend() && m.uses.size() < window;
       ++it) {
    const v1::Round& r = rounds[*it];
    if (r.state() == v1::ROUND_STATE_CANCELLED) continue;
    m.uses.emplace_back(
        index.entry(*it).technique,
        r.state() == v1::ROUND_STATE_DONE && r.decision() == v1::DECISION_KEPT);
  }
  std::reverse(m.uses.begin(), m.uses.end());
  if (h.best_round >= 0) {
    if (const std::vector<size_t>* walks = index.walks_from(h.best_round)) {
      for (size_t pos : *walks) {
        m.walk_used += rounds[pos].state() != v1::ROUND_STATE_CANCELLED;
      }
    }
  }
  m.ok = index.ok();
  m.failed = index.failed();
  const int n_ok = static_cast<int>(m.ok.size());
  const int n_good =
      n_ok == 0
          ? 0
          : std::clamp(static_cast<int>(std::ceil(o.gamma_pct / 100.0 * n_ok)),
                       1, kMaxGood);
  m.good = Centres(m.dims.size());
  m.good.Reserve(static_cast<size_t>(n_good));
  for (int i = 0; i < n_good; ++i) m.good.Add(*m.ok[i].config);
  // The rest: the slower ones by time, the failed, and (a constant liar, as
  // Optuna's TPE with constant_liar) the rounds in flight, which count as
  // slow so that the next proposals move away from them instead of piling
  // onto the same good region while their results are out. Every score
  // costs O(rest): past kMaxRest configurations it is an evenly spaced
  // sample of them, so that a proposal's cost stops growing with the
  // sweep. Only sweeps of more than kMaxRest rounds see it.
  const size_t n_rest =
      static_cast<size_t>(n_ok - n_good) + m.failed.size() + m.in_flight.size();
  auto rest = [&](size_t k) -> const Config& {
    if (k < static_cast<size_t>(n_ok - n_good)) return *m.ok[n_good + k].config;
    k -= static_cast<size_t>(n_ok - n_good);
    if (k < m.failed.size()) return *m.failed[k].config;
    return *m.in_flight[k - m.failed.size()];
  };
  m.bad = Centres(m.dims.size());
  const size_t kept = std::min(n_rest, kMaxRest);
  m.bad.Reserve(kept + 1);  // and the call's proposal (NextRound asks one)
  for (size_t k = 0; k < kept; ++k) {
    m.bad.Add(rest(n_rest > kMaxRest ? k * n_rest / kMaxRest : k));
  }
  // How much each numeric domain's order explains the times so far: a
  // method id or a flag behaves as a category, a tile size as an ordered
  // value. Until three values were seen, half and half.
  for (size_t i = 0; i < m.dims.size(); ++i) {
    Dim& d = m.dims[i];
    if (!d.ordinal) continue;
    std::vector<std::vector<double>> means(d.ordered.size());
    for (size_t j = 0; j < means.size(); ++j) {
      if (std::optional<double> mean = index.MeanLogUs(i, j)) {
        means[j] = {*mean};
      }
    }
    d.order_weight = OrderWeight(means, kUndeterminedOrder);
  }
  for (Dim& d : m.dims) BuildKernels(d, static_cast<int>(m.good.size()));
  return m;
}

// log of the mixture density of `c` around `centres` (plus a uniform prior
// component of the same weight as one centre).
double LogDensity(const Model& m, const Centres& centres, const Config& c) {
  const size_t dims = m.dims.size();
  double prior = 1;
  for (const Dim& d : m.dims) prior /= static_cast<double>(d.ordered.size());
  // Per parameter, the kernel around every value, evaluated at c's.
  absl::InlinedVector<const double*, 16> at(dims);
  for (size_t i = 0; i < dims; ++i) at[i] = m.dims[i].at[c[i]].data();
  double sum = prior;
  for (size_t g = 0; g < centres.size(); ++g) {
    const int* row = centres.row(g);
    double p = 1;
    for (size_t i = 0; i < dims; ++i) p *= at[i][row[i]];
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
    const std::vector<double>& cdf = d.cdf[m.good.row(pick)[i]];
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
    return o_.bandit ? kHybridStrategyName : kTpeStrategyName;
  }
  // The start-up's draws (and the model's, once it is ready) search the
  // whole space: they need no measured baseline.
  bool ProposesWhileBaselineRuns() const override { return true; }

  std::vector<Candidate> Propose(const SearchHistory& history, int n) override {
    std::vector<Candidate> out;
    if (n <= 0 || history.op == nullptr || history.op->parameters_size() == 0) {
      return out;
    }
    for (const v1::ParameterDomain& p : history.op->parameters()) {
      if (p.values().empty()) return out;
    }
    // A history without a rounds vector is one without rounds.
    const std::vector<v1::Round> no_rounds;
    SearchHistory h = history;
    if (h.rounds == nullptr) h.rounds = &no_rounds;
    Model m = Learn(o_, h, index_);
    const uint64_t count = h.rounds->size();
    // SeedSeq: std::seed_seq's algorithm, cheaper.
    SeedSeq seq{static_cast<uint32_t>(o_.seed),
                static_cast<uint32_t>(o_.seed >> 32),
                static_cast<uint32_t>(count),
                static_cast<uint32_t>(count >> 32), 0x7b9e1d2fu};
    std::mt19937_64 rng(seq);
    while (static_cast<int>(out.size()) < n) {
      std::optional<Candidate> c = ProposeOne(h, m, rng);
      if (!c.has_value()) break;
      AddProposal(m, c->params);
      ++m.rounds;
      ++m.pending;
      if (const int t = TechniqueOf(c->stage); t >= 0) {
        m.uses.emplace_back(t, false);
      }
      out.push_back(*std::move(c));
    }
    return out;
  }

 private:
  Candidate Make(const SearchHistory& h, const Model& m, ParamMap params,
                 std::string stage, const std::string& why) const {
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

  // The start-up is over once `startup` rounds finished OK, counting the
  // rounds in flight at the success rate seen so far (Laplace-smoothed):
  // with many boards, a whole batch of start-up draws is out before the
  // first returns, and more draws while they run would only add to the
  // start-up what the model could propose better.
  bool ModelReady(const Model& m) const {
    if (m.good.empty() || m.rounds < o_.startup) return false;
    const double ok = static_cast<double>(m.ok.size());
    const double rate =
        (ok + 1) / (ok + static_cast<double>(m.failed.size()) + 2);
    return static_cast<int>(ok + m.pending * rate) >= std::max(1, o_.startup);
  }

  double Score(const Model& m, const Config& c) const {
    return LogDensity(m, m.good, c) - LogDensity(m, m.bad, c);
  }

  // The technique with the highest score among `open` ones: OpenTuner's
  // AUC bandit. A technique's credit is the area under its curve of new
  // bests over its last uses in the window (recent uses weigh more), plus
  // an exploration bonus c * sqrt(2 ln N / n). Rounds in flight count as
  // uses without a new best yet, so one batch spreads over the techniques.
  // A technique not used in the window goes first.
  int PickTechnique(const Model& m, const std::array<bool, kTechniques>& open,
                    std::string* why) const {
    const size_t window = BanditWindow(o_);
    const size_t from = m.uses.size() > window ? m.uses.size() - window : 0;
    std::array<int, kTechniques> uses{};
    std::array<double, kTechniques> area{};
    for (size_t i = from; i < m.uses.size(); ++i) {
      const auto [t, gained] = m.uses[i];
      ++uses[t];
      if (gained) area[t] += uses[t];
    }
    const double total = static_cast<double>(m.uses.size() - from);
    int pick = -1;
    double pick_score = -INFINITY;
    for (int t = 0; t < kTechniques; ++t) {
      if (!open[t]) continue;
      if (uses[t] == 0) {
        *why = absl::StrCat("bandit: ", kTechniqueNames[t],
                            " not used in the last ", window, " rounds");
        return t;
      }
      const double n = uses[t];
      const double auc = area[t] / (n * (n + 1) / 2);
      const double score =
          auc + o_.bandit_c_pct / 100.0 * std::sqrt(2 * std::log(total) / n);
      if (score > pick_score) {
        pick_score = score;
        pick = t;
        *why = absl::StrFormat(
            "bandit: %s scores %.2f (new-best credit %.2f over its last %d "
            "uses)",
            kTechniqueNames[t], score, auc, uses[t]);
      }
    }
    return pick;
  }

  std::optional<Candidate> ProposeOne(const SearchHistory& h, Model& m,
                                      std::mt19937_64& rng) const {
    if (std::optional<Candidate> c = Rerace(h, m)) return c;
    if (!o_.bandit) {  // tpe: the model alone
      const std::string why =
          h.best_round < 0 ? "proposed while the baseline runs" : "";
      if (ModelReady(m)) {
        if (std::optional<Candidate> c = Tpe(h, m, rng, why)) return c;
      }
      return Uniform(h, m, rng, why);
    }
    // Until the model has its `startup` finished rounds, uniform draws look
    // at the whole space first (as the peers' random start or initial
    // population): single changes of an early best refine a configuration
    // that is mostly still far from good. The diagnosis' suggestions for the
    // best go first all the same.
    const bool started = ModelReady(m);
    if (!started && m.diagnosis == nullptr && o_.startup > 0) {
      return Uniform(
          h, m, rng,
          absl::StrCat(
              "start-up: ", m.ok.size(), " of ", o_.startup,
              " finished rounds before the "
              "model and the bandit",
              h.best_round < 0 ? ", proposed while the baseline runs" : ""),
          true);
    }
    // While the baseline runs there is no measured best to walk from: the
    // free boards get draws over the whole space.
    if (h.best_round < 0) {
      const std::string why =
          "while the baseline runs (no measured best to walk from yet)";
      if (started) {
        if (std::optional<Candidate> c = Tpe(h, m, rng, why)) return c;
      }
      return Uniform(h, m, rng, why, true);
    }
    // A burst of walk rounds right after each new best (the diagnosis'
    // suggestions first), then the bandit shares the boards. With rounds in
    // flight the burst grows by one per two of them: its rounds go out
    // together instead of each after the last one's result, so a batch
    // covers more of the new best's neighbourhood at once.
    const int burst = o_.walk + m.pending / 2;
    if (!m.best.empty() && m.walk_used < burst) {
      if (std::optional<Candidate> c =
              Walk(h, m, m.best,
                   absl::StrCat("walk round ", m.walk_used + 1, " of ", burst,
                                " after a new best"))) {
        ++m.walk_used;
        return c;
      }
    }
    // Elite restarts once the best stalls or has no single change left;
    // space-filling exploration once it stalls.
    const bool stalled =
        o_.restart_after > 0 && m.since_best >= o_.restart_after;
    std::array<bool, kTechniques> open = {!m.best.empty(), stalled, true,
                                          m.ok.size() >= 2, true};
    while (true) {
      std::string why;
      const int t = PickTechnique(m, open, &why);
      if (t < 0) break;
      std::optional<Candidate> c;
      if (t == kWalkTechnique) {
        c = Walk(h, m, m.best, why);
        if (!c.has_value()) open[kRestartTechnique] = !m.best.empty();
      } else if (t == kRestartTechnique) {
        c = Restart(h, m, stalled, why);
      } else if (t == kRecombineTechnique) {
        c = Recombine(h, m, rng, why);
      } else if (t == kExploreTechnique) {
        // Once the best stalls, away from everything tried instead of where
        // the model points: in a deceptive space (a method that wins only
        // with another parameter far from the fast rounds) the model's
        // rating keeps draws off the next basin.
        c = ModelReady(m) && !stalled
                ? Explore(h, m, rng, why)
                : Uniform(h, m, rng,
                          stalled ? absl::StrFormat(
                                        "%s; %d rounds without a new best: "
                                        "exploration away from everything "
                                        "tried, not where the model points",
                                        why, m.since_best)
                                  : why,
                          true);
      } else if (ModelReady(m)) {
        c = Tpe(h, m, rng, why);
      } else {
        c = Uniform(h, m, rng, why);
      }
      if (c.has_value()) return c;
      open[t] = false;
    }
    return Uniform(h, m, rng, "");
  }

  // A re-race (RaceAgainCandidate), at most once per configuration.
  std::optional<Candidate> Rerace(const SearchHistory& h, Model& m) const {
    std::optional<Candidate> c = RaceAgainCandidate(
        h, m.reraced, m.index->inconclusive(),
        [&](size_t pos) { return m.index->Measured(m, h, pos); });
    if (c.has_value()) m.reraced.push_back(ParamsKey(c->params));
    return c;
  }

  // An elite restart: the walk from the fastest other configuration that
  // still has untried single changes; when the best stalled, at least two
  // parameters from it, so that the walk leaves its neighbourhood.
  std::optional<Candidate> Restart(const SearchHistory& h, const Model& m,
                                   bool stalled, const std::string& why) const {
    constexpr int kElites = 16;
    int tried = 0;
    for (size_t i = 0; i < m.ok.size() && tried < kElites; ++i) {
      const Finished& e = m.ok[i];
      if (Distance(*e.config, m.best) < (stalled ? 2 : 1)) continue;
      ++tried;
      std::optional<Candidate> c = Walk(
          h, m, *e.config,
          absl::StrFormat("%s; elite restart from round %d (the %d%s fastest "
                          "configuration%s)",
                          why, e.round, i + 1,
                          i == 0   ? "st"
                          : i == 1 ? "nd"
                          : i == 2 ? "rd"
                                   : "th",
                          stalled ? absl::StrFormat(", %d rounds without a "
                                                    "new best",
                                                    m.since_best)
                                  : ", every single change of the best tried"));
      if (c.has_value()) {
        c->stage = kRestartStage;
        return c;
      }
    }
    return std::nullopt;
  }

  // One change from `centre`: from the best, the diagnosis' suggestions
  // first; then neighbours, by the model's score when it is ready, nearest
  // first otherwise.
  std::optional<Candidate> Walk(const SearchHistory& h, const Model& m,
                                const Config& centre,
                                const std::string& why) const {
    const std::string prefix = why.empty() ? "" : absl::StrCat(why, "; ");
    const bool from_best = centre == m.best;
    if (m.diagnosis != nullptr && from_best) {
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
          const int from = centre[i];
          int given = -1;
          if (s->has_value()) {
            auto at = d.pos.find(ParamValueToString(s->value()));
            if (at != d.pos.end()) given = at->second;
          }
          const int to = SuggestedPosition(*s, from, given,
                                           static_cast<int>(d.ordered.size()));
          if (to < 0) continue;
          Config c = centre;
          c[i] = to;
          if (!Fresh(m, c)) continue;
          return Make(
              h, m, ToParams(m, c), d.stage,
              absl::StrFormat("%swalk from the best: analyzer suggests "
                              "%s %s (rule %s, confidence %.2f: %s)",
                              prefix, s->direction(), s->parameter(), s->rule(),
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
        const int step = to - centre[i];
        if (step == 0) continue;
        Config c = centre;
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
    const int step = best_to - centre[best_i];
    Config c = centre;
    c[best_i] = best_to;
    const std::string move = absl::StrFormat(
        "%s %d step%s %s", d.name, std::abs(step),
        std::abs(step) > 1 ? "s" : "", step > 0 ? "up" : "down");
    const std::string where = from_best ? "walk from the best" : "walk";
    return Make(h, m, ToParams(m, c), d.stage,
                model ? absl::StrFormat("%s%s: %s, the single change the "
                                        "model rates best (score %.2f)",
                                        prefix, where, move, best_rank)
                      : absl::StrCat(prefix, where, ": ", move));
  }

  // Recombination, as a genetic algorithm's crossover: two of the fastest
  // finished configurations (the fastest quarter, at least 2, at most 16)
  // mixed parameter by parameter, then each parameter mutated with
  // probability 1/dims (one step along a numeric domain, any value of
  // another).
  std::optional<Candidate> Recombine(const SearchHistory& h, const Model& m,
                                     std::mt19937_64& rng,
                                     const std::string& why) const {
    const int n_ok = static_cast<int>(m.ok.size());
    if (n_ok < 2) return std::nullopt;
    const int elite = std::clamp((n_ok + 3) / 4, 2, 16);
    const int dims = static_cast<int>(m.dims.size());
    constexpr int kDraws = 200;
    for (int draw = 0; draw < kDraws; ++draw) {
      const int a = Below(rng, elite);
      int b = Below(rng, elite - 1);
      if (b >= a) ++b;
      const Config& x = *m.ok[a].config;
      const Config& y = *m.ok[b].config;
      Config c(dims);
      int mutated = 0;
      for (int i = 0; i < dims; ++i) {
        c[i] = (rng() & 1) ? x[i] : y[i];
        if (Below(rng, dims) != 0) continue;
        const int size = static_cast<int>(m.dims[i].ordered.size());
        if (size < 2) continue;
        const int before = c[i];
        if (m.dims[i].ordinal) {
          c[i] = std::clamp(c[i] + ((rng() & 1) ? 1 : -1), 0, size - 1);
        } else {
          c[i] = Below(rng, size);
        }
        mutated += c[i] != before;
      }
      if (!Fresh(m, c)) continue;
      return Make(
          h, m, ToParams(m, c), kRecombineStage,
          absl::StrFormat(
              "%srecombination of rounds %d and %d (the %d. and "
              "%d. fastest)%s",
              why.empty() ? "" : absl::StrCat(why, "; "), m.ok[a].round,
              m.ok[b].round, a + 1, b + 1,
              mutated > 0 ? absl::StrFormat(", %d mutated", mutated) : ""));
    }
    return std::nullopt;
  }

  std::optional<Candidate> Tpe(const SearchHistory& h, const Model& m,
                               std::mt19937_64& rng,
                               const std::string& why) const {
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
    // Numeric parameters whose order the model found not to explain the
    // times: it treats them mostly as categories.
    std::string unordered;
    for (const Dim& d : m.dims) {
      if (d.ordinal && d.ordered.size() > 2 && d.order_weight < 0.5) {
        absl::StrAppend(&unordered, unordered.empty() ? "" : ", ", d.name);
      }
    }
    return Make(
        h, m, ToParams(m, *pick), kGlobalStage,
        absl::StrFormat(
            "%smodel (TPE over %d finished rounds, %d "
            "good): the best density ratio among %d "
            "untried draws (log ratio %.2f)%s",
            why.empty() ? "" : absl::StrCat(why, "; "),
            static_cast<int>(m.ok.size() + m.failed.size()),
            static_cast<int>(m.good.size()), scored, pick_score,
            unordered.empty() ? "" : absl::StrCat("; unordered: ", unordered)));
  }

  // Exploration: of kDesignDraws uniform untried draws, the one the model
  // rates best. Unlike the model's own draws around good configurations,
  // these can land in a basin no good round is near yet (a method that
  // wins only with another parameter at its far end); the model's rating
  // keeps them off regions where rounds failed.
  std::optional<Candidate> Explore(const SearchHistory& h, const Model& m,
                                   std::mt19937_64& rng,
                                   const std::string& why) const {
    std::optional<Config> pick;
    double pick_score = -INFINITY;
    int got = 0;
    Config c(m.dims.size());
    for (int draw = 0; draw < kUniformDraws && got < kDesignDraws; ++draw) {
      for (size_t i = 0; i < m.dims.size(); ++i) {
        c[i] = Below(rng, static_cast<int>(m.dims[i].ordered.size()));
      }
      if (!Fresh(m, c)) continue;
      ++got;
      const double score = Score(m, c);
      if (score > pick_score) {
        pick_score = score;
        pick = c;
      }
    }
    if (!pick.has_value()) return Uniform(h, m, rng, why);
    return Make(h, m, ToParams(m, *pick), kExploreStage,
                absl::StrFormat("%sexploration: of %d uniform untried "
                                "draws, the one the model rates best (log "
                                "ratio %.2f)",
                                why.empty() ? "" : absl::StrCat(why, "; "), got,
                                pick_score));
  }

  // Uniform over the untried feasible configurations (rejection sampling,
  // then an enumeration when the space is small enough).
  std::optional<Candidate> Uniform(const SearchHistory& h, const Model& m,
                                   std::mt19937_64& rng, const std::string& why,
                                   bool design = false) const {
    const std::string prefix = why.empty() ? "" : absl::StrCat(why, "; ");
    Config c(m.dims.size());
    // The start-up's design: of kDesignDraws untried draws, the one farthest
    // from every configuration tried (a maximin design: the first rounds
    // spread over the space instead of clumping by chance).
    const int spread = design ? kDesignDraws : 1;
    if (spread > 1) {
      std::optional<Config> pick;
      double pick_d = -1;
      int got = 0;
      for (int draw = 0; draw < kUniformDraws && got < spread; ++draw) {
        for (size_t i = 0; i < m.dims.size(); ++i) {
          c[i] = Below(rng, static_cast<int>(m.dims[i].ordered.size()));
        }
        if (!Fresh(m, c)) continue;
        ++got;
        double nearest = INFINITY;
        auto near = [&](const int* t) {
          double d = 0;
          for (size_t i = 0; i < m.dims.size(); ++i) {
            const int k = static_cast<int>(m.dims[i].ordered.size());
            if (k < 2) continue;
            d += m.dims[i].ordinal ? std::abs(c[i] - t[i]) / (k - 1.0)
                                   : (c[i] != t[i]);
          }
          nearest = std::min(nearest, d);
        };
        for (const Centres* group : {&m.good, &m.bad}) {
          for (size_t g = 0; g < group->size(); ++g) near(group->row(g));
        }
        if (!m.best.empty()) near(m.best.data());
        if (nearest > pick_d) {
          pick_d = nearest;
          pick = c;
        }
      }
      if (pick.has_value()) {
        return Make(h, m, ToParams(m, *pick), kExploreStage,
                    absl::StrCat(prefix,
                                 "space-filling draw among the untried "
                                 "feasible configurations"));
      }
    }
    for (int draw = 0; draw < kUniformDraws; ++draw) {
      for (size_t i = 0; i < m.dims.size(); ++i) {
        c[i] = Below(rng, static_cast<int>(m.dims[i].ordered.size()));
      }
      if (Fresh(m, c)) {
        return Make(h, m, ToParams(m, c), kExploreStage,
                    absl::StrCat(prefix,
                                 "uniform draw among the untried feasible "
                                 "configurations"));
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
                    absl::StrCat(prefix,
                                 "one of the last untried feasible "
                                 "configurations"));
      }
    }
    return std::nullopt;
  }

  HybridOptions o_;
  RoundIndex index_;
};

}  // namespace

const std::vector<std::string>& HybridOptionNames() {
  static const auto* names = new std::vector<std::string>{
      "bandit_c_pct",  "bandit_window", "candidates",    "gamma_pct",
      "restart_after", "startup",       "use_diagnosis", "walk"};
  return *names;
}

absl::StatusOr<HybridOptions> HybridOptionsFromSpec(
    const v1::StrategySpec& spec, bool walk) {
  HybridOptions o;
  o.seed = spec.seed();
  o.bandit = walk;
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
    fields["restart_after"] = {&o.restart_after, 0, 100000};
    fields["bandit_window"] = {&o.bandit_window, 1, 100000};
    fields["bandit_c_pct"] = {&o.bandit_c_pct, 0, 1000};
  }
  const std::map<std::string, std::string> sorted(spec.options().begin(),
                                                  spec.options().end());
  for (const auto& [key, value] : sorted) {
    auto it = fields.find(key);
    if (it == fields.end()) {
      std::string known;
      for (const auto& [k, f] : fields) {
        absl::StrAppend(&known, known.empty() ? "" : ", ", k);
      }
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
