#include "agent/sim_board.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "agent/measurement.h"
#include "agent/precision.h"
#include "agent/process_runner.h"
#include "agent/sim_model.h"
#include "common/files.h"
#include "common/params.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace tunefarm {
namespace {

namespace fs = std::filesystem;

constexpr char kKind[] = "sim";
constexpr int kDefaultWarmup = 3;
constexpr int kDefaultSamples = 20;
constexpr int kMaxWarmup = 1000;
constexpr int kMaxSamples = 10000;
constexpr int64_t kMaxBundleBytes = 64 << 20;

// A path component from an id that came over the wire: nothing but
// [A-Za-z0-9._-], never "." or "..".
std::string SafeComponent(const std::string& id) {
  std::string out;
  for (char c : id.substr(0, 128)) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    out.push_back(ok ? c : '_');
  }
  if (out.empty() || out == "." || out == "..") out = "_" + out;
  return out;
}

std::string Dump(const nlohmann::json& j) {
  // Replace invalid UTF-8 rather than throw: a hostile string parameter must
  // reach the kernel as data, and the kernel rejects it.
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string StageFailure(const std::string& stage, const ProcessResult& r) {
  std::string what =
      r.term_signal != 0
          ? absl::StrCat("killed by signal ", r.term_signal, " (",
                         SignalName(r.term_signal), ")")
          : absl::StrCat("exited with code ", r.exit_code);
  std::string tail(absl::StripTrailingAsciiWhitespace(r.stderr_tail));
  return absl::StrCat(stage, " ", what, tail.empty() ? "" : ": ", tail);
}

bool StageOk(const ProcessResult& r) {
  return !r.timed_out && !r.cancelled && r.term_signal == 0 && r.exit_code == 0;
}

class SimBoard : public Board {
 public:
  explicit SimBoard(SimBoardOptions options)
      : options_(std::move(options)), chip_(DefaultSimChip()) {
    info_.set_board_id(options_.board_id);
    info_.set_agent_id(options_.agent_id);
    info_.set_node(options_.node);
    info_.set_kind(kKind);
    info_.set_chip(chip_.name);
    for (const auto& [k, v] : options_.labels) (*info_.mutable_labels())[k] = v;
    *info_.mutable_capabilities() = SimChipCapabilities(chip_);
    info_.set_simulated(true);
    info_.set_state(v1::BOARD_STATE_IDLE);
  }

  const v1::BoardInfo& info() const override { return info_; }

  absl::StatusOr<Evaluation> Evaluate(const v1::WorkItem& work,
                                      const std::atomic<bool>& cancel) override;

 private:
  struct Stage {
    std::string out_dir;
    ProcessResult result;
  };

  // The manifest's "sim" command with {bin} and {pkg} expanded, checked.
  absl::StatusOr<std::vector<std::string>> ExpandCommand(
      const v1::OperatorManifest& op, bool* from_bin) const;

  absl::StatusOr<Stage> RunStage(const std::vector<std::string>& command,
                                 const std::string& work_dir,
                                 const std::string& stage,
                                 std::vector<std::string> extra_args,
                                 uint64_t seed,
                                 const std::atomic<bool>& cancel) const;

  absl::StatusOr<v1::ProfileBundle> ReadBundle(const std::string& profile_dir) const;

  const SimBoardOptions options_;
  const SimChip chip_;
  v1::BoardInfo info_;  // immutable after construction
};

absl::StatusOr<std::vector<std::string>> SimBoard::ExpandCommand(
    const v1::OperatorManifest& op, bool* from_bin) const {
  auto it = op.backends().find(kKind);
  if (it == op.backends().end() || it->second.command().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "operator ", op.name(), " has no command for board kind \"sim\""));
  }
  std::vector<std::string> argv;
  for (const std::string& part : it->second.command()) {
    if (absl::StrContains(part, "{pkg}") && op.package_dir().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "operator ", op.name(), ": command uses {pkg} but package_dir is empty"));
    }
    std::string expanded = absl::StrReplaceAll(
        part, {{"{bin}", options_.bin_dir}, {"{pkg}", op.package_dir()}});
    if (expanded.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "operator ", op.name(), ": command argument holds a NUL byte"));
    }
    argv.push_back(std::move(expanded));
  }
  *from_bin = absl::StartsWith(it->second.command(0), "{bin}");
  const std::string& exe = argv[0];
  if (exe.empty() || exe[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat(
        "operator ", op.name(), ": sim command \"", exe,
        "\" is not an absolute path after expanding {bin}/{pkg}"));
  }
  for (absl::string_view c : absl::StrSplit(exe, '/')) {
    if (c == "..") {
      return absl::InvalidArgumentError(absl::StrCat(
          "operator ", op.name(), ": sim command \"", exe,
          "\" escapes its folder (\"..\")"));
    }
  }
  return argv;
}

absl::StatusOr<SimBoard::Stage> SimBoard::RunStage(
    const std::vector<std::string>& command, const std::string& work_dir,
    const std::string& stage, std::vector<std::string> extra_args,
    uint64_t seed, const std::atomic<bool>& cancel) const {
  Stage s;
  s.out_dir = absl::StrCat(work_dir, "/", stage);
  TF_RETURN_IF_ERROR(MakeDirs(s.out_dir));
  TF_RETURN_IF_ERROR(MakeDirs(work_dir + "/logs"));
  ProcessSpec spec;
  spec.argv = command;
  for (std::string a :
       {std::string("--stage"), stage, std::string("--params"),
        work_dir + "/params.json", std::string("--workload"),
        work_dir + "/workload.json", std::string("--out"), s.out_dir,
        std::string("--seed"), absl::StrCat(seed)}) {
    spec.argv.push_back(std::move(a));
  }
  for (std::string& a : extra_args) spec.argv.push_back(std::move(a));
  spec.cwd = work_dir;
  spec.stdout_path = absl::StrCat(work_dir, "/logs/", stage, ".stdout");
  spec.stderr_path = absl::StrCat(work_dir, "/logs/", stage, ".stderr");
  spec.timeout = options_.stage_timeout;
  spec.cancel = &cancel;
  TF_ASSIGN_OR_RETURN(s.result, RunProcess(spec));
  return s;
}

absl::StatusOr<v1::ProfileBundle> SimBoard::ReadBundle(
    const std::string& profile_dir) const {
  std::error_code ec;
  std::vector<std::string> prof_dirs;
  for (fs::directory_iterator it(profile_dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->is_directory(ec) &&
        absl::StartsWith(it->path().filename().string(), "PROF_")) {
      prof_dirs.push_back(it->path().filename().string());
    }
  }
  if (ec) {
    return absl::NotFoundError(
        absl::StrCat("cannot list profile folder ", profile_dir, ": ", ec.message()));
  }
  if (prof_dirs.empty()) {
    return absl::NotFoundError(
        absl::StrCat("profile stage wrote no PROF_* folder under ", profile_dir));
  }
  std::vector<std::string> files;
  for (const std::string& d : prof_dirs) {
    for (fs::recursive_directory_iterator it(profile_dir + "/" + d, ec), end;
         !ec && it != end; it.increment(ec)) {
      if (it->is_regular_file(ec) && !it->is_symlink(ec)) {
        files.push_back(fs::relative(it->path(), profile_dir, ec).string());
      }
    }
    if (ec) {
      return absl::InternalError(
          absl::StrCat("cannot walk profile folder ", d, ": ", ec.message()));
    }
  }
  std::sort(files.begin(), files.end());
  bool has_summary = false;
  for (const std::string& f : files) {
    if (absl::StrContains(f, "mindstudio_profiler_output/op_summary_")) has_summary = true;
  }
  if (!has_summary) {
    return absl::NotFoundError(absl::StrCat(
        "profile folder has no mindstudio_profiler_output/op_summary_*.csv"));
  }
  v1::ProfileBundle bundle;
  int64_t total = 0;
  for (const std::string& f : files) {
    TF_ASSIGN_OR_RETURN(std::string content, ReadFile(profile_dir + "/" + f));
    total += static_cast<int64_t>(content.size());
    if (total > kMaxBundleBytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "profile files exceed ", kMaxBundleBytes, " bytes"));
    }
    v1::ProfileFile* pf = bundle.add_files();
    pf->set_path(f);
    pf->set_content(std::move(content));
  }
  return bundle;
}

absl::StatusOr<Evaluation> SimBoard::Evaluate(const v1::WorkItem& work,
                                              const std::atomic<bool>& cancel) {
  Evaluation eval;
  v1::RoundResult& result = eval.result;
  const v1::OperatorManifest& op = work.operator_();
  const uint64_t seed = work.seed() != 0 ? work.seed() : options_.seed;

  bool from_bin = false;
  absl::StatusOr<std::vector<std::string>> command = ExpandCommand(op, &from_bin);
  if (!command.ok()) {
    result.set_outcome(v1::OUTCOME_BUILD_FAILED);
    result.set_detail(std::string(command.status().message()));
    return eval;
  }

  const std::string work_dir =
      absl::StrCat(options_.work_root, "/", SafeComponent(work.sweep_id()),
                   "/round_", work.round_id(), "/epoch_", work.epoch());
  TF_RETURN_IF_ERROR(RemoveAll(work_dir));
  TF_RETURN_IF_ERROR(MakeDirs(work_dir));
  TF_RETURN_IF_ERROR(
      WriteFileAtomic(work_dir + "/params.json", Dump(ParamsToJson(work.params()))));
  nlohmann::json workload = nlohmann::json::object();
  workload["name"] = work.workload().name();
  workload["dtype"] = work.workload().dtype();
  workload["dims"] = nlohmann::json::object();
  for (const auto& [k, v] : work.workload().dims()) workload["dims"][k] = v;
  TF_RETURN_IF_ERROR(WriteFileAtomic(work_dir + "/workload.json", Dump(workload)));

  auto cancelled = [&] {
    return absl::CancelledError(absl::StrCat("evaluation of ", work.sweep_id(),
                                             " round ", work.round_id(),
                                             " cancelled (lease revoked)"));
  };
  // A stage that could not even start: the board's own program missing is
  // the board's fault; the operator's program missing is the variant's.
  auto start_failure = [&](const absl::Status& s) -> absl::StatusOr<Evaluation> {
    if (from_bin) return s;
    result.set_outcome(v1::OUTCOME_BUILD_FAILED);
    result.set_detail(std::string(s.message()));
    return eval;
  };

  // build
  absl::StatusOr<Stage> build = RunStage(*command, work_dir, "build", {}, seed, cancel);
  if (!build.ok()) return start_failure(build.status());
  result.set_build_s(absl::ToDoubleSeconds(build->result.wall));
  if (build->result.cancelled) return cancelled();
  if (build->result.timed_out) {
    result.set_outcome(v1::OUTCOME_BUILD_FAILED);
    result.set_detail(absl::StrCat("build timed out after ",
                                   absl::FormatDuration(options_.stage_timeout)));
    return eval;
  }
  if (!StageOk(build->result)) {
    result.set_outcome(v1::OUTCOME_BUILD_FAILED);
    result.set_detail(StageFailure("build", build->result));
    return eval;
  }

  // reference
  absl::StatusOr<Stage> ref = RunStage(*command, work_dir, "reference", {}, seed, cancel);
  if (!ref.ok()) return start_failure(ref.status());
  if (ref->result.cancelled) return cancelled();
  if (ref->result.timed_out) {
    result.set_outcome(v1::OUTCOME_RUN_TIMEOUT);
    result.set_detail(absl::StrCat("reference timed out after ",
                                   absl::FormatDuration(options_.stage_timeout)));
    return eval;
  }
  if (!StageOk(ref->result)) {
    result.set_outcome(v1::OUTCOME_RUN_CRASHED);
    result.set_detail(StageFailure("reference", ref->result));
    return eval;
  }

  // run
  const v1::MeasurementPolicy& policy = work.measurement();
  int warmup = policy.warmup(), samples = policy.samples();
  if (warmup == 0 && samples == 0) {
    warmup = kDefaultWarmup;
    samples = kDefaultSamples;
  }
  warmup = std::clamp(warmup, 0, kMaxWarmup);
  samples = std::clamp(samples <= 0 ? kDefaultSamples : samples, 1, kMaxSamples);
  absl::StatusOr<Stage> run = RunStage(
      *command, work_dir, "run",
      {"--samples", absl::StrCat(samples), "--warmup", absl::StrCat(warmup),
       "--delay_ms", absl::StrCat(absl::ToInt64Milliseconds(options_.run_delay))},
      seed, cancel);
  if (!run.ok()) return start_failure(run.status());
  result.set_run_s(absl::ToDoubleSeconds(run->result.wall));
  if (run->result.cancelled) return cancelled();
  if (run->result.timed_out) {
    result.set_outcome(v1::OUTCOME_RUN_TIMEOUT);
    result.set_detail(absl::StrCat("run did not finish within ",
                                   absl::FormatDuration(options_.stage_timeout),
                                   "; its process group was killed"));
    return eval;
  }
  if (!StageOk(run->result)) {
    result.set_outcome(v1::OUTCOME_RUN_CRASHED);
    result.set_detail(StageFailure("run", run->result));
    return eval;
  }

  // precision: the farm decides, from the files.
  *result.mutable_precision() =
      ComparePrecision(run->out_dir + "/output.bin", ref->out_dir + "/reference.bin",
                       op.tolerances());
  if (!result.precision().passed()) {
    result.set_outcome(v1::OUTCOME_PRECISION_FAILED);
    result.set_detail(absl::StrCat("precision: ", result.precision().detail()));
    return eval;
  }

  // timing
  absl::StatusOr<std::vector<double>> timing =
      ReadTimingSamples(run->out_dir + "/timing_us.txt");
  if (!timing.ok()) {
    result.set_outcome(v1::OUTCOME_RUN_CRASHED);
    result.set_detail(absl::StrCat("run wrote no usable timing: ",
                                   timing.status().message()));
    return eval;
  }
  if (timing->size() != static_cast<size_t>(warmup + samples)) {
    result.set_outcome(v1::OUTCOME_RUN_CRASHED);
    result.set_detail(absl::StrCat("run wrote ", timing->size(),
                                   " timing samples, expected warmup ", warmup,
                                   " + samples ", samples));
    return eval;
  }
  *result.mutable_measurement() = Summarize(
      *std::move(timing), warmup, /*simulated=*/true,
      absl::StrCat("warmup=", warmup, " samples=", samples,
                   " median/p20/p80 of samples; simulated by the ", chip_.name,
                   " model (seed ", seed, "), not measured on hardware",
                   policy.flush_cache() ? "; flush_cache has no effect on sim" : ""));

  // profile: a failure here keeps the measurement.
  absl::StatusOr<Stage> prof = RunStage(*command, work_dir, "profile", {}, seed, cancel);
  if (!prof.ok()) return start_failure(prof.status());
  if (prof->result.cancelled) return cancelled();
  if (!StageOk(prof->result)) {
    result.set_outcome(v1::OUTCOME_PROFILE_FAILED);
    result.set_detail(prof->result.timed_out
                          ? absl::StrCat("profile timed out after ",
                                         absl::FormatDuration(options_.stage_timeout))
                          : StageFailure("profile", prof->result));
    return eval;
  }
  absl::StatusOr<v1::ProfileBundle> bundle = ReadBundle(prof->out_dir);
  if (!bundle.ok()) {
    result.set_outcome(v1::OUTCOME_PROFILE_FAILED);
    result.set_detail(absl::StrCat("profile: ", bundle.status().message()));
    return eval;
  }
  const std::string bundle_id =
      absl::StrCat(SafeComponent(work.sweep_id()), ".r", work.round_id(), ".e",
                   work.epoch(), ".", SafeComponent(options_.board_id));
  bundle->set_bundle_id(bundle_id);
  bundle->set_sweep_id(work.sweep_id());
  bundle->set_round_id(work.round_id());
  bundle->set_epoch(work.epoch());
  bundle->set_board_id(info_.board_id());
  bundle->set_board_kind(kKind);
  bundle->set_chip(chip_.name);
  bundle->set_simulated(true);
  bundle->set_profiler("msprof");
  *bundle->mutable_measurement() = result.measurement();
  *bundle->mutable_capabilities() = info_.capabilities();
  *bundle->mutable_params() = work.params();
  bundle->set_created_unix_ms(absl::ToUnixMillis(absl::Now()));
  result.set_bundle_id(bundle_id);
  result.set_outcome(v1::OUTCOME_OK);
  result.set_detail(absl::StrCat("ok: median ", result.measurement().median_us(),
                                 " us (simulated)"));
  eval.bundle = *std::move(bundle);
  return eval;
}

}  // namespace

std::unique_ptr<Board> NewSimBoard(SimBoardOptions options) {
  return std::make_unique<SimBoard>(std::move(options));
}

}  // namespace tunefarm
