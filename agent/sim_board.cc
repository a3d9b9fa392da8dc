#include "agent/sim_board.h"

#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "agent/sim_model.h"
#include "agent/stage_runner.h"
#include "common/status_macros.h"

namespace tunefarm {
namespace {

namespace fs = std::filesystem;

constexpr char kKind[] = "sim";

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

  v1::BoardInfo info() const override { return info_; }

  absl::StatusOr<Evaluation> Evaluate(const v1::WorkItem& work,
                                      const std::atomic<bool>& cancel) override;

 private:
  // The manifest's "sim" command with {bin} and {pkg} expanded, checked.
  absl::StatusOr<std::vector<std::string>> ExpandCommand(
      const v1::OperatorManifest& op, bool* from_bin) const;

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
      return absl::InvalidArgumentError(
          absl::StrCat("operator ", op.name(),
                       ": command uses {pkg} but package_dir is empty"));
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
    return absl::InvalidArgumentError(
        absl::StrCat("operator ", op.name(), ": sim command \"", exe,
                     "\" is not an absolute path after expanding {bin}/{pkg}"));
  }
  for (absl::string_view c : absl::StrSplit(exe, '/')) {
    if (c == "..") {
      return absl::InvalidArgumentError(
          absl::StrCat("operator ", op.name(), ": sim command \"", exe,
                       "\" escapes its folder (\"..\")"));
    }
  }
  return argv;
}

// The profile folder as msprof leaves it: PROF_* folders holding
// mindstudio_profiler_output/op_summary_*.csv.
absl::StatusOr<v1::ProfileBundle> ReadMsprofFolder(
    const std::string& profile_dir) {
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
    return absl::NotFoundError(absl::StrCat("cannot list profile folder ",
                                            profile_dir, ": ", ec.message()));
  }
  if (prof_dirs.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "profile stage wrote no PROF_* folder under ", profile_dir));
  }
  bool has_summary = false;
  for (const std::string& d : prof_dirs) {
    for (fs::recursive_directory_iterator it(profile_dir + "/" + d, ec), end;
         !ec && it != end; it.increment(ec)) {
      if (absl::StrContains(it->path().string(),
                            "mindstudio_profiler_output/op_summary_")) {
        has_summary = true;
      }
    }
  }
  if (!has_summary) {
    return absl::NotFoundError(absl::StrCat(
        "profile folder has no mindstudio_profiler_output/op_summary_*.csv"));
  }
  return ReadFilesIntoBundle(profile_dir);
}

absl::StatusOr<Evaluation> SimBoard::Evaluate(const v1::WorkItem& work,
                                              const std::atomic<bool>& cancel) {
  Evaluation eval;
  const uint64_t seed = work.seed() != 0 ? work.seed() : options_.seed;
  bool from_bin = false;
  absl::StatusOr<std::vector<std::string>> command =
      ExpandCommand(work.operator_(), &from_bin);
  if (!command.ok()) {
    eval.result.set_outcome(v1::OUTCOME_BUILD_FAILED);
    eval.result.set_detail(std::string(command.status().message()));
    return eval;
  }
  StagePlan plan;
  plan.command = *std::move(command);
  plan.work_dir = WorkDirFor(options_.work_root, work);
  TF_RETURN_IF_ERROR(PrepareWorkDir(plan.work_dir, work));
  plan.seed = seed;
  plan.timeout = options_.stage_timeout;
  plan.run_build_stage = true;
  // The board's own program missing is the board's fault; the operator's
  // program missing is the variant's.
  plan.program_is_variant = !from_bin;
  const SimBoardOptions& o = options_;
  // Noise varies per round too (the input seed is one per sweep).
  const uint64_t round = static_cast<uint64_t>(work.round_id());
  plan.block_args = [&o, seed, round](bool reference, int block) {
    std::vector<std::string> args;
    if (!reference && block == 0 && o.run_delay > absl::ZeroDuration()) {
      args = {"--delay_ms",
              absl::StrCat(absl::ToInt64Milliseconds(o.run_delay))};
    }
    if (o.noise > 0) {
      // Each block a run of its own: its own speed offset and jitter.
      const uint64_t noise_seed = seed * 1000003u + round * 15485863u +
                                  static_cast<uint64_t>(block) * 2 +
                                  (reference ? 1 : 0) + o.seed * 7919u;
      for (std::string a :
           {std::string("--noise"), absl::StrCat(o.noise),
            std::string("--noise_seed"), absl::StrCat(noise_seed)}) {
        args.push_back(std::move(a));
      }
    }
    if (o.fixed_latency_us > 0) {
      args.push_back("--latency_us");
      args.push_back(absl::StrCat(o.fixed_latency_us));
    }
    return args;
  };
  plan.simulated = true;
  plan.policy_note = absl::StrCat(
      "simulated by the ", chip_.name, " model (seed ", seed,
      "), not measured on hardware",
      o.noise > 0 ? absl::StrCat("; injected noise +/-", o.noise * 100,
                                 "% per run and sample")
                  : "",
      o.fixed_latency_us > 0 ? "; every variant modelled at the same latency"
                             : "",
      work.measurement().flush_cache() ? "; flush_cache has no effect on sim"
                                       : "");
  plan.board_id = info_.board_id();
  plan.board_kind = kKind;
  plan.chip = chip_.name;
  plan.profiler = "msprof";
  plan.capabilities = info_.capabilities();
  plan.read_profile = ReadMsprofFolder;
  absl::StatusOr<std::string> reference_entry = CommandReferenceCacheEntry(
      plan.command, plan.work_dir, seed, options_.cache_dir, cancel);
  if (!reference_entry.ok()) return reference_entry.status();
  plan.reference_cache = *reference_entry;
  return RunStages(plan, work, cancel, std::move(eval));
}

}  // namespace

std::unique_ptr<Board> NewSimBoard(SimBoardOptions options) {
  return std::make_unique<SimBoard>(std::move(options));
}

}  // namespace tunefarm
