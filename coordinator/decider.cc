#include "coordinator/decider.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/params.h"
#include "common/speedup.h"
#include "coordinator/event_text.h"
#include "coordinator/keep_rule.h"
#include "coordinator/saturation.h"
#include "coordinator/strategy.h"
#include "coordinator/sweep_book.h"
#include "coordinator/workloads.h"
#include "spdlog/spdlog.h"

namespace tunefarm {
namespace {

// decision_reason of a result that waits for its parent's.
constexpr char kWaitingForParent[] = "waiting to be judged: needs round ";

// The best's speedup over the baseline as the product of the paired gains
// along its lineage, each timed side by side with its parent in one lease;
// 0 when a round on the way has no paired gain (independent mode).
double PairedLineageSpeedup(const SweepRuntime& s) {
  double product = 1;
  int64_t r = s.sweep.best_round();
  for (size_t steps = 0; r > 0 && r < static_cast<int64_t>(s.rounds.size()) &&
                         steps < s.rounds.size();
       ++steps) {
    const v1::Measurement& m = s.rounds[r].result().measurement();
    if (!m.paired() || m.pairs() == 0 || m.gain() >= 1) return 0;
    product /= 1 - m.gain();
    r = s.rounds[r].parent_round();
  }
  return r == 0 ? product : 0;
}

// What a closing check without a paired result leaves.
std::string LeaseSpeedupStands(const v1::ClosingCheck& c) {
  return absl::StrFormat(
      "the speedup stands at %.2fx, from medians timed in different leases",
      c.lease_speedup());
}

}  // namespace

void Decider::Decide(Txn& txn, SweepRuntime& s, v1::Round& round) {
  const v1::RoundResult& res = round.result();
  const double median = res.measurement().median_us();
  const std::string sim = MeasuredTag(res.measurement());
  if (s.sweep.has_closing_check() &&
      round.round_id() == s.sweep.closing_check().round_id()) {
    DecideClosingCheck(txn, s, round);
    return;
  }
  if (round.round_id() == 0) {
    round.set_decision(v1::DECISION_BASELINE);
    if (res.outcome() != v1::OUTCOME_OK) {
      round.set_decision_reason(absl::StrCat(
          "baseline ", v1::Outcome_Name(res.outcome()), ": ", res.detail()));
      staging_->AddEvent(
          txn, s, v1::EVENT_KIND_ROUND_FINISHED,
          absl::StrCat("baseline failed: ", round.decision_reason()), &round);
      Finish(txn, s, v1::SWEEP_STATE_FAILED, v1::TERMINATION_BASELINE_FAILED,
             round.decision_reason());
      return;
    }
    round.set_decision_reason("baseline");
    s.sweep.set_baseline_us(median);
    s.sweep.set_best_us(median);
    s.sweep.set_best_round(0);
    staging_->AddEvent(txn, s, v1::EVENT_KIND_ROUND_FINISHED,
                       absl::StrCat("baseline on ", round.board_id(), ": ",
                                    FormatUs(median), sim),
                       &round);
    DecideWaiting(txn, s, round);
    return;
  }
  const std::string what =
      absl::StrCat("round ", round.round_id(), " (",
                   DescribeChanges(round.changes()), ") on ", round.board_id());
  // Proposed while its parent ran (the baseline: ProposeNextCandidate): the
  // keep rule needs the parent's measurement, so it is judged once that is
  // in. A failure needs none.
  if (res.outcome() == v1::OUTCOME_OK && round.parent_round() >= 0 &&
      round.parent_round() < round.round_id() &&
      s.rounds[round.parent_round()].state() != v1::ROUND_STATE_DONE) {
    round.set_decision_reason(
        absl::StrCat(kWaitingForParent, round.parent_round(), "'s result"));
    staging_->AddEvent(
        txn, s, v1::EVENT_KIND_ROUND_FINISHED,
        absl::StrCat(what, ": ", FormatUs(median), sim, ", judged once round ",
                     round.parent_round(), " (its parent) has its result"),
        &round);
    return;
  }
  DecideCandidate(txn, s, round, /*w=*/nullptr, what);
}

void Decider::DecideWaiting(Txn& txn, SweepRuntime& s,
                            const v1::Round& parent) {
  for (size_t i = static_cast<size_t>(parent.round_id()) + 1;
       i < s.rounds.size(); ++i) {
    v1::Round& r = s.rounds[i];
    if (s.finished) return;
    if (r.parent_round() != parent.round_id() ||
        r.state() != v1::ROUND_STATE_DONE ||
        r.decision() != v1::DECISION_UNSPECIFIED) {
      continue;
    }
    staging_->SaveRound(txn, s, r);
    DecideCandidate(
        txn, s, r, /*w=*/nullptr,
        absl::StrCat("round ", r.round_id(), " (", DescribeChanges(r.changes()),
                     ") on ", r.board_id(), ", judged after its parent"));
    txn.writes.PutRound(r);
  }
}

void Decider::DecideCandidate(Txn& txn, SweepRuntime& s, v1::Round& round,
                              v1::WorkloadProgress* w,
                              const std::string& what) {
  const v1::RoundResult& res = round.result();
  const double median = res.measurement().median_us();
  const std::string sim = MeasuredTag(res.measurement());
  // The counters the decision moves: the workload's too when there is one;
  // rounds without gain and the best are the lineage's (the workload's, or
  // the sweep's).
  const auto finished = [&](int delta) {
    s.sweep.set_rounds_finished(s.sweep.rounds_finished() + delta);
    if (w != nullptr) w->set_rounds_finished(w->rounds_finished() + delta);
  };
  const auto no_gain = [&] {
    if (w != nullptr) {
      w->set_rounds_without_gain(w->rounds_without_gain() + 1);
    } else {
      s.sweep.set_rounds_without_gain(s.sweep.rounds_without_gain() + 1);
    }
  };
  finished(1);
  if (res.outcome() != v1::OUTCOME_OK) {
    round.set_decision(v1::DECISION_REJECTED);
    round.set_decision_reason(
        absl::StrCat(v1::Outcome_Name(res.outcome()), ": ", res.detail()));
    no_gain();
    staging_->AddEvent(
        txn, s, v1::EVENT_KIND_ROUND_FINISHED,
        absl::StrCat(what, ": rejected, ", round.decision_reason()), &round);
    return;
  }
  const v1::Round& parent = s.rounds[round.parent_round()];
  const double parent_us = parent.result().measurement().median_us();
  round.set_parent_us(parent_us);
  const int64_t best_round =
      w != nullptr ? w->best_round() : s.sweep.best_round();
  const double min_gain = s.sweep.spec().min_gain();
  const double best_us = w != nullptr ? w->best_us() : s.sweep.best_us();
  const GainVerdict v =
      JudgeGain(res.measurement(), parent.result().measurement(), min_gain,
                round.parent_round(), best_round, best_us);
  if (v.keep) {
    round.set_decision(v1::DECISION_KEPT);
    round.set_decision_reason(
        absl::StrFormat("kept: %s; parent round %d (%.1f µs)", v.reason,
                        round.parent_round(), parent_us));
    // Kept on its gain over its parent, yet timed slower than the best it
    // replaces was: the two were timed in different leases (perhaps on
    // different boards) and the times drifted. The event says so, lest the
    // lower speedup read as a regression.
    std::string drift;
    if (best_round >= 0 && best_us > 0 && median > best_us) {
      drift = absl::StrFormat(
          "; timed %.1f%% slower than round %d was (%.1f µs) in another "
          "lease: times drift between leases and boards, and the gain over "
          "its parent was timed side by side",
          (median / best_us - 1) * 100, best_round, best_us);
    }
    std::string best;
    if (w != nullptr) {
      w->set_best_round(round.round_id());
      w->set_best_us(median);
      w->set_rounds_without_gain(0);
      SummarizeWorkloads(s);
      best = absl::StrFormat(
          "best of %s is now round %d: %.1f µs, %.2fx over its baseline%s%s",
          w->workload(), round.round_id(), median, w->baseline_us() / median,
          sim, drift);
    } else {
      s.sweep.set_best_round(round.round_id());
      s.sweep.set_best_us(median);
      s.sweep.set_rounds_without_gain(0);
      best = absl::StrFormat(
          "best is now round %d: %.1f µs, %.2fx over the baseline%s%s",
          round.round_id(), median, s.sweep.baseline_us() / median, sim, drift);
    }
    staging_->AddEvent(txn, s, v1::EVENT_KIND_ROUND_FINISHED,
                       absl::StrCat(what, ": ", FormatUs(median), sim,
                                    ", kept (", VsParent(v.gain), ")"),
                       &round);
    staging_->AddEvent(txn, s, v1::EVENT_KIND_BEST_IMPROVED, std::move(best),
                       &round);
    return;
  }
  if (v.inconclusive && round.remeasures() < kMaxRemeasures) {
    // Only noise stands between the estimate and min_gain: measure again
    // with a larger cap (GrantLease) before judging. Not a finished round.
    finished(-1);
    round.set_remeasures(round.remeasures() + 1);
    round.set_state(v1::ROUND_STATE_QUEUED);
    s.queued_from =
        std::min(s.queued_from, static_cast<size_t>(round.round_id()));
    round.set_decision_reason(absl::StrCat("re-measuring: ", v.reason));
    staging_->AddEvent(
        txn, s, v1::EVENT_KIND_ROUND_REQUEUED,
        absl::StrCat(what, ": ", FormatUs(median), sim, ", inconclusive (",
                     VsParent(v.gain), "), measured again (",
                     round.remeasures(), " of ", kMaxRemeasures, ")"),
        &round);
    return;
  }
  round.set_decision(v.inconclusive ? v1::DECISION_INCONCLUSIVE
                                    : v1::DECISION_ROLLED_BACK);
  round.set_decision_reason(absl::StrFormat(
      "%s: %s; parent round %d (%.1f µs)",
      v.inconclusive ? absl::StrCat("inconclusive after ", round.remeasures(),
                                    " re-measurement(s)")
                     : std::string("rolled back"),
      v.reason, round.parent_round(), parent_us));
  no_gain();
  // A gain over the parent that still rolls back says what it fell short of.
  std::string short_of;
  if (v.short_of_best) {
    short_of = absl::StrFormat(", not %.1f%% faster than the best, round %d",
                               min_gain * 100, best_round);
  } else if (!v.inconclusive && v.gain > 0) {
    short_of =
        absl::StrFormat(", under the %.1f%% minimum gain", min_gain * 100);
  }
  staging_->AddEvent(
      txn, s, v1::EVENT_KIND_ROUND_FINISHED,
      absl::StrCat(what, ": ", FormatUs(median), sim,
                   v.inconclusive ? ", inconclusive (" : ", rolled back (",
                   VsParent(v.gain), short_of, ")"),
      &round);
}

void Decider::CheckTermination(Txn& txn, SweepRuntime& s) {
  if (s.finished) return;
  if (IsMultiWorkload(s.sweep.spec())) {
    CheckMultiWorkloadTermination(txn, s);
    return;
  }
  if (s.sweep.has_closing_check()) {
    CheckClosingTimeLimit(txn, s);
    return;
  }
  const v1::SweepSpec& spec = s.sweep.spec();
  if (s.sweep.best_round() >= 0 && s.sweep.best_us() > 0) {
    // The two leases' medians carry each lease's drift (a baseline timed
    // while the host was busy); the gains along the lineage were each timed
    // side by side. The goal is reached when both say so.
    const double goal = spec.goal().speedup();
    const double speedup = LeaseSpeedup(s.sweep);
    if (goal > 0 && speedup >= goal) {
      const double paired = PairedLineageSpeedup(s);
      if ((paired == 0 || paired >= goal) &&
          s.sweep.goal_refuted_round() != s.sweep.best_round()) {
        EndSearch(
            txn, s, v1::TERMINATION_GOAL_REACHED,
            absl::StrCat(
                absl::StrFormat("speedup %.2fx reached the goal of %.2fx",
                                speedup, goal),
                paired > 0 ? absl::StrFormat("; %.2fx by the paired gains "
                                             "along its lineage",
                                             paired)
                           : ""));
        return;
      }
    }
    if (spec.goal().target_us() > 0 &&
        s.sweep.best_us() <= spec.goal().target_us()) {
      EndSearch(txn, s, v1::TERMINATION_GOAL_REACHED,
                absl::StrFormat("%.1f µs reached the target of %.1f µs",
                                s.sweep.best_us(), spec.goal().target_us()));
      return;
    }
  }
  // Saturation is read from the best round's diagnosis (the kept variant,
  // or the baseline), which may arrive after its result: RecordDiagnosis
  // checks again.
  if (s.sweep.best_round() >= 0 &&
      s.sweep.best_round() < static_cast<int64_t>(s.rounds.size())) {
    const v1::Round& best = s.rounds[s.sweep.best_round()];
    if (best.has_diagnosis()) {
      if (std::optional<std::string> why =
              SaturationOf(best.diagnosis(), spec.saturation())) {
        EndSearch(txn, s, v1::TERMINATION_BOARD_SATURATED,
                  absl::StrCat("board saturated on round ", best.round_id(),
                               " (board ", best.board_id(), "): ", *why));
        return;
      }
    }
  }
  if (spec.budget().max_rounds() > 0 &&
      s.sweep.rounds_finished() >= spec.budget().max_rounds()) {
    EndSearch(
        txn, s, v1::TERMINATION_ROUND_BUDGET,
        absl::StrCat("round budget of ", spec.budget().max_rounds(), " spent"));
    return;
  }
  if (spec.budget().max_rounds_without_gain() > 0 &&
      s.sweep.rounds_without_gain() >=
          spec.budget().max_rounds_without_gain()) {
    EndSearch(txn, s, v1::TERMINATION_NO_GAIN,
              absl::StrCat(s.sweep.rounds_without_gain(),
                           " rounds in a row without gain"));
    return;
  }
  if (PastTimeLimit(s.sweep)) {
    Finish(txn, s, v1::SWEEP_STATE_SUCCEEDED, v1::TERMINATION_TIME_LIMIT,
           absl::StrCat("time limit of ", spec.budget().time_limit_s(),
                        " s reached"));
    return;
  }
  // The closing check runs within the time limit: the search ends early
  // enough to leave it the time a round has taken.
  const int64_t limit_ms = int64_t{spec.budget().time_limit_s()} * 1000;
  if (limit_ms > 0 && PastTimeLimit(s.sweep, limit_ms / 4) &&
      WantsClosingCheck(s)) {
    const int64_t reserve_ms = ClosingCheckReserveMs(s);
    if (reserve_ms > 0 && PastTimeLimit(s.sweep, reserve_ms)) {
      const int64_t left_ms =
          s.sweep.started_unix_ms() + limit_ms - clock_->NowUnixMs();
      EndSearch(
          txn, s, v1::TERMINATION_TIME_LIMIT,
          absl::StrFormat("time limit of %d s: the search ended with "
                          "%.1f s left, for the closing check",
                          spec.budget().time_limit_s(), left_ms / 1000.0));
      return;
    }
  }
  // Nothing in flight and nothing left to try: done now, not on the next
  // lease request (which may never come if no board matches any more).
  if (s.strategy == nullptr || s.rounds.empty() ||
      s.rounds[0].state() != v1::ROUND_STATE_DONE) {
    return;
  }
  if (SweepBook::CandidatesInFlight(s) > 0 ||
      SweepBook::FirstQueued(s) != nullptr) {
    return;
  }
  SearchHistory history{s.op, &s.sweep.spec(), &s.rounds, s.sweep.best_round(),
                        s.rewinds};
  if (s.strategy->Propose(history, 1).empty()) {
    Exhaustion why = s.strategy->Exhausted(history);
    EndSearch(txn, s, why.reason, std::move(why.detail));
  }
}

void Decider::Finish(Txn& txn, SweepRuntime& s, v1::SweepState state,
                     v1::TerminationReason reason, std::string detail) {
  if (s.finished) return;
  staging_->Touch(txn, s);
  s.finished = true;
  EndRoundsInPlay(txn, s, absl::StrCat("the sweep ended (", detail, ")"));
  // Workloads still open end with the sweep.
  for (v1::WorkloadProgress& w : *s.sweep.mutable_workload_progress()) {
    if (w.done()) continue;
    w.set_done(true);
    w.set_termination(reason);
    w.set_termination_detail(detail);
  }
  s.sweep.set_state(state);
  s.sweep.set_termination(reason);
  s.sweep.set_termination_detail(detail);
  s.sweep.set_finished_unix_ms(clock_->NowUnixMs());
  if (!report_dir_.empty()) {
    s.sweep.set_report_path(
        absl::StrCat(report_dir_, "/", s.sweep.sweep_id(), ".md"));
  }
  std::string summary = absl::StrCat("sweep ", s.sweep.sweep_id(), " ",
                                     v1::SweepState_Name(state), ": ", detail);
  if (IsMultiWorkload(s.sweep.spec())) {
    absl::StrAppend(&summary, "; ", WorkloadsSummary(s.sweep));
  } else if (s.sweep.best_round() >= 0 && s.sweep.best_us() > 0) {
    absl::StrAppend(
        &summary,
        absl::StrFormat(
            "; best round %d at %.1f µs, %.2fx over the baseline (%s)%s",
            s.sweep.best_round(), s.sweep.best_us(), SweepSpeedup(s.sweep),
            SpeedupBasis(s.sweep),
            s.sweep.simulated()                          ? " [simulated]"
            : s.sweep.spec().boards().kind() == "replay" ? " [replayed]"
                                                         : ""));
    const v1::ClosingCheck& c = s.sweep.closing_check();
    if (!c.outcome().empty()) {
      absl::StrAppend(&summary, "; closing check: ", c.outcome());
    }
  }
  staging_->AddEvent(txn, s, v1::EVENT_KIND_FINISHED, summary, nullptr);
  spdlog::info("{}", summary);
}

void Decider::EndSearch(Txn& txn, SweepRuntime& s, v1::TerminationReason reason,
                        std::string detail) {
  if (s.finished || s.sweep.has_closing_check()) return;
  if (!WantsClosingCheck(s)) {
    Finish(txn, s, v1::SWEEP_STATE_SUCCEEDED, reason, std::move(detail));
    return;
  }
  const int64_t best = s.sweep.best_round();
  EndRoundsInPlay(txn, s, absl::StrCat("the search ended (", detail, ")"));
  Candidate check;
  check.parent_round = 0;
  check.params = s.rounds[best].params();
  check.changes = DiffParams(s.rounds[0].params(), check.params);
  check.stage = "closing check";
  check.rationale = absl::StrCat(
      "closing check: the best, round ", best,
      ", timed against the baseline side by side in one lease; the "
      "sweep's speedup compares medians timed in different leases");
  const v1::Round& round = *staging_->AddRound(txn, s, std::move(check));
  v1::ClosingCheck& c = *s.sweep.mutable_closing_check();
  c.set_round_id(round.round_id());
  c.set_best_round(best);
  c.set_termination(reason);
  c.set_termination_detail(std::move(detail));
  c.set_lease_speedup(LeaseSpeedup(s.sweep));
  staging_->AddEvent(
      txn, s, v1::EVENT_KIND_CLOSING_CHECK,
      absl::StrFormat("the search is over (%s); round %d times the best, "
                      "round %d (%.2fx from the two leases' medians), "
                      "against the baseline side by side before the sweep "
                      "ends",
                      c.termination_detail(), c.round_id(), best,
                      c.lease_speedup()),
      &round);
}

void Decider::DecideClosingCheck(Txn& txn, SweepRuntime& s, v1::Round& round) {
  v1::ClosingCheck& c = *s.sweep.mutable_closing_check();
  const v1::RoundResult& res = round.result();
  const v1::Measurement& m = res.measurement();
  round.set_decision(v1::DECISION_CLOSING_CHECK);
  round.set_parent_us(s.rounds[0].result().measurement().median_us());
  std::string outcome;
  if (res.outcome() != v1::OUTCOME_OK) {
    outcome = absl::StrCat("round ", c.best_round(),
                           " failed it: ", v1::Outcome_Name(res.outcome()),
                           ": ", res.detail(), "; ", LeaseSpeedupStands(c));
  } else if (!m.paired() || m.pairs() == 0 || m.gain() >= 1) {
    outcome = absl::StrCat("the board timed no pairs; ", LeaseSpeedupStands(c));
  } else {
    c.set_speedup(1 / (1 - m.gain()));
    std::string bounds;
    if (m.gain_lower() <= m.gain() && m.gain() <= m.gain_upper() &&
        m.gain_lower() < m.gain_upper()) {
      c.set_speedup_low(1 / (1 - m.gain_lower()));
      c.set_speedup_high(1 / (1 - m.gain_upper()));
      c.set_confidence(m.confidence());
      bounds = absl::StrFormat(" (%.2fx to %.2fx, each bound at %.0f%%)",
                               c.speedup_low(), c.speedup_high(),
                               c.confidence() * 100);
    }
    outcome = absl::StrFormat(
        "round %d is %.2fx the baseline's speed side by side%s over %d "
        "pairs on %s%s; the two leases' medians said %.2fx",
        c.best_round(), c.speedup(), bounds, m.pairs(), round.board_id(),
        MeasuredTag(m), c.lease_speedup());
    if (NotShownFaster(c)) {
      absl::StrAppend(&outcome, "; not shown faster than the baseline");
    }
  }
  c.set_outcome(outcome);
  const double goal = s.sweep.spec().goal().speedup();
  const bool short_of_goal = c.termination() == v1::TERMINATION_GOAL_REACHED &&
                             goal > 0 && c.speedup() > 0 && c.speedup() < goal;
  round.set_decision_reason(absl::StrCat(
      "closing check: ", outcome, short_of_goal ? "; short of the goal" : ""));
  staging_->AddEvent(
      txn, s, v1::EVENT_KIND_ROUND_FINISHED,
      absl::StrCat("round ", round.round_id(), " (closing check): ", outcome),
      &round);
  if (short_of_goal) {
    // The search stopped for a goal that side by side is not met: with
    // budget left it goes on, and the goal then needs a better round.
    if (SearchBudgetLeft(s)) {
      const std::string resumed = absl::StrFormat(
          "round %d is %.2fx the baseline's speed side by side, short of "
          "the goal of %.2fx that ended the search (%s): the search goes "
          "on, and the goal needs a better round",
          c.best_round(), c.speedup(), goal, c.termination_detail());
      s.sweep.set_goal_refuted_round(c.best_round());
      s.sweep.clear_closing_check();
      staging_->AddEvent(txn, s, v1::EVENT_KIND_SEARCH_RESUMED, resumed,
                         nullptr);
      return;
    }
    c.set_termination_detail(
        absl::StrFormat("%s; side by side %.2fx, short of the goal",
                        c.termination_detail(), c.speedup()));
  }
  Finish(txn, s, v1::SWEEP_STATE_SUCCEEDED, c.termination(),
         c.termination_detail());
}

void Decider::CheckClosingTimeLimit(Txn& txn, SweepRuntime& s) {
  if (!PastTimeLimit(s.sweep)) return;
  staging_->Touch(txn, s);
  v1::ClosingCheck& c = *s.sweep.mutable_closing_check();
  c.set_outcome(absl::StrCat("not run to the end within the time limit of ",
                             s.sweep.spec().budget().time_limit_s(), " s; ",
                             LeaseSpeedupStands(c)));
  Finish(txn, s, v1::SWEEP_STATE_SUCCEEDED, c.termination(),
         c.termination_detail());
}

bool Decider::PastTimeLimit(const v1::Sweep& sweep, int64_t reserve_ms) const {
  const int64_t limit_s = sweep.spec().budget().time_limit_s();
  return limit_s > 0 && sweep.started_unix_ms() > 0 &&
         clock_->NowUnixMs() - sweep.started_unix_ms() + reserve_ms >=
             limit_s * 1000;
}

bool Decider::SearchBudgetLeft(const SweepRuntime& s) const {
  const v1::Budget& b = s.sweep.spec().budget();
  return (b.max_rounds() <= 0 || s.sweep.rounds_finished() < b.max_rounds()) &&
         (b.max_rounds_without_gain() <= 0 ||
          s.sweep.rounds_without_gain() < b.max_rounds_without_gain()) &&
         !PastTimeLimit(s.sweep, ClosingCheckReserveMs(s));
}

bool Decider::WantsClosingCheck(const SweepRuntime& s) {
  const v1::SweepSpec& spec = s.sweep.spec();
  const int64_t best = s.sweep.best_round();
  // Replayed numbers were recorded elsewhere, once: they cannot drift.
  return !IsMultiWorkload(spec) && !spec.measurement().skip_closing_check() &&
         spec.measurement().mode() != v1::MEASUREMENT_MODE_INDEPENDENT &&
         spec.boards().kind() != "replay" && best > 0 &&
         best < static_cast<int64_t>(s.rounds.size()) && s.sweep.best_us() > 0;
}

int64_t Decider::ClosingCheckReserveMs(const SweepRuntime& s) {
  // The newest rounds are at the end; a bounded walk back, so the cost does
  // not grow with the sweep.
  constexpr int kRecent = 16;
  constexpr int kWalk = 64;
  int64_t longest_ms = 0;
  int seen = 0;
  for (auto it = s.rounds.rbegin(); it != s.rounds.rend() && seen < kRecent &&
                                    it - s.rounds.rbegin() < kWalk;
       ++it) {
    const v1::Round& r = *it;
    if (r.state() != v1::ROUND_STATE_DONE ||
        r.result().outcome() != v1::OUTCOME_OK ||
        r.lease().granted_unix_ms() <= 0 ||
        r.finished_unix_ms() < r.lease().granted_unix_ms()) {
      continue;
    }
    longest_ms = std::max(longest_ms,
                          r.finished_unix_ms() - r.lease().granted_unix_ms());
    ++seen;
  }
  return std::min(longest_ms * 3 / 2,
                  int64_t{s.sweep.spec().budget().time_limit_s()} * 1000 / 4);
}

void Decider::EndRoundsInPlay(Txn& txn, SweepRuntime& s,
                              const std::string& ended) {
  for (v1::Round& r : s.rounds) {
    if (r.state() == v1::ROUND_STATE_QUEUED ||
        r.state() == v1::ROUND_STATE_LEASED) {
      staging_->SaveRound(txn, s, r);
      leases_->FreeBoard(txn, r.lease().board_id(), r.lease().lease_id());
      r.set_state(v1::ROUND_STATE_CANCELLED);
      r.set_decision_reason(absl::StrCat("not run: ", ended));
      txn.writes.PutRound(r);
    } else if (r.state() == v1::ROUND_STATE_DONE &&
               r.decision() == v1::DECISION_UNSPECIFIED &&
               absl::StartsWith(r.decision_reason(), kWaitingForParent)) {
      // Its parent never gave a result to judge it against.
      staging_->SaveRound(txn, s, r);
      r.set_decision_reason(absl::StrCat("not judged: its parent round ",
                                         r.parent_round(),
                                         " had no result when ", ended));
      txn.writes.PutRound(r);
    }
  }
}

void Decider::CancelRound(Txn& txn, SweepRuntime& s, v1::Round& round,
                          const std::string& why) {
  if (round.state() != v1::ROUND_STATE_QUEUED &&
      round.state() != v1::ROUND_STATE_LEASED) {
    return;
  }
  staging_->SaveRound(txn, s, round);
  leases_->FreeBoard(txn, round.lease().board_id(), round.lease().lease_id());
  round.set_state(v1::ROUND_STATE_CANCELLED);
  round.set_decision_reason(absl::StrCat("not run: ", why));
  txn.writes.PutRound(round);
}

void Decider::SummarizeWorkloads(SweepRuntime& s) {
  std::vector<double> baselines, bests, weights;
  int64_t best_round = -1;
  for (int i = 0; i < s.sweep.workload_progress_size(); ++i) {
    const v1::WorkloadProgress& w = s.sweep.workload_progress(i);
    if (w.best_round() < 0 || w.best_us() <= 0) continue;
    if (best_round < 0) best_round = w.best_round();
    baselines.push_back(w.baseline_us());
    bests.push_back(w.best_us());
    weights.push_back(WorkloadWeight(s.sweep.spec(), i));
  }
  s.sweep.set_best_round(best_round);
  s.sweep.set_baseline_us(WeightedGeomean(baselines, weights));
  s.sweep.set_best_us(WeightedGeomean(bests, weights));
}

void Decider::DecideMultiWorkload(Txn& txn, SweepRuntime& s, v1::Round& round) {
  if (s.sweep.spec().objective() == v1::WORKLOAD_OBJECTIVE_ONE_CONFIG) {
    DecideConfigRound(txn, s, round);
  } else {
    DecideWorkloadRound(txn, s, round);
  }
}

void Decider::DecideWorkloadRound(Txn& txn, SweepRuntime& s, v1::Round& round) {
  v1::WorkloadProgress& w =
      *s.sweep.mutable_workload_progress(round.workload_index());
  const v1::RoundResult& res = round.result();
  const double median = res.measurement().median_us();
  const std::string sim = MeasuredTag(res.measurement());
  const std::string what =
      absl::StrCat(RoundAndChange(round), " on ", round.board_id());
  if (round.parent_round() < 0) {
    round.set_decision(v1::DECISION_BASELINE);
    if (res.outcome() != v1::OUTCOME_OK) {
      round.set_decision_reason(absl::StrCat(
          "baseline ", v1::Outcome_Name(res.outcome()), ": ", res.detail()));
      staging_->AddEvent(
          txn, s, v1::EVENT_KIND_ROUND_FINISHED,
          absl::StrCat(what, ": baseline failed, ", round.decision_reason()),
          &round);
      FinishWorkload(txn, s, round.workload_index(),
                     v1::TERMINATION_BASELINE_FAILED, round.decision_reason());
      return;
    }
    round.set_decision_reason("baseline");
    w.set_baseline_us(median);
    w.set_best_us(median);
    w.set_best_round(round.round_id());
    SummarizeWorkloads(s);
    staging_->AddEvent(txn, s, v1::EVENT_KIND_ROUND_FINISHED,
                       absl::StrCat(what, ": ", FormatUs(median), sim), &round);
    return;
  }
  DecideCandidate(txn, s, round, &w, what);
}

void Decider::DecideConfigRound(Txn& txn, SweepRuntime& s, v1::Round& round) {
  const v1::SweepSpec& spec = s.sweep.spec();
  const int n = spec.workloads_size();
  const int64_t first = round.round_id() - round.workload_index();
  v1::WorkloadProgress& w =
      *s.sweep.mutable_workload_progress(round.workload_index());
  const v1::RoundResult& res = round.result();
  const double median = res.measurement().median_us();
  const std::string sim = MeasuredTag(res.measurement());
  const std::string what =
      absl::StrCat(RoundAndChange(round), " on ", round.board_id());
  auto group_done = [&] {
    for (int64_t i = first; i < first + n; ++i) {
      if (s.rounds[i].state() != v1::ROUND_STATE_DONE) return false;
    }
    return true;
  };
  if (first == 0) {  // the baselines: one configuration needs them all
    round.set_decision(v1::DECISION_BASELINE);
    if (res.outcome() != v1::OUTCOME_OK) {
      round.set_decision_reason(absl::StrCat(
          "baseline ", v1::Outcome_Name(res.outcome()), ": ", res.detail()));
      staging_->AddEvent(
          txn, s, v1::EVENT_KIND_ROUND_FINISHED,
          absl::StrCat(what, ": baseline failed, ", round.decision_reason()),
          &round);
      Finish(txn, s, v1::SWEEP_STATE_FAILED, v1::TERMINATION_BASELINE_FAILED,
             absl::StrCat("baseline of workload ", round.workload(), ": ",
                          round.decision_reason()));
      return;
    }
    round.set_decision_reason("baseline");
    w.set_baseline_us(median);
    w.set_best_us(median);
    w.set_best_round(round.round_id());
    staging_->AddEvent(txn, s, v1::EVENT_KIND_ROUND_FINISHED,
                       absl::StrCat(what, ": ", FormatUs(median), sim), &round);
    if (group_done()) {
      SummarizeWorkloads(s);
      s.sweep.set_best_round(0);
    }
    return;
  }
  std::vector<const v1::Round*> group, parent, best;
  for (int i = 0; i < n; ++i) group.push_back(&s.rounds[first + i]);
  if (res.outcome() != v1::OUTCOME_OK) {
    // One workload failing rejects the configuration for all of them.
    round.set_decision(v1::DECISION_REJECTED);
    round.set_decision_reason(
        absl::StrCat(v1::Outcome_Name(res.outcome()), ": ", res.detail()));
    const std::string why =
        absl::StrCat("the configuration failed on workload ", round.workload(),
                     " (round ", round.round_id(), ")");
    for (int i = 0; i < n; ++i) {
      v1::Round& other = s.rounds[first + i];
      if (&other == &round) continue;
      if (other.state() == v1::ROUND_STATE_DONE) {
        staging_->SaveRound(txn, s, other);
        other.set_decision(v1::DECISION_REJECTED);
        other.set_decision_reason(absl::StrCat("rejected: ", why));
        txn.writes.PutRound(other);
      } else {
        CancelRound(txn, s, other, why);
      }
    }
    s.sweep.set_rounds_finished(s.sweep.rounds_finished() + 1);
    s.sweep.set_rounds_without_gain(s.sweep.rounds_without_gain() + 1);
    staging_->AddEvent(
        txn, s, v1::EVENT_KIND_ROUND_FINISHED,
        absl::StrCat(what, ": rejected, ", round.decision_reason()), &round);
    return;
  }
  round.set_parent_us(
      s.rounds[round.parent_round()].result().measurement().median_us());
  if (!group_done()) {
    round.set_decision_reason(
        "measured; judged once every workload of its configuration has a "
        "result");
    staging_->AddEvent(
        txn, s, v1::EVENT_KIND_ROUND_FINISHED,
        absl::StrCat(what, ": ", FormatUs(median), sim,
                     ", waiting for the configuration's other workloads"),
        &round);
    return;
  }
  const int64_t parent_first = group.front()->parent_round();
  const int64_t best_first = s.sweep.best_round();
  for (int i = 0; i < n; ++i) {
    parent.push_back(&s.rounds[parent_first + i]);
    best.push_back(&s.rounds[best_first + i]);
  }
  const ConfigVerdict v = ScoreConfig(spec, group, parent, best);
  s.sweep.set_rounds_finished(s.sweep.rounds_finished() + 1);
  for (int i = 0; i < n; ++i) {
    v1::Round& r = s.rounds[first + i];
    if (&r != &round) staging_->SaveRound(txn, s, r);
    r.set_decision(v.keep ? v1::DECISION_KEPT : v1::DECISION_ROLLED_BACK);
    r.set_decision_reason(absl::StrFormat(
        "%s: %s; parent configuration round %d",
        v.keep ? "kept" : "rolled back", v.reason, parent_first));
    if (&r != &round) txn.writes.PutRound(r);
  }
  const std::string config =
      absl::StrCat("configuration of round ", first, " (",
                   DescribeChanges(round.changes()), ")");
  if (!v.keep) {
    s.sweep.set_rounds_without_gain(s.sweep.rounds_without_gain() + 1);
    staging_->AddEvent(txn, s, v1::EVENT_KIND_ROUND_FINISHED,
                       absl::StrCat(what, ": ", FormatUs(median), sim, "; ",
                                    config, " rolled back: ", v.reason),
                       &round);
    return;
  }
  for (int i = 0; i < n; ++i) {
    v1::WorkloadProgress& p = *s.sweep.mutable_workload_progress(i);
    p.set_best_round(first + i);
    p.set_best_us(s.rounds[first + i].result().measurement().median_us());
  }
  SummarizeWorkloads(s);
  s.sweep.set_best_round(first);
  s.sweep.set_rounds_without_gain(0);
  staging_->AddEvent(txn, s, v1::EVENT_KIND_ROUND_FINISHED,
                     absl::StrCat(what, ": ", FormatUs(median), sim, "; ",
                                  config, " kept: ", v.reason),
                     &round);
  staging_->AddEvent(
      txn, s, v1::EVENT_KIND_BEST_IMPROVED,
      absl::StrFormat("best configuration is now round %d's: weighted "
                      "geometric mean %.1f µs, %.2fx over the baselines%s",
                      first, s.sweep.best_us(),
                      s.sweep.baseline_us() / s.sweep.best_us(), sim),
      &round);
}

void Decider::FinishWorkload(Txn& txn, SweepRuntime& s, int index,
                             v1::TerminationReason reason, std::string detail) {
  v1::WorkloadProgress& w = *s.sweep.mutable_workload_progress(index);
  if (s.finished || w.done()) return;
  staging_->Touch(txn, s);
  w.set_done(true);
  w.set_termination(reason);
  w.set_termination_detail(detail);
  // A workload that is done takes no more boards.
  for (v1::Round& r : s.rounds) {
    if (r.workload_index() == index) {
      CancelRound(
          txn, s, r,
          absl::StrCat("workload ", w.workload(), " is done (", detail, ")"));
    }
  }
  staging_->AddEvent(txn, s, v1::EVENT_KIND_WORKLOAD_DONE,
                     absl::StrCat("workload ", w.workload(), " done: ", detail,
                                  "; it takes no more boards"),
                     nullptr);
  std::vector<std::string> details;
  bool all_goal = true, any_best = false;
  v1::TerminationReason first_other = v1::TERMINATION_UNSPECIFIED;
  for (const v1::WorkloadProgress& p : s.sweep.workload_progress()) {
    if (!p.done()) return;
    details.push_back(absl::StrCat(p.workload(), ": ", p.termination_detail()));
    any_best = any_best || p.best_round() >= 0;
    if (p.termination() != v1::TERMINATION_GOAL_REACHED) {
      all_goal = false;
      if (first_other == v1::TERMINATION_UNSPECIFIED) {
        first_other = p.termination();
      }
    }
  }
  Finish(txn, s, any_best ? v1::SWEEP_STATE_SUCCEEDED : v1::SWEEP_STATE_FAILED,
         all_goal ? v1::TERMINATION_GOAL_REACHED : first_other,
         absl::StrCat("every workload is done (", absl::StrJoin(details, "; "),
                      ")"));
}

void Decider::CheckMultiWorkloadTermination(Txn& txn, SweepRuntime& s) {
  const v1::SweepSpec& spec = s.sweep.spec();
  if (PastTimeLimit(s.sweep)) {
    Finish(txn, s, v1::SWEEP_STATE_SUCCEEDED, v1::TERMINATION_TIME_LIMIT,
           absl::StrCat("time limit of ", spec.budget().time_limit_s(),
                        " s reached"));
    return;
  }
  if (spec.objective() == v1::WORKLOAD_OBJECTIVE_ONE_CONFIG) {
    CheckOneConfigTermination(txn, s);
    return;
  }
  for (int i = 0; i < s.sweep.workload_progress_size() && !s.finished; ++i) {
    const v1::WorkloadProgress& w = s.sweep.workload_progress(i);
    if (w.done() || w.best_round() < 0 || w.best_us() <= 0) continue;
    const double speedup = w.baseline_us() / w.best_us();
    if (spec.goal().speedup() > 0 && speedup >= spec.goal().speedup()) {
      FinishWorkload(txn, s, i, v1::TERMINATION_GOAL_REACHED,
                     absl::StrFormat("speedup %.2fx reached the goal of %.2fx",
                                     speedup, spec.goal().speedup()));
      continue;
    }
    if (spec.goal().target_us() > 0 && w.best_us() <= spec.goal().target_us()) {
      FinishWorkload(txn, s, i, v1::TERMINATION_GOAL_REACHED,
                     absl::StrFormat("%.1f µs reached the target of %.1f µs",
                                     w.best_us(), spec.goal().target_us()));
      continue;
    }
    const v1::Round& best = s.rounds[w.best_round()];
    if (best.has_diagnosis()) {
      if (std::optional<std::string> why =
              SaturationOf(best.diagnosis(), spec.saturation())) {
        FinishWorkload(txn, s, i, v1::TERMINATION_BOARD_SATURATED,
                       absl::StrCat("board saturated on round ",
                                    best.round_id(), ": ", *why));
        continue;
      }
    }
    if (w.rounds_finished() >= spec.budget().max_rounds()) {
      FinishWorkload(txn, s, i, v1::TERMINATION_ROUND_BUDGET,
                     absl::StrCat("round budget of ",
                                  spec.budget().max_rounds(), " spent"));
      continue;
    }
    if (w.rounds_without_gain() >= spec.budget().max_rounds_without_gain()) {
      FinishWorkload(txn, s, i, v1::TERMINATION_NO_GAIN,
                     absl::StrCat(w.rounds_without_gain(),
                                  " rounds in a row without gain"));
      continue;
    }
    const WorkloadViews& views = SyncedViews(s);
    if (views.InFlight(i) > 0) continue;
    SearchHistory history{s.op, &spec, &views.Workload(i), w.best_round(),
                          s.rewinds};
    if (s.workload_strategies[i]->Propose(history, 1).empty()) {
      Exhaustion why = s.workload_strategies[i]->Exhausted(history);
      FinishWorkload(txn, s, i, why.reason, std::move(why.detail));
    }
  }
}

void Decider::CheckOneConfigTermination(Txn& txn, SweepRuntime& s) {
  const v1::SweepSpec& spec = s.sweep.spec();
  if (s.sweep.best_round() < 0 || s.sweep.best_us() <= 0) return;
  const double speedup = s.sweep.baseline_us() / s.sweep.best_us();
  if (spec.goal().speedup() > 0 && speedup >= spec.goal().speedup()) {
    Finish(txn, s, v1::SWEEP_STATE_SUCCEEDED, v1::TERMINATION_GOAL_REACHED,
           absl::StrFormat("weighted geometric mean speedup %.2fx reached the "
                           "goal of %.2fx",
                           speedup, spec.goal().speedup()));
    return;
  }
  if (s.sweep.rounds_finished() >= spec.budget().max_rounds()) {
    Finish(txn, s, v1::SWEEP_STATE_SUCCEEDED, v1::TERMINATION_ROUND_BUDGET,
           absl::StrCat("round budget of ", spec.budget().max_rounds(),
                        " configuration(s) spent"));
    return;
  }
  if (s.sweep.rounds_without_gain() >=
      spec.budget().max_rounds_without_gain()) {
    Finish(txn, s, v1::SWEEP_STATE_SUCCEEDED, v1::TERMINATION_NO_GAIN,
           absl::StrCat(s.sweep.rounds_without_gain(),
                        " configurations in a row without gain"));
    return;
  }
  const int64_t configs =
      static_cast<int64_t>(s.rounds.size() / spec.workloads_size()) - 1;
  if (configs > s.sweep.rounds_finished()) return;  // in flight
  SearchHistory history{s.op, &spec, &SyncedViews(s).Configs(),
                        s.sweep.best_round(), s.rewinds};
  if (s.strategy->Propose(history, 1).empty()) {
    Exhaustion why = s.strategy->Exhausted(history);
    Finish(txn, s, v1::SWEEP_STATE_SUCCEEDED, why.reason,
           std::move(why.detail));
  }
}

}  // namespace tunefarm
