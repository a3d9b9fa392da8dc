// RunStages: the evaluation pipeline every board kind shares once it has an
// operator program to run — reference → run → precision → timing → profile
// (and optionally the program's own `build` stage first) — each stage a child
// process (RunProcess: argv, no shell, own process group, timeout, cancel),
// or a call into the board's persistent runner (StagePlan.runner, the same
// contract; agent/variant_runner.h)
// following the stage contract of docs/operators.md. Boards differ only in
// how they get the program (sim: a shipped binary; cpu/cuda: BuildVariant;
// ascend: the manifest's command), the environment they give it (pinning,
// device isolation) and how they profile (the program's profile stage read
// back, or the board's own profiler around it: ncu, msprof); those come in
// through StagePlan.
//
// Outcomes: a stage killed by a signal or exiting non-zero → RUN_CRASHED
// (with the signal name and stderr tail), a stage past its timeout →
// RUN_TIMEOUT (its process group is killed, the board stays usable),
// precision mismatch → PRECISION_FAILED, profile failure → PROFILE_FAILED
// with the measurement kept. CANCELLED status when `cancel` fires; other
// non-OK statuses are the board's fault.
//
// Pure functions over their arguments; thread-safe (each call owns its work
// directory).
#ifndef TUNEFARM_AGENT_STAGE_RUNNER_H_
#define TUNEFARM_AGENT_STAGE_RUNNER_H_

#include <atomic>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/board.h"
#include "agent/process_runner.h"
#include "agent/variant_build.h"
#include "agent/variant_runner.h"
#include "common/params.h"

namespace tunefarm {

// A path component from an id that came over the wire: only [A-Za-z0-9._-],
// never "." or "..".
std::string SafeComponent(const std::string& id);

// <root>/<sweep>/round_<r>/epoch_<e>.
std::string WorkDirFor(const std::string& root, const v1::WorkItem& work);

// Clears `work_dir` and writes params.json (work.params(), or `params` when
// given: the A/B reference variant's) and workload.json into it.
absl::Status PrepareWorkDir(const std::string& work_dir,
                            const v1::WorkItem& work,
                            const ParamMap* params = nullptr);

// `command` followed by the stage contract's arguments (docs/operators.md):
// --stage STAGE --params <work_dir>/params.json --workload
// <work_dir>/workload.json --out OUT_DIR --seed SEED.
std::vector<std::string> StageArgv(std::vector<std::string> command,
                                   const std::string& work_dir,
                                   const std::string& stage,
                                   const std::string& out_dir, uint64_t seed);

// The warm-up and sample counts of a policy (ResolveMeasurementPolicy).
void ResolvePolicy(const v1::MeasurementPolicy& policy, int* warmup,
                   int* samples);

// True when the child exited 0 without timeout, cancel or signal.
bool StageOk(const ProcessResult& r);
// "run killed by signal 11 (SIGSEGV): <stderr tail>".
std::string StageFailure(const std::string& stage, const ProcessResult& r);

struct StagePlan {
  std::vector<std::string> command;  // the operator program and fixed args
  std::string work_dir;              // prepared by PrepareWorkDir
  uint64_t seed = 0;
  absl::Duration timeout = absl::Minutes(2);  // per stage
  // The build and reference stages' limit, where it differs (a program
  // that compiles its kernel in its build stage); zero = timeout.
  absl::Duration setup_timeout = absl::ZeroDuration();
  std::vector<std::pair<std::string, std::string>> env;
  bool run_build_stage = true;  // the program's own `build` check first
  // Extra args of the run and profile stages (beyond --warmup/--samples).
  std::vector<std::string> run_extra_args;
  bool pass_flush_cache = false;  // add --flush_cache 0|1 to run and profile
  // The program takes --output 0|1 on the run stage. Only the candidate's
  // first block is checked against the reference; the others (and every
  // parent block) get --output 0 and skip writing output.bin, which for a
  // large operator (softmax 8192^2: 256 MB) cost more than the timing.
  bool pass_output_flag = false;
  // Args added to one timed block of the run stage: `reference` says which
  // variant, `block` counts that variant's blocks from 0 (sim: noise seeds).
  std::function<std::vector<std::string>(bool reference, int block)> block_args;
  // A/B (work.has_reference() and the policy's mode): the parent variant's
  // program; empty = `command` run with the parent's params (sim, where the
  // program is shared). Its work dir is <work_dir>/parent.
  std::vector<std::string> reference_command;
  // Non-empty: the parent variant cannot be run here (e.g. it failed to
  // build); the candidate is timed alone and this is recorded in the policy.
  std::string no_reference_reason;
  // A stage program that cannot be started is the variant's fault
  // (BUILD_FAILED), not the board's (a non-OK status).
  bool program_is_variant = false;
  bool simulated = false;
  std::string policy_note;  // appended to Measurement.policy
  // Non-null: the stages run in this persistent runner (command[0] and
  // reference_command[0] are shared objects) instead of one process each.
  VariantRunner* runner = nullptr;
  // Non-empty: the folder of the cached reference (ReferenceCacheEntry).
  // RunStages reads reference.bin from it, or runs the reference stage once
  // and publishes its output there.
  std::string reference_cache;
  std::string board_id, board_kind, chip, profiler;
  v1::BoardCapabilities capabilities;
  // Reads the profile stage's folder into a bundle (files only; RunStages
  // fills the identity fields). A non-OK status → PROFILE_FAILED.
  std::function<absl::StatusOr<v1::ProfileBundle>(
      const std::string& profile_dir)>
      read_profile;
  // Non-null: the board profiles the measured variant itself (a profiler
  // that wraps a process: ncu, msprof), in place of the program's profile
  // stage and read_profile. It fills *bundle's files, or sets *failure
  // (PROFILE_FAILED, the measurement kept); it may annotate
  // result->measurement(). A non-OK status is the board's failure.
  std::function<absl::Status(const std::atomic<bool>& cancel,
                             v1::RoundResult* result, v1::ProfileBundle* bundle,
                             std::string* failure)>
      profile;
  // No profile at all: a good measurement is OK without a bundle.
  bool no_profile = false;
};

// Runs the stages for `work` into `eval` (whose result may already hold
// build_s). See the header comment for outcomes. The program's build check
// follows the stage contract (docs/operators.md): exit 2 (and any other
// refusal) → BUILD_FAILED, exit 3 (internal error, e.g. a CUDA error) or a
// signal → RUN_CRASHED, past its limit → RUN_TIMEOUT. The run stage is timed
// by MeasureRunStage.
absl::StatusOr<Evaluation> RunStages(const StagePlan& plan,
                                     const v1::WorkItem& work,
                                     const std::atomic<bool>& cancel,
                                     Evaluation eval = {});

// The run stage, timed per work.measurement() through MeasureBlocks: the
// candidate alone, or (A/B) interleaved with the parent variant in ABBA
// blocks. The candidate's first block is judged against `reference_bin`
// (the reference stage's output) on a host thread while the blocks after
// it run; a mismatch stops them at the next block and outranks a later
// block's failure. Returns
// true with result->measurement (and precision, run_s) filled, or false
// with result's outcome and detail set (RUN_CRASHED, RUN_TIMEOUT,
// PRECISION_FAILED, BUILD_FAILED when program_is_variant and the program
// cannot start). CANCELLED when `cancel` fires; other statuses are the
// board's fault.
absl::StatusOr<bool> MeasureRunStage(const StagePlan& plan,
                                     const v1::WorkItem& work,
                                     const std::string& reference_bin,
                                     const std::atomic<bool>& cancel,
                                     v1::RoundResult* result);

// A/B on a board that compiles variants: builds the parent variant from
// `parent_request` (usually a build-cache hit) and points
// plan->reference_command at its binary, or records in
// plan->no_reference_reason why the parent cannot be timed here (the
// candidate is then timed alone). Only a cancelled build is an error.
absl::Status UseParentVariant(
    const absl::StatusOr<BuildRequest>& parent_request,
    const std::atomic<bool>& cancel, StagePlan* plan);

// The reference cache entry of a variant: <cache_dir>/reference/<key>, the
// key covering the operator's build inputs without the parameters
// (SharedBuildKey), the work folder's workload.json and the seed. A
// reference never depends on the variant's parameters (docs/operators.md),
// and for a large workload it costs seconds of fp64 work per round. "" when
// no key can be made (then nothing is cached); CANCELLED when `cancel`
// fired.
absl::StatusOr<std::string> ReferenceCacheEntry(
    const BuildRequest& request, const std::string& work_dir, uint64_t seed,
    const std::string& cache_dir, const std::atomic<bool>& cancel);

// ReferenceCacheEntry for a board whose program is a command rather than a
// compiled variant (ascend: `python3 <pkg>/run.py ...`): keyed by the
// command's interpreter (its --version), its other arguments, and the
// folders of the arguments that are files (the operator package). A command
// with no file argument whose first element is a program file (sim:
// `tunefarm-sim-matmul`) is keyed by that program's bytes and its
// arguments. "" when neither applies (nothing to key the program's code by).
absl::StatusOr<std::string> CommandReferenceCacheEntry(
    const std::vector<std::string>& command, const std::string& work_dir,
    uint64_t seed, const std::string& cache_dir,
    const std::atomic<bool>& cancel);

// Copies `reference_bin` into `entry`/reference.bin, published by rename so
// a reader sees a whole file or none. Failures are logged, not returned: the
// cache only saves time.
void PublishReference(const std::string& reference_bin,
                      const std::string& entry);

// Regular files under `dir` (relative paths, sorted) read into a bundle,
// at most 64 MiB in all.
absl::StatusOr<v1::ProfileBundle> ReadFilesIntoBundle(const std::string& dir);

}  // namespace tunefarm

#endif  // TUNEFARM_AGENT_STAGE_RUNNER_H_
