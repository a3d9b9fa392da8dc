#include "agent/cuda_board.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "agent/ncu.h"
#include "agent/process_runner.h"
#include "agent/stage_runner.h"
#include "agent/variant_build.h"
#include "agent/variant_runner.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace tunefarm {
namespace {

namespace fs = std::filesystem;

constexpr char kKind[] = "cuda";
constexpr int64_t kMaxBundleFileBytes = 16 << 20;

std::string ResolveTool(const std::string& configured,
                        const std::string& name) {
  if (!configured.empty()) return configured;
  std::string found = FindExecutable(name);
  // CUDA's installer puts its tools outside PATH.
  return found.empty() ? FindExecutable("/usr/local/cuda/bin/" + name) : found;
}

class CudaBoardImpl : public Board {
 public:
  CudaBoardImpl(const CudaBoardOptions& options, const GpuInfo& gpu,
                const GpuSpec& spec)
      : options_(options), gpu_(gpu), spec_(spec) {
    arch_ = options_.arch.empty() ? NvccArch(spec_.cc_major, spec_.cc_minor)
                                  : options_.arch;
    nvcc_ = ResolveTool(options_.nvcc, "nvcc");
    ncu_ = options_.profile ? ResolveTool(options_.ncu, "ncu") : "";
    local_name_ = absl::StrCat("cuda", gpu_.index);
    info_.set_board_id(absl::StrCat(options_.agent_id, "/", local_name_));
    info_.set_agent_id(options_.agent_id);
    info_.set_node(options_.node);
    info_.set_kind(kKind);
    info_.set_chip(spec_.chip.empty() ? gpu_.name : spec_.chip);
    for (const auto& [k, v] : options_.labels) (*info_.mutable_labels())[k] = v;
    (*info_.mutable_labels())["gpu"] = gpu_.name;
    *info_.mutable_capabilities() = GpuCapabilities(gpu_, spec_);
    (*info_.mutable_capabilities()->mutable_extra())["nvcc_arch"] = arch_;
    info_.set_simulated(false);
    info_.set_state(v1::BOARD_STATE_IDLE);
    info_.set_health_detail(absl::StrCat(
        GpuHealthLine(gpu_), "; nvcc ", nvcc_.empty() ? "NOT FOUND" : nvcc_,
        "; ncu ",
        ncu_.empty()
            ? (options_.profile ? "not found (profiles are evidence gaps)"
                                : "off")
            : ncu_));
    runner_binary_ = options_.runner_binary.empty() ? FindVariantRunnerBinary()
                                                    : options_.runner_binary;
    // A runner that cannot start is the board's problem, never a variant's:
    // without one the board runs one process per stage.
    if (!runner_binary_.empty() && access(runner_binary_.c_str(), X_OK) != 0) {
      spdlog::warn("{}: variant runner {} is not executable", info_.board_id(),
                   runner_binary_);
      runner_binary_.clear();
    }
    if (!runner_binary_.empty()) {
      VariantRunnerOptions ro;
      ro.runner_binary = runner_binary_;
      ro.recycle_after = std::max(1, options_.runner_recycle_after);
      ro.name = info_.board_id();
      const std::string dir = options_.work_root + "/" + local_name_;
      (void)MakeDirs(dir);
      ro.log_path = dir + "/runner.log";
      runner_ = std::make_unique<VariantRunner>(std::move(ro));
    }
    info_.set_health_detail(absl::StrCat(
        info_.health_detail(), "; ",
        runner_ != nullptr ? "persistent runner " + runner_binary_
                           : "no persistent runner: one process per stage"));
  }

  v1::BoardInfo info() const override { return info_; }

  absl::StatusOr<Evaluation> Evaluate(const v1::WorkItem& work,
                                      const std::atomic<bool>& cancel) override;

  // The agent's build/run overlap: builds into the cache, no GPU.
  absl::Status Prefetch(const v1::WorkItem& work,
                        const std::atomic<bool>& cancel) override {
    absl::StatusOr<BuildRequest> req =
        MakeBuildRequest(work.operator_(), work.params(), UseRunner(work));
    if (!req.ok()) return absl::OkStatus();  // Evaluate reports it
    return BuildVariant(*req, cancel).status();
  }

 private:
  // Whether `work` runs in the persistent runner (as CpuBoard::UseRunner).
  bool UseRunner(const v1::WorkItem& work) const {
    if (runner_ == nullptr) return false;
    if (work.measurement().isolation() == v1::ISOLATION_PROCESS) return false;
    auto it = work.operator_().backends().find(kKind);
    return it == work.operator_().backends().end() ||
           it->second.isolation() != v1::ISOLATION_PROCESS;
  }
  absl::StatusOr<BuildRequest> MakeBuildRequest(const v1::OperatorManifest& op,
                                                const ParamMap& params,
                                                bool shared) const;
  // Evaluate without the runner's bookkeeping.
  absl::StatusOr<Evaluation> EvaluateVariant(const v1::WorkItem& work,
                                             const std::atomic<bool>& cancel);
  // ncu profile + CSV exports into <work_dir>/profile; returns the bundle
  // files, or the reason profiling gave no profile.
  void Profile(const std::string& binary, const std::string& work_dir,
               uint64_t seed, const std::atomic<bool>& cancel,
               v1::ProfileBundle* bundle, std::string* gap,
               bool shared_object) const;
  std::vector<std::pair<std::string, std::string>> StageEnv() const {
    return {{"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
            {"CUDA_VISIBLE_DEVICES",
             gpu_.uuid.empty() ? absl::StrCat(gpu_.index) : gpu_.uuid}};
  }

  const CudaBoardOptions options_;
  const GpuInfo gpu_;
  const GpuSpec spec_;
  std::string arch_, nvcc_, ncu_, local_name_, runner_binary_;
  v1::BoardInfo info_;                     // immutable after construction
  std::unique_ptr<VariantRunner> runner_;  // null: no runner binary
};

std::vector<std::string> ExpandFlagsImpl(const std::vector<std::string>& flags,
                                         const std::string& arch) {
  std::vector<std::string> out;
  out.reserve(flags.size());
  // sm_90a's virtual architecture is compute_90a: naming both in one
  // -gencode builds the board's cubin alone, where -arch=sm_90a also runs
  // the front end for compute_90 PTX the board never loads.
  std::string virtual_arch = arch;
  if (absl::StartsWith(virtual_arch, "sm_")) {
    virtual_arch.replace(0, 3, "compute_");
  }
  for (const std::string& f : flags) {
    out.push_back(absl::StrReplaceAll(
        f, {{"{arch}", arch}, {"{virtual_arch}", virtual_arch}}));
  }
  return out;
}

absl::StatusOr<BuildRequest> CudaBoardImpl::MakeBuildRequest(
    const v1::OperatorManifest& op, const ParamMap& params, bool shared) const {
  auto it = op.backends().find(kKind);
  if (it == op.backends().end() || it->second.sources().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "operator ", op.name(), " has no sources for board kind \"cuda\""));
  }
  if (op.package_dir().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("operator ", op.name(), ": package_dir is empty"));
  }
  const v1::BackendEntry& entry = it->second;
  BuildRequest req;
  const std::string compiler =
      entry.compiler().empty() ? "nvcc" : entry.compiler();
  req.compiler = compiler == "nvcc" ? nvcc_ : compiler;
  if (req.compiler.empty()) {
    return absl::FailedPreconditionError(
        "nvcc not found (PATH, /usr/local/cuda/bin)");
  }
  for (const std::string& src : entry.sources()) {
    if (src.empty() || src[0] == '/' || absl::StrContains(src, "..")) {
      return absl::InvalidArgumentError(
          absl::StrCat("operator ", op.name(), ": cuda source \"", src,
                       "\" must be relative to the package"));
    }
    req.sources.push_back(absl::StrCat(op.package_dir(), "/", src));
  }
  req.flags = ExpandFlagsImpl(
      std::vector<std::string>(entry.flags().begin(), entry.flags().end()),
      arch_);
  if (shared) {
    // The program's main becomes the runner's entry point
    // (ops/common/cuda_harness.cuh).
    for (const char* f : {"-shared", "-Xcompiler", "-fPIC",
                          "-DTF_VARIANT_SHARED", "-Dmain=tf_variant_main"}) {
      req.flags.push_back(f);
    }
  }
  req.params = params;
  req.cache_dir = options_.cache_dir;
  req.timeout = options_.build_timeout;
  if (!options_.include_dirs.empty()) {
    req.extra_include_dirs = options_.include_dirs;
  } else {
    std::error_code ec;
    const fs::path common =
        fs::weakly_canonical(fs::path(op.package_dir()) / ".." / "common", ec);
    if (!ec && fs::is_directory(common, ec))
      req.extra_include_dirs.push_back(common.string());
  }
  return req;
}

void CudaBoardImpl::Profile(const std::string& binary,
                            const std::string& work_dir, uint64_t seed,
                            const std::atomic<bool>& cancel,
                            v1::ProfileBundle* bundle, std::string* gap,
                            bool shared_object) const {
  if (ncu_.empty()) {
    *gap = options_.profile ? "ncu (Nsight Compute) was not found in PATH or "
                              "/usr/local/cuda/bin"
                            : "profiling is turned off on this board";
    return;
  }
  const std::string dir = work_dir + "/profile";
  if (absl::Status st = MakeDirs(dir + "/out"); !st.ok()) {
    *gap = std::string(st.message());
    return;
  }
  NcuProfileOptions o;
  o.ncu = ncu_;
  o.report_base = dir + "/report";
  o.log_file = dir + "/ncu.log";
  // The profile stage launches only the candidate: 3 warm-ups, then the
  // profiled one (-s 3 -c 1 counts kernel launches).
  ProcessSpec spec;
  std::vector<std::string> program =
      StageArgv({binary}, work_dir, "profile", dir + "/out", seed);
  if (shared_object) {
    // ncu profiles a process: the runner runs the one stage and exits.
    program.insert(program.begin(), {runner_binary_, "--exec"});
  }
  spec.argv = NcuProfileArgv(o, program);
  spec.cwd = work_dir;
  spec.env = StageEnv();
  spec.stdout_path = dir + "/profile.stdout";
  spec.stderr_path = dir + "/profile.stderr";
  spec.timeout = options_.profile_timeout;
  spec.cancel = &cancel;
  absl::StatusOr<ProcessResult> r = RunProcess(spec);
  absl::StatusOr<std::string> log = ReadFile(o.log_file);
  auto add_file = [&](const std::string& path, const std::string& content) {
    if (static_cast<int64_t>(content.size()) > kMaxBundleFileBytes) return;
    v1::ProfileFile* f = bundle->add_files();
    f->set_path(path);
    f->set_content(content);
  };
  if (log.ok()) add_file("ncu/ncu.log", *log);
  if (!r.ok() || !StageOk(*r)) {
    *gap = absl::StrCat(
        "ncu profile run failed: ",
        r.ok() ? StageFailure("ncu", *r) : std::string(r.status().message()),
        log.ok() ? absl::StrCat("; ncu.log: ", log->substr(0, 2000)) : "");
    return;
  }
  for (const char* page : {"raw", "details"}) {
    ProcessSpec ex;
    ex.argv = NcuExportArgv(ncu_, o.report_base + ".ncu-rep", page);
    ex.cwd = work_dir;
    ex.stdout_path = absl::StrCat(dir, "/", page, ".csv");
    ex.stderr_path = absl::StrCat(dir, "/", page, ".stderr");
    ex.timeout = options_.profile_timeout;
    ex.cancel = &cancel;
    absl::StatusOr<ProcessResult> er = RunProcess(ex);
    absl::StatusOr<std::string> csv = ReadFile(ex.stdout_path);
    if (!er.ok() || !StageOk(*er) || !csv.ok()) {
      *gap = absl::StrCat("ncu --page ", page, " export failed: ",
                          er.ok() ? StageFailure("ncu -i", *er)
                                  : std::string(er.status().message()));
      return;
    }
    if (NcuCsvRecords(*csv).empty()) {
      *gap = absl::StrCat("ncu --page ", page, " export holds no CSV records");
      return;
    }
    add_file(absl::StrCat("ncu/", page, ".csv"), *csv);
  }
}

absl::StatusOr<Evaluation> CudaBoardImpl::Evaluate(
    const v1::WorkItem& work, const std::atomic<bool>& cancel) {
  if (!UseRunner(work)) return EvaluateVariant(work, cancel);
  const int64_t starts = runner_->starts();
  absl::StatusOr<Evaluation> out = EvaluateVariant(work, cancel);
  if (out.ok()) {
    out->result.set_runner_starts(
        static_cast<int32_t>(runner_->starts() - starts));
  }
  // A variant that failed inside the runner may have left it (and its CUDA
  // context) in any state: the next variant gets a fresh one.
  if (!out.ok() || (out->result.outcome() != v1::OUTCOME_OK &&
                    out->result.outcome() != v1::OUTCOME_BUILD_FAILED)) {
    runner_->Recycle();
  }
  return out;
}

absl::StatusOr<Evaluation> CudaBoardImpl::EvaluateVariant(
    const v1::WorkItem& work, const std::atomic<bool>& cancel) {
  Evaluation eval;
  v1::RoundResult& result = eval.result;
  const v1::OperatorManifest& op = work.operator_();
  const uint64_t seed = work.seed();
  auto cancelled = [&] {
    return absl::CancelledError(absl::StrCat("evaluation of ", work.sweep_id(),
                                             " round ", work.round_id(),
                                             " cancelled (lease revoked)"));
  };

  // Where the evaluation's time goes, for the log line at the end (an
  // operator tuning the board reads it; docs/measurement.md).
  const absl::Time t_start = absl::Now();
  absl::Time t_mark = t_start;
  auto lap = [&t_mark] {
    const absl::Time now = absl::Now();
    const double s = absl::ToDoubleSeconds(now - t_mark);
    t_mark = now;
    return s;
  };

  // build (compile)
  const bool in_runner = UseRunner(work);
  absl::StatusOr<BuildRequest> req =
      MakeBuildRequest(op, work.params(), in_runner);
  if (!req.ok()) {
    if (absl::IsFailedPrecondition(req.status()))
      return req.status();  // no nvcc: the board's
    result.set_outcome(v1::OUTCOME_BUILD_FAILED);
    result.set_detail(std::string(req.status().message()));
    return eval;
  }
  absl::StatusOr<BuildResult> build = BuildVariant(*req, cancel);
  if (!build.ok()) {
    if (absl::IsCancelled(build.status())) return cancelled();
    return build.status();
  }
  result.set_build_s(absl::ToDoubleSeconds(build->build_time));
  if (!build->ok) {
    result.set_outcome(v1::OUTCOME_BUILD_FAILED);
    result.set_detail(absl::StrCat(
        "nvcc (", arch_,
        ") failed: ", absl::StripTrailingAsciiWhitespace(build->log_tail)));
    return eval;
  }

  const std::string work_dir =
      WorkDirFor(options_.work_root + "/" + local_name_, work);
  TF_RETURN_IF_ERROR(PrepareWorkDir(work_dir, work));
  const std::string& bin = build->binary;
  const double build_wait_s = lap();

  // The shared pipeline (agent/stage_runner.h): the variant's device check
  // (its build stage), the reference (cached per operator build inputs,
  // workload and seed: it never depends on the variant's parameters, and
  // softmax 8192^2 costs seconds of fp64 host work), the timed run blocks
  // (A/B against the parent variant's binary), then ncu.
  StagePlan plan;
  plan.command = {bin};
  plan.work_dir = work_dir;
  plan.seed = seed;
  plan.timeout = options_.stage_timeout;
  plan.env = StageEnv();
  plan.policy_note =
      "cuda events around each launch, L2 flushed (256 MiB memset) before each "
      "sample";
  plan.pass_output_flag = true;
  if (in_runner) {
    plan.runner = runner_.get();
    plan.program_is_variant = true;
    plan.policy_note += "; in the board's persistent runner";
  } else {
    plan.policy_note += "; one process per stage";
  }
  absl::StatusOr<std::string> ref_entry =
      ReferenceCacheEntry(*req, work_dir, seed, options_.cache_dir, cancel);
  if (!ref_entry.ok()) return cancelled();
  plan.reference_cache = *ref_entry;
  if (work.has_reference()) {
    absl::Status parent = UseParentVariant(
        MakeBuildRequest(op, work.reference_params(), in_runner), cancel,
        &plan);
    if (absl::IsCancelled(parent)) return cancelled();
    TF_RETURN_IF_ERROR(parent);
  }
  plan.board_id = info_.board_id();
  plan.board_kind = kKind;
  plan.chip = info_.chip();
  plan.profiler = "ncu";
  plan.capabilities = info_.capabilities();
  std::string gap;
  plan.profile = [&](const std::atomic<bool>& cancel_profile,
                     v1::RoundResult* measured, v1::ProfileBundle* bundle,
                     std::string* /*failure*/) {
    // The harness's timing note (device, clocks, protocol) joins the policy
    // and the bundle; without ncu the bundle says why it holds no profile,
    // and the outcome stays OK (the timing is a valid measurement).
    absl::StatusOr<std::string> note =
        ReadFile(work_dir + "/run/timing_note.txt");
    measured->mutable_measurement()->set_policy(absl::StrCat(
        measured->measurement().policy(), "; ",
        note.ok() ? std::string(absl::StripTrailingAsciiWhitespace(*note))
                  : "no timing note"));
    Profile(bin, work_dir, seed, cancel_profile, bundle, &gap, in_runner);
    if (note.ok()) {
      v1::ProfileFile* f = bundle->add_files();
      f->set_path("timing_note.txt");
      f->set_content(*note);
    }
    if (!gap.empty()) {
      v1::ProfileFile* f = bundle->add_files();
      f->set_path("ncu_unavailable.txt");
      f->set_content(absl::StrCat("EVIDENCE GAP (ncu): ", gap, "\n"));
    }
    return absl::OkStatus();
  };
  TF_ASSIGN_OR_RETURN(eval, RunStages(plan, work, cancel, std::move(eval)));
  if (result.outcome() == v1::OUTCOME_OK) {
    result.set_detail(
        absl::StrCat("ok: median ", result.measurement().median_us(), " us on ",
                     gpu_.name, build->cache_hit ? " (build cache hit)" : "",
                     gap.empty() ? "" : absl::StrCat("; no profile: ", gap)));
  }
  // Where the round went; the run blocks' share is run_s, of which timed_s
  // in timed launches.
  spdlog::info(
      "{}: round {} phases: build/prep {:.3f} s, stages {:.3f} s (blocks "
      "{:.3f} s, timed {:.3f} s)",
      info_.board_id(), work.round_id(), build_wait_s, lap(), result.run_s(),
      result.timed_s());
  return eval;
}

}  // namespace

std::vector<std::string> ExpandCudaFlags(const std::vector<std::string>& flags,
                                         const std::string& arch) {
  return ExpandFlagsImpl(flags, arch);
}

std::unique_ptr<Board> NewCudaBoard(const CudaBoardOptions& options,
                                    const GpuInfo& gpu, const GpuSpec& spec) {
  return std::make_unique<CudaBoardImpl>(options, gpu, spec);
}

absl::StatusOr<std::vector<std::unique_ptr<Board>>> DiscoverCudaBoards(
    const CudaBoardOptions& options) {
  TF_ASSIGN_OR_RETURN(std::vector<GpuInfo> gpus, QueryGpus(options.nvidia_smi));
  if (gpus.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        options.nvidia_smi, " lists no NVIDIA GPU on this machine"));
  }
  std::vector<const GpuInfo*> chosen;
  if (options.gpu_indices.empty()) {
    for (const GpuInfo& g : gpus) chosen.push_back(&g);
  } else {
    for (int index : options.gpu_indices) {
      auto it = std::find_if(gpus.begin(), gpus.end(), [&](const GpuInfo& g) {
        return g.index == index;
      });
      if (it == gpus.end()) {
        std::vector<int> have;
        for (const GpuInfo& g : gpus) have.push_back(g.index);
        return absl::InvalidArgumentError(
            absl::StrCat("cuda board: no GPU with index ", index,
                         " (nvidia-smi lists ", absl::StrJoin(have, ","), ")"));
      }
      chosen.push_back(&*it);
    }
  }
  std::vector<std::unique_ptr<Board>> boards;
  for (const GpuInfo* g : chosen) {
    std::optional<GpuSpec> spec = LookupGpuSpec(g->name);
    if (!spec) {
      if (options.arch.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("cuda board: GPU ", g->index, " \"", g->name,
                         "\" is not in the chip table "
                         "(agent/gpu_discovery.cc); give its nvcc arch "
                         "(e.g. sm_90a) in the board options"));
      }
      spec = GpuSpec{g->name, 0, 0, 0, 0, 128};
    }
    boards.push_back(NewCudaBoard(options, *g, *spec));
  }
  return boards;
}

}  // namespace tunefarm
