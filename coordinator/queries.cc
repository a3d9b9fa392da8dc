#include "coordinator/queries.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/speedup.h"
#include "common/status_macros.h"
#include "coordinator/report.h"
#include "coordinator/report_render.h"
#include "storage/lineage.h"

namespace tunefarm {

absl::StatusOr<int> PageSize(int limit, int default_size) {
  if (limit < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("limit: must not be negative, got ", limit));
  }
  if (limit == 0) return default_size;
  return std::min(limit, kMaxPageSize);
}

namespace {

absl::Status ForeignToken(const std::string& token) {
  return absl::InvalidArgumentError(absl::StrCat(
      "page_token: '", token, "' is not a token this server handed out"));
}

}  // namespace

absl::StatusOr<v1::ListSweepsResponse> QueryListSweeps(
    Store& store, const v1::ListSweepsRequest& request) {
  TF_ASSIGN_OR_RETURN(const int limit, PageSize(request.limit(), 100));
  // The token is the last sweep id of the page before; ids sort by age.
  const std::string& after = request.page_token();
  if (!after.empty() && !absl::StartsWith(after, "sw-")) {
    return ForeignToken(after);
  }
  TF_ASSIGN_OR_RETURN(std::vector<v1::Sweep> sweeps, store.ListSweeps());
  v1::ListSweepsResponse response;
  size_t bytes = 0;
  // Newest first.
  for (auto it = sweeps.rbegin(); it != sweeps.rend(); ++it) {
    if (!after.empty() && it->sweep_id() >= after) continue;
    if (!request.team().empty() && it->spec().team() != request.team()) {
      continue;
    }
    if (request.state() != v1::SWEEP_STATE_UNSPECIFIED &&
        it->state() != request.state()) {
      continue;
    }
    if (response.sweeps_size() >= limit ||
        (response.sweeps_size() > 0 && bytes >= kMaxPageBytes)) {
      response.set_next_page_token(
          response.sweeps(response.sweeps_size() - 1).sweep_id());
      break;
    }
    bytes += it->ByteSizeLong();
    *response.add_sweeps() = std::move(*it);
  }
  return response;
}

absl::StatusOr<v1::ListRoundsResponse> QueryListRounds(
    Store& store, const v1::ListRoundsRequest& request) {
  TF_ASSIGN_OR_RETURN(const int limit, PageSize(request.limit(), 500));
  // The token is the first round id of the next page.
  int64_t from = 0;
  if (!request.page_token().empty() &&
      (!absl::SimpleAtoi(request.page_token(), &from) || from < 0)) {
    return ForeignToken(request.page_token());
  }
  TF_RETURN_IF_ERROR(store.GetSweep(request.sweep_id()).status());
  TF_ASSIGN_OR_RETURN(
      std::vector<v1::Round> rounds,
      store.ListRoundsFrom(request.sweep_id(), from, limit + 1));
  v1::ListRoundsResponse response;
  size_t bytes = 0;
  for (v1::Round& r : rounds) {
    if (response.rounds_size() >= limit ||
        (response.rounds_size() > 0 && bytes >= kMaxPageBytes)) {
      response.set_next_page_token(absl::StrCat(r.round_id()));
      break;
    }
    if (!request.include_diagnosis()) {
      r.mutable_diagnosis()->clear_perf_analysis_md();
    }
    bytes += r.ByteSizeLong();
    *response.add_rounds() = std::move(r);
  }
  if (request.page_token().empty()) {  // the whole path, once
    TF_ASSIGN_OR_RETURN(std::vector<int64_t> path,
                        store.KeptPath(request.sweep_id()));
    response.mutable_kept_path()->Add(path.begin(), path.end());
  }
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
  response.set_speedup(SweepSpeedup(sweep));
  response.mutable_kept_path()->Add(path.begin(), path.end());
  *response.mutable_sweep() = std::move(sweep);
  return response;
}

}  // namespace tunefarm
