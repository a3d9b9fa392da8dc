// The diagnosis rules as data: chip facts (for the roofline and core
// counts), thresholds per chip and per profiler, and the rule table that
// turns signals into bottlenecks and parameter moves.
//
// The starting thresholds are the seed workflows' (ascend-formats.md §1.1,
// §1.3.3, §1.4; cuda-backend.md §5.2): msprof-analyze's advisor bands for
// pipe ratios (0.8 bound), PyPTO perf-analyzer's utilisation / bubble / load
// balance bands, Nsight Compute's SOLBottleneck (80 / 60 / 10). All ratio
// thresholds are on the fraction scale 0..1. A chip- or profiler-specific
// row overrides the defaults field by field (see kThresholdRows in
// rules.cc); adding a chip or a rule is adding a row.
//
// Everything here is immutable after static initialisation: thread-safe.
#ifndef TUNEFARM_ANALYZER_RULES_H_
#define TUNEFARM_ANALYZER_RULES_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tunefarm {

// Public hardware facts for a chip (ascend-formats.md §4, cuda-backend.md
// §5.1). Matched by prefix of the bundle's chip string, case-insensitive.
struct ChipFacts {
  std::string_view chip_prefix;
  int cube_cores;      // AIC (Ascend) or SMs (NVIDIA)
  int vector_cores;    // AIV; 0 on NVIDIA
  double cube_tflops;  // dense BF16/FP16 peak
  double vector_tflops;
  double hbm_gbps;
  int64_t ub_bytes;  // 0 when not applicable
  std::string_view source;
};
// nullptr when the chip is unknown.
const ChipFacts* FindChip(std::string_view chip);

struct Thresholds {
  // Pipe ratios (fractions).
  double pipe_bound = 0.8;        // msprof-analyze operator_bound_ratio
  double pipe_busy = 0.5;         // under this on both sides: latency-bound
  double cube_mte2_bound = 0.95;  // advisor: aic_mte2_ratio >= 0.95
  double scalar_high = 0.2;       // Helix scalar-overhead (0..1 scale)
  double op_type_cube = 0.2;      // Helix op-type guess, 0..1 scale
  double op_type_vector = 0.2;
  double op_type_mixed_vector = 0.3;
  double wait_share_high = 0.2;  // Task Wait Time / Duration of hotspot
  double block_underfill = 0.5;  // Block Dim / cores below this
  double l2_hit_low = 0.8;       // .bin spec healthy L2 hit > 0.80
  // Timeline.
  double idle_ratio_high = 0.3;
  double short_kernel_share = 0.5;  // launch-bound when most are short
  double host_launch_share = 0.3;   // launch-related share of host API
  // PyPTO perf-analyzer bands (percent).
  double pypto_util_high = 50, pypto_util_medium = 70;
  double pypto_bubble_high = 20, pypto_bubble_medium = 10;
  double pypto_balance_high = 60, pypto_balance_medium = 80;
  double pypto_pred_wait_us = 500;
  // Nsight Compute SOLBottleneck (percent).
  double ncu_no_bound = 80, ncu_latency = 60, ncu_balanced = 10;
  double ncu_waves_small = 1;
  double ncu_tensor_pipe_low = 50;
  // A tensor pipe this busy (percent of peak) is at the compute roof.
  double ncu_tensor_saturated = 80;
  // msprof op: per-block time balance (mean / max) under this is uneven.
  double block_balance_low = 0.8;
  // Host launch time against device kernel time: above this share the
  // host cannot keep the device fed.
  double launch_vs_device = 0.3;
  // Where this set came from, e.g. "default+A2" for the markdown.
  std::string source = "default";
};
// Defaults overlaid with every row whose chip prefix and profiler match.
Thresholds ThresholdsFor(std::string_view profiler, std::string_view chip);

// The analyzer's view of one profile, format-neutral: what the rules test.
// Optional fields are absent when the profile does not carry them.
struct Cite {
  std::string file, column;
  double value = 0;
  std::string Text(int precision = 3) const;  // "`file` column=value"
};
struct Signals {
  std::string profiler, chip;
  std::map<std::string, int64_t> params;  // the round's int params
  // Hotspot.
  std::string hotspot, hotspot_type, hotspot_core;
  double hotspot_share = 0, hotspot_us = 0;
  int64_t hotspot_count = 0;
  std::string side;           // aic | aiv | gpu
  std::string side_evidence;  // why that side (cycles, time, core label)
  // The core type of the launches the ratios come from (the hotspot's
  // largest core-type slice), and a note when it ran on several.
  std::string slice_core;
  std::string core_split;
  // Cycle counters and per-side time of that slice; negative = the table
  // has no such column.
  double aic_cycles = -1, aiv_cycles = -1;
  double aic_time_us = -1, aiv_time_us = -1;
  std::optional<Cite> compute, memory, scalar, mte3, fixpipe, occupancy,
      block_dim, wait, l2_hit, mte1;
  int cores = 0;  // of the hotspot's side
  // Timeline.
  std::optional<Cite> idle_ratio, short_kernels, host_launch, bubble_step;
  int64_t launches = 0;
  // Host kernel-launch API time and the device kernel time it feeds (µs).
  double launch_us = 0, device_kernel_us = 0;
  // Gaps between tasks (Wait Time): a scheduling / host signal, never an
  // in-kernel stall.
  std::optional<Cite> wait_between;
  // Achieved main-memory bandwidth of the hotspot (MemoryAccess group,
  // GB/s) against the chip's HBM bandwidth.
  std::optional<Cite> achieved_bw;
  double peak_bw_gbps = 0;
  // msprof op per-block balance (mean / max block time).
  std::optional<Cite> block_balance;
  // PyPTO.
  std::optional<Cite> pypto_util, pypto_bubble, pypto_balance, pypto_pred;
  // Nsight Compute.
  std::optional<Cite> ncu_compute_sol, ncu_memory_sol, ncu_waves,
      ncu_tensor_pipe, ncu_occupancy, ncu_dram, ncu_l1, ncu_l2;
  // Derived by Classify on ncu: dram | l1 | l2 when memory-bound, and
  // whether the tensor pipe is at its roof.
  std::string memory_level;
  bool saturated = false;
  // UB pressure: a build log's overflow message (value = bytes requested,
  // column names the capacity it exceeded); ub_capacity_bytes from it.
  std::optional<Cite> ub_request;
  double ub_capacity_bytes = 0;
  // Derived by Classify (rules.cc).
  // cube | vector | mixed | copy | aicpu | unknown
  std::string operator_type = "unknown";
  std::string operator_type_evidence;
  std::string bound = "unknown";  // compute|memory|latency|unknown
  std::string bound_evidence;
};

// Fills operator_type / bound (+ evidence) from the signals.
void Classify(Signals& s, const Thresholds& t);

struct Move {
  std::string parameter, direction;  // raise | lower | set
  std::optional<int64_t> value;
  double confidence = 0;
  // The move in words, for rounds whose parameters lack `parameter`.
  std::string advice;
};
struct Finding {
  std::string rule;      // rule id
  std::string category;  // pipeline | memory_hierarchy | concurrency | host |
                         // implementation | bound
  std::string severity;  // high | medium | low
  std::string summary;   // the inference, one sentence
  std::string evidence;  // the facts (file, column, value vs threshold)
  std::optional<Move> move;
};

// Runs every rule row; findings in table order.
std::vector<Finding> ApplyRules(const Signals& s, const Thresholds& t);

}  // namespace tunefarm

#endif  // TUNEFARM_ANALYZER_RULES_H_
