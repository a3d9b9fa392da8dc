#include "agent/ascend_board.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <mutex>
#include <optional>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "agent/ascend_errors.h"
#include "agent/measurement.h"
#include "agent/precision.h"
#include "agent/process_runner.h"
#include "agent/stage_runner.h"
#include "agent/variant_runner.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace tunefarm {
namespace {

namespace fs = std::filesystem;

constexpr char kKind[] = "ascend";
constexpr int64_t kMaxBundleBytes = 64 << 20;
constexpr size_t kClassifyBytes = 256 << 10;

const char* const kMetricGroups[] = {
    "PipeUtilization", "ArithmeticUtilization", "Memory",  "MemoryL0",
    "MemoryUB",        "ResourceConflictRatio", "L2Cache", "MemoryAccess"};

// POSIX single-quoting, for msprof's --application string (msprof splits it
// itself). The tokens are our own paths and the manifest's argv; parameters
// never appear here (they travel in params.json).
std::string ShellQuote(const std::string& s) {
  return absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "'\\''"}}), "'");
}

std::string Tail(const std::string& path) {
  absl::StatusOr<std::string> s = ReadFile(path);
  if (!s.ok()) return "";
  if (s->size() > kClassifyBytes) return s->substr(s->size() - kClassifyBytes);
  return *std::move(s);
}

// Adds every regular file under `root`/`sub` to `bundle`, paths relative to
// `root`.
absl::Status AddTree(const std::string& root, const std::string& sub,
                     v1::ProfileBundle* bundle, int64_t* total) {
  std::error_code ec;
  std::vector<std::string> files;
  const fs::path base = fs::path(root) / sub;
  if (fs::is_regular_file(base, ec)) {
    files.push_back(sub);
  } else {
    for (fs::recursive_directory_iterator it(base, ec), end; !ec && it != end;
         it.increment(ec)) {
      if (it->is_regular_file(ec) && !it->is_symlink(ec)) {
        files.push_back(fs::relative(it->path(), root, ec).string());
      }
    }
  }
  if (ec)
    return absl::NotFoundError(
        absl::StrCat("cannot walk ", base.string(), ": ", ec.message()));
  std::sort(files.begin(), files.end());
  for (const std::string& f : files) {
    TF_ASSIGN_OR_RETURN(std::string content, ReadFile(root + "/" + f));
    *total += static_cast<int64_t>(content.size());
    if (*total > kMaxBundleBytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat("profile files exceed ", kMaxBundleBytes, " bytes"));
    }
    v1::ProfileFile* pf = bundle->add_files();
    pf->set_path(f);
    pf->set_content(std::move(content));
  }
  return absl::OkStatus();
}

// Directories under `root` (recursively, at most `depth` levels) whose name
// satisfies `match`, relative to root, sorted.
template <typename Pred>
std::vector<std::string> FindDirs(const std::string& root, int depth,
                                  Pred match) {
  std::vector<std::string> out;
  std::error_code ec;
  fs::recursive_directory_iterator it(root, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    if (it.depth() >= depth) it.disable_recursion_pending();
    if (it->is_directory(ec) && !it->is_symlink(ec) &&
        match(it->path().filename().string(), it->path())) {
      out.push_back(fs::relative(it->path(), root, ec).string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct Child {
  std::string out_dir;
  std::string stdout_path, stderr_path;
  ProcessResult result;
};

class AscendBoardImpl : public Board {
 public:
  AscendBoardImpl(AscendBoardOptions options, NpuChip chip, int device_id)
      : options_(std::move(options)),
        chip_(std::move(chip)),
        device_id_(device_id) {
    spec_ = AscendChipSpecFor(chip_.name);
    v1::BoardInfo info;
    info.set_board_id(absl::StrCat(options_.agent_id, "/ascend", device_id_));
    info.set_agent_id(options_.agent_id);
    info.set_node(options_.node);
    info.set_kind(kKind);
    info.set_chip(chip_.name);
    auto& labels = *info.mutable_labels();
    for (const auto& [k, v] : options_.labels) labels[k] = v;
    labels["npu_id"] = absl::StrCat(chip_.npu_id);
    labels["chip_id"] = absl::StrCat(chip_.chip_id);
    labels["device_id"] = absl::StrCat(device_id_);
    if (!chip_.bus_id.empty()) labels["bus_id"] = chip_.bus_id;
    if (!spec_.family.empty()) labels["family"] = spec_.family;
    *info.mutable_capabilities() = AscendCapabilities(spec_);
    auto& extra = *info.mutable_capabilities()->mutable_extra();
    if (chip_.has_hbm) extra["hbm_total_mb"] = absl::StrCat(chip_.hbm_total_mb);
    info.set_simulated(false);
    std::string health = absl::StrCat(
        "npu-smi: health ", chip_.health, ", ", chip_.temp_c, " C",
        chip_.has_power ? absl::StrCat(", ", chip_.power_w, " W")
                        : std::string(),
        chip_.has_hbm ? absl::StrCat(", HBM ", chip_.hbm_used_mb, "/",
                                     chip_.hbm_total_mb, " MB")
                      : absl::StrCat(", memory ", chip_.memory_used_mb, "/",
                                     chip_.memory_total_mb, " MB"));
    if (chip_.health == "OK" || chip_.health == "Warning") {
      info.set_state(v1::BOARD_STATE_IDLE);
    } else {
      info.set_state(v1::BOARD_STATE_QUARANTINED);
      health = absl::StrCat("quarantined at discovery: ", health);
      quarantined_ = true;
    }
    StartRunner(&health);
    info.set_health_detail(health);
    Publish(std::move(info));
  }

  v1::BoardInfo info() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return info_;
  }

  void Readmit() override {
    std::lock_guard<std::mutex> lock(mu_);
    consecutive_device_errors_ = 0;
    quarantined_ = false;
    v1::BoardInfo info = info_;
    info.set_state(v1::BOARD_STATE_IDLE);
    info.set_health_detail(absl::StrCat("readmitted; ", info.health_detail()));
    PublishLocked(std::move(info));
  }

  absl::StatusOr<Evaluation> Evaluate(const v1::WorkItem& work,
                                      const std::atomic<bool>& cancel) override;

 private:
  void Publish(v1::BoardInfo info) {
    std::lock_guard<std::mutex> lock(mu_);
    PublishLocked(std::move(info));
  }
  void PublishLocked(v1::BoardInfo info) { info_ = std::move(info); }

  // Counts a device error; quarantines at the threshold. Returns the status
  // Evaluate gives back.
  absl::Status DeviceError(const std::string& stage, const AscendFailure& f) {
    std::lock_guard<std::mutex> lock(mu_);
    ++consecutive_device_errors_;
    std::string what =
        absl::StrCat("ascend device ", device_id_, " (", chip_.name,
                     "): ", stage, ": ", f.summary, ": ", f.evidence);
    if (consecutive_device_errors_ >= options_.quarantine_after &&
        !quarantined_) {
      quarantined_ = true;
      v1::BoardInfo info = info_;
      info.set_state(v1::BOARD_STATE_QUARANTINED);
      info.set_health_detail(
          absl::StrCat("quarantined after ", consecutive_device_errors_,
                       " device errors in a row; last: ", what));
      PublishLocked(std::move(info));
      what = absl::StrCat(what, " (card quarantined)");
    }
    return absl::UnavailableError(what);
  }

  void DeviceOk() {
    std::lock_guard<std::mutex> lock(mu_);
    consecutive_device_errors_ = 0;
  }

  std::vector<std::pair<std::string, std::string>> Env() const {
    const std::string d = absl::StrCat(device_id_);
    return {{"ASCEND_RT_VISIBLE_DEVICES", d}, {"TILE_FWK_DEVICE_ID", d}};
  }

  absl::StatusOr<Child> RunChild(std::vector<std::string> argv,
                                 const std::string& work_dir,
                                 const std::string& name,
                                 const std::string& out_dir,
                                 const std::string& cwd, absl::Duration timeout,
                                 const std::atomic<bool>& cancel) const {
    Child c;
    c.out_dir = out_dir;
    TF_RETURN_IF_ERROR(MakeDirs(out_dir));
    TF_RETURN_IF_ERROR(MakeDirs(work_dir + "/logs"));
    c.stdout_path = absl::StrCat(work_dir, "/logs/", name, ".stdout");
    c.stderr_path = absl::StrCat(work_dir, "/logs/", name, ".stderr");
    ProcessSpec spec;
    spec.argv = std::move(argv);
    spec.cwd = cwd;
    spec.env = Env();
    spec.stdout_path = c.stdout_path;
    spec.stderr_path = c.stderr_path;
    spec.timeout = timeout;
    spec.cancel = &cancel;
    TF_ASSIGN_OR_RETURN(c.result, RunProcess(spec));
    return c;
  }

  absl::StatusOr<std::vector<std::string>> ExpandCommand(
      const v1::OperatorManifest& op) const;

  // The bundle of one profile run, or why there is none.
  absl::StatusOr<v1::ProfileBundle> CollectMsprof(
      const std::string& profile_root,
      const std::vector<std::string>& groups) const;
  absl::StatusOr<v1::ProfileBundle> CollectTorchNpu(
      const std::string& dir) const;
  absl::StatusOr<v1::ProfileBundle> CollectPypto(const std::string& dir) const;

  // The persistent Python runner, when the interpreter and
  // tunefarm-py-runner are found; appends to the board's health text.
  void StartRunner(std::string* health) {
    std::string script =
        options_.py_runner.empty() ? FindPyVariantRunner() : options_.py_runner;
    const std::string python = absl::StrContains(options_.python, '/')
                                   ? options_.python
                                   : FindExecutable(options_.python);
    if (script.empty() || access(script.c_str(), R_OK) != 0 || python.empty() ||
        access(python.c_str(), X_OK) != 0) {
      spdlog::warn(
          "{}: no Python runner ({} / {}); every variant runs one "
          "process per stage",
          absl::StrCat(options_.agent_id, "/ascend", device_id_),
          script.empty() ? "tunefarm-py-runner not found" : script,
          python.empty() ? options_.python + " not found" : python);
      absl::StrAppend(health, "; no Python runner: one process per stage");
      return;
    }
    VariantRunnerOptions ro;
    ro.runner_binary = python;
    ro.runner_args = {script};
    // Python cannot unload a module: one program per runner.
    ro.recycle_after = 1;
    ro.name = absl::StrCat(options_.agent_id, "/ascend", device_id_);
    const std::string root =
        absl::StrCat(options_.work_root, "/ascend", device_id_);
    if (MakeDirs(root).ok()) ro.log_path = root + "/runner.log";
    runner_ = std::make_unique<VariantRunner>(std::move(ro));
    absl::StrAppend(health, "; persistent Python runner ", script);
  }

  // Whether `work` runs in the persistent runner: the board has one, the
  // backend's command is "{python} <program>.py ...", and neither the sweep
  // nor the backend asks for process isolation.
  bool UseRunner(const v1::WorkItem& work) const {
    if (runner_ == nullptr) return false;
    if (work.measurement().isolation() == v1::ISOLATION_PROCESS) return false;
    auto it = work.operator_().backends().find(kKind);
    if (it == work.operator_().backends().end()) return false;
    const auto& command = it->second.command();
    return it->second.isolation() != v1::ISOLATION_PROCESS &&
           command.size() >= 2 && command[0] == "{python}" &&
           absl::EndsWith(command[1], ".py");
  }

  const AscendBoardOptions options_;
  const NpuChip chip_;
  const int device_id_;
  AscendChipSpec spec_;

  mutable std::mutex mu_;
  v1::BoardInfo info_;                 // guarded by mu_
  int consecutive_device_errors_ = 0;  // guarded by mu_
  std::atomic<bool> quarantined_{false};
  std::unique_ptr<VariantRunner> runner_;  // null: one process per stage
};

absl::StatusOr<std::vector<std::string>> AscendBoardImpl::ExpandCommand(
    const v1::OperatorManifest& op) const {
  auto it = op.backends().find(kKind);
  if (it == op.backends().end() || it->second.command().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "operator ", op.name(), " has no command for board kind \"ascend\""));
  }
  std::vector<std::string> argv;
  for (const std::string& part : it->second.command()) {
    if (absl::StrContains(part, "{pkg}") && op.package_dir().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("operator ", op.name(),
                       ": command uses {pkg} but package_dir is empty"));
    }
    std::string expanded = absl::StrReplaceAll(
        part, {{"{python}", options_.python}, {"{pkg}", op.package_dir()}});
    if (expanded.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "operator ", op.name(), ": command argument holds a NUL byte"));
    }
    argv.push_back(std::move(expanded));
  }
  return argv;
}

absl::StatusOr<v1::ProfileBundle> AscendBoardImpl::CollectMsprof(
    const std::string& profile_root,
    const std::vector<std::string>& groups) const {
  v1::ProfileBundle bundle;
  int64_t total = 0;
  for (const std::string& group : groups) {
    const std::string root = profile_root + "/" + group;
    std::vector<std::string> outs =
        FindDirs(root, 3, [](const std::string& name, const fs::path& p) {
          return name == "mindstudio_profiler_output" &&
                 absl::StartsWith(p.parent_path().filename().string(), "PROF_");
        });
    if (outs.empty()) {
      return absl::NotFoundError(absl::StrCat(
          "msprof (", group,
          ") wrote no PROF_*/mindstudio_profiler_output under ", root));
    }
    for (const std::string& o : outs) {
      TF_RETURN_IF_ERROR(
          AddTree(profile_root, group + "/" + o, &bundle, &total));
    }
  }
  return bundle;
}

absl::StatusOr<v1::ProfileBundle> AscendBoardImpl::CollectTorchNpu(
    const std::string& dir) const {
  std::vector<std::string> pts =
      FindDirs(dir, 2, [](const std::string& name, const fs::path&) {
        return absl::EndsWith(name, "_ascend_pt");
      });
  v1::ProfileBundle bundle;
  int64_t total = 0;
  std::error_code ec;
  for (const std::string& pt : pts) {
    const std::string out = pt + "/ASCEND_PROFILER_OUTPUT";
    if (!fs::is_directory(fs::path(dir) / out, ec)) continue;
    TF_RETURN_IF_ERROR(AddTree(dir, out, &bundle, &total));
    for (fs::directory_iterator it(fs::path(dir) / pt, ec), end;
         !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (it->is_regular_file(ec) && absl::StartsWith(name, "profiler_") &&
          absl::EndsWith(name, ".json")) {
        TF_RETURN_IF_ERROR(AddTree(dir, pt + "/" + name, &bundle, &total));
      }
    }
  }
  if (bundle.files().empty()) {
    return absl::NotFoundError(
        absl::StrCat("the torch_npu profiler wrote no "
                     "*_ascend_pt/ASCEND_PROFILER_OUTPUT under ",
                     dir));
  }
  return bundle;
}

absl::StatusOr<v1::ProfileBundle> AscendBoardImpl::CollectPypto(
    const std::string& dir) const {
  std::vector<std::string> outs = FindDirs(
      dir + "/output", 0, [](const std::string& name, const fs::path&) {
        return absl::StartsWith(name, "output_");
      });
  if (outs.empty()) {
    return absl::NotFoundError(
        absl::StrCat("the PyPTO run wrote no output/output_* folder under ",
                     dir, " (is runtime_debug_mode on?)"));
  }
  // Timestamps sort: the newest folder is the last.
  v1::ProfileBundle bundle;
  int64_t total = 0;
  TF_RETURN_IF_ERROR(AddTree(dir, "output/" + outs.back(), &bundle, &total));
  if (bundle.files().empty()) {
    return absl::NotFoundError(
        absl::StrCat("output/", outs.back(), " under ", dir, " is empty"));
  }
  return bundle;
}

absl::StatusOr<Evaluation> AscendBoardImpl::Evaluate(
    const v1::WorkItem& work, const std::atomic<bool>& cancel) {
  if (quarantined_.load()) {
    return absl::FailedPreconditionError(absl::StrCat(
        info().board_id(), " is quarantined (", info().health_detail(),
        "); Readmit() it once the card is checked"));
  }
  Evaluation eval;
  v1::RoundResult& result = eval.result;
  const v1::OperatorManifest& op = work.operator_();
  const uint64_t seed = work.seed();

  absl::StatusOr<std::vector<std::string>> command = ExpandCommand(op);
  if (!command.ok()) {
    result.set_outcome(v1::OUTCOME_BUILD_FAILED);
    result.set_detail(std::string(command.status().message()));
    return eval;
  }
  absl::StatusOr<AscendProfilerPlan> plan = AscendProfilerPlanFor(*command);
  if (!plan.ok()) {
    result.set_outcome(v1::OUTCOME_BUILD_FAILED);
    result.set_detail(
        absl::StrCat("operator ", op.name(), ": ", plan.status().message()));
    return eval;
  }

  const std::string work_dir =
      WorkDirFor(absl::StrCat(options_.work_root, "/ascend", device_id_), work);
  TF_RETURN_IF_ERROR(PrepareWorkDir(work_dir, work));

  // The shared pipeline (agent/stage_runner.h): the program's build stage
  // (it compiles the kernel and launches it once), the host reference, the
  // timed run blocks (A/B: the same command with the parent's parameters,
  // in ABBA order), then the operator's profiler.
  const bool use_runner = UseRunner(work);
  StagePlan stages;
  stages.command = *command;
  if (use_runner) {
    // The runner is the interpreter: the stages name the program itself.
    stages.command.erase(stages.command.begin());
    stages.runner = runner_.get();
    stages.program_is_variant = true;  // a program that cannot be loaded
  }
  stages.work_dir = work_dir;
  stages.seed = seed;
  stages.timeout = options_.run_timeout;
  stages.setup_timeout = options_.precision_timeout;
  stages.env = Env();
  stages.pass_output_flag = true;
  stages.policy_note =
      absl::StrCat("NPU events around each launch, on ", chip_.name, " device ",
                   device_id_, " (ASCEND_RT_VISIBLE_DEVICES=", device_id_, ")",
                   use_runner ? "; in the board's persistent Python runner"
                              : "; one process per stage");
  stages.board_id = info().board_id();
  stages.board_kind = kKind;
  stages.chip = chip_.name;
  stages.profiler = plan->profiler;
  stages.capabilities = info().capabilities();
  stages.no_profile = !options_.profile;
  absl::StatusOr<std::string> reference_entry = CommandReferenceCacheEntry(
      *command, work_dir, seed, options_.cache_dir, cancel);
  if (!reference_entry.ok()) return reference_entry.status();
  stages.reference_cache = *reference_entry;
  // A profiler run that fails on a device error is the board's; any other
  // failure is PROFILE_FAILED with the measurement kept.
  stages.profile = [&](const std::atomic<bool>& cancel_profile,
                       v1::RoundResult* /*measured*/, v1::ProfileBundle* bundle,
                       std::string* failure) -> absl::Status {
    const std::string profile_root = work_dir + "/profile";
    auto run_failed = [&](const std::string& what,
                          const Child& c) -> absl::Status {
      const AscendFailure f = ClassifyAscendFailure(Tail(c.stderr_path) + "\n" +
                                                    Tail(c.stdout_path));
      if (f.fault == AscendFault::kDevice) return DeviceError(what, f);
      *failure =
          c.result.timed_out
              ? absl::StrCat(what, " did not finish within ",
                             absl::FormatDuration(options_.profile_timeout))
              : StageFailure(what, c.result);
      return absl::OkStatus();
    };
    absl::StatusOr<v1::ProfileBundle> collected;
    if (plan->profiler == "msprof") {
      for (const std::string& group : plan->aic_metrics) {
        const std::string out = absl::StrCat(profile_root, "/", group);
        std::vector<std::string> quoted;
        for (const std::string& a :
             StageArgv(*command, work_dir, "profile", out, seed)) {
          quoted.push_back(ShellQuote(a));
        }
        std::vector<std::string> argv = {
            options_.msprof, "--application=" + absl::StrJoin(quoted, " "),
            "--output=" + out, "--aic-metrics=" + group};
        absl::StatusOr<Child> prof =
            RunChild(argv, work_dir, "profile_" + group, out, work_dir,
                     options_.profile_timeout, cancel_profile);
        if (!prof.ok()) {
          *failure = absl::StrCat("msprof: ", prof.status().message());
          return absl::OkStatus();
        }
        if (prof->result.cancelled) return absl::OkStatus();
        if (!StageOk(prof->result)) {
          return run_failed(absl::StrCat("profile (msprof ", group, ")"),
                            *prof);
        }
      }
      collected = CollectMsprof(profile_root, plan->aic_metrics);
    } else {
      TF_ASSIGN_OR_RETURN(
          Child prof,
          RunChild(StageArgv(*command, work_dir, "profile", profile_root, seed),
                   work_dir, "profile", profile_root, profile_root,
                   options_.profile_timeout, cancel_profile));
      if (prof.result.cancelled) return absl::OkStatus();
      if (!StageOk(prof.result)) {
        return run_failed(absl::StrCat("profile (", plan->profiler, ")"), prof);
      }
      collected = plan->profiler == "torch_npu" ? CollectTorchNpu(profile_root)
                                                : CollectPypto(profile_root);
    }
    if (!collected.ok()) {
      *failure = std::string(collected.status().message());
      return absl::OkStatus();
    }
    *bundle = *std::move(collected);
    return absl::OkStatus();
  };
  const int64_t starts = runner_ != nullptr ? runner_->starts() : 0;
  absl::StatusOr<Evaluation> ran = RunStages(stages, work, cancel);
  // A variant that failed inside the runner (a crash, a hang, wrong output,
  // a device error) may have left the interpreter or the device context in
  // any state: the next variant gets a fresh runner. A build refusal, or a
  // profiler (its own process) that failed, leaves both as they were.
  auto recycle = [&] {
    if (use_runner) runner_->Recycle();
  };
  if (!ran.ok()) {
    recycle();
    return ran.status();
  }
  eval = *std::move(ran);
  if (runner_ != nullptr) {
    result.set_runner_starts(static_cast<int32_t>(runner_->starts() - starts));
  }
  // A stage that failed: what its messages say decides whose fault it is
  // (agent/ascend_errors.h). A device error is the board's.
  if (result.outcome() == v1::OUTCOME_RUN_CRASHED ||
      result.outcome() == v1::OUTCOME_BUILD_FAILED ||
      result.outcome() == v1::OUTCOME_RUN_TIMEOUT) {
    const AscendFailure f = ClassifyAscendFailure(result.detail());
    if (f.fault == AscendFault::kDevice) {
      recycle();
      return DeviceError("evaluation", f);
    }
    if (result.outcome() != v1::OUTCOME_RUN_TIMEOUT &&
        (f.fault == AscendFault::kUbOverflow ||
         f.fault == AscendFault::kGridLimit ||
         f.fault == AscendFault::kCompile)) {
      result.set_outcome(v1::OUTCOME_BUILD_FAILED);
      result.set_detail(
          absl::StrCat(f.summary, f.fault == AscendFault::kCompile
                                      ? std::string()
                                      : absl::StrCat(" [", f.evidence, "]")));
    }
  }
  if (result.outcome() != v1::OUTCOME_OK &&
      result.outcome() != v1::OUTCOME_BUILD_FAILED &&
      result.outcome() != v1::OUTCOME_PROFILE_FAILED) {  // profiles: processes
    recycle();
  }
  DeviceOk();
  return eval;
}

}  // namespace

absl::StatusOr<AscendProfilerPlan> AscendProfilerPlanFor(
    const std::vector<std::string>& command) {
  AscendProfilerPlan plan;
  auto value = [&](size_t i, const std::string& flag, std::string* out) {
    if (command[i] == flag && i + 1 < command.size()) {
      *out = command[i + 1];
      return true;
    }
    if (absl::StartsWith(command[i], flag + "=")) {
      *out = command[i].substr(flag.size() + 1);
      return true;
    }
    return false;
  };
  std::string v;
  for (size_t i = 0; i < command.size(); ++i) {
    if (value(i, "--profiler", &v)) {
      if (v != "msprof" && v != "torch_npu" && v != "pypto") {
        return absl::InvalidArgumentError(
            absl::StrCat("ascend command: --profiler \"", v,
                         "\" is not one of msprof, torch_npu, pypto"));
      }
      plan.profiler = v;
    } else if (value(i, "--aic_metrics", &v) || value(i, "--aic-metrics", &v)) {
      std::vector<std::string> groups;
      for (absl::string_view g : absl::StrSplit(v, ',', absl::SkipEmpty())) {
        const std::string group(g);
        if (std::find(std::begin(kMetricGroups), std::end(kMetricGroups),
                      group) == std::end(kMetricGroups)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "ascend command: --aic_metrics group \"", group,
              "\" is not one of ", absl::StrJoin(kMetricGroups, ", ")));
        }
        if (std::find(groups.begin(), groups.end(), group) == groups.end()) {
          groups.push_back(group);
        }
      }
      // PipeUtilization first: compute vs move vs scalar is the first
      // question; later groups answer narrower ones (MemoryUB: UB bandwidth).
      std::stable_partition(
          groups.begin(), groups.end(),
          [](const std::string& g) { return g == "PipeUtilization"; });
      if (groups.empty() || groups[0] != "PipeUtilization") {
        groups.insert(groups.begin(), "PipeUtilization");
      }
      plan.aic_metrics = std::move(groups);
    }
  }
  return plan;
}

std::unique_ptr<Board> NewAscendBoard(const AscendBoardOptions& options,
                                      const NpuChip& chip, int device_id) {
  return std::make_unique<AscendBoardImpl>(options, chip, device_id);
}

absl::StatusOr<std::vector<std::unique_ptr<Board>>> DiscoverAscendBoards(
    const AscendBoardOptions& options) {
  TF_ASSIGN_OR_RETURN(std::string tmp, MakeTempDir("tf-npu-smi"));
  ProcessSpec spec;
  spec.argv = {options.npu_smi, "info"};
  spec.stdout_path = tmp + "/stdout";
  spec.stderr_path = tmp + "/stderr";
  spec.timeout = options.discover_timeout;
  absl::StatusOr<ProcessResult> r = RunProcess(spec);
  absl::StatusOr<std::string> out = ReadFile(tmp + "/stdout");
  (void)RemoveAll(tmp);
  if (!r.ok()) {
    return absl::NotFoundError(absl::StrCat("cannot run ", options.npu_smi,
                                            " info: ", r.status().message()));
  }
  if (!StageOk(*r)) {
    return absl::UnavailableError(StageFailure(options.npu_smi + " info", *r));
  }
  if (!out.ok()) return out.status();
  absl::StatusOr<std::vector<NpuChip>> chips = ParseNpuSmiInfo(*out);
  if (!chips.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(options.npu_smi, ": ", chips.status().message()));
  }
  std::vector<std::unique_ptr<Board>> boards;
  std::vector<int> seen;
  for (size_t i = 0; i < chips->size(); ++i) {
    const NpuChip& chip = (*chips)[i];
    const int dev = chip.device_id >= 0 ? chip.device_id : static_cast<int>(i);
    seen.push_back(dev);
    if (!options.devices.empty() &&
        std::find(options.devices.begin(), options.devices.end(), dev) ==
            options.devices.end()) {
      continue;
    }
    boards.push_back(NewAscendBoard(options, chip, dev));
  }
  for (int d : options.devices) {
    if (std::find(seen.begin(), seen.end(), d) == seen.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ascend device ", d, " is not listed by ", options.npu_smi,
          " info (devices: ", absl::StrJoin(seen, ", "), ")"));
    }
  }
  return boards;
}

}  // namespace tunefarm
