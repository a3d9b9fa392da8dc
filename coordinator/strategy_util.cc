#include "coordinator/strategy_util.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tunefarm {

std::vector<v1::ParamValue> OrderedValues(const v1::ParameterDomain& domain) {
  std::vector<v1::ParamValue> ordered(domain.values().begin(),
                                      domain.values().end());
  if (std::all_of(ordered.begin(), ordered.end(), IsNumber)) {
    std::stable_sort(ordered.begin(), ordered.end(),
                     [](const v1::ParamValue& a, const v1::ParamValue& b) {
                       return AsDouble(a) < AsDouble(b);
                     });
  }
  return ordered;
}

int SuggestedPosition(const v1::Suggestion& s, int from, int given, int size) {
  int to = -1;
  if (s.direction() == "set") {
    to = given;
  } else if (s.direction() == "raise") {
    to = given > from ? given : from + 1;
  } else if (s.direction() == "lower") {
    to = given >= 0 && given < from ? given : from - 1;
  }
  return to < 0 || to >= size || to == from ? -1 : to;
}

double OrderWeight(const std::vector<std::vector<double>>& times,
                   double undetermined) {
  std::vector<double> means;
  for (const std::vector<double>& t : times) {
    if (t.empty()) continue;
    double sum = 0;
    for (double x : t) sum += x;
    means.push_back(sum / static_cast<double>(t.size()));
  }
  if (means.size() < 3) return undetermined;
  double adjacent = 0, all = 0;
  for (size_t i = 0; i + 1 < means.size(); ++i) {
    adjacent += std::abs(means[i + 1] - means[i]);
  }
  adjacent /= static_cast<double>(means.size() - 1);
  int pairs = 0;
  for (size_t i = 0; i < means.size(); ++i) {
    for (size_t j = i + 1; j < means.size(); ++j) {
      all += std::abs(means[j] - means[i]);
      ++pairs;
    }
  }
  all /= pairs;
  if (all <= 0) return undetermined;
  return std::clamp(1 - adjacent / all, 0.0, 1.0);
}

const v1::Round* FindRound(const SearchHistory& h, int64_t id) {
  if (h.rounds == nullptr || id < 0) return nullptr;
  auto it = std::lower_bound(
      h.rounds->begin(), h.rounds->end(), id,
      [](const v1::Round& r, int64_t x) { return r.round_id() < x; });
  if (it == h.rounds->end() || it->round_id() != id) return nullptr;
  return &*it;
}

std::optional<Candidate> RaceAgainCandidate(
    const SearchHistory& h, const std::vector<std::string>& skip,
    std::span<const size_t> inconclusive,
    absl::FunctionRef<int(size_t)> measured) {
  const v1::Round* best = FindRound(h, h.best_round);
  if (best == nullptr) return std::nullopt;
  const double best_us = best->result().measurement().median_us();
  if (best_us <= 0) return std::nullopt;
  const double min_gain = h.spec != nullptr ? h.spec->min_gain() : 0;
  const v1::Round* pick = nullptr;
  for (size_t pos : inconclusive) {
    const v1::Round& r = (*h.rounds)[pos];
    const double us = r.result().measurement().median_us();
    if (us <= 0 || us > best_us * (1 - min_gain) ||
        (pick != nullptr && us >= pick->result().measurement().median_us()) ||
        measured(pos) != 1 ||
        std::find(skip.begin(), skip.end(), ParamsKey(r.params())) !=
            skip.end()) {
      continue;
    }
    pick = &r;
  }
  if (pick == nullptr) return std::nullopt;
  Candidate c;
  c.parent_round = h.best_round;
  c.changes = DiffParams(best->params(), pick->params());
  c.params = pick->params();
  c.stage = kRerace;
  const size_t k = c.changes.size();
  c.rationale = absl::StrCat(
      absl::StrFormat("re-race of inconclusive round %d (%.1f µs, below the "
                      "best's %.1f µs) against the current best",
                      pick->round_id(),
                      pick->result().measurement().median_us(), best_us),
      k == 1
          ? std::string("; 1 parameter changed")
          : absl::StrCat("; multi-parameter move: ", k, " parameters at once"));
  return c;
}

std::optional<Candidate> RaceAgainCandidate(
    const SearchHistory& h, const std::vector<std::string>& skip) {
  if (h.rounds == nullptr) return std::nullopt;
  std::vector<size_t> inconclusive;
  for (size_t i = 0; i < h.rounds->size(); ++i) {
    const v1::Round& r = (*h.rounds)[i];
    if (r.state() == v1::ROUND_STATE_DONE &&
        r.decision() == v1::DECISION_INCONCLUSIVE) {
      inconclusive.push_back(i);
    }
  }
  if (inconclusive.empty()) return std::nullopt;
  // Every round's configuration key is built only once an inconclusive
  // round beats the best: most calls find none.
  std::optional<absl::flat_hash_map<std::string, int>> times;
  return RaceAgainCandidate(h, skip, inconclusive, [&](size_t pos) {
    if (!times.has_value()) {
      times.emplace();
      for (const v1::Round& r : *h.rounds) ++(*times)[ParamsKey(r.params())];
    }
    return (*times)[ParamsKey((*h.rounds)[pos].params())];
  });
}

size_t HistoryCursor::Resume(const SearchHistory& h) {
  const size_t n = h.rounds != nullptr ? h.rounds->size() : 0;
  if (h.rounds != rounds_ || h.op != op_ || h.rewinds != rewinds_ ||
      n < read_ ||
      (read_ > 0 && ParamsKey((*h.rounds)[read_ - 1].params()) != last_)) {
    ++starts_;
    rounds_ = h.rounds;
    op_ = h.op;
    rewinds_ = h.rewinds;
    read_ = 0;
    last_.clear();
  }
  return read_;
}

void HistoryCursor::ReadAll(const SearchHistory& h) {
  rounds_ = h.rounds;
  op_ = h.op;
  rewinds_ = h.rewinds;
  read_ = h.rounds != nullptr ? h.rounds->size() : 0;
  last_ = read_ > 0 ? ParamsKey((*h.rounds)[read_ - 1].params()) : "";
}

}  // namespace tunefarm
