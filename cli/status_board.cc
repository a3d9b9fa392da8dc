#include "cli/status_board.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/speedup.h"

namespace tunefarm {
namespace {

// "45s", "3m20s", "1h2m": whole seconds are enough for an ETA.
std::string Span(int64_t ms) {
  return absl::FormatDuration(absl::Trunc(
      absl::Milliseconds(std::max<int64_t>(0, ms)), absl::Seconds(1)));
}

}  // namespace

bool StatusBoard::Add(const v1::SweepEvent& event) {
  if (first_ms_ == 0) first_ms_ = event.time_unix_ms();
  last_ms_ = std::max(last_ms_, event.time_unix_ms());
  if (event.has_sweep()) {
    sweep_ = event.sweep();
    simulated_ = simulated_ || sweep_.simulated();
    if (sweep_.started_unix_ms() > 0) first_ms_ = sweep_.started_unix_ms();
  }
  const v1::Round& r = event.round();
  switch (event.kind()) {
    case v1::EVENT_KIND_ROUND_LEASED:
      running_[r.round_id()] = r.lease().board_id();
      if (!r.stage().empty()) stage_ = r.stage();
      return false;
    case v1::EVENT_KIND_ROUND_REQUEUED:
      running_.erase(r.round_id());
      return false;
    case v1::EVENT_KIND_ROUND_FINISHED:
      running_.erase(r.round_id());
      ++finished_;
      if (r.result().outcome() != v1::OUTCOME_OK) ++failed_;
      if (r.decision() == v1::DECISION_KEPT) ++kept_;
      if (r.parent_round() >= 0 && r.decision() != v1::DECISION_CLOSING_CHECK) {
        ++candidates_;
      }
      if (r.result().measurement().simulated()) simulated_ = true;
      if (r.result().measurement().replayed()) replayed_ = true;
      // The check's outcome reaches the sweep with the FINISHED event that
      // follows; a board printed now would call it running.
      if (r.decision() == v1::DECISION_CLOSING_CHECK) return false;
      return every_ > 0 && finished_ % every_ == 0;
    case v1::EVENT_KIND_CLOSING_CHECK:  // rounds in play were cancelled
    case v1::EVENT_KIND_FINISHED:
      running_.clear();
      return false;
    default:
      return false;
  }
}

std::string StatusBoard::Render() const {
  const std::string sim = simulated_  ? " [simulated]"
                          : replayed_ ? " [replayed]"
                                      : "";
  std::string out = absl::StrFormat(
      "── status of %s: %d rounds done (%d ok, %d failed, %d kept), %d "
      "running ──\n",
      sweep_.sweep_id().empty() ? "the sweep" : sweep_.sweep_id(), finished_,
      finished_ - failed_, failed_, kept_, running_.size());
  if (sweep_.best_round() >= 0 && sweep_.best_us() > 0) {
    absl::StrAppend(
        &out, absl::StrFormat("   best so far: %.2f µs (round %d), %.2fx over "
                              "the %.2f µs baseline%s",
                              sweep_.best_us(), sweep_.best_round(),
                              LeaseSpeedup(sweep_), sweep_.baseline_us(), sim));
    if (sweep_.spec().goal().speedup() > 0) {
      absl::StrAppend(&out, absl::StrFormat("; goal %.2fx",
                                            sweep_.spec().goal().speedup()));
    }
    absl::StrAppend(&out, "\n");
  } else {
    absl::StrAppend(&out, "   best so far: none yet (no passing baseline)\n");
  }
  std::vector<std::string> boards;
  for (const auto& [round, board] : running_) boards.push_back(board);
  std::sort(boards.begin(), boards.end());
  boards.erase(std::unique(boards.begin(), boards.end()), boards.end());
  absl::StrAppend(
      &out, "   stage: ", stage_.empty() ? "-" : stage_,
      "   boards busy: ", boards.size(),
      boards.empty() ? "" : " (" + absl::StrJoin(boards, ", ") + ")", "\n");

  // ETA from the pace so far, for the candidates the budget has left.
  const v1::Budget& budget = sweep_.spec().budget();
  const int64_t elapsed = std::max<int64_t>(0, last_ms_ - first_ms_);
  std::string eta = "   ETA: ";
  if (sweep_.has_closing_check()) {
    const v1::ClosingCheck& c = sweep_.closing_check();
    absl::StrAppend(&eta, "the search is over (", c.termination_detail(),
                    "); closing check: ", ClosingCheckText(c));
  } else if (budget.max_rounds() > 0 && finished_ > 0) {
    // A multi-workload sweep's budget counts per workload (or per
    // configuration, a round on each workload).
    const int64_t total = int64_t{budget.max_rounds()} *
                          std::max(1, sweep_.spec().workloads_size());
    const int64_t left = std::max<int64_t>(0, total - candidates_);
    const int64_t per_round = elapsed / finished_;
    absl::StrAppend(&eta, "~", Span(per_round * left), " for ", left,
                    " more of ", total, " rounds");
  } else {
    absl::StrAppend(&eta, "unknown (no round budget)");
  }
  absl::StrAppend(&eta, "; elapsed ", Span(elapsed));
  if (budget.time_limit_s() > 0) {
    absl::StrAppend(&eta, " of the ", Span(budget.time_limit_s() * 1000),
                    " time budget");
  }
  absl::StrAppend(&out, eta, "\n");
  return out;
}

}  // namespace tunefarm
