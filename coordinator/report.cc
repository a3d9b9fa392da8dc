#include "coordinator/report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/params.h"
#include "common/speedup.h"
#include "coordinator/report_render.h"
#include "coordinator/workloads.h"
#include "storage/lineage.h"

namespace tunefarm {
namespace {

using nlohmann::json;

std::string Lower(const std::string& name, absl::string_view prefix) {
  return absl::AsciiStrToLower(absl::StripPrefix(name, prefix));
}

std::string DecisionName(v1::Decision d) {
  switch (d) {
    case v1::DECISION_BASELINE:
      return "baseline";
    case v1::DECISION_KEPT:
      return "kept";
    case v1::DECISION_ROLLED_BACK:
      return "rolled_back";
    case v1::DECISION_REJECTED:
      return "rejected";
    case v1::DECISION_INCONCLUSIVE:
      return "inconclusive";
    case v1::DECISION_CLOSING_CHECK:
      return "closing_check";
    default:
      return "pending";
  }
}

// The outcome of a judged round, or its state while it has none.
std::string OutcomeName(const v1::Round& r) {
  if (r.state() != v1::ROUND_STATE_DONE) {
    return Lower(v1::RoundState_Name(r.state()), "ROUND_STATE_");
  }
  return Lower(v1::Outcome_Name(r.result().outcome()), "OUTCOME_");
}

bool HasTime(const v1::Round& r) {
  return r.state() == v1::ROUND_STATE_DONE &&
         r.result().outcome() == v1::OUTCOME_OK &&
         r.result().measurement().samples() > 0;
}

json TimeOrNull(const v1::Round& r) {
  return HasTime(r) ? json(r.result().measurement().median_us()) : json();
}

// The interval around a round's time, [low, high] in µs: for A/B rounds
// the paired gain's interval applied to the parent timed in the same lease
// (what the keep rule judged); otherwise the median's 95% interval from its
// p20..p80 spread and sample count (keep_rule.h's estimate). Null without a
// time, or without a spread to estimate it from.
json IntervalOrNull(const v1::Round& r) {
  if (!HasTime(r)) return json();
  const v1::Measurement& m = r.result().measurement();
  if (m.paired() && m.pairs() > 0 && m.gain_upper() >= m.gain_lower()) {
    const double ref = m.reference().median_us() > 0 ? m.reference().median_us()
                                                     : r.parent_us();
    if (ref > 0) {
      return json::array(
          {ref * (1 - m.gain_upper()), ref * (1 - m.gain_lower())});
    }
  }
  if (m.samples() > 1 && m.p80_us() > m.p20_us()) {
    // p20..p80 of a normal is 1.683 sigma; a median's standard error is
    // 1.2533 sigma / sqrt(n).
    const double se = 1.2533 * (m.p80_us() - m.p20_us()) / 1.6832 /
                      std::sqrt(static_cast<double>(m.samples()));
    return json::array({m.median_us() - 1.96 * se, m.median_us() + 1.96 * se});
  }
  return json();
}

std::string GoalText(const v1::Goal& goal) {
  std::vector<std::string> parts;
  if (goal.speedup() > 0) {
    parts.push_back(absl::StrFormat("%.2fx faster", goal.speedup()));
  }
  if (goal.target_us() > 0) {
    parts.push_back(absl::StrFormat("≤ %.2f µs", goal.target_us()));
  }
  if (parts.empty()) return "none (best effort)";
  return parts.size() == 1 ? parts[0]
                           : absl::StrCat(parts[0], " or ", parts[1]);
}

json MeasuredRound(const v1::Round& r) {
  const v1::Measurement& m = r.result().measurement();
  json j = {{"round", r.round_id()},      {"time_us", m.median_us()},
            {"p20_us", m.p20_us()},       {"p80_us", m.p80_us()},
            {"samples", m.samples()},     {"board", r.board_id()},
            {"simulated", m.simulated()}, {"policy", m.policy()}};
  return j;
}

// A diagnosis as named signals, in a fixed order. Zero means "not measured"
// in these protos, so only non-zero numbers are signals.
std::vector<std::pair<std::string, json>> Signals(const v1::Diagnosis& d) {
  std::vector<std::pair<std::string, json>> out;
  auto num = [&out](std::string name, double v) {
    if (v != 0 && std::isfinite(v)) out.emplace_back(std::move(name), v);
  };
  auto str = [&out](std::string name, const std::string& v) {
    if (!v.empty() && v != "unknown") out.emplace_back(std::move(name), v);
  };
  str("bound", d.bound());
  str("operator type", d.operator_type());
  num("device time µs", d.total_device_us());
  if (!d.hotspots().empty()) {
    const v1::Hotspot& h = d.hotspots(0);
    str("hotspot", h.op_name());
    num("hotspot share", h.share());
    num("hotspot µs", h.duration_us());
    num("hotspot block dim", h.block_dim());
  }
  for (const v1::PipelineRatio& p : d.pipeline_ratios()) {
    num(absl::StrCat("pipe ", p.column()), p.mean());
  }
  const v1::TimelineSignals& t = d.timeline();
  num("idle ratio", t.idle_ratio());
  num("gaps", static_cast<double>(t.gaps()));
  num("max gap µs", t.max_gap_us());
  num("bubble µs", t.bubble_us());
  num("core utilisation %", t.core_utilization_pct());
  num("bubble rate %", t.bubble_rate_pct());
  num("load balance %", t.load_balance_pct());
  num("achieved TFLOPS", d.roofline().achieved_tflops());
  num("arithmetic intensity", d.roofline().arithmetic_intensity());
  num("host launch µs", d.host_api().launch_related_us());
  return out;
}

bool Diagnosed(const v1::Round& r) {
  return !r.diagnosis().bundle_id().empty() ||
         !r.diagnosis().hotspots().empty() || !r.diagnosis().bound().empty();
}

// The signals present in both diagnoses whose values differ.
json MovedSignals(const v1::Diagnosis& base, const v1::Diagnosis& best) {
  std::map<std::string, json> after;
  for (auto& [name, value] : Signals(best)) after[name] = value;
  json moved = json::array();
  for (auto& [name, before] : Signals(base)) {
    auto it = after.find(name);
    if (it == after.end() || it->second == before) continue;
    json change;  // null for words
    if (before.is_number() && it->second.is_number()) {
      change = (it->second.get<double>() - before.get<double>()) /
               before.get<double>() * 100;
    }
    moved.push_back({{"signal", name},
                     {"baseline", before},
                     {"best", it->second},
                     {"change_pct", change}});
  }
  return moved;
}

// Multi-workload sweeps: one section per workload (its baseline, its best
// round, how its lineage ended).
json WorkloadSections(const v1::Sweep& sweep,
                      const std::map<int64_t, const v1::Round*>& by_id,
                      std::set<int64_t>* on_path) {
  const v1::SweepSpec& spec = sweep.spec();
  auto find = [&by_id](int64_t id) -> const v1::Round* {
    auto it = by_id.find(id);
    return it == by_id.end() || !HasTime(*it->second) ? nullptr : it->second;
  };
  std::vector<v1::Round> rounds;
  for (const auto& [id, r] : by_id) rounds.push_back(*r);
  json out = json::array();
  for (int i = 0; i < spec.workloads_size(); ++i) {
    const v1::Workload& w = spec.workloads(i);
    const v1::WorkloadProgress* p = i < sweep.workload_progress_size()
                                        ? &sweep.workload_progress(i)
                                        : nullptr;
    std::vector<std::string> dims;
    for (const auto& [k, v] :
         std::map<std::string, int64_t>(w.dims().begin(), w.dims().end())) {
      dims.push_back(absl::StrCat(k, "=", v));
    }
    const v1::Round* baseline = find(i);
    const v1::Round* best =
        p != nullptr && p->best_round() >= 0 ? find(p->best_round()) : nullptr;
    json kept = json::array();
    if (best != nullptr) {
      absl::StatusOr<std::vector<int64_t>> path =
          KeptPathTo(rounds, best->round_id());
      if (path.ok()) {
        for (int64_t id : *path) {
          kept.push_back(id);
          on_path->insert(id);
        }
      }
    }
    const double speedup = baseline != nullptr && best != nullptr
                               ? baseline->result().measurement().median_us() /
                                     best->result().measurement().median_us()
                               : 0;
    json b;
    if (best != nullptr) {
      b = MeasuredRound(*best);
      b["speedup"] = speedup;
      b["config"] = ParamsKey(best->params());
    }
    int64_t rounds_of = 0;
    for (const v1::Round& r : rounds) {
      rounds_of += r.workload_index() == i ? 1 : 0;
    }
    out.push_back(
        {{"name", w.name()},
         {"dtype", w.dtype()},
         {"dims", absl::StrJoin(dims, ",")},
         {"weight", WorkloadWeight(spec, i)},
         {"baseline", baseline != nullptr ? MeasuredRound(*baseline) : json()},
         {"best", std::move(b)},
         {"rounds", rounds_of},
         {"rounds_finished", p != nullptr ? p->rounds_finished() : 0},
         {"done", p != nullptr && p->done()},
         {"ended_because", p != nullptr ? p->termination_detail() : ""},
         {"goal_met",
          p != nullptr && p->termination() == v1::TERMINATION_GOAL_REACHED},
         {"kept_path", std::move(kept)}});
  }
  return out;
}

const char* const kProblemKinds[] = {"build_failed",   "precision_failed",
                                     "run_timeout",    "run_crashed",
                                     "profile_failed", "board_fault"};

}  // namespace

json BuildReport(const v1::Sweep& sweep, const std::vector<v1::Round>& rounds,
                 const std::vector<v1::BoardInfo>& boards) {
  const v1::SweepSpec& spec = sweep.spec();
  std::map<int64_t, const v1::Round*> by_id;
  for (const v1::Round& r : rounds) by_id[r.round_id()] = &r;
  auto find = [&by_id](int64_t id) -> const v1::Round* {
    auto it = by_id.find(id);
    return it == by_id.end() ? nullptr : it->second;
  };
  const bool multi = IsMultiWorkload(spec);
  std::vector<int64_t> kept_path;
  std::set<int64_t> on_path;
  json workloads;
  if (multi) {
    // Every workload's kept path: the rounds table marks them all.
    workloads = WorkloadSections(sweep, by_id, &on_path);
    kept_path.assign(on_path.begin(), on_path.end());
  } else {
    absl::StatusOr<std::vector<int64_t>> path =
        KeptPathTo(rounds, sweep.best_round());
    if (path.ok()) kept_path = *std::move(path);
    on_path.insert(kept_path.begin(), kept_path.end());
  }

  // A multi-workload sweep has no one baseline and best: its sections do.
  const v1::Round* baseline = multi ? nullptr : find(0);
  if (baseline != nullptr && !HasTime(*baseline)) baseline = nullptr;
  const v1::Round* best =
      !multi && sweep.best_round() >= 0 ? find(sweep.best_round()) : nullptr;
  if (best != nullptr && !HasTime(*best)) best = nullptr;
  // The best round's median over the baseline's; the sweep's own speedup is
  // the closing check's when it measured one.
  const double lease_speedup = LeaseSpeedup(sweep);
  const double speedup = SweepSpeedup(sweep);

  // Boards used: the board of every recorded result.
  std::map<std::string, int> board_rounds;
  int64_t last_finished_ms = 0;
  for (const v1::Round& r : rounds) {
    if (!r.board_id().empty()) ++board_rounds[r.board_id()];
    last_finished_ms = std::max(last_finished_ms, r.finished_unix_ms());
  }
  json boards_used = json::array();
  for (const auto& [id, count] : board_rounds) {
    json b = {{"board_id", id},
              {"kind", ""},
              {"chip", ""},
              {"simulated", false},
              {"rounds", count}};
    for (const v1::BoardInfo& info : boards) {
      if (info.board_id() != id) continue;
      b["kind"] = info.kind();
      b["chip"] = info.chip();
      b["simulated"] = info.simulated();
    }
    boards_used.push_back(std::move(b));
  }

  const int64_t end_ms = sweep.finished_unix_ms() > 0 ? sweep.finished_unix_ms()
                                                      : last_finished_ms;
  const int64_t start_ms = sweep.started_unix_ms() > 0
                               ? sweep.started_unix_ms()
                               : sweep.submitted_unix_ms();
  const v1::Goal& goal = spec.goal();
  bool goal_met = false;
  if (multi) {
    goal_met = sweep.termination() == v1::TERMINATION_GOAL_REACHED;
  } else if (best != nullptr) {
    goal_met = (goal.speedup() > 0 && speedup >= goal.speedup()) ||
               (goal.target_us() > 0 && sweep.best_us() <= goal.target_us());
  }

  json report;
  report["schema"] = "tunefarm.report";
  report["schema_version"] = kReportSchemaVersion;
  report["simulated"] = sweep.simulated();
  // Replay boards answer from a file of someone else's measurements.
  report["replayed"] = spec.boards().kind() == "replay";
  report["overview"] = {
      {"sweep_id", sweep.sweep_id()},
      {"name", spec.name()},
      {"team", spec.team()},
      {"operator", spec.operator_name()},
      {"workload", absl::StrJoin(WorkloadNames(spec), ", ")},
      {"dtype", multi ? spec.workloads(0).dtype() : spec.workload().dtype()},
      {"strategy", spec.strategy().name()},
      {"seed", spec.strategy().seed()},
      {"board_kind", spec.boards().kind()},
      {"state", Lower(v1::SweepState_Name(sweep.state()), "SWEEP_STATE_")},
      {"ended_because", sweep.termination_detail()},
      {"goal", GoalText(goal)},
      {"goal_speedup", goal.speedup()},
      {"goal_target_us", goal.target_us()},
      {"goal_met", goal_met},
      {"achieved_speedup", speedup},
      {"speedup_basis",
       CheckedSideBySide(sweep) ? "side_by_side" : "lease_medians"},
      {"submitted_unix_ms", sweep.submitted_unix_ms()},
      {"started_unix_ms", sweep.started_unix_ms()},
      {"finished_unix_ms", sweep.finished_unix_ms()},
      {"duration_s",
       start_ms > 0 && end_ms > start_ms ? (end_ms - start_ms) / 1000.0 : 0.0},
      {"rounds", static_cast<int64_t>(rounds.size())},
      {"rounds_finished", sweep.rounds_finished()},
      {"max_rounds", spec.budget().max_rounds()},
      {"time_limit_s", spec.budget().time_limit_s()},
      {"min_gain", spec.min_gain()},
      {"boards", std::move(boards_used)},
      // Where round 0's parameters came from when not the manifest's
      // defaults (a warm start from a tuning database); "" otherwise.
      {"baseline_source", spec.baseline_source()},
      {"operator_source_hash", spec.operator_source_hash()},
  };

  if (multi) {
    report["objective"] = spec.objective() == v1::WORKLOAD_OBJECTIVE_ONE_CONFIG
                              ? "one_config"
                              : "per_workload";
    report["workloads"] = std::move(workloads);
  }
  report["baseline"] = baseline != nullptr ? MeasuredRound(*baseline) : json();
  if (best != nullptr) {
    json b = MeasuredRound(*best);
    b["speedup"] = lease_speedup;
    b["config"] = ParamsKey(best->params());
    json params = json::object();
    for (const auto& [name, value] : best->params()) {
      params[name] = ParamValueToString(value);
    }
    b["params"] = std::move(params);
    report["best"] = std::move(b);
  } else {
    report["best"] = json();
  }
  if (sweep.has_closing_check()) {
    const v1::ClosingCheck& c = sweep.closing_check();
    report["closing_check"] = {
        {"round", c.round_id()},
        {"best_round", c.best_round()},
        {"lease_speedup", c.lease_speedup()},
        {"speedup", c.speedup()},
        {"speedup_low", c.speedup_low()},
        {"speedup_high", c.speedup_high()},
        {"confidence", c.confidence()},
        {"outcome", c.outcome()},
    };
  }
  report["signals"] = {
      {"baseline_diagnosed", baseline != nullptr && Diagnosed(*baseline)},
      {"best_diagnosed", best != nullptr && Diagnosed(*best)},
      {"moved", baseline != nullptr && best != nullptr
                    ? MovedSignals(baseline->diagnosis(), best->diagnosis())
                    : json::array()}};

  json table = json::array();
  json effective = json::array();
  json problems = json::array();
  std::map<std::string, int> problem_counts;
  for (const char* kind : kProblemKinds) problem_counts[kind] = 0;
  std::map<int, double> best_by_workload;  // per workload's lineage
  for (const v1::Round& r : rounds) {
    const bool timed = HasTime(r);
    const double t = r.result().measurement().median_us();
    double& best_so_far = best_by_workload[r.workload_index()];
    if (timed &&
        (r.decision() == v1::DECISION_BASELINE ||
         r.decision() == v1::DECISION_KEPT) &&
        (best_so_far == 0 || t < best_so_far)) {
      best_so_far = t;
    }
    json change_pct;
    if (timed && r.parent_us() > 0) {
      change_pct = (t - r.parent_us()) / r.parent_us() * 100;
    }
    std::string hotspot;
    if (!r.diagnosis().hotspots().empty()) {
      const v1::Hotspot& h = r.diagnosis().hotspots(0);
      hotspot = absl::StrFormat("%s %.0f%%", h.op_name(), h.share() * 100);
    }
    table.push_back(
        {{"round", r.round_id()},
         {"parent", r.parent_round()},
         {"stage", r.stage()},
         {"rationale", r.rationale()},
         {"workload", r.workload()},
         {"change",
          r.parent_round() < 0 ? "baseline" : DescribeChanges(r.changes())},
         {"board", r.board_id()},
         {"outcome", OutcomeName(r)},
         {"time_us", TimeOrNull(r)},
         {"interval_us", IntervalOrNull(r)},
         {"parent_us", r.parent_us() > 0 ? json(r.parent_us()) : json()},
         {"change_pct", change_pct},
         {"decision", DecisionName(r.decision())},
         {"reason", r.decision_reason()},
         {"attempts", r.attempts()},
         {"simulated", r.result().measurement().simulated()},
         {"best_so_far_us", best_so_far > 0 ? json(best_so_far) : json()},
         {"hotspot", hotspot},
         {"on_kept_path", on_path.count(r.round_id()) > 0}});
    if (r.decision() == v1::DECISION_KEPT && timed && r.parent_us() > 0) {
      effective.push_back(
          {{"round", r.round_id()},
           {"change", DescribeChanges(r.changes())},
           {"from_us", r.parent_us()},
           {"to_us", t},
           {"gain_pct", (r.parent_us() - t) / r.parent_us() * 100},
           {"on_kept_path", on_path.count(r.round_id()) > 0}});
    }
    const v1::Outcome outcome = r.result().outcome();
    if (r.state() == v1::ROUND_STATE_DONE && outcome != v1::OUTCOME_OK &&
        outcome != v1::OUTCOME_UNSPECIFIED) {
      std::string kind = outcome == v1::OUTCOME_BOARD_LOST
                             ? "board_fault"
                             : Lower(v1::Outcome_Name(outcome), "OUTCOME_");
      ++problem_counts[kind];
      problems.push_back({{"round", r.round_id()},
                          {"kind", kind},
                          {"board", r.board_id()},
                          {"detail", r.result().detail()}});
    }
    // A round leased more than once lost a board or a lease on the way:
    // the board's fault, not the variant's.
    if (r.attempts() > 1 && outcome != v1::OUTCOME_BOARD_LOST) {
      ++problem_counts["board_fault"];
      problems.push_back(
          {{"round", r.round_id()},
           {"kind", "board_fault"},
           {"board", r.board_id()},
           {"detail", absl::StrCat("leased ", r.attempts(),
                                   " times: a board or lease was lost and "
                                   "the round ran again")}});
    }
  }
  report["rounds"] = std::move(table);
  report["kept_path"] = kept_path;
  report["effective"] = std::move(effective);
  report["problems"] = {{"counts", problem_counts},
                        {"items", std::move(problems)}};
  return report;
}

std::string RenderReport(const v1::Sweep& sweep,
                         const std::vector<v1::Round>& rounds) {
  absl::StatusOr<std::string> md =
      RenderReportMarkdown(BuildReport(sweep, rounds));
  // BuildReport writes what the renderer reads; a failure is a bug, and the
  // report says so rather than vanish.
  return md.ok() ? *std::move(md)
                 : absl::StrCat("# Tuning report of ", sweep.sweep_id(),
                                "\n\nCannot render: ", md.status().ToString(),
                                "\n");
}

}  // namespace tunefarm
