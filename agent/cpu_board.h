// The `cpu` board: tunes an operator's "cpu" backend on this machine's cores.
// Per variant: BuildVariant compiles the backend's sources with the variant's
// parameters as compile-time constants (cached), then RunStages runs the
// program's build-check, reference, run and profile stages in child
// processes pinned to the board's CPUs (TF_CPU_LIST, applied by the
// harness), checks the output against the reference (ComparePrecision) and
// summarises the real timing (warm-up, samples, median; caches flushed
// between samples when the policy says flush_cache). The profile bundle holds
// hardware counters (perf_event_open around the timed loop) or, where the
// kernel refuses them, counters_unavailable.txt saying why; the measurement
// stays either way. Numbers are measured (simulated=false).
//
// Capabilities (BoardInfo.capabilities), estimated once at construction:
//   vector_cores        the board's CPUs
//   clock_mhz           cpuinfo_max_freq of its first CPU, else /proc/cpuinfo
//                       "cpu MHz"
//   peak_tflops         cores × GHz × 2 FMA pipes × 2 flops × fp32 SIMD lanes
//                       (16 with avx512f, 8 with avx2+fma, 4 otherwise) / 1000
//   memory_bandwidth_gbps  best of 3 single-thread 64 MiB memcpy passes,
//                       counting bytes read + written (a lower bound for
//                       multi-core bandwidth)
//   extra: model, simd, perf_counters ("available" or the reason), cpus.
//
// Isolation (docs/measurement.md): by default each variant is built as a
// shared object and its stages run inside the board's persistent runner
// (agent/variant_runner.h: one long-lived child process, pinned like the
// stages, restarted after a variant that crashes, hangs or fails in it, and
// recycled after runner_recycle_after variants). A sweep's
// `measurement.isolation: process`, a backend's `isolation: process` in the
// manifest, or a missing runner binary give one process per stage instead
// (a normal executable). Results, precision verdicts and the ABBA order are
// the same either way.
//
// NewCpuBoard returns a Board the caller owns. Thread-safety as Board: one
// Evaluate at a time (the agent guarantees it), info() from any thread.
#ifndef TUNEFARM_AGENT_CPU_BOARD_H_
#define TUNEFARM_AGENT_CPU_BOARD_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "agent/board.h"

namespace tunefarm {

struct CpuBoardOptions {
  std::string board_id, agent_id, node;
  // Work directories go under it: <work_root>/<sweep>/round_<r>/epoch_<e>.
  std::string work_root;
  // The variant build cache; "" = <work_root>/build_cache.
  std::string cache_dir;
  // The folder holding harness.h (the repository's ops/common); passed to the
  // compiler as -I, along with the operator's package folder.
  std::string harness_dir;
  // The CPUs this board owns (child processes are pinned to them); empty =
  // every CPU this process may run on.
  std::vector<int> cpus;
  // Seed of the inputs when the work item has none (seed 0).
  uint64_t seed = 0;
  absl::Duration build_timeout = absl::Minutes(5);
  // Timeout of each stage (build check, reference, run, profile).
  absl::Duration stage_timeout = absl::Minutes(2);
  std::map<std::string, std::string> labels;
  // tunefarm-variant-runner; "" = FindVariantRunnerBinary(). Not found:
  // every variant runs one process per stage.
  std::string runner_binary;
  int runner_recycle_after = 32;
};

std::unique_ptr<Board> NewCpuBoard(CpuBoardOptions options);

// Splits this process's allowed CPUs into `boards` disjoint, contiguous
// groups (for `--boards cpu:N`); fewer groups when there are fewer CPUs.
std::vector<std::vector<int>> SplitAllowedCpus(int boards);

}  // namespace tunefarm

#endif  // TUNEFARM_AGENT_CPU_BOARD_H_
