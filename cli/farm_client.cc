#include "cli/farm_client.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cli/status_board.h"
#include "common/files.h"
#include "common/grpc_status.h"
#include "common/params.h"
#include "common/speedup.h"
#include "common/text.h"
#include "coordinator/report_render.h"
#include "coordinator/spec.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "tuning_db/database.h"
#include "tuning_db/warm_start.h"

namespace tunefarm {
namespace {

// Every page of a list RPC, in order: sends `request` with each next page
// token (a fresh context from `context` each time) and hands each page to
// `take`; the first failed call's status.
template <typename Request, typename Page, typename Context, typename Take>
grpc::Status ForEachPage(v1::TuneFarm::Stub* stub,
                         grpc::Status (v1::TuneFarm::Stub::*rpc)(
                             grpc::ClientContext*, const Request&, Page*),
                         Context context, Request request, Take take) {
  do {
    Page page;
    auto ctx = context();
    grpc::Status st = (stub->*rpc)(ctx.get(), request, &page);
    if (!st.ok()) return st;
    take(page);
    request.set_page_token(page.next_page_token());
  } while (!request.page_token().empty());
  return grpc::Status::OK;
}

std::string Json(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(m, &out, opts);
  return out;
}

std::string Lower(absl::string_view enum_name, absl::string_view prefix) {
  return absl::AsciiStrToLower(absl::StripPrefix(enum_name, prefix));
}

std::string StateName(v1::SweepState s) {
  return Lower(v1::SweepState_Name(s), "SWEEP_STATE_");
}

// "[simulated]" or "[replayed]" after `sep` for numbers that did not come
// from running the variant on a real chip; "" otherwise.
std::string Label(const v1::Sweep& s, const char* sep) {
  if (s.simulated()) return absl::StrCat(sep, "[simulated]");
  if (s.spec().boards().kind() == "replay") {
    return absl::StrCat(sep, "[replayed]");
  }
  return "";
}

// The sweep's speedup (the closing check's when it measured one).
std::string SpeedupText(const v1::Sweep& s) {
  const double speedup = SweepSpeedup(s);
  return speedup > 0 ? absl::StrFormat("%.2fx", speedup) : "-";
}

}  // namespace

int ExitCodeFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return kExitOk;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return kExitBadInput;
    case absl::StatusCode::kNotFound:
      return kExitNotFound;
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
      return kExitDenied;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
      return kExitUnavailable;
    default:
      return kExitFailure;
  }
}

FarmClient::FarmClient(CliContext ctx) : ctx_(std::move(ctx)) {
  auto channel = MakeChannel(ctx_.coordinator, ctx_.security);
  if (!channel.ok()) {
    // Reported on the first call, through an unusable channel.
    std::cerr << "tunefarm: " << channel.status().message() << "\n";
    channel = grpc::CreateChannel("unix:/nonexistent",
                                  grpc::InsecureChannelCredentials());
  }
  stub_ = v1::TuneFarm::NewStub(*channel);
}

std::unique_ptr<grpc::ClientContext> FarmClient::Context(
    absl::Duration timeout) const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  if (timeout != absl::InfiniteDuration()) {
    ctx->set_deadline(std::chrono::system_clock::now() +
                      absl::ToChronoMilliseconds(timeout));
  }
  AddCredentials(ctx.get(), ctx_.security);
  return ctx;
}

int FarmClient::Fail(const absl::Status& status, const std::string& what) {
  std::string msg = std::string(status.message());
  if (absl::IsUnavailable(status)) {
    msg = absl::StrCat("coordinator ", ctx_.coordinator, " unreachable: ", msg);
  }
  std::cerr << "tunefarm " << what << ": " << msg << "\n";
  return ExitCodeFor(status);
}

int FarmClient::Submit(const std::string& spec_path,
                       const std::string& idempotency_key, bool watch,
                       std::string* sweep_id_out) {
  // A spec is small text: stop at the coordinator's limit whatever the
  // path is (/dev/zero, a pipe), and say what is wrong before sending.
  auto yaml = ReadFileUpTo(spec_path, kMaxSpecFileBytes, "a sweep spec");
  if (!yaml.ok()) {
    return Fail(absl::InvalidArgumentError(yaml.status().message()), "submit");
  }
  if (size_t bad = 0; !IsValidUtf8(*yaml, &bad)) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
                    spec_path, " is not UTF-8 text (invalid byte at offset ",
                    bad, "); a sweep spec is UTF-8 YAML")),
                "submit");
  }
  v1::SubmitSweepRequest request;
  request.set_spec_yaml(*yaml);
  // baseline.from_db: the coordinator reads no client files, so the
  // database (this operator's part) goes with the parsed spec. Other specs
  // go as YAML, and the coordinator names any bad field.
  absl::StatusOr<v1::SweepSpec> parsed = ParseSweepSpec(*yaml);
  if (parsed.ok() && !parsed->baseline_from_db().empty()) {
    std::string path = parsed->baseline_from_db();
    const std::filesystem::path spec_dir =
        std::filesystem::path(spec_path).parent_path();
    std::error_code ec;
    if (!std::filesystem::exists(path, ec) && path[0] != '/' &&
        std::filesystem::exists(spec_dir / path, ec)) {
      path = (spec_dir / path).string();  // relative to the spec's folder
    }
    absl::StatusOr<TuningDb> db = LoadTuningDb(path);
    if (!db.ok()) {
      return Fail(
          absl::InvalidArgumentError(absl::StrCat(
              spec_path, ": baseline.from_db: ", db.status().message())),
          "submit");
    }
    parsed->set_baseline_db_json(
        TuningDbForOperator(*db, parsed->operator_name()));
    *request.mutable_spec() = *std::move(parsed);
    request.clear_spec_yaml();
  }
  request.set_idempotency_key(idempotency_key);
  v1::SubmitSweepResponse response;
  auto ctx = Context(absl::Seconds(30));
  grpc::Status st = stub_->SubmitSweep(ctx.get(), request, &response);
  if (!st.ok()) {
    return Fail(FromGrpcStatus(st), absl::StrCat("submit ", spec_path));
  }
  if (sweep_id_out != nullptr) *sweep_id_out = response.sweep().sweep_id();
  WarnIfNoBoardMatches(response.sweep());
  if (ctx_.json) {
    std::cout << Json(response) << "\n";
  } else {
    std::cout << (response.existing() ? "already submitted: " : "submitted ")
              << response.sweep().sweep_id() << " ("
              << response.sweep().spec().operator_name() << ", team "
              << response.sweep().spec().team() << ")\n";
  }
  if (!watch) return kExitOk;
  int rc = Watch(response.sweep().sweep_id());
  if (rc != kExitOk && rc != kExitSweepFailed) return rc;
  int summary = Summary(response.sweep().sweep_id());
  return rc != kExitOk ? rc : summary;
}

void FarmClient::WarnIfNoBoardMatches(const v1::Sweep& sweep) {
  v1::ListBoardsRequest request;
  *request.mutable_selector() = sweep.spec().boards();
  v1::ListBoardsResponse response;
  auto ctx = Context(absl::Seconds(10));
  if (!stub_->ListBoards(ctx.get(), request, &response).ok()) return;
  if (response.boards_size() > 0) return;
  std::vector<std::string> wanted;
  const v1::BoardSelector& sel = sweep.spec().boards();
  if (!sel.kind().empty()) wanted.push_back(absl::StrCat("kind=", sel.kind()));
  if (!sel.chip().empty()) wanted.push_back(absl::StrCat("chip=", sel.chip()));
  for (const auto& [key, value] : sel.labels()) {
    wanted.push_back(absl::StrCat(key, "=", value));
  }
  std::cerr << "tunefarm submit: warning: no registered board matches "
            << sweep.sweep_id() << "'s boards (" << absl::StrJoin(wanted, ", ")
            << "); it waits until such a board registers "
               "(tunefarm boards lists them)\n";
}

int FarmClient::Status(const std::string& sweep_id) {
  if (!sweep_id.empty()) {
    v1::GetSweepRequest request;
    request.set_sweep_id(sweep_id);
    v1::Sweep sweep;
    auto ctx = Context(absl::Seconds(10));
    grpc::Status st = stub_->GetSweep(ctx.get(), request, &sweep);
    if (!st.ok()) return Fail(FromGrpcStatus(st), "status");
    if (ctx_.json) {
      std::cout << Json(sweep) << "\n";
      return kExitOk;
    }
    std::cout << absl::StrFormat(
        "%s  %s  team %s  operator %s\n  state: %s%s\n  rounds finished: %d "
        "(proposed %d)\n  baseline: %.2f µs  best: round %d, %.2f µs  "
        "speedup: %s%s%s\n",
        sweep.sweep_id(), sweep.spec().name(), sweep.spec().team(),
        sweep.spec().operator_name(), StateName(sweep.state()),
        sweep.termination_detail().empty()
            ? ""
            : absl::StrCat(" (", sweep.termination_detail(), ")"),
        sweep.rounds_finished(), sweep.candidates_proposed(),
        sweep.baseline_us(), sweep.best_round(), sweep.best_us(),
        SpeedupText(sweep),
        SweepSpeedup(sweep) > 0 && sweep.spec().workloads().empty()
            ? absl::StrCat(" (", SpeedupBasis(sweep), ")")
            : "",
        Label(sweep, "  "));
    if (sweep.has_closing_check()) {
      std::cout << "  closing check: "
                << ClosingCheckText(sweep.closing_check()) << "\n";
    }
    if (!sweep.spec().baseline_source().empty()) {
      std::cout << "  baseline from: " << sweep.spec().baseline_source()
                << "\n";
    }
    PrintWorkloads(sweep);
    return kExitOk;
  }
  v1::ListSweepsResponse response;
  grpc::Status st = ForEachPage(
      stub_.get(), &v1::TuneFarm::Stub::ListSweeps,
      [this] { return Context(absl::Seconds(10)); }, v1::ListSweepsRequest(),
      [&](const v1::ListSweepsResponse& page) {
        response.mutable_sweeps()->MergeFrom(page.sweeps());
      });
  if (!st.ok()) return Fail(FromGrpcStatus(st), "status");
  if (ctx_.json) {
    std::cout << Json(response) << "\n";
    return kExitOk;
  }
  std::cout << absl::StrFormat("%-10s %-24s %-10s %-10s %7s %9s\n", "SWEEP",
                               "NAME", "TEAM", "STATE", "ROUNDS", "SPEEDUP");
  for (const v1::Sweep& s : response.sweeps()) {
    std::cout << absl::StrFormat("%-10s %-24s %-10s %-10s %7d %9s%s\n",
                                 s.sweep_id(), s.spec().name(), s.spec().team(),
                                 StateName(s.state()), s.rounds_finished(),
                                 SpeedupText(s), Label(s, " "));
  }
  return kExitOk;
}

int FarmClient::Watch(const std::string& sweep_id) {
  v1::WatchSweepRequest request;
  request.set_sweep_id(sweep_id);
  v1::SweepEvent ev;
  v1::SweepState final_state = v1::SWEEP_STATE_UNSPECIFIED;
  int finished = 0, kept = 0;
  bool status_line = false;
  StatusBoard board;
  // The stream ends when the sweep does, or when the coordinator goes away
  // (a restart): then reconnect with backoff and resume after the last
  // event printed, so each event is printed once.
  int64_t next_seq = 1;
  bool done = false;
  bool connected = false;  // a first event came: the sweep and caller are ok
  absl::Duration backoff = absl::Milliseconds(100);
  absl::Time down_since = absl::InfiniteFuture();
  while (!done) {
    request.set_from_seq(next_seq);
    // No deadline: a sweep may run for hours.
    auto ctx = Context(absl::InfiniteDuration());
    auto reader = stub_->WatchSweep(ctx.get(), request);
    while (reader->Read(&ev)) {
      if (ev.seq() < next_seq) continue;  // printed before a reconnect
      connected = true;
      next_seq = ev.seq() + 1;
      backoff = absl::Milliseconds(100);
      down_since = absl::InfiniteFuture();
      if (ev.kind() == v1::EVENT_KIND_FINISHED) done = true;
      if (ctx_.json) {
        std::cout << Json(ev) << std::endl;
      } else if (ev.kind() != v1::EVENT_KIND_ROUND_LEASED) {
        if (status_line) std::cout << "\r\033[K";
        std::cout << absl::FormatTime("%H:%M:%S",
                                      absl::FromUnixMillis(ev.time_unix_ms()),
                                      absl::LocalTimeZone())
                  << "  " << ev.message() << std::endl;  // pipes see it now
        status_line = false;
      }
      if (ev.kind() == v1::EVENT_KIND_ROUND_FINISHED) ++finished;
      if (ev.kind() == v1::EVENT_KIND_BEST_IMPROVED) ++kept;
      if (ev.has_sweep()) final_state = ev.sweep().state();
      if (board.Add(ev) && !ctx_.json) {
        if (status_line) std::cout << "\r\033[K";
        status_line = false;
        std::cout << board.Render() << std::flush;
      }
      // A live line only where a person watches; logs and pipes get events.
      if (ctx_.terminal && !ctx_.json && ev.kind() != v1::EVENT_KIND_FINISHED) {
        std::cout << absl::StrFormat("  … %d rounds finished, %d improvements",
                                     finished, kept)
                  << std::flush;
        status_line = true;
      }
    }
    grpc::Status st = reader->Finish();
    if (done) break;
    const absl::Status status = FromGrpcStatus(st);
    // Never reached, or not to be waited for (`tunefarm local` stops its own
    // coordinator): as before, no retry.
    if (!connected || ctx_.reconnect_for <= absl::ZeroDuration()) {
      if (st.ok()) break;
      if (status_line) std::cout << "\r\033[K" << std::flush;
      return Fail(status, "watch");
    }
    // An unknown sweep or a denied caller will not get better; a coordinator
    // that went away (UNAVAILABLE, or a clean end of the stream at its
    // shutdown) may come back.
    if (!st.ok() && !absl::IsUnavailable(status)) {
      if (status_line) std::cout << "\r\033[K" << std::flush;
      return Fail(status, "watch");
    }
    const absl::Time now = absl::Now();
    if (down_since == absl::InfiniteFuture()) down_since = now;
    if (now - down_since >= ctx_.reconnect_for) {
      if (status_line) std::cout << "\r\033[K" << std::flush;
      return Fail(st.ok() ? absl::UnavailableError("the stream ended") : status,
                  absl::StrCat("watch (gave up reconnecting after ",
                               absl::FormatDuration(ctx_.reconnect_for), ")"));
    }
    std::cerr << "tunefarm watch: coordinator " << ctx_.coordinator
              << (st.ok() ? " ended the stream" : " unreachable")
              << "; reconnecting in " << absl::FormatDuration(backoff)
              << " from event " << next_seq << "\n";
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(5));
  }
  if (status_line) std::cout << "\r\033[K" << std::flush;
  if (final_state == v1::SWEEP_STATE_FAILED ||
      final_state == v1::SWEEP_STATE_CANCELLED) {
    return kExitSweepFailed;
  }
  return kExitOk;
}

int FarmClient::Cancel(const std::string& sweep_id, const std::string& reason) {
  v1::CancelSweepRequest request;
  request.set_sweep_id(sweep_id);
  request.set_reason(reason);
  v1::Sweep sweep;
  auto ctx = Context(absl::Seconds(10));
  grpc::Status st = stub_->CancelSweep(ctx.get(), request, &sweep);
  if (!st.ok()) return Fail(FromGrpcStatus(st), "cancel");
  if (ctx_.json) {
    std::cout << Json(sweep) << "\n";
  } else {
    std::cout << "cancelled " << sweep.sweep_id() << "\n";
  }
  return kExitOk;
}

int FarmClient::Rounds(const std::string& sweep_id) {
  v1::ListRoundsRequest request;
  request.set_sweep_id(sweep_id);
  request.set_include_diagnosis(ctx_.json);
  // Text streams page by page; JSON stays one document.
  v1::ListRoundsResponse response;
  bool header = false;
  do {
    v1::ListRoundsResponse page;
    auto ctx = Context(absl::Seconds(30));
    grpc::Status st = stub_->ListRounds(ctx.get(), request, &page);
    if (!st.ok()) return Fail(FromGrpcStatus(st), "rounds");
    request.set_page_token(page.next_page_token());
    if (page.kept_path_size() > 0) {
      *response.mutable_kept_path() = page.kept_path();
    }
    if (ctx_.json) {
      response.mutable_rounds()->MergeFrom(page.rounds());
      continue;
    }
    if (!header) {
      std::cout << absl::StrFormat(
          "%5s %-12s %6s %-36s %-18s %-16s %11s %-11s %s\n", "ROUND",
          "WORKLOAD", "PARENT", "CHANGE", "BOARD", "OUTCOME", "MEDIAN_US",
          "DECISION", "HOTSPOT");
      header = true;
    }
    PrintRounds(page);
    std::cout << std::flush;
  } while (!request.page_token().empty());
  if (ctx_.json) {
    std::cout << Json(response) << "\n";
    return kExitOk;
  }
  std::cout << "kept path:";
  for (int64_t id : response.kept_path()) std::cout << " " << id;
  std::cout << "\n(* simulated board: modelled time, not a measurement; r "
               "replayed: recorded by someone else in a measured space)\n";
  return kExitOk;
}

void FarmClient::PrintWorkloads(const v1::Sweep& sweep) {
  if (sweep.spec().workloads().empty()) return;
  std::cout << "  objective: "
            << (sweep.spec().objective() == v1::WORKLOAD_OBJECTIVE_ONE_CONFIG
                    ? "one_config (weighted geometric mean over the "
                      "workloads)"
                    : "per_workload")
            << "\n";
  for (const v1::WorkloadProgress& w : sweep.workload_progress()) {
    std::string best = "no passing baseline yet";
    if (w.best_round() >= 0 && w.best_us() > 0) {
      best = absl::StrFormat(
          "baseline %.2f µs, best round %d at %.2f µs (%.2fx)", w.baseline_us(),
          w.best_round(), w.best_us(), w.baseline_us() / w.best_us());
    }
    std::cout << "  workload " << w.workload() << ": " << best << ", "
              << w.rounds_finished() << " rounds finished"
              << (w.done() ? absl::StrCat("; done: ", w.termination_detail())
                           : std::string())
              << "\n";
  }
}

void FarmClient::PrintRounds(const v1::ListRoundsResponse& response) {
  for (const v1::Round& r : response.rounds()) {
    std::string outcome =
        r.state() == v1::ROUND_STATE_DONE
            ? Lower(v1::Outcome_Name(r.result().outcome()), "OUTCOME_")
            : Lower(v1::RoundState_Name(r.state()), "ROUND_STATE_");
    std::string median =
        r.result().measurement().samples() > 0
            ? absl::StrFormat("%.2f%s", r.result().measurement().median_us(),
                              r.result().measurement().simulated()  ? "*"
                              : r.result().measurement().replayed() ? "r"
                                                                    : "")
            : "-";
    std::string hotspot = "-";
    if (!r.diagnosis().hotspots().empty()) {
      hotspot =
          absl::StrFormat("%s %.0f%%", r.diagnosis().hotspots(0).op_name(),
                          r.diagnosis().hotspots(0).share() * 100);
    }
    std::cout << absl::StrFormat(
        "%5d %-12s %6s %-36s %-18s %-16s %11s %-11s %s\n", r.round_id(),
        r.workload().empty() ? "-" : r.workload(),
        r.parent_round() < 0 ? "-" : absl::StrCat(r.parent_round()),
        r.parent_round() < 0 ? "baseline" : DescribeChanges(r.changes()),
        r.board_id().empty() ? "-" : r.board_id(), outcome, median,
        r.decision() == v1::DECISION_UNSPECIFIED
            ? "pending"
            : Lower(v1::Decision_Name(r.decision()), "DECISION_"),
        hotspot);
    // Why the strategy proposed it (rounds stored before rationales were
    // kept have none), and why an undecided round waits.
    if (!r.rationale().empty()) {
      std::cout << "      why: " << r.rationale() << "\n";
    }
    if (r.decision() == v1::DECISION_UNSPECIFIED &&
        !r.decision_reason().empty()) {
      std::cout << "      " << r.decision_reason() << "\n";
    }
  }
}

int FarmClient::Report(const std::string& sweep_id,
                       const ReportOptions& options) {
  v1::GetReportRequest request;
  request.set_sweep_id(sweep_id);
  v1::GetReportResponse response;
  auto ctx = Context(absl::Seconds(30));
  grpc::Status st = stub_->GetReport(ctx.get(), request, &response);
  if (!st.ok()) return Fail(FromGrpcStatus(st), "report");
  if (ctx_.json && options.out_dir.empty()) {
    std::cout << Json(response) << "\n";
    return kExitOk;
  }
  if (response.report_json().empty()) {
    return Fail(absl::FailedPreconditionError(
                    "the coordinator sent no report JSON (it is older than "
                    "this CLI)"),
                "report");
  }
  // Every rendering is made here from the JSON the coordinator built, so
  // the files and --format json always agree.
  absl::StatusOr<nlohmann::json> report = ParseReport(response.report_json());
  if (!report.ok()) return Fail(report.status(), "report");
  if (!options.out_dir.empty()) {
    absl::StatusOr<nlohmann::json> written =
        WriteReportFolder(*std::move(report), options.out_dir);
    if (!written.ok()) {
      return Fail(absl::InternalError(written.status().message()), "report");
    }
    const nlohmann::json& pictures = written->at("pictures");
    std::cout << "report written to " << options.out_dir
              << ": report.md, report.json, progress.svg, lineage.dot"
              << (pictures.at("lineage_svg").get<std::string>().empty()
                      ? ""
                      : ", lineage.svg")
              << "\n";
    const std::string note = pictures.at("lineage_note").get<std::string>();
    if (!note.empty()) std::cout << "note: " << note << "\n";
    return kExitOk;
  }
  if (options.format == "json") {
    std::cout << report->dump(2, ' ', false,
                              nlohmann::json::error_handler_t::replace)
              << "\n";
    return kExitOk;
  }
  absl::StatusOr<std::string> md = RenderReportMarkdown(*report);
  if (!md.ok()) return Fail(md.status(), "report");
  std::cout << *md;
  return kExitOk;
}

int FarmClient::Boards() {
  v1::ListBoardsResponse response;
  grpc::Status st = ForEachPage(
      stub_.get(), &v1::TuneFarm::Stub::ListBoards,
      [this] { return Context(absl::Seconds(10)); }, v1::ListBoardsRequest(),
      [&](const v1::ListBoardsResponse& page) {
        response.mutable_boards()->MergeFrom(page.boards());
      });
  if (!st.ok()) return Fail(FromGrpcStatus(st), "boards");
  if (ctx_.json) {
    std::cout << Json(response) << "\n";
    return kExitOk;
  }
  std::cout << absl::StrFormat("%-24s %-6s %-16s %-11s %7s %-12s %s\n", "BOARD",
                               "KIND", "CHIP", "STATE", "ROUNDS", "RESERVED",
                               "LEASE");
  for (const v1::BoardInfo& b : response.boards()) {
    std::cout << absl::StrFormat(
        "%-24s %-6s %-16s %-11s %7d %-12s %s%s\n", b.board_id(), b.kind(),
        b.chip(), Lower(v1::BoardState_Name(b.state()), "BOARD_STATE_"),
        b.rounds_run(), b.reserved_for().empty() ? "-" : b.reserved_for(),
        b.current_lease_id().empty() ? "-" : b.current_lease_id(),
        b.simulated() ? "  (simulated)" : "");
  }
  return kExitOk;
}

int FarmClient::Summary(const std::string& sweep_id) {
  v1::GetReportRequest request;
  request.set_sweep_id(sweep_id);
  v1::GetReportResponse response;
  auto ctx = Context(absl::Seconds(30));
  grpc::Status st = stub_->GetReport(ctx.get(), request, &response);
  if (!st.ok()) return Fail(FromGrpcStatus(st), "report");
  if (ctx_.json) {
    std::cout << Json(response) << "\n";
    return kExitOk;
  }
  const v1::Sweep& s = response.sweep();
  // Real boards' numbers are labelled too, so the two never mix up.
  const std::string sim =
      s.simulated() ? " (simulated board)"
      : s.spec().boards().kind() == "replay"
          ? " (replayed: recorded in a measured space, not run here)"
          : " (measured)";
  std::cout << "\n== " << s.sweep_id() << " " << StateName(s.state()) << ": "
            << s.termination_detail() << "\n";
  if (!s.spec().workloads().empty()) {
    PrintWorkloads(s);
  } else if (response.has_best() && response.speedup() > 0) {
    std::cout << absl::StrFormat(
        "   best configuration: %s\n   best time: %.2f µs (round %d)%s\n"
        "   baseline: %.2f µs\n   speedup over the baseline: %.2fx (%s)%s\n",
        ParamsKey(response.best().params()), s.best_us(), s.best_round(), sim,
        s.baseline_us(), response.speedup(), SpeedupBasis(s), sim);
  }
  if (!s.closing_check().outcome().empty()) {
    std::cout << "   closing check: " << s.closing_check().outcome() << "\n";
  }
  std::cout << "   report: "
            << (response.report_path().empty() ? "(not written)"
                                               : response.report_path())
            << "\n";
  return kExitOk;
}

absl::Status FarmClient::FetchSweep(const std::string& sweep_id,
                                    v1::Sweep* sweep,
                                    std::vector<v1::Round>* rounds) {
  v1::GetSweepRequest request;
  request.set_sweep_id(sweep_id);
  auto ctx = Context(absl::Seconds(10));
  grpc::Status st = stub_->GetSweep(ctx.get(), request, sweep);
  if (!st.ok()) return FromGrpcStatus(st);
  v1::ListRoundsRequest rounds_request;
  rounds_request.set_sweep_id(sweep_id);
  rounds->clear();
  do {
    v1::ListRoundsResponse page;
    auto rctx = Context(absl::Seconds(30));
    st = stub_->ListRounds(rctx.get(), rounds_request, &page);
    if (!st.ok()) return FromGrpcStatus(st);
    rounds->insert(rounds->end(), page.rounds().begin(), page.rounds().end());
    rounds_request.set_page_token(page.next_page_token());
  } while (!rounds_request.page_token().empty());
  return absl::OkStatus();
}

absl::Status FarmClient::FetchBoards(std::vector<v1::BoardInfo>* boards) {
  boards->clear();
  return FromGrpcStatus(ForEachPage(
      stub_.get(), &v1::TuneFarm::Stub::ListBoards,
      [this] { return Context(absl::Seconds(10)); }, v1::ListBoardsRequest(),
      [&](const v1::ListBoardsResponse& page) {
        boards->insert(boards->end(), page.boards().begin(),
                       page.boards().end());
      }));
}

int FarmClient::Teams() {
  v1::ListTeamsResponse response;
  grpc::Status st = ForEachPage(
      stub_.get(), &v1::TuneFarm::Stub::ListTeams,
      [this] { return Context(absl::Seconds(10)); }, v1::ListTeamsRequest(),
      [&](const v1::ListTeamsResponse& page) {
        response.mutable_teams()->MergeFrom(page.teams());
      });
  if (!st.ok()) return Fail(FromGrpcStatus(st), "teams");
  if (ctx_.json) {
    std::cout << Json(response) << "\n";
    return kExitOk;
  }
  std::cout << absl::StrFormat("%-16s %7s %11s %13s %9s %14s\n", "TEAM",
                               "WEIGHT", "MAX_BOARDS", "BOARDS_IN_USE",
                               "SWEEPS", "BOARD_SECONDS");
  for (const v1::TeamUsage& u : response.teams()) {
    std::cout << absl::StrFormat(
        "%-16s %7.2f %11s %13d %9s %14.1f\n", u.quota().team(),
        u.quota().weight(),
        u.quota().max_boards() == 0 ? "-"
                                    : absl::StrCat(u.quota().max_boards()),
        u.boards_in_use(),
        absl::StrCat(u.active_sweeps(), "/",
                     u.quota().max_active_sweeps() == 0
                         ? "-"
                         : absl::StrCat(u.quota().max_active_sweeps())),
        u.board_seconds());
  }
  return kExitOk;
}

int FarmClient::Drain(const std::string& board_id, const std::string& reason) {
  v1::BoardAdminRequest request;
  request.set_board_id(board_id);
  request.set_reason(reason);
  v1::BoardInfo board;
  auto ctx = Context(absl::Seconds(10));
  grpc::Status st = stub_->DrainBoard(ctx.get(), request, &board);
  if (!st.ok()) return Fail(FromGrpcStatus(st), "admin drain");
  std::cout << (ctx_.json ? Json(board) : "draining " + board.board_id())
            << "\n";
  return kExitOk;
}

int FarmClient::Admit(const std::string& board_id, const std::string& reason) {
  v1::BoardAdminRequest request;
  request.set_board_id(board_id);
  request.set_reason(reason);
  v1::BoardInfo board;
  auto ctx = Context(absl::Seconds(10));
  grpc::Status st = stub_->AdmitBoard(ctx.get(), request, &board);
  if (!st.ok()) return Fail(FromGrpcStatus(st), "admin admit");
  std::cout << (ctx_.json ? Json(board) : "admitted " + board.board_id())
            << "\n";
  return kExitOk;
}

int FarmClient::SetQuota(const v1::TeamQuota& quota) {
  v1::SetTeamQuotaRequest request;
  *request.mutable_quota() = quota;
  v1::TeamQuota response;
  auto ctx = Context(absl::Seconds(10));
  grpc::Status st = stub_->SetTeamQuota(ctx.get(), request, &response);
  if (!st.ok()) return Fail(FromGrpcStatus(st), "admin quota");
  std::cout << (ctx_.json ? Json(response)
                          : absl::StrCat("quota of ", response.team(), " set"))
            << "\n";
  return kExitOk;
}

int FarmClient::Reserve(const v1::BoardReservation& reservation, bool reserve) {
  v1::ReserveBoardsRequest request;
  *request.mutable_reservation() = reservation;
  v1::ListReservationsResponse response;
  auto ctx = Context(absl::Seconds(10));
  grpc::Status st = reserve
                        ? stub_->ReserveBoards(ctx.get(), request, &response)
                        : stub_->UnreserveBoards(ctx.get(), request, &response);
  if (!st.ok()) {
    return Fail(FromGrpcStatus(st),
                reserve ? "admin reserve" : "admin unreserve");
  }
  if (ctx_.json) {
    std::cout << Json(response) << "\n";
    return kExitOk;
  }
  std::cout << absl::StrFormat("%-32s %-16s %-7s %s\n", "BOARDS", "TEAM",
                               "SOURCE", "REASON");
  for (const v1::BoardReservation& r : response.reservations()) {
    std::vector<std::string> labels;
    for (const auto& [key, value] : r.labels()) {
      labels.push_back(absl::StrCat(key, "=", value));
    }
    std::sort(labels.begin(), labels.end());
    std::cout << absl::StrFormat(
        "%-32s %-16s %-7s %s\n",
        r.board_id().empty()
            ? absl::StrCat("labels ", absl::StrJoin(labels, ","))
            : r.board_id(),
        r.team(), r.from_policy() ? "policy" : "admin", r.reason());
  }
  return kExitOk;
}

}  // namespace tunefarm
