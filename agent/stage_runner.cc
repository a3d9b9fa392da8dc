#include "agent/stage_runner.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <future>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/measurement.h"
#include "agent/precision.h"
#include "common/digest.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/params.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace tunefarm {

std::vector<std::string> StageArgv(std::vector<std::string> command,
                                   const std::string& work_dir,
                                   const std::string& stage,
                                   const std::string& out_dir, uint64_t seed) {
  for (std::string a : {std::string("--stage"), stage, std::string("--params"),
                        work_dir + "/params.json", std::string("--workload"),
                        work_dir + "/workload.json", std::string("--out"),
                        out_dir, std::string("--seed"), absl::StrCat(seed)}) {
    command.push_back(std::move(a));
  }
  return command;
}

namespace {

namespace fs = std::filesystem;

constexpr int64_t kMaxBundleBytes = 64 << 20;
// A program keyed by its bytes for the reference cache: larger ones are not
// cached (hashing them would cost more than their reference stage).
constexpr uintmax_t kMaxProgramBytes = 256u << 20;

std::string Dump(const nlohmann::json& j) {
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

struct Stage {
  std::string out_dir;
  ProcessResult result;
};

// The stage contract's exit code for an internal error (docs/operators.md).
constexpr int kStageExitInternal = 3;

absl::Duration StageTimeout(const StagePlan& plan, const std::string& stage) {
  const bool setup = stage == "build" || stage == "reference";
  return setup && plan.setup_timeout > absl::ZeroDuration() ? plan.setup_timeout
                                                            : plan.timeout;
}

// Runs `stage` of plan.command; its outputs go to <work_dir>/<out_name>
// (default: the stage's name), its logs to <work_dir>/logs/<out_name>.*.
absl::StatusOr<Stage> RunOne(const StagePlan& plan, const std::string& stage,
                             std::vector<std::string> extra_args,
                             const std::atomic<bool>& cancel,
                             const std::string& out_name = "") {
  const std::string name = out_name.empty() ? stage : out_name;
  Stage s;
  s.out_dir = absl::StrCat(plan.work_dir, "/", name);
  TF_RETURN_IF_ERROR(MakeDirs(s.out_dir));
  TF_RETURN_IF_ERROR(MakeDirs(plan.work_dir + "/logs"));
  ProcessSpec spec;
  spec.argv =
      StageArgv(plan.command, plan.work_dir, stage, s.out_dir, plan.seed);
  for (std::string& a : extra_args) spec.argv.push_back(std::move(a));
  spec.cwd = plan.work_dir;
  spec.env = plan.env;
  spec.stdout_path = absl::StrCat(plan.work_dir, "/logs/", name, ".stdout");
  spec.stderr_path = absl::StrCat(plan.work_dir, "/logs/", name, ".stderr");
  spec.timeout = StageTimeout(plan, stage);
  spec.cancel = &cancel;
  TF_ASSIGN_OR_RETURN(s.result, plan.runner != nullptr ? plan.runner->Run(spec)
                                                       : RunProcess(spec));
  return s;
}

}  // namespace

std::string SafeComponent(const std::string& id) {
  std::string out;
  for (char c : id.substr(0, 128)) {
    const bool ok = absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
                    c == '.' || c == '_' || c == '-';
    out.push_back(ok ? c : '_');
  }
  if (out.empty() || out == "." || out == "..") out = "_" + out;
  return out;
}

std::string WorkDirFor(const std::string& root, const v1::WorkItem& work) {
  return absl::StrCat(root, "/", SafeComponent(work.sweep_id()), "/round_",
                      work.round_id(), "/epoch_", work.epoch());
}

absl::Status PrepareWorkDir(const std::string& work_dir,
                            const v1::WorkItem& work, const ParamMap* params) {
  TF_RETURN_IF_ERROR(RemoveAll(work_dir));
  TF_RETURN_IF_ERROR(MakeDirs(work_dir));
  TF_RETURN_IF_ERROR(WriteFileAtomic(
      work_dir + "/params.json",
      Dump(ParamsToJson(params != nullptr ? *params : work.params()))));
  nlohmann::json workload = nlohmann::json::object();
  workload["name"] = work.workload().name();
  workload["dtype"] = work.workload().dtype();
  workload["dims"] = nlohmann::json::object();
  for (const auto& [k, v] : work.workload().dims()) workload["dims"][k] = v;
  return WriteFileAtomic(work_dir + "/workload.json", Dump(workload));
}

void ResolvePolicy(const v1::MeasurementPolicy& policy, int* warmup,
                   int* samples) {
  const ResolvedPolicy r = ResolveMeasurementPolicy(policy);
  *warmup = r.warmup;
  *samples = r.samples;
}

bool StageOk(const ProcessResult& r) {
  return !r.timed_out && !r.cancelled && r.term_signal == 0 && r.exit_code == 0;
}

std::string StageFailure(const std::string& stage, const ProcessResult& r) {
  std::string what = r.term_signal != 0
                         ? absl::StrCat("killed by signal ", r.term_signal,
                                        " (", SignalName(r.term_signal), ")")
                         : absl::StrCat("exited with code ", r.exit_code);
  std::string tail(absl::StripTrailingAsciiWhitespace(r.stderr_tail));
  return absl::StrCat(stage, " ", what, tail.empty() ? "" : ": ", tail);
}

absl::StatusOr<std::string> ReferenceCacheEntry(
    const BuildRequest& request, const std::string& work_dir, uint64_t seed,
    const std::string& cache_dir, const std::atomic<bool>& cancel) {
  absl::StatusOr<std::string> workload = ReadFile(work_dir + "/workload.json");
  if (!workload.ok()) return std::string();
  absl::StatusOr<std::string> key =
      SharedBuildKey(request, {*workload, absl::StrCat(seed)}, cancel);
  if (cancel.load()) {
    return absl::CancelledError("cancelled while keying the reference");
  }
  if (!key.ok()) return std::string();
  return absl::StrCat(cache_dir, "/reference/", *key);
}

absl::StatusOr<std::string> CommandReferenceCacheEntry(
    const std::vector<std::string>& command, const std::string& work_dir,
    uint64_t seed, const std::string& cache_dir,
    const std::atomic<bool>& cancel) {
  if (command.empty() || cache_dir.empty()) return std::string();
  BuildRequest request;
  request.compiler = command[0];
  request.cache_dir = cache_dir;
  std::error_code ec;
  for (size_t i = 1; i < command.size(); ++i) {
    const std::string& arg = command[i];
    if (!arg.empty() && arg[0] == '/' && fs::is_regular_file(arg, ec)) {
      request.sources.push_back(arg);
    } else {
      request.flags.push_back(arg);
    }
  }
  if (!request.sources.empty()) {
    return ReferenceCacheEntry(request, work_dir, seed, cache_dir, cancel);
  }
  // No script argument: the program is command[0] itself (the sim board's
  // tunefarm-sim-matmul), keyed by its bytes.
  if (command[0].empty() || command[0][0] != '/' ||
      !fs::is_regular_file(command[0], ec) ||
      fs::file_size(command[0], ec) > kMaxProgramBytes || ec) {
    return std::string();
  }
  absl::StatusOr<std::string> program = ReadFile(command[0]);
  absl::StatusOr<std::string> workload = ReadFile(work_dir + "/workload.json");
  if (!program.ok() || !workload.ok()) return std::string();
  std::vector<std::pair<std::string, std::string>> fields = {
      {"program", command[0]},
      {"content", *program},
      {"workload", *workload},
      {"seed", absl::StrCat(seed)}};
  for (const std::string& f : request.flags) fields.emplace_back("arg", f);
  return absl::StrCat(cache_dir, "/reference/",
                      FieldsDigest(fields).substr(0, 40));
}

void PublishReference(const std::string& reference_bin,
                      const std::string& entry) {
  std::error_code ec;
  const std::string tmp =
      absl::StrCat(entry, "/.reference.bin.", ::getpid(), ".",
                   std::hash<std::string>{}(reference_bin));
  fs::create_directories(entry, ec);
  if (!ec) fs::copy_file(reference_bin, tmp, ec);
  if (!ec) fs::rename(tmp, entry + "/reference.bin", ec);
  if (ec) {
    fs::remove(tmp, ec);
    spdlog::warn("reference not cached in {}: {}", entry, ec.message());
  }
}

absl::StatusOr<v1::ProfileBundle> ReadFilesIntoBundle(const std::string& dir) {
  std::error_code ec;
  std::vector<std::string> files;
  for (fs::recursive_directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->is_regular_file(ec) && !it->is_symlink(ec)) {
      files.push_back(fs::relative(it->path(), dir, ec).string());
    }
  }
  if (ec) {
    return absl::NotFoundError(
        absl::StrCat("cannot walk ", dir, ": ", ec.message()));
  }
  std::sort(files.begin(), files.end());
  v1::ProfileBundle bundle;
  int64_t total = 0;
  for (const std::string& f : files) {
    TF_ASSIGN_OR_RETURN(std::string content, ReadFile(dir + "/" + f));
    total += static_cast<int64_t>(content.size());
    if (total > kMaxBundleBytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("profile files exceed ", kMaxBundleBytes, " bytes"));
    }
    v1::ProfileFile* pf = bundle.add_files();
    pf->set_path(f);
    pf->set_content(std::move(content));
  }
  return bundle;
}

absl::StatusOr<bool> MeasureRunStage(const StagePlan& plan,
                                     const v1::WorkItem& work,
                                     const std::string& reference_bin,
                                     const std::atomic<bool>& cancel,
                                     v1::RoundResult* result) {
  const ResolvedPolicy policy = ResolveMeasurementPolicy(work.measurement());
  const bool ab =
      policy.ab && work.has_reference() && plan.no_reference_reason.empty();
  StagePlan parent = plan;
  if (ab) {
    parent.work_dir = plan.work_dir + "/parent";
    if (!plan.reference_command.empty()) {
      parent.command = plan.reference_command;
    }
    TF_RETURN_IF_ERROR(
        PrepareWorkDir(parent.work_dir, work, &work.reference_params()));
  }
  std::string note;
  if (!work.has_reference()) {
    note = "no parent to compare with (baseline)";
  } else if (!policy.ab) {
    note = absl::StrCat("parent round ", work.reference_round(),
                        " not timed here (independent mode)");
  } else if (!plan.no_reference_reason.empty()) {
    note = absl::StrCat("parent round ", work.reference_round(),
                        " not timed here: ", plan.no_reference_reason);
  }
  if (plan.pass_flush_cache) {
    note = absl::StrCat(note, note.empty() ? "" : "; ",
                        work.measurement().flush_cache()
                            ? "caches flushed before each sample"
                            : "warm caches");
  }
  if (!plan.policy_note.empty()) {
    note = absl::StrCat(note, note.empty() ? "" : "; ", plan.policy_note);
  }

  // A block that fails records why here and stops MeasureBlocks.
  bool failed = false;
  // The checked block's output is compared on a host thread while the board
  // runs the blocks after it (a large output takes tens of ms to read and
  // compare). A mismatch stops the blocks at the next one and takes
  // precedence over anything a later block did.
  std::future<v1::PrecisionCheck> check;
  auto precision_failed = [&](bool wait) {
    if (!check.valid() || (!wait && check.wait_for(std::chrono::seconds(0)) !=
                                        std::future_status::ready)) {
      return false;
    }
    *result->mutable_precision() = check.get();
    if (result->precision().passed()) return false;
    failed = true;
    result->set_outcome(v1::OUTCOME_PRECISION_FAILED);
    result->set_detail(
        absl::StrCat("precision: ", result->precision().detail()));
    return true;
  };
  auto fail = [&](v1::Outcome outcome, std::string detail) {
    if (!precision_failed(/*wait=*/true)) {
      failed = true;
      result->set_outcome(outcome);
      result->set_detail(std::move(detail));
    }
    return absl::AbortedError("block failed");
  };
  double run_s = 0, timed_us = 0;
  BlockRunner run_block =
      [&](bool reference, int index, int warmup,
          int samples) -> absl::StatusOr<std::vector<double>> {
    if (precision_failed(/*wait=*/false)) {
      return absl::AbortedError("block failed");
    }
    const StagePlan& p = reference ? parent : plan;
    std::vector<std::string> args = {"--samples", absl::StrCat(samples),
                                     "--warmup", absl::StrCat(warmup)};
    if (plan.pass_flush_cache) {
      args.push_back("--flush_cache");
      args.push_back(work.measurement().flush_cache() ? "1" : "0");
    }
    const bool checked = !reference && index == 0;
    if (plan.pass_output_flag) {
      args.push_back("--output");
      args.push_back(checked ? "1" : "0");
    }
    for (const std::string& a : plan.run_extra_args) args.push_back(a);
    if (plan.block_args) {
      for (std::string& a : plan.block_args(reference, index)) {
        args.push_back(std::move(a));
      }
    }
    const std::string what = reference
                                 ? absl::StrCat("parent variant (round ",
                                                work.reference_round(), ") run")
                                 : std::string("run");
    absl::StatusOr<Stage> run =
        RunOne(p, "run", args, cancel,
               index == 0 ? std::string("run") : absl::StrCat("run_", index));
    if (!run.ok()) {
      if (!plan.program_is_variant) return run.status();
      return fail(v1::OUTCOME_BUILD_FAILED,
                  std::string(run.status().message()));
    }
    run_s += absl::ToDoubleSeconds(run->result.wall);
    if (run->result.cancelled) {
      return absl::CancelledError(
          absl::StrCat("evaluation of ", work.sweep_id(), " round ",
                       work.round_id(), " cancelled (lease revoked)"));
    }
    if (run->result.timed_out) {
      return fail(v1::OUTCOME_RUN_TIMEOUT,
                  absl::StrCat(what, " did not finish within ",
                               absl::FormatDuration(plan.timeout),
                               "; its process group was killed"));
    }
    if (!StageOk(run->result)) {
      return fail(v1::OUTCOME_RUN_CRASHED, StageFailure(what, run->result));
    }
    if (checked) {
      check = std::async(std::launch::async,
                         [output = run->out_dir + "/output.bin", &reference_bin,
                          tolerances = work.operator_().tolerances()] {
                           return ComparePrecision(output, reference_bin,
                                                   tolerances);
                         });
    }
    absl::StatusOr<std::vector<double>> timing =
        ReadTimingSamples(run->out_dir + "/timing_us.txt");
    if (!timing.ok()) {
      return fail(v1::OUTCOME_RUN_CRASHED,
                  absl::StrCat(what, " wrote no usable timing: ",
                               timing.status().message()));
    }
    if (timing->size() != static_cast<size_t>(warmup + samples)) {
      return fail(v1::OUTCOME_RUN_CRASHED,
                  absl::StrCat(what, " wrote ", timing->size(),
                               " timing samples, expected warmup ", warmup,
                               " + samples ", samples));
    }
    for (double us : *timing) timed_us += us;
    timing->erase(timing->begin(), timing->begin() + warmup);
    return timing;
  };
  absl::StatusOr<v1::Measurement> m =
      MeasureBlocks(policy, ab, run_block, plan.simulated, note);
  result->set_run_s(run_s);
  result->set_timed_s(timed_us / 1e6);
  if (precision_failed(/*wait=*/true)) return false;
  if (!m.ok()) {
    if (failed) return false;
    return m.status();
  }
  if (ab) m->set_reference_round(work.reference_round());
  *result->mutable_measurement() = *std::move(m);
  return true;
}

absl::Status UseParentVariant(
    const absl::StatusOr<BuildRequest>& parent_request,
    const std::atomic<bool>& cancel, StagePlan* plan) {
  absl::StatusOr<BuildResult> parent =
      parent_request.ok()
          ? BuildVariant(*parent_request, cancel)
          : absl::StatusOr<BuildResult>(parent_request.status());
  if (cancel.load() || (!parent.ok() && absl::IsCancelled(parent.status()))) {
    return absl::CancelledError("cancelled while building the parent variant");
  }
  if (parent.ok() && parent->ok) {
    plan->reference_command = {parent->binary};
  } else {
    plan->no_reference_reason =
        parent.ok() ? "the parent variant did not build here"
                    : absl::StrCat("the parent variant did not build here: ",
                                   parent.status().message());
  }
  return absl::OkStatus();
}

absl::StatusOr<Evaluation> RunStages(const StagePlan& plan,
                                     const v1::WorkItem& work,
                                     const std::atomic<bool>& cancel,
                                     Evaluation eval) {
  v1::RoundResult& result = eval.result;
  auto cancelled = [&] {
    return absl::CancelledError(absl::StrCat("evaluation of ", work.sweep_id(),
                                             " round ", work.round_id(),
                                             " cancelled (lease revoked)"));
  };
  auto timeout = [&](const std::string& stage, const std::string& what) {
    result.set_outcome(v1::OUTCOME_RUN_TIMEOUT);
    result.set_detail(
        absl::StrCat(what, " did not finish within ",
                     absl::FormatDuration(StageTimeout(plan, stage)),
                     "; its process group was killed"));
    return eval;
  };
  // Runs a stage; a program that cannot start is the variant's fault when
  // plan.program_is_variant (then `outcome_set` is true and eval holds it).
  bool outcome_set = false;
  auto run_one = [&](const std::string& stage,
                     std::vector<std::string> args) -> absl::StatusOr<Stage> {
    absl::StatusOr<Stage> s = RunOne(plan, stage, std::move(args), cancel);
    if (!s.ok() && plan.program_is_variant) {
      result.set_outcome(v1::OUTCOME_BUILD_FAILED);
      result.set_detail(std::string(s.status().message()));
      outcome_set = true;
    }
    return s;
  };

  if (plan.run_build_stage) {
    absl::StatusOr<Stage> build = run_one("build", {});
    if (outcome_set) return eval;
    TF_RETURN_IF_ERROR(build.status());
    if (result.build_s() == 0) {
      result.set_build_s(absl::ToDoubleSeconds(build->result.wall));
    }
    if (build->result.cancelled) return cancelled();
    if (build->result.timed_out) return timeout("build", "build check");
    if (!StageOk(build->result)) {
      // A refusal (the program's own parameter check, a compile error) is
      // the variant's; a signal or an internal error (exit 3) is a crash.
      const bool crashed = build->result.term_signal != 0 ||
                           build->result.exit_code == kStageExitInternal;
      result.set_outcome(crashed ? v1::OUTCOME_RUN_CRASHED
                                 : v1::OUTCOME_BUILD_FAILED);
      result.set_detail(StageFailure("build check", build->result));
      return eval;
    }
  }

  std::string reference_bin;
  std::error_code ec;
  if (!plan.reference_cache.empty() &&
      fs::is_regular_file(plan.reference_cache + "/reference.bin", ec)) {
    reference_bin = plan.reference_cache + "/reference.bin";
  } else {
    absl::StatusOr<Stage> ref = run_one("reference", {});
    if (outcome_set) return eval;
    TF_RETURN_IF_ERROR(ref.status());
    if (ref->result.cancelled) return cancelled();
    if (ref->result.timed_out) return timeout("reference", "reference");
    if (!StageOk(ref->result)) {
      result.set_outcome(v1::OUTCOME_RUN_CRASHED);
      result.set_detail(StageFailure("reference", ref->result));
      return eval;
    }
    reference_bin = ref->out_dir + "/reference.bin";
    if (!plan.reference_cache.empty()) {
      PublishReference(reference_bin, plan.reference_cache);
    }
  }

  TF_ASSIGN_OR_RETURN(bool measured, MeasureRunStage(plan, work, reference_bin,
                                                     cancel, &result));
  if (!measured) return eval;

  if (plan.no_profile) {
    result.set_outcome(v1::OUTCOME_OK);
    result.set_detail(absl::StrCat("ok: median ",
                                   result.measurement().median_us(), " us",
                                   plan.simulated ? " (simulated)" : ""));
    return eval;
  }

  // profile: a failure here keeps the measurement.
  absl::StatusOr<v1::ProfileBundle> bundle;
  if (plan.profile) {
    v1::ProfileBundle files;
    std::string failure;
    TF_RETURN_IF_ERROR(plan.profile(cancel, &result, &files, &failure));
    if (cancel.load()) return cancelled();
    if (!failure.empty()) {
      result.set_outcome(v1::OUTCOME_PROFILE_FAILED);
      result.set_detail(absl::StrCat("profile: ", failure));
      return eval;
    }
    bundle = std::move(files);
  } else {
    int warmup = 0, samples = 0;
    ResolvePolicy(work.measurement(), &warmup, &samples);
    std::vector<std::string> prof_args = {"--samples", absl::StrCat(samples),
                                          "--warmup", absl::StrCat(warmup)};
    if (plan.pass_flush_cache) {
      prof_args.push_back("--flush_cache");
      prof_args.push_back(work.measurement().flush_cache() ? "1" : "0");
    }
    for (const std::string& a : plan.run_extra_args) prof_args.push_back(a);
    absl::StatusOr<Stage> prof = run_one("profile", prof_args);
    if (outcome_set) return eval;
    TF_RETURN_IF_ERROR(prof.status());
    if (prof->result.cancelled) return cancelled();
    if (!StageOk(prof->result)) {
      result.set_outcome(v1::OUTCOME_PROFILE_FAILED);
      result.set_detail(prof->result.timed_out
                            ? absl::StrCat("profile timed out after ",
                                           absl::FormatDuration(plan.timeout))
                            : StageFailure("profile", prof->result));
      return eval;
    }
    bundle = plan.read_profile ? plan.read_profile(prof->out_dir)
                               : ReadFilesIntoBundle(prof->out_dir);
    if (!bundle.ok()) {
      result.set_outcome(v1::OUTCOME_PROFILE_FAILED);
      result.set_detail(absl::StrCat("profile: ", bundle.status().message()));
      return eval;
    }
  }
  const std::string bundle_id =
      absl::StrCat(SafeComponent(work.sweep_id()), ".r", work.round_id(), ".e",
                   work.epoch(), ".", SafeComponent(plan.board_id));
  bundle->set_bundle_id(bundle_id);
  bundle->set_sweep_id(work.sweep_id());
  bundle->set_round_id(work.round_id());
  bundle->set_epoch(work.epoch());
  bundle->set_board_id(plan.board_id);
  bundle->set_board_kind(plan.board_kind);
  bundle->set_chip(plan.chip);
  bundle->set_simulated(plan.simulated);
  bundle->set_profiler(plan.profiler);
  *bundle->mutable_measurement() = result.measurement();
  *bundle->mutable_capabilities() = plan.capabilities;
  *bundle->mutable_params() = work.params();
  bundle->set_created_unix_ms(absl::ToUnixMillis(absl::Now()));
  result.set_bundle_id(bundle_id);
  result.set_outcome(v1::OUTCOME_OK);
  result.set_detail(absl::StrCat("ok: median ",
                                 result.measurement().median_us(), " us",
                                 plan.simulated ? " (simulated)" : ""));
  eval.bundle = *std::move(bundle);
  return eval;
}

}  // namespace tunefarm
