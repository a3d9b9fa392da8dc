// The `cuda` board: one NVIDIA GPU running an operator's "cuda" backend.
//
// Evaluate builds the variant with nvcc through BuildVariant (parameters as
// compile-time constants, cached by source/params/compiler/flags; "{arch}"
// in the manifest's flags becomes the GPU's target, e.g. sm_90a), then runs
// the stage program's build (variant-vs-device check), reference, run and,
// when Nsight Compute is present, profile stages as child processes pinned
// to its GPU with CUDA_DEVICE_ORDER=PCI_BUS_ID and CUDA_VISIBLE_DEVICES=<the
// GPU's UUID>. The farm judges the output (ComparePrecision against the
// reference; the program NaN-poisons its output first) and summarises the
// CUDA-event samples (Summarize). Profiles are `ncu` runs exported to CSV
// (agent/ncu.h) and sent as a ProfileBundle; without ncu, or when ncu fails,
// the bundle carries an evidence-gap file saying why and the outcome stays
// OK (the timing is still a valid measurement).
//
// Outcomes: compile error or a variant the device cannot run (static_assert,
// shared memory over the limit, workload not a multiple of the tile) ->
// BUILD_FAILED; a stage crashing or failing a CUDA call -> RUN_CRASHED; over
// the stage timeout -> RUN_TIMEOUT; wrong or unwritten output ->
// PRECISION_FAILED. A non-OK Status is the board's own failure.
//
// Isolation (docs/measurement.md): by default the variant is built as a
// shared object (nvcc -shared -Xcompiler -fPIC -Dmain=tf_variant_main) and
// its build check, reference and run stages run in the board's persistent
// runner, one process that keeps its CUDA context across variants; a
// variant that crashes it, hangs or hits a CUDA error (the harness exits
// with code 3) ends only the runner, which the next stage restarts. ncu
// still profiles a process of its own (`tunefarm-variant-runner --exec`).
// `measurement.isolation: process` or a backend's `isolation: process` gives
// one process per stage (a normal executable).
//
// Build/run overlap: the agent runs one worker thread per board, so on a
// machine with several GPUs one board compiles while another runs. Within
// one board, Prefetch(work) compiles a variant the agent leased ahead (on
// the agent's background threads); Evaluate then finds it in the build cache
// (BuildVariant makes concurrent builds of one key build once). The board's
// nvcc target is info().capabilities().extra()["nvcc_arch"].
//
// Ownership: the caller owns the boards. Thread-safety: as Board (one
// Evaluate at a time, info() and Prefetch from any thread).
#ifndef TUNEFARM_AGENT_CUDA_BOARD_H_
#define TUNEFARM_AGENT_CUDA_BOARD_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/board.h"
#include "agent/gpu_discovery.h"

namespace tunefarm {

struct CudaBoardOptions {
  std::string agent_id, node;
  // Work directories: <work_root>/<board>/<sweep>/round_<r>/epoch_<e>.
  std::string work_root;
  // BuildVariant's cache; may be shared by every board of the agent.
  std::string cache_dir;
  // The GPUs to serve, by nvidia-smi index; empty = all.
  std::vector<int> gpu_indices;
  // Tools: names looked up in PATH or paths. nvcc "" = "nvcc" in PATH, else
  // /usr/local/cuda/bin/nvcc. ncu "" = "ncu" in PATH, else the
  // /usr/local/cuda/bin one, else profiling is an evidence gap.
  std::string nvcc, ncu;
  std::string nvidia_smi = "nvidia-smi";
  // Overrides the nvcc target picked from the chip table (e.g. "sm_90a");
  // required for a GPU the table does not know.
  std::string arch;
  // Include dirs for the shared harness (cuda_harness.cuh); empty =
  // <package_dir>/../common.
  std::vector<std::string> include_dirs;
  bool profile = true;  // run ncu when it is available
  absl::Duration build_timeout = absl::Minutes(5);
  absl::Duration stage_timeout = absl::Minutes(2);
  absl::Duration profile_timeout = absl::Minutes(5);
  std::map<std::string, std::string> labels;
  // The persistent runner (agent/variant_runner.h); "" =
  // FindVariantRunnerBinary(). Not found: one process per stage.
  std::string runner_binary;
  int runner_recycle_after = 32;
};

// One board per GPU nvidia-smi lists (or per options.gpu_indices). NOT_FOUND
// when nvidia-smi is missing, UNAVAILABLE when it fails, FAILED_PRECONDITION
// when it lists no GPU, INVALID_ARGUMENT for an index it does not list or a
// GPU the chip table lacks when options.arch is empty.
absl::StatusOr<std::vector<std::unique_ptr<Board>>> DiscoverCudaBoards(
    const CudaBoardOptions& options);

// A board for one known GPU (tests, and DiscoverCudaBoards). board_id is
// "<agent_id>/cuda<index>".
std::unique_ptr<Board> NewCudaBoard(const CudaBoardOptions& options,
                                        const GpuInfo& gpu,
                                        const GpuSpec& spec);

// The flags of a manifest's cuda backend entry with "{arch}" (sm_90a) and
// "{virtual_arch}" (compute_90a) filled in.
std::vector<std::string> ExpandCudaFlags(const std::vector<std::string>& flags,
                                         const std::string& arch);

}  // namespace tunefarm

#endif  // TUNEFARM_AGENT_CUDA_BOARD_H_
