#include "coordinator/queries.h"

#include <algorithm>

#include "common/status_macros.h"
#include "coordinator/report.h"
#include "coordinator/report_render.h"
#include "storage/lineage.h"

namespace tunefarm {

absl::StatusOr<v1::ListSweepsResponse> QueryListSweeps(
    Store& store, const v1::ListSweepsRequest& request) {
  TF_ASSIGN_OR_RETURN(std::vector<v1::Sweep> sweeps, store.ListSweeps());
  const int limit = request.limit() > 0 ? request.limit() : 100;
  v1::ListSweepsResponse response;
  // Newest first.
  for (auto it = sweeps.rbegin(); it != sweeps.rend(); ++it) {
    if (!request.team().empty() && it->spec().team() != request.team()) {
      continue;
    }
    if (request.state() != v1::SWEEP_STATE_UNSPECIFIED &&
        it->state() != request.state()) {
      continue;
    }
    *response.add_sweeps() = std::move(*it);
    if (response.sweeps_size() >= limit) break;
  }
  return response;
}

absl::StatusOr<v1::ListRoundsResponse> QueryListRounds(
    Store& store, const v1::ListRoundsRequest& request) {
  TF_ASSIGN_OR_RETURN(v1::Sweep sweep, store.GetSweep(request.sweep_id()));
  TF_ASSIGN_OR_RETURN(std::vector<v1::Round> rounds,
                      store.ListRounds(request.sweep_id()));
  TF_ASSIGN_OR_RETURN(std::vector<int64_t> path,
                      KeptPathTo(rounds, sweep.best_round()));
  v1::ListRoundsResponse response;
  for (v1::Round& r : rounds) {
    if (!request.include_diagnosis()) {
      r.mutable_diagnosis()->clear_perf_analysis_md();
    }
    *response.add_rounds() = std::move(r);
  }
  response.mutable_kept_path()->Add(path.begin(), path.end());
  return response;
}

absl::StatusOr<v1::GetReportResponse> QueryReport(
    Store& store, const v1::GetReportRequest& request) {
  TF_ASSIGN_OR_RETURN(v1::Sweep sweep, store.GetSweep(request.sweep_id()));
  TF_ASSIGN_OR_RETURN(std::vector<v1::Round> rounds,
                      store.ListRounds(request.sweep_id()));
  TF_ASSIGN_OR_RETURN(std::vector<int64_t> path,
                      KeptPathTo(rounds, sweep.best_round()));
  TF_ASSIGN_OR_RETURN(std::vector<v1::BoardInfo> boards, store.ListBoards());
  const nlohmann::json report = BuildReport(sweep, rounds, boards);
  TF_ASSIGN_OR_RETURN(std::string markdown, RenderReportMarkdown(report));
  v1::GetReportResponse response;
  response.set_markdown(std::move(markdown));
  // Replacing bad UTF-8 (e.g. in a compiler message) keeps dump() from
  // throwing.
  response.set_report_json(
      report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace));
  response.set_report_path(sweep.report_path());
  if (!rounds.empty()) *response.mutable_baseline() = rounds.front();
  if (sweep.best_round() >= 0 &&
      sweep.best_round() < static_cast<int64_t>(rounds.size())) {
    *response.mutable_best() = rounds[sweep.best_round()];
  }
  if (sweep.best_us() > 0) {
    response.set_speedup(sweep.baseline_us() / sweep.best_us());
  }
  response.mutable_kept_path()->Add(path.begin(), path.end());
  *response.mutable_sweep() = std::move(sweep);
  return response;
}

}  // namespace tunefarm
