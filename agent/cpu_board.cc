#include "agent/cpu_board.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/perf_counters.h"
#include "agent/stage_runner.h"
#include "agent/variant_build.h"
#include "agent/variant_runner.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace tunefarm {
namespace {

constexpr char kKind[] = "cpu";

std::vector<int> AllowedCpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
  }
  if (cpus.empty()) cpus.push_back(0);
  return cpus;
}

// "0-3,6" from a sorted list.
std::string CpuList(const std::vector<int>& cpus) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    parts.push_back(i == j ? absl::StrCat(cpus[i])
                           : absl::StrCat(cpus[i], "-", cpus[j]));
    i = j + 1;
  }
  return absl::StrJoin(parts, ",");
}

// The value of the first "<key>\t: value" line of /proc/cpuinfo.
std::string CpuInfoField(const std::string& cpuinfo, absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(cpuinfo, '\n')) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(line, absl::MaxSplits(':', 1));
    if (absl::StripAsciiWhitespace(kv.first) == key) {
      return std::string(absl::StripAsciiWhitespace(kv.second));
    }
  }
  return "";
}

// Best of three memcpy passes over 64 MiB: bytes read + written per second.
double MeasureCopyGbps() {
  constexpr size_t kBytes = 64 << 20;
  std::vector<char> a(kBytes, 1), b(kBytes, 2);
  double best = 0;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(b.data(), a.data(), kBytes);
    const auto t1 = std::chrono::steady_clock::now();
    const double s = std::chrono::duration<double>(t1 - t0).count();
    if (s > 0) best = std::max(best, 2.0 * kBytes / s / 1e9);
    a[i] = b[kBytes - 1 - i];  // keep the copies observable
  }
  return best;
}

class CpuBoard : public Board {
 public:
  explicit CpuBoard(CpuBoardOptions options) : options_(std::move(options)) {
    if (options_.cpus.empty()) options_.cpus = AllowedCpus();
    std::sort(options_.cpus.begin(), options_.cpus.end());
    options_.cpus.erase(std::unique(options_.cpus.begin(), options_.cpus.end()),
                        options_.cpus.end());
    if (options_.cache_dir.empty())
      options_.cache_dir = options_.work_root + "/build_cache";
    cpu_list_ = CpuList(options_.cpus);

    const std::string cpuinfo = ReadFile("/proc/cpuinfo").value_or("");
    std::string model = CpuInfoField(cpuinfo, "model name");
    if (model.empty()) model = "unknown cpu";
    const std::string flags = CpuInfoField(cpuinfo, "flags");
    const std::vector<absl::string_view> flag_list = absl::StrSplit(flags, ' ');
    auto has = [&](absl::string_view f) {
      return std::find(flag_list.begin(), flag_list.end(), f) !=
             flag_list.end();
    };
    int lanes = 4;
    std::string simd = "sse";
    if (has("avx512f")) {
      lanes = 16;
      simd = "avx512f";
    } else if (has("avx2") && has("fma")) {
      lanes = 8;
      simd = "avx2+fma";
    }
    double mhz = 0;
    const std::string max_freq =
        absl::StrCat("/sys/devices/system/cpu/cpu", options_.cpus.front(),
                     "/cpufreq/cpuinfo_max_freq");
    if (absl::StatusOr<std::string> khz = ReadFile(max_freq); khz.ok()) {
      double v = 0;
      if (absl::SimpleAtod(absl::StripAsciiWhitespace(*khz), &v))
        mhz = v / 1000.0;
    }
    if (mhz <= 0) {
      double v = 0;
      if (absl::SimpleAtod(CpuInfoField(cpuinfo, "cpu MHz"), &v)) mhz = v;
    }
    const int cores = static_cast<int>(options_.cpus.size());

    info_.set_board_id(options_.board_id);
    info_.set_agent_id(options_.agent_id);
    info_.set_node(options_.node);
    info_.set_kind(kKind);
    info_.set_chip(model);
    for (const auto& [k, v] : options_.labels) (*info_.mutable_labels())[k] = v;
    v1::BoardCapabilities& caps = *info_.mutable_capabilities();
    caps.set_vector_cores(cores);
    caps.set_clock_mhz(mhz);
    caps.set_peak_tflops(cores * (mhz / 1000.0) * 2 * 2 * lanes / 1000.0);
    caps.set_memory_bandwidth_gbps(MeasureCopyGbps());
    (*caps.mutable_extra())["model"] = model;
    (*caps.mutable_extra())["simd"] = simd;
    (*caps.mutable_extra())["cpus"] = cpu_list_;
    const absl::Status perf = ProbePerfCounters();
    (*caps.mutable_extra())["perf_counters"] =
        perf.ok() ? "available" : std::string(perf.message());
    (*caps.mutable_extra())["peak_estimate"] = absl::StrCat(
        "cores x GHz x 2 FMA pipes x 2 flops x ", lanes, " fp32 lanes");
    (*caps.mutable_extra())["bandwidth_estimate"] =
        "best of 3 single-thread 64 MiB memcpy, read+write bytes";
    info_.set_simulated(false);
    info_.set_state(v1::BOARD_STATE_IDLE);

    if (options_.runner_binary.empty())
      options_.runner_binary = FindVariantRunnerBinary();
    // A runner that cannot start is the board's problem, never a variant's:
    // without one the board runs one process per stage.
    if (!options_.runner_binary.empty() &&
        access(options_.runner_binary.c_str(), X_OK) != 0) {
      spdlog::warn("{}: variant runner {} is not executable", options_.board_id,
                   options_.runner_binary);
      options_.runner_binary.clear();
    }
    if (options_.runner_binary.empty()) {
      spdlog::warn("{}: tunefarm-variant-runner not found; every variant "
                   "runs one process per stage",
                   options_.board_id);
    } else {
      VariantRunnerOptions ro;
      ro.runner_binary = options_.runner_binary;
      ro.recycle_after = std::max(1, options_.runner_recycle_after);
      ro.name = options_.board_id;
      ro.log_path = options_.work_root + "/runner.log";
      (void)MakeDirs(options_.work_root);
      runner_ = std::make_unique<VariantRunner>(std::move(ro));
    }
    info_.set_health_detail(
        runner_ != nullptr
            ? absl::StrCat("persistent runner ", options_.runner_binary)
            : "no persistent runner: one process per stage");
  }

  v1::BoardInfo info() const override { return info_; }

  absl::StatusOr<Evaluation> Evaluate(const v1::WorkItem& work,
                                      const std::atomic<bool>& cancel) override;

  absl::Status Prefetch(const v1::WorkItem& work,
                        const std::atomic<bool>& cancel) override {
    absl::StatusOr<BuildRequest> req =
        MakeBuildRequest(work.operator_(), work.params(), UseRunner(work));
    // A bad backend is the variant's fault: Evaluate reports it.
    if (!req.ok()) return absl::OkStatus();
    return BuildVariant(*req, cancel).status();
  }

 private:
  // Whether `work` runs in the persistent runner (else one process per
  // stage): the board has one, and neither the sweep nor the manifest's
  // backend asks for process isolation.
  bool UseRunner(const v1::WorkItem& work) const {
    if (runner_ == nullptr) return false;
    if (work.measurement().isolation() == v1::ISOLATION_PROCESS) return false;
    auto it = work.operator_().backends().find(kKind);
    return it == work.operator_().backends().end() ||
           it->second.isolation() != v1::ISOLATION_PROCESS;
  }
  // The BuildVariant request of a variant (a shared object for the runner
  // when `shared`); INVALID_ARGUMENT (the variant's BUILD_FAILED) when the
  // operator has no usable cpu backend.
  absl::StatusOr<BuildRequest> MakeBuildRequest(const v1::OperatorManifest& op,
                                                const ParamMap& params,
                                                bool shared) const;
  // The backend's sources as absolute paths inside the package, checked.
  absl::StatusOr<std::vector<std::string>> Sources(
      const v1::OperatorManifest& op, const v1::BackendEntry& be) const;

  CpuBoardOptions options_;
  std::string cpu_list_;
  v1::BoardInfo info_;  // immutable after construction
  std::unique_ptr<VariantRunner> runner_;  // null: no runner binary
};

absl::StatusOr<std::vector<std::string>> CpuBoard::Sources(
    const v1::OperatorManifest& op, const v1::BackendEntry& be) const {
  if (be.sources().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("operator ", op.name(),
                     ": cpu backend lists no sources (the cpu board "
                     "compiles every variant)"));
  }
  if (op.package_dir().empty() || op.package_dir()[0] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("operator ", op.name(), ": package_dir \"",
                     op.package_dir(), "\" is not an absolute path"));
  }
  std::vector<std::string> out;
  for (const std::string& s : be.sources()) {
    if (s.empty() || s[0] == '/' || s.find('\0') != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("operator ", op.name(), ": source \"", s,
                       "\" must be a path relative to the package"));
    }
    for (absl::string_view c : absl::StrSplit(s, '/')) {
      if (c == "..") {
        return absl::InvalidArgumentError(
            absl::StrCat("operator ", op.name(), ": source \"", s,
                         "\" escapes its package"));
      }
    }
    out.push_back(absl::StrCat(op.package_dir(), "/", s));
  }
  return out;
}

absl::StatusOr<BuildRequest> CpuBoard::MakeBuildRequest(
    const v1::OperatorManifest& op, const ParamMap& params, bool shared) const {
  auto it = op.backends().find(kKind);
  if (it == op.backends().end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "operator ", op.name(), " has no backend for board kind \"cpu\""));
  }
  TF_ASSIGN_OR_RETURN(std::vector<std::string> sources,
                      Sources(op, it->second));
  BuildRequest req;
  req.compiler = it->second.compiler().empty() ? "c++" : it->second.compiler();
  req.flags.assign(it->second.flags().begin(), it->second.flags().end());
  if (shared) {
    // The program's main becomes the runner's entry point
    // (ops/common/harness.h).
    for (const char* f : {"-shared", "-fPIC", "-DTF_VARIANT_SHARED",
                          "-Dmain=tf_variant_main"}) {
      req.flags.push_back(f);
    }
  }
  req.sources = std::move(sources);
  req.params = params;
  req.cache_dir = options_.cache_dir;
  req.timeout = options_.build_timeout;
  if (!options_.harness_dir.empty())
    req.extra_include_dirs.push_back(options_.harness_dir);
  req.extra_include_dirs.push_back(op.package_dir());
  return req;
}

absl::StatusOr<Evaluation> CpuBoard::Evaluate(const v1::WorkItem& work,
                                              const std::atomic<bool>& cancel) {
  Evaluation eval;
  v1::RoundResult& result = eval.result;
  const v1::OperatorManifest& op = work.operator_();
  auto build_failed = [&](std::string detail) {
    result.set_outcome(v1::OUTCOME_BUILD_FAILED);
    result.set_detail(std::move(detail));
    return eval;
  };
  const bool use_runner = UseRunner(work);
  absl::StatusOr<BuildRequest> req =
      MakeBuildRequest(op, work.params(), use_runner);
  if (!req.ok()) return build_failed(std::string(req.status().message()));
  TF_ASSIGN_OR_RETURN(BuildResult build, BuildVariant(*req, cancel));
  result.set_build_s(absl::ToDoubleSeconds(build.build_time));
  if (!build.ok) {
    return build_failed(absl::StrCat(
        "compile failed", build.cache_hit ? " (cached verdict)" : "", ": ",
        absl::StripTrailingAsciiWhitespace(build.log_tail)));
  }

  StagePlan plan;
  plan.command = {build.binary};
  if (work.has_reference()) {
    TF_RETURN_IF_ERROR(UseParentVariant(
        MakeBuildRequest(op, work.reference_params(), use_runner), cancel,
        &plan));
  }
  plan.work_dir = WorkDirFor(options_.work_root, work);
  TF_RETURN_IF_ERROR(PrepareWorkDir(plan.work_dir, work));
  plan.seed = work.seed() != 0 ? work.seed() : options_.seed;
  // The reference is computed once per (build inputs, workload, seed).
  TF_ASSIGN_OR_RETURN(plan.reference_cache,
                      ReferenceCacheEntry(*req, plan.work_dir, plan.seed,
                                          options_.cache_dir, cancel));
  plan.timeout = options_.stage_timeout;
  plan.env = {{"TF_CPU_LIST", cpu_list_}, {"OMP_WAIT_POLICY", "PASSIVE"}};
  plan.run_build_stage = true;
  plan.pass_flush_cache = true;
  plan.pass_output_flag = true;
  plan.simulated = false;
  plan.policy_note =
      absl::StrCat("measured on ", info_.chip(), ", cpus ", cpu_list_,
                   ", steady_clock; variant ", build.key.substr(0, 12),
                   use_runner ? "; in the board's persistent runner"
                              : "; one process per stage");
  if (use_runner) {
    plan.runner = runner_.get();
    plan.program_is_variant = true;  // a shared object that cannot load
  }
  plan.board_id = options_.board_id;
  plan.board_kind = kKind;
  plan.chip = info_.chip();
  plan.profiler = "perf";
  plan.capabilities = info_.capabilities();
  plan.read_profile =
      [](const std::string& dir) -> absl::StatusOr<v1::ProfileBundle> {
    const std::string prof = dir + "/PROF_cpu";
    absl::StatusOr<std::string> counters = ReadFile(prof + "/counters.csv");
    if (counters.ok()) {
      TF_ASSIGN_OR_RETURN(auto values, ParseCountersCsv(*counters));
      if (!values.count("cycles") || !values.count("instructions")) {
        return absl::InvalidArgumentError(
            "counters.csv lacks cycles or instructions");
      }
    } else if (!ReadFile(prof + "/counters_unavailable.txt").ok()) {
      return absl::NotFoundError(
          "profile wrote neither PROF_cpu/counters.csv nor "
          "PROF_cpu/counters_unavailable.txt");
    }
    return ReadFilesIntoBundle(dir);
  };
  const int64_t starts = runner_ != nullptr ? runner_->starts() : 0;
  absl::StatusOr<Evaluation> out =
      RunStages(plan, work, cancel, std::move(eval));
  if (out.ok() && runner_ != nullptr) {
    out->result.set_runner_starts(
        static_cast<int32_t>(runner_->starts() - starts));
  }
  // A variant that failed inside the runner may have left it in any state
  // (corrupted heap, stray threads): the next variant gets a fresh one.
  if (use_runner &&
      (!out.ok() || (out->result.outcome() != v1::OUTCOME_OK &&
                     out->result.outcome() != v1::OUTCOME_BUILD_FAILED))) {
    runner_->Recycle();
  }
  return out;
}

}  // namespace

std::unique_ptr<Board> NewCpuBoard(CpuBoardOptions options) {
  return std::make_unique<CpuBoard>(std::move(options));
}

std::vector<std::vector<int>> SplitAllowedCpus(int boards) {
  const std::vector<int> cpus = AllowedCpus();
  const int n =
      std::max(1, std::min<int>(boards, static_cast<int>(cpus.size())));
  std::vector<std::vector<int>> out(n);
  for (size_t i = 0; i < cpus.size(); ++i) {
    out[i * n / cpus.size()].push_back(cpus[i]);
  }
  return out;
}

}  // namespace tunefarm
