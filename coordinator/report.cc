#include "coordinator/report.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/time.h"
#include "common/params.h"
#include "storage/lineage.h"

namespace tunefarm {
namespace {

std::string Time(int64_t unix_ms) {
  if (unix_ms <= 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC",
                          absl::FromUnixMillis(unix_ms), absl::UTCTimeZone());
}

// Table cells must not break the Markdown table.
std::string Cell(const std::string& s) {
  return absl::StrReplaceAll(s, {{"|", "\\|"}, {"\n", " "}});
}

std::string DecisionName(v1::Decision d) {
  switch (d) {
    case v1::DECISION_BASELINE:
      return "baseline";
    case v1::DECISION_KEPT:
      return "kept";
    case v1::DECISION_ROLLED_BACK:
      return "rolled back";
    case v1::DECISION_REJECTED:
      return "rejected";
    default:
      return "-";
  }
}

std::string OutcomeName(const v1::Round& r) {
  if (r.state() != v1::ROUND_STATE_DONE) {
    return absl::AsciiStrToLower(
        absl::StripPrefix(v1::RoundState_Name(r.state()), "ROUND_STATE_"));
  }
  return absl::AsciiStrToLower(
      absl::StripPrefix(v1::Outcome_Name(r.result().outcome()), "OUTCOME_"));
}

}  // namespace

std::string RenderReport(const v1::Sweep& sweep,
                         const std::vector<v1::Round>& rounds) {
  const v1::SweepSpec& spec = sweep.spec();
  const std::string sim = sweep.simulated() ? " (simulated)" : "";
  std::string md = absl::StrCat("# Tuning report: ", spec.name(), " (",
                                sweep.sweep_id(), ")\n\n");
  if (sweep.simulated()) {
    absl::StrAppend(&md,
                    "> **Simulated board.** Every time in this report comes "
                    "from tunefarm's NPU model, not from a real card.\n\n");
  }
  absl::StrAppend(
      &md, "| | |\n|---|---|\n",
      "| team | ", Cell(spec.team()), " |\n",
      "| operator | ", Cell(spec.operator_name()), " |\n",
      "| workload | ", Cell(spec.workload().name()), " (",
      Cell(spec.workload().dtype()), ") |\n",
      "| strategy | ", Cell(spec.strategy().name()), " (seed ",
      spec.strategy().seed(), ") |\n",
      "| boards | kind ", Cell(spec.boards().kind()),
      spec.boards().chip().empty() ? "" : ", chip " + spec.boards().chip(),
      " |\n",
      "| state | ", v1::SweepState_Name(sweep.state()), " |\n",
      "| ended because | ", Cell(sweep.termination_detail()), " |\n",
      "| submitted | ", Time(sweep.submitted_unix_ms()), " |\n",
      "| finished | ", Time(sweep.finished_unix_ms()), " |\n",
      "| minimum gain | ", absl::StrFormat("%.1f%%", spec.min_gain() * 100),
      " |\n\n");

  absl::StrAppend(&md, "## Result\n\n");
  if (sweep.best_round() >= 0 && sweep.best_us() > 0 &&
      sweep.best_round() < static_cast<int64_t>(rounds.size())) {
    const v1::Round& best = rounds[sweep.best_round()];
    absl::StrAppend(
        &md,
        absl::StrFormat("- baseline: %.2f µs%s\n- best: round %d, %.2f µs%s\n"
                        "- speedup over the baseline: **%.2fx**%s\n",
                        sweep.baseline_us(), sim, sweep.best_round(),
                        sweep.best_us(), sim,
                        sweep.baseline_us() / sweep.best_us(), sim),
        "- best configuration: `", ParamsKey(best.params()), "`\n");
    if (best.result().has_measurement()) {
      const v1::Measurement& m = best.result().measurement();
      absl::StrAppend(&md, absl::StrFormat(
                               "- best measurement: median %.2f µs, p20 %.2f, "
                               "p80 %.2f, %d samples; %s\n",
                               m.median_us(), m.p20_us(), m.p80_us(),
                               m.samples(), m.policy()));
    }
  } else {
    absl::StrAppend(&md, "No configuration passed: ",
                    Cell(sweep.termination_detail()), "\n");
  }

  auto path = KeptPathTo(rounds, sweep.best_round());
  if (path.ok() && !path->empty()) {
    absl::StrAppend(&md, "\n## Kept path (baseline → best)\n\n");
    for (size_t i = 0; i < path->size(); ++i) {
      const int64_t id = (*path)[i];
      const v1::Round& r = rounds[id];
      absl::StrAppend(
          &md,
          absl::StrFormat("%d. round %d: %s — %.2f µs%s\n", i + 1, id,
                          id == 0 ? std::string("baseline")
                                  : DescribeChanges(r.changes()),
                          r.result().measurement().median_us(), sim));
    }
  }

  int counts[5] = {0, 0, 0, 0, 0};
  for (const v1::Round& r : rounds) {
    if (r.decision() >= 0 && r.decision() < 5) ++counts[r.decision()];
  }
  absl::StrAppend(&md, "\n## Rounds\n\n",
                  absl::StrFormat("%d rounds: %d kept, %d rolled back, %d "
                                  "rejected, %d not run.\n\n",
                                  rounds.size(), counts[v1::DECISION_KEPT],
                                  counts[v1::DECISION_ROLLED_BACK],
                                  counts[v1::DECISION_REJECTED],
                                  counts[v1::DECISION_UNSPECIFIED]),
                  "| round | parent | change | board | outcome | median µs",
                  sim, " | decision | hotspot | reason |\n",
                  "|---|---|---|---|---|---|---|---|---|\n");
  for (const v1::Round& r : rounds) {
    std::string median = "-";
    if (r.result().measurement().samples() > 0) {
      median = absl::StrFormat("%.2f", r.result().measurement().median_us());
    }
    std::string hotspot = "-";
    if (!r.diagnosis().hotspots().empty()) {
      const v1::Hotspot& h = r.diagnosis().hotspots(0);
      hotspot = absl::StrFormat("%s %.1f µs (%.0f%%)", h.op_name(),
                                h.duration_us(), h.share() * 100);
    }
    absl::StrAppend(
        &md, "| ", r.round_id(), " | ",
        r.parent_round() < 0 ? "-" : absl::StrCat(r.parent_round()), " | ",
        Cell(r.round_id() == 0 ? "baseline" : DescribeChanges(r.changes())),
        " | ", Cell(r.board_id().empty() ? "-" : r.board_id()), " | ",
        OutcomeName(r), " | ", median, " | ", DecisionName(r.decision()),
        " | ", Cell(hotspot), " | ", Cell(r.decision_reason()), " |\n");
  }
  return md;
}

}  // namespace tunefarm
