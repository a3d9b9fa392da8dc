#include "coordinator/workloads.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace tunefarm {

bool IsMultiWorkload(const v1::SweepSpec& spec) {
  return !spec.workloads().empty();
}

int WorkloadCount(const v1::SweepSpec& spec) {
  return IsMultiWorkload(spec) ? spec.workloads_size() : 1;
}

std::vector<std::string> WorkloadNames(const v1::SweepSpec& spec) {
  std::vector<std::string> names;
  if (!IsMultiWorkload(spec)) {
    names.push_back(spec.workload().name());
    return names;
  }
  for (const v1::Workload& w : spec.workloads()) names.push_back(w.name());
  return names;
}

const v1::Workload& RoundWorkload(const v1::SweepSpec& spec,
                                  const v1::Round& round) {
  if (!IsMultiWorkload(spec)) return spec.workload();
  const int i = std::clamp(round.workload_index(), 0,
                           static_cast<int>(spec.workloads_size()) - 1);
  return spec.workloads(i);
}

double WorkloadWeight(const v1::SweepSpec& spec, int index) {
  if (spec.objective() != v1::WORKLOAD_OBJECTIVE_ONE_CONFIG || index < 0 ||
      index >= spec.workloads_size()) {
    return 1;
  }
  auto it = spec.workload_weights().find(spec.workloads(index).name());
  return it == spec.workload_weights().end() ? 1 : it->second;
}

double WeightedGeomean(const std::vector<double>& values,
                       const std::vector<double>& weights) {
  double sum = 0, total = 0;
  for (size_t i = 0; i < values.size() && i < weights.size(); ++i) {
    if (!(values[i] > 0) || !std::isfinite(values[i])) return 0;
    sum += weights[i] * std::log(values[i]);
    total += weights[i];
  }
  return total > 0 ? std::exp(sum / total) : 0;
}

std::vector<v1::Round> WorkloadHistory(const std::vector<v1::Round>& rounds,
                                       int index) {
  std::vector<v1::Round> out;
  for (const v1::Round& r : rounds) {
    if (r.workload_index() == index) out.push_back(r);
  }
  return out;
}

namespace {

std::vector<double> Weights(const v1::SweepSpec& spec) {
  std::vector<double> weights(WorkloadCount(spec));
  for (int i = 0; i < WorkloadCount(spec); ++i) {
    weights[i] = WorkloadWeight(spec, i);
  }
  return weights;
}

// ConfigHistory's round for the configuration whose rounds are
// rounds[first, first + weights.size()).
v1::Round ConfigRound(const std::vector<v1::Round>& rounds, size_t first,
                      const std::vector<double>& weights) {
  const size_t n = weights.size();
  v1::Round c = rounds[first];
  c.clear_workload();
  c.clear_workload_index();
  std::vector<double> medians;
  bool all_done = true, any_cancelled = false;
  const v1::Round* failed = nullptr;
  for (size_t i = first; i < first + n; ++i) {
    const v1::Round& r = rounds[i];
    any_cancelled = any_cancelled || r.state() == v1::ROUND_STATE_CANCELLED;
    if (r.state() != v1::ROUND_STATE_DONE) {
      all_done = false;
      continue;
    }
    if (r.result().outcome() != v1::OUTCOME_OK) {
      if (failed == nullptr) failed = &r;
      continue;
    }
    medians.push_back(r.result().measurement().median_us());
    if (r.decision() != v1::DECISION_UNSPECIFIED) {
      c.set_decision(r.decision());
    }
  }
  if (failed != nullptr) {
    // One workload failing rejects the configuration.
    c.set_state(v1::ROUND_STATE_DONE);
    *c.mutable_result() = failed->result();
    c.set_decision(failed->decision());
  } else if (all_done) {
    c.set_state(v1::ROUND_STATE_DONE);
    c.mutable_result()->mutable_measurement()->set_median_us(
        WeightedGeomean(medians, weights));
  } else if (any_cancelled) {
    c.set_state(v1::ROUND_STATE_CANCELLED);
  } else {
    c.set_state(v1::ROUND_STATE_LEASED);  // in flight
    c.clear_result();
  }
  return c;
}

bool IsInFlight(const v1::Round& r) {
  return r.state() == v1::ROUND_STATE_QUEUED ||
         r.state() == v1::ROUND_STATE_LEASED;
}

}  // namespace

std::vector<v1::Round> ConfigHistory(const v1::SweepSpec& spec,
                                     const std::vector<v1::Round>& rounds) {
  const std::vector<double> weights = Weights(spec);
  std::vector<v1::Round> out;
  for (size_t first = 0; first + weights.size() <= rounds.size();
       first += weights.size()) {
    out.push_back(ConfigRound(rounds, first, weights));
  }
  return out;
}

void WorkloadViews::Lineage::Count(const v1::Round& r, int64_t sign) {
  if (r.parent_round() >= 0) candidates += sign;
  if (IsInFlight(r)) in_flight += sign;
}

void WorkloadViews::Sync(const v1::SweepSpec& spec,
                         const std::vector<v1::Round>& rounds) {
  if (weights_.empty()) {
    weights_ = Weights(spec);
    workloads_.resize(weights_.size());
  }
  const bool one_config = spec.objective() == v1::WORKLOAD_OBJECTIVE_ONE_CONFIG;
  const size_t n = weights_.size();
  if (n == 0) return;  // not a multi-workload sweep
  const size_t valid = std::min(synced_, rounds.size());
  // Copies of rounds that are gone (an undo removed them) go too.
  for (Lineage& l : workloads_) {
    while (!l.rounds.empty() &&
           l.rounds.back().round_id() >= static_cast<int64_t>(valid)) {
      l.Count(l.rounds.back(), -1);
      l.rounds.pop_back();
    }
  }
  while (configs_.size() * n > valid - valid % n) configs_.pop_back();
  for (const int64_t id : changed_) {
    if (id < 0 || id >= static_cast<int64_t>(valid)) continue;
    const v1::Round& r = rounds[id];
    if (one_config) {
      const size_t c = static_cast<size_t>(id) / n;
      if (c < configs_.size()) {
        configs_[c] = ConfigRound(rounds, c * n, weights_);
      }
      continue;
    }
    if (r.workload_index() < 0 || r.workload_index() >= static_cast<int>(n)) {
      continue;
    }
    Lineage& l = workloads_[r.workload_index()];
    auto it = std::lower_bound(
        l.rounds.begin(), l.rounds.end(), id,
        [](const v1::Round& a, int64_t b) { return a.round_id() < b; });
    if (it == l.rounds.end() || it->round_id() != id) continue;
    l.Count(*it, -1);
    *it = r;
    l.Count(*it, +1);
  }
  changed_.clear();
  if (one_config) {
    for (size_t first = configs_.size() * n; first + n <= rounds.size();
         first += n) {
      configs_.push_back(ConfigRound(rounds, first, weights_));
    }
  } else {
    for (size_t id = valid; id < rounds.size(); ++id) {
      const v1::Round& r = rounds[id];
      if (r.workload_index() < 0 || r.workload_index() >= static_cast<int>(n)) {
        continue;
      }
      Lineage& l = workloads_[r.workload_index()];
      l.rounds.push_back(r);
      l.Count(r, +1);
    }
  }
  synced_ = rounds.size();
}

absl::Status WorkloadViews::Check(const v1::SweepSpec& spec,
                                  const std::vector<v1::Round>& rounds) const {
  auto differ = [](const std::string& what, const std::vector<v1::Round>& got,
                   const std::vector<v1::Round>& want) {
    for (size_t i = 0; i < std::max(got.size(), want.size()); ++i) {
      const std::string g = i < got.size() ? got[i].ShortDebugString() : "";
      const std::string w = i < want.size() ? want[i].ShortDebugString() : "";
      if (g != w) {
        return absl::InternalError(absl::StrCat(what, ", entry ", i,
                                                ": the view holds {", g,
                                                "}, the rounds say {", w, "}"));
      }
    }
    return absl::OkStatus();
  };
  if (spec.objective() == v1::WORKLOAD_OBJECTIVE_ONE_CONFIG) {
    return differ("configurations", configs_, ConfigHistory(spec, rounds));
  }
  if (workloads_.size() != static_cast<size_t>(spec.workloads_size())) {
    return absl::InternalError(
        absl::StrCat("the views hold ", workloads_.size(),
                     " workloads, the spec names ", spec.workloads_size()));
  }
  for (int i = 0; i < spec.workloads_size(); ++i) {
    const std::vector<v1::Round> want = WorkloadHistory(rounds, i);
    if (absl::Status st =
            differ(absl::StrCat("workload ", i), workloads_[i].rounds, want);
        !st.ok()) {
      return st;
    }
    Lineage counted;
    for (const v1::Round& r : want) counted.Count(r, +1);
    if (counted.candidates != workloads_[i].candidates ||
        counted.in_flight != workloads_[i].in_flight) {
      return absl::InternalError(
          absl::StrCat("workload ", i, ": the view counts ",
                       workloads_[i].candidates, " candidates and ",
                       workloads_[i].in_flight, " in flight, the rounds ",
                       counted.candidates, " and ", counted.in_flight));
    }
  }
  return absl::OkStatus();
}

std::string WorkloadsSummary(const v1::Sweep& sweep) {
  std::vector<std::string> parts;
  for (const v1::WorkloadProgress& w : sweep.workload_progress()) {
    if (w.best_round() < 0 || w.best_us() <= 0) {
      parts.push_back(absl::StrCat(w.workload(), ": no passing baseline"));
      continue;
    }
    parts.push_back(absl::StrFormat("%s: round %d, %.2fx", w.workload(),
                                    w.best_round(),
                                    w.baseline_us() / w.best_us()));
  }
  std::string out = absl::StrJoin(parts, "; ");
  if (sweep.best_us() > 0 && sweep.baseline_us() > 0) {
    absl::StrAppend(
        &out, absl::StrFormat(
                  "; %sgeometric mean %.2fx over the baselines",
                  sweep.spec().objective() == v1::WORKLOAD_OBJECTIVE_ONE_CONFIG
                      ? "weighted "
                      : "",
                  sweep.baseline_us() / sweep.best_us()));
  }
  return out;
}

namespace {

// A workload's time ratio candidate / parent and its pessimistic end.
void Ratio(const v1::Measurement& c, const v1::Measurement& p, double* ratio,
           double* upper) {
  if (c.paired()) {
    *ratio = 1 - c.gain();
    *upper = 1 - c.gain_lower();
    return;
  }
  *ratio = p.median_us() > 0 ? c.median_us() / p.median_us() : 0;
  *upper = p.p20_us() > 0 ? std::max(c.p80_us(), c.median_us()) /
                                std::min(p.p20_us(), p.median_us())
                          : *ratio;
}

}  // namespace

ConfigVerdict ScoreConfig(const v1::SweepSpec& spec,
                          const std::vector<const v1::Round*>& group,
                          const std::vector<const v1::Round*>& parent,
                          const std::vector<const v1::Round*>& best) {
  ConfigVerdict v;
  std::vector<double> ratios, uppers, weights, medians, best_medians;
  std::vector<std::string> parts;
  for (size_t i = 0; i < group.size() && i < parent.size(); ++i) {
    double r = 0, u = 0;
    Ratio(group[i]->result().measurement(), parent[i]->result().measurement(),
          &r, &u);
    ratios.push_back(r);
    uppers.push_back(u);
    weights.push_back(WorkloadWeight(spec, static_cast<int>(i)));
    medians.push_back(group[i]->result().measurement().median_us());
    if (i < best.size()) {
      best_medians.push_back(best[i]->result().measurement().median_us());
    }
    parts.push_back(absl::StrFormat("%s %.3f (weight %g)",
                                    RoundWorkload(spec, *group[i]).name(), r,
                                    weights.back()));
  }
  v.score = WeightedGeomean(ratios, weights);
  v.score_upper = WeightedGeomean(uppers, weights);
  v.mean_us = WeightedGeomean(medians, weights);
  const double min_gain = spec.min_gain();
  const std::string stats = absl::StrFormat(
      "weighted geometric mean of time ratios %.3f (gain %.1f%%, pessimistic "
      "%.1f%%) over %s",
      v.score, (1 - v.score) * 100, (1 - v.score_upper) * 100,
      absl::StrJoin(parts, ", "));
  if (!(v.score > 0) || !(v.score_upper > 0)) {
    v.reason = absl::StrCat("no usable times: ", stats);
    return v;
  }
  if (1 - v.score_upper <= min_gain) {
    v.reason = absl::StrFormat(
        "%s: the pessimistic gain must exceed the %.1f%% minimum gain", stats,
        min_gain * 100);
    return v;
  }
  const bool parent_is_best =
      !parent.empty() && !best.empty() &&
      parent.front()->round_id() == best.front()->round_id();
  if (!parent_is_best) {
    const double best_us = WeightedGeomean(best_medians, weights);
    if (best_us > 0 && v.mean_us > best_us * (1 - min_gain)) {
      v.reason = absl::StrFormat(
          "%s beats its parent, but its weighted geometric mean %.2f µs does "
          "not beat the current best configuration (round %d, %.2f µs) by "
          "the %.1f%% minimum gain",
          stats, v.mean_us, best.front()->round_id(), best_us, min_gain * 100);
      return v;
    }
  }
  v.keep = true;
  v.reason = absl::StrFormat("%s clears the %.1f%% minimum gain", stats,
                             min_gain * 100);
  return v;
}

}  // namespace tunefarm
