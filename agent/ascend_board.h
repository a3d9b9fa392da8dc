// The `ascend` board: one Ascend NPU (one chip as `npu-smi info` lists it)
// running an operator's "ascend" backend — a ready program, normally a
// Python entry point of a Triton-Ascend / TileLang / PyPTO kernel:
//
//   backends:
//     ascend:
//       command: ["{python}", "{pkg}/run.py", "--profiler", "msprof",
//                 "--aic_metrics", "PipeUtilization"]
//
// "{python}" expands to options.python, "{pkg}" to the package. The board
// reads `--profiler msprof|torch_npu|pypto` and `--aic_metrics G1,G2` from
// that command (the BackendEntry proto has no profiler field; see
// docs/ascend.md) and leaves them in the argv, so the program sees them too.
//
// Evaluate runs the shared evaluation pipeline (agent/stage_runner.h,
// RunStages) with ASCEND_RT_VISIBLE_DEVICES=<device> and
// TILE_FWK_DEVICE_ID=<device> in its environment, on the operator stage
// contract (docs/operators.md). When the command is "{python} <program>.py
// ..." each stage runs in the board's persistent Python runner
// (agent/py_variant_runner.py through VariantRunner: the interpreter, torch
// and the device context start once; a stage calls the program's main());
// `measurement.isolation: process`, a backend's `isolation: process` or no
// runner give one child process per stage (RunProcess: no shell, own process
// group, timeout, cancel). A variant that fails in the runner (crash,
// timeout, wrong output, device error) gets the runner recycled. The stages:
//   1. `--stage build` (options.precision_timeout, 300 s default): the
//      program compiles the kernel and launches it once;
//   2. `--stage reference` (same limit): DIR/reference.bin on the host;
//   3. `--stage run --warmup W --samples S --output 0|1` blocks
//      (options.run_timeout each): the first writes DIR/output.bin, which
//      the farm compares with the reference (ComparePrecision with the
//      manifest's tolerances), every block DIR/timing_us.txt. A/B rounds
//      alternate the candidate with the parent's parameters in ABBA blocks,
//      as on every board kind.
//   4. profile, by the operator's profiler:
//      msprof   — `msprof --application="<program> --stage profile ..."
//                 --output=<dir>/<group> --aic-metrics=<group>`, one run per
//                 metric group, PipeUtilization first; bundled:
//                 <group>/PROF_*/mindstudio_profiler_output/*.
//      torch_npu — the program's profile stage writes
//                 *_ascend_pt/ASCEND_PROFILER_OUTPUT/ (torch_npu.profiler
//                 around the workload's `workload()`); bundled with
//                 *_ascend_pt/profiler_*.json.
//      pypto    — the program runs with runtime_debug_mode in cwd=<dir> and
//                 writes output/output_<ts>/ (merged_swimlane.json,
//                 bubble_analysis.log); the newest such folder is bundled.
//
// Outcomes (message classification: agent/ascend_errors.h):
//   compile failure, UB overflow (detail names requested/available bytes)
//   and grid limit → BUILD_FAILED. The grid limit is refused by the
//   launcher before any kernel runs and is a pure function of the
//   parameters and the workload, so it is an infeasible variant, not a
//   crash; BUILD_FAILED also lets strategies treat it as a constraint.
//   Wrong output → PRECISION_FAILED; a step past its timeout → RUN_TIMEOUT;
//   any other non-zero exit or signal → RUN_CRASHED; profiler failure →
//   PROFILE_FAILED with the measurement kept.
//   Device error → a non-OK Status (UNAVAILABLE): the board, not the
//   variant, failed (the agent reports BOARD_LOST and the round is
//   re-queued). `quarantine_after` device errors in a row (2 by default)
//   quarantine the card: info().state() becomes BOARD_STATE_QUARANTINED with
//   health_detail saying why, and Evaluate refuses (FAILED_PRECONDITION)
//   until Readmit(). Any evaluation that reaches the card without a device
//   error resets the count.
//
// Ownership: the caller owns the boards. Thread-safety: as Board — one
// Evaluate at a time; info() (a copy) and Readmit() from any thread.
#ifndef TUNEFARM_AGENT_ASCEND_BOARD_H_
#define TUNEFARM_AGENT_ASCEND_BOARD_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/board.h"
#include "agent/npu_smi.h"

namespace tunefarm {

struct AscendBoardOptions {
  std::string agent_id, node;
  // Work directories: <work_root>/ascend<device>/<sweep>/round_<r>/epoch_<e>.
  std::string work_root;
  // Where each (operator code, workload, seed)'s reference output is kept
  // and reused (CommandReferenceCacheEntry); empty: computed every round.
  std::string cache_dir;
  // Tools: a path, or a name looked up in PATH.
  std::string npu_smi = "npu-smi";
  std::string msprof = "msprof";
  std::string python = "python3";  // what "{python}" expands to
  // agent/py_variant_runner.py; "" = tunefarm-py-runner.py beside this
  // executable. Not found: one process per stage.
  std::string py_runner;
  // Logical device ids to serve (ASCEND_RT_VISIBLE_DEVICES values); empty =
  // every chip npu-smi lists.
  std::vector<int> devices;
  absl::Duration discover_timeout = absl::Seconds(30);
  absl::Duration precision_timeout = absl::Seconds(300);
  absl::Duration run_timeout = absl::Minutes(2);
  absl::Duration profile_timeout = absl::Minutes(10);
  int quarantine_after = 2;  // device errors in a row
  bool profile = true;
  std::map<std::string, std::string> labels;
};

// One board per chip `npu-smi info` lists (or per options.devices). The
// logical device id is the "Device"/"Phy-ID" column where npu-smi prints
// one, else the chip's position in the table. NOT_FOUND when npu-smi is
// missing, UNAVAILABLE when it fails or times out, INVALID_ARGUMENT when its
// output does not parse or a requested device is not listed. A chip whose
// health is neither OK nor Warning starts QUARANTINED.
absl::StatusOr<std::vector<std::unique_ptr<Board>>> DiscoverAscendBoards(
    const AscendBoardOptions& options);

// A board for one chip (tests, and DiscoverAscendBoards). board_id is
// "<agent_id>/ascend<device_id>".
std::unique_ptr<Board> NewAscendBoard(const AscendBoardOptions& options,
                                      const NpuChip& chip, int device_id);

// The profiler settings read from an ascend backend command.
struct AscendProfilerPlan {
  std::string profiler = "msprof";  // msprof | torch_npu | pypto
  std::vector<std::string> aic_metrics = {"PipeUtilization"};  // msprof only
};
// INVALID_ARGUMENT naming the value for an unknown profiler or metric group.
absl::StatusOr<AscendProfilerPlan> AscendProfilerPlanFor(
    const std::vector<std::string>& command);

}  // namespace tunefarm

#endif  // TUNEFARM_AGENT_ASCEND_BOARD_H_
