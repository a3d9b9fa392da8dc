#include "analyzer/rules.h"

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tunefarm {
namespace {

absl::string_view Av(std::string_view s) { return {s.data(), s.size()}; }

// ascend-formats.md §4 and cuda-backend.md §5.1. Longest prefix first
// within a family so "Ascend910B3" does not match "Ascend910B".
const ChipFacts kChips[] = {
    {"Ascend910B3", 20, 40, 294.9, 18.4, 1600, 196608,
     "catlass arch.hpp (20 AIC) x 4096 MAC x 2 x 1.8 GHz"},
    {"Ascend910B", 24, 48, 353.9, 22.1, 1600, 196608,
     "A2 910B2: 24 AIC x 4096 x 2 x 1.8 GHz; HBM 1.6 TB/s"},
    {"Ascend910C", 24, 48, 363.7, 22.1, 1600, 196608,
     "A3 per die at 1.85 GHz (inference, ascend-formats.md §4)"},
    {"Ascend950", 32, 64, 432.0, 54.0, 1600, 253952,
     "950 32-core part: ops-nn errata 432 TFLOPS; 1.6 TB/s"},
    {"NVIDIA H200", 132, 0, 989.0, 67.0, 4800, 0,
     "H200 SXM dense BF16 989 TFLOP/s, 4.8 TB/s (vendor)"},
    {"H200", 132, 0, 989.0, 67.0, 4800, 0,
     "H200 SXM dense BF16 989 TFLOP/s, 4.8 TB/s (vendor)"},
};

struct ThresholdRow {
  std::string_view chip_prefix;  // "" = any
  std::string_view profiler;     // "" = any
  std::function<void(Thresholds&)> apply;
};

// Overrides of the defaults. Kept short on purpose: each row names why.
const ThresholdRow kThresholdRows[] = {
    // PyPTO's own report uses a 70 % "good" utilisation band on every chip.
    {"", "pypto", [](Thresholds& t) { t.pypto_util_medium = 70; }},
    // Kineto timelines carry profiler overhead: gaps read pessimistic
    // (cuda-backend.md §3), so ask for more idle before calling it.
    {"", "kineto", [](Thresholds& t) { t.idle_ratio_high = 0.5; }},
    // On 950 the UB is larger and the cube hands off through registers
    // (Helix architecture notes): a high mte3 matters less.
    {"Ascend950", "", [](Thresholds& t) { t.pipe_bound = 0.85; }},
};

std::string Lower(std::string_view s) { return absl::AsciiStrToLower(Av(s)); }

std::optional<int64_t> Scaled(const Signals& s, std::string_view param,
                              double factor) {
  auto it = s.params.find(std::string(param));
  if (it == s.params.end()) return std::nullopt;
  return std::max<int64_t>(1, static_cast<int64_t>(it->second * factor));
}

Move MoveBy(const Signals& s, std::string_view param, std::string_view dir,
            double factor, double confidence, std::string_view advice) {
  return Move{std::string(param), std::string(dir), Scaled(s, param, factor),
              confidence, std::string(advice)};
}

std::string F(double v) { return absl::StrFormat("%.3g", v); }

using RuleFn =
    std::function<std::optional<Finding>(const Signals&, const Thresholds&)>;
struct RuleRow {
  std::string_view id;
  std::string_view category;
  RuleFn fn;
};

Finding Make(std::string_view id, std::string_view cat, std::string sev,
             std::string summary, std::string evidence,
             std::optional<Move> move = std::nullopt) {
  return Finding{std::string(id),    std::string(cat),    std::move(sev),
                 std::move(summary), std::move(evidence), std::move(move)};
}

const std::vector<RuleRow>& Rules() {
  static const auto* rules = new std::vector<RuleRow>{
      {"pipe.memory_bound", "pipeline",
       [](const Signals& s, const Thresholds& t) -> std::optional<Finding> {
         if (s.bound != "memory" || !s.memory || s.side == "gpu") return {};
         return Make(
             "pipe.memory_bound", "pipeline",
             s.memory->value >= t.pipe_bound ? "high" : "medium",
             "the load pipe (MTE2) dominates the hotspot; deeper "
             "buffering overlaps GM loads with compute",
             absl::StrCat(s.memory->Text(), " vs ",
                          s.compute ? s.compute->Text() : "no compute ratio",
                          "; bound threshold ", F(t.pipe_bound)),
             MoveBy(s, "buffer_count", "raise", 2, 0.6,
                    "deepen the load pipelining (double / triple buffer the "
                    "GM loads so they overlap compute)"));
       }},
      {"pipe.memory_bound_reuse", "memory_hierarchy",
       [](const Signals& s, const Thresholds& t) -> std::optional<Finding> {
         if (s.bound != "memory" || !s.memory || s.side == "gpu" ||
             (s.compute && s.compute->value >= t.pipe_busy)) {
           return {};
         }
         return Make("pipe.memory_bound_reuse", "memory_hierarchy", "medium",
                     "compute is under-fed while loads dominate: a larger "
                     "tile raises data reuse per byte loaded",
                     absl::StrCat(s.memory->Text(), "; ",
                                  s.compute ? s.compute->Text() : "no compute",
                                  " < ", F(t.pipe_busy)),
                     MoveBy(s, "tile_n", "raise", 2, 0.4,
                            "make each block's output tile larger so every "
                            "byte loaded is reused more"));
       }},
      {"pipe.cube_occupied_not_computing", "implementation",
       [](const Signals& s, const Thresholds& t) -> std::optional<Finding> {
         if (s.side != "aic" || !s.occupancy || !s.compute ||
             s.occupancy->value < t.pipe_bound ||
             s.compute->value >= t.pipe_busy) {
           return {};
         }
         return Make("pipe.cube_occupied_not_computing", "implementation",
                     "medium",
                     "cube cores are occupied but the MAC pipe is mostly idle: "
                     "cube_utilization is occupancy, not MAC efficiency",
                     absl::StrCat(s.occupancy->Text(), " (occupancy) vs ",
                                  s.compute->Text()));
       }},
      {"pipe.scalar_high", "implementation",
       [](const Signals& s, const Thresholds& t) -> std::optional<Finding> {
         if (!s.scalar || s.scalar->value < t.scalar_high ||
             (s.compute && s.scalar->value < s.compute->value)) {
           return {};
         }
         return Make("pipe.scalar_high", "implementation", "medium",
                     "scalar work (index maths, branches, per-tile setup) "
                     "rivals compute; fewer, larger tiles amortise it",
                     absl::StrCat(s.scalar->Text(), " >= ", F(t.scalar_high)),
                     MoveBy(s, "tile_m", "raise", 2, 0.3,
                            "give each block fewer, larger tiles so per-tile "
                            "setup and index maths are amortised"));
       }},
      {"pipe.writeback_high", "memory_hierarchy",
       [](const Signals& s, const Thresholds& t) -> std::optional<Finding> {
         const std::optional<Cite>& w =
             s.mte3 && (!s.fixpipe || s.mte3->value >= s.fixpipe->value)
                 ? s.mte3
                 : s.fixpipe;
         if (!w || w->value < t.pipe_bound) return {};
         return Make("pipe.writeback_high", "memory_hierarchy", "medium",
                     "write-back (MTE3 / FIXPIPE) is saturated: results go out "
                     "through GM; fusing the consumer or a larger K per "
                     "output tile cuts it",
                     absl::StrCat(w->Text(), " >= ", F(t.pipe_bound)),
                     MoveBy(s, "tile_k", "raise", 2, 0.3,
                            "accumulate over a larger K step per output tile "
                            "(or fuse the consumer) so less goes back to GM"));
       }},
      {"mem.l2_hit_low", "memory_hierarchy",
       [](const Signals& s, const Thresholds& t) -> std::optional<Finding> {
         if (!s.l2_hit || s.l2_hit->value >= t.l2_hit_low) return {};
         return Make("mem.l2_hit_low", "memory_hierarchy", "medium",
                     "L2 reuse is poor: tile the traversal for locality",
                     absl::StrCat(s.l2_hit->Text(), " < ", F(t.l2_hit_low)));
       }},
      {"mem.ub_overflow", "memory_hierarchy",
       [](const Signals& s, const Thresholds&) -> std::optional<Finding> {
         if (!s.ub_request || s.ub_capacity_bytes <= 0 ||
             s.ub_request->value <= s.ub_capacity_bytes) {
           return {};
         }
         // Lower the largest tile dimension the round sets, by at least
         // half and enough to fit: buffers scale with it linearly.
         std::string param = "tile_n";
         int64_t largest = 0;
         for (const char* p : {"tile_n", "tile_m", "tile_k"}) {
           auto it = s.params.find(p);
           if (it != s.params.end() && it->second > largest) {
             largest = it->second;
             param = p;
           }
         }
         double fit = s.ub_capacity_bytes / s.ub_request->value;
         return Make("mem.ub_overflow", "memory_hierarchy", "high",
                     "the tile's buffers do not fit the Unified Buffer: lower "
                     "a tile dimension until they do",
                     absl::StrCat(s.ub_request->Text(0), " > ",
                                  absl::StrFormat("%.0f", s.ub_capacity_bytes),
                                  " bytes of UB"),
                     MoveBy(s, param, "lower", std::min(0.5, fit), 0.8,
                            "shrink the tile until its buffers fit the "
                            "Unified Buffer"));
       }},
      {"sched.block_underfill", "concurrency",
       [](const Signals& s, const Thresholds& t) -> std::optional<Finding> {
         if (!s.block_dim || s.cores <= 0 || s.block_dim->value <= 0 ||
             s.block_dim->value >= t.block_underfill * s.cores) {
           return {};
         }
         Move m{"block_dim", "raise", s.cores, 0.6,
                absl::StrCat("launch at least ", s.cores,
                             " blocks so every core gets work")};
         return Make("sched.block_underfill", "concurrency", "high",
                     absl::StrCat("only ", F(s.block_dim->value), " of ",
                                  s.cores, " cores get a block"),
                     absl::StrCat(s.block_dim->Text(0), " < ",
                                  F(t.block_underfill), " x ", s.cores,
                                  " cores (board capabilities / chip table)"),
                     m);
       }},
      {"sched.block_not_multiple", "concurrency",
       [](const Signals& s, const Thresholds&) -> std::optional<Finding> {
         if (!s.block_dim || s.cores <= 0 || s.block_dim->value <= s.cores) {
           return {};
         }
         int64_t b = static_cast<int64_t>(s.block_dim->value);
         if (b % s.cores == 0) return {};
         Move m{"block_dim", "set", (b / s.cores) * s.cores, 0.3,
                absl::StrCat("use a block count that is a multiple of the ",
                             s.cores, " cores")};
         return Make(
             "sched.block_not_multiple", "concurrency", "low",
             "the last wave of blocks leaves cores idle (msprof-analyze "
             "BlockDimChecker)",
             absl::StrCat(s.block_dim->Text(0), " % ", s.cores,
                          " cores = ", b % s.cores),
             m);
       }},
      {"timeline.task_wait_high", "concurrency",
       [](const Signals& s, const Thresholds& t) -> std::optional<Finding> {
         // Wait Time is the gap before a task starts (host, dependencies,
         // Python between steps), not a stall inside the kernel: it says
         // nothing about the kernel's pipeline, so no kernel move.
         if (!s.wait_between || s.wait_between->value < t.wait_share_high) {
           return {};
         }
         return Make("timeline.task_wait_high", "concurrency", "low",
                     "tasks wait before they start (Wait Time is the gap "
                     "between tasks: host, dependencies or the framework "
                     "between steps), not a stall inside the kernel",
                     absl::StrCat(s.wait_between->Text(),
                                  " of task time >= ", F(t.wait_share_high)));
       }},
      {"timeline.idle_high", "concurrency",
       [](const Signals& s, const Thresholds& t) -> std::optional<Finding> {
         if (!s.idle_ratio || s.idle_ratio->value < t.idle_ratio_high)
           return {};
         return Make(
             "timeline.idle_high", "concurrency",
             s.idle_ratio->value >= 2 * t.idle_ratio_high ? "high" : "medium",
             "the device is idle for much of the window: work is not "
             "issued fast enough (host, sync or dependencies)",
             absl::StrCat(s.idle_ratio->Text(), " >= ", F(t.idle_ratio_high)));
       }},
      {"host.short_kernels", "host",
       [](const Signals& s, const Thresholds& t) -> std::optional<Finding> {
         if (!s.short_kernels ||
             s.short_kernels->value < t.short_kernel_share) {
           return {};
         }
         return Make("host.short_kernels", "host", "high",
                     "most kernels run shorter than their launch call: "
                     "launch-bound; more work per launch (bigger tiles) or "
                     "fusion / graphs",
                     absl::StrCat(s.short_kernels->Text(),
                                  " >= ", F(t.short_kernel_share), " over ",
                                  s.launches, " launches"),
                     MoveBy(s, "tile_m", "raise", 2, 0.4,
                            "give each launch more work (larger tiles), or "
                            "fuse kernels / capture a graph"));
       }},
      {"host.launch_share_high", "host",
       [](const Signals& s, const Thresholds& t) -> std::optional<Finding> {
         // A launch share of host time alone says nothing when the device
         // is busy far longer than the launches take: also ask that the
         // launch time be a real fraction of the device kernel time.
         if (!s.host_launch || s.host_launch->value < t.host_launch_share) {
           return {};
         }
         if (s.device_kernel_us > 0 &&
             s.launch_us < t.launch_vs_device * s.device_kernel_us) {
           return {};
         }
         return Make(
             "host.launch_share_high", "host", "medium",
             "kernel-launch calls dominate host API time and are comparable "
             "to the device time they feed (Helix symptom E)",
             absl::StrCat(s.host_launch->Text(), " >= ", F(t.host_launch_share),
                          "; launch ", absl::StrFormat("%.1f", s.launch_us),
                          " us vs device kernels ",
                          absl::StrFormat("%.1f", s.device_kernel_us), " us"));
       }},
      {"pypto.utilization_low", "concurrency",
       [](const Signals& s, const Thresholds& t) -> std::optional<Finding> {
         if (!s.pypto_util || s.pypto_util->value >= t.pypto_util_medium) {
           return {};
         }
         bool high = s.pypto_util->value < t.pypto_util_high;
         return Make(
             "pypto.utilization_low", "concurrency", high ? "high" : "medium",
             "cores sit idle (PyPTO perf-analyzer): bigger tiles / "
             "task granularity first (tune-frontend)",
             absl::StrCat(s.pypto_util->Text(1), " % < ",
                          F(high ? t.pypto_util_high : t.pypto_util_medium)),
             MoveBy(s, "tile_m", "raise", 2, high ? 0.5 : 0.3,
                    "use larger tasks (bigger tiles) so cores stay busy"));
       }},
      {"pypto.bubble_high", "concurrency",
       [](const Signals& s, const Thresholds& t) -> std::optional<Finding> {
         if (!s.pypto_bubble ||
             s.pypto_bubble->value <= t.pypto_bubble_medium) {
           return {};
         }
         bool high = s.pypto_bubble->value > t.pypto_bubble_high;
         return Make("pypto.bubble_high", "concurrency",
                     high ? "high" : "medium",
                     "ready tasks wait for a free slot (bubbles): larger task "
                     "granularity / loop unroll, or L1 reuse",
                     absl::StrCat(
                         s.pypto_bubble->Text(2), " % > ",
                         F(high ? t.pypto_bubble_high : t.pypto_bubble_medium)),
                     MoveBy(s, "tile_k", "raise", 2, 0.3,
                            "use coarser tasks (larger K step / unroll) so "
                            "fewer tasks wait for a free slot"));
       }},
      {"pypto.load_imbalance", "concurrency",
       [](const Signals& s, const Thresholds& t) -> std::optional<Finding> {
         if (!s.pypto_balance ||
             s.pypto_balance->value >= t.pypto_balance_medium) {
           return {};
         }
         bool high = s.pypto_balance->value < t.pypto_balance_high;
         return Make(
             "pypto.load_imbalance", "concurrency", high ? "high" : "medium",
             "AIC work is unevenly spread (load balance over AIC "
             "cores only): sort / rebalance sub-graphs (tune-swimlane)",
             absl::StrCat(
                 s.pypto_balance->Text(1), " % < ",
                 F(high ? t.pypto_balance_high : t.pypto_balance_medium)));
       }},
      {"pypto.predecessor_wait", "concurrency",
       [](const Signals& s, const Thresholds& t) -> std::optional<Finding> {
         if (!s.pypto_pred || s.pypto_pred->value <= t.pypto_pred_wait_us) {
           return {};
         }
         return Make("pypto.predecessor_wait", "concurrency", "medium",
                     "AIC cores wait long on predecessors: merge scopes "
                     "(sg_set_scope)",
                     absl::StrCat(s.pypto_pred->Text(1), " us > ",
                                  F(t.pypto_pred_wait_us)));
       }},
      {"ncu.small_grid", "concurrency",
       [](const Signals& s, const Thresholds& t) -> std::optional<Finding> {
         if (s.bound != "latency" || !s.ncu_waves ||
             s.ncu_waves->value >= t.ncu_waves_small) {
           return {};
         }
         return Make(
             "ncu.small_grid", "concurrency", "high",
             "fewer than one wave of blocks: smaller tiles give more "
             "blocks (ncu SOLBottleneck 'Small Grid')",
             absl::StrCat(s.ncu_waves->Text(2), " < ", F(t.ncu_waves_small)),
             MoveBy(s, "tile_m", "lower", 0.5, 0.5,
                    "use smaller tiles so the grid has at least one full "
                    "wave of blocks"));
       }},
      {"ncu.latency_bound", "pipeline",
       [](const Signals& s, const Thresholds& t) -> std::optional<Finding> {
         if (s.bound != "latency" || !s.ncu_compute_sol) return {};
         if (s.ncu_waves && s.ncu_waves->value < t.ncu_waves_small) return {};
         return Make("ncu.latency_bound", "pipeline", "high",
                     "compute and memory throughput both below the latency "
                     "band: more work in flight per SM (more pipeline stages)",
                     absl::StrCat(s.ncu_compute_sol->Text(1), ", ",
                                  s.ncu_memory_sol ? s.ncu_memory_sol->Text(1)
                                                   : "no memory SOL",
                                  " < ", F(t.ncu_latency), " %"),
                     MoveBy(s, "buffer_count", "raise", 2, 0.4,
                            "keep more work in flight per SM (more pipeline "
                            "stages)"));
       }},
      {"ncu.memory_bound", "memory_hierarchy",
       [](const Signals& s, const Thresholds& t) -> std::optional<Finding> {
         if (s.bound != "memory" || s.side != "gpu" || !s.ncu_memory_sol ||
             s.memory_level != "dram") {
           return {};
         }
         return Make("ncu.memory_bound", "memory_hierarchy", "high",
                     "DRAM throughput is the limiter: larger tiles raise "
                     "arithmetic intensity",
                     absl::StrCat(s.ncu_memory_sol->Text(1), ", ",
                                  s.ncu_dram ? s.ncu_dram->Text(1) : "",
                                  " >= ", F(t.ncu_latency), " %"),
                     MoveBy(s, "tile_n", "raise", 2, 0.4,
                            "use larger output tiles per block so each byte "
                            "from DRAM is reused more"));
       }},
      {"ncu.l1_bound", "memory_hierarchy",
       [](const Signals& s, const Thresholds& t) -> std::optional<Finding> {
         if (s.bound != "memory" || s.side != "gpu" ||
             (s.memory_level != "l1" && s.memory_level != "l2")) {
           return {};
         }
         const std::optional<Cite>& c =
             s.memory_level == "l1" ? s.ncu_l1 : s.ncu_l2;
         return Make(
             "ncu.l1_bound", "memory_hierarchy", "medium",
             absl::StrCat("on-chip ",
                          s.memory_level == "l1" ? "L1 / shared" : "L2",
                          " traffic is the limiter, not DRAM: fewer, wider "
                          "on-chip accesses (register reuse, vectorised and "
                          "conflict-free shared loads) help; larger DRAM "
                          "tiles do not"),
             absl::StrCat(c ? c->Text(1) : "", "; ",
                          s.ncu_dram ? s.ncu_dram->Text(1) : "no DRAM metric",
                          " < ", F(t.ncu_latency), " %"));
       }},
      {"ncu.saturated", "bound",
       [](const Signals& s, const Thresholds& t) -> std::optional<Finding> {
         if (!s.saturated || !s.ncu_tensor_pipe) return {};
         return Make("ncu.saturated", "bound", "low",
                     "the tensor pipe runs near its peak: the kernel sits on "
                     "the compute roof; parameter moves can only trim the "
                     "remaining overheads",
                     absl::StrCat(s.ncu_tensor_pipe->Text(1),
                                  " >= ", F(t.ncu_tensor_saturated), " %"));
       }},
      {"sched.block_imbalance", "concurrency",
       [](const Signals& s, const Thresholds& t) -> std::optional<Finding> {
         if (!s.block_balance ||
             s.block_balance->value >= t.block_balance_low) {
           return {};
         }
         return Make("sched.block_imbalance", "concurrency", "medium",
                     "blocks carry uneven work: the slowest block sets the "
                     "kernel time; split the work more evenly across blocks",
                     absl::StrCat(s.block_balance->Text(), " < ",
                                  F(t.block_balance_low)));
       }},
      {"ncu.tensor_pipe_idle", "implementation",
       [](const Signals& s, const Thresholds& t) -> std::optional<Finding> {
         if (!s.ncu_tensor_pipe || !s.ncu_compute_sol ||
             s.ncu_compute_sol->value < t.ncu_latency ||
             s.ncu_tensor_pipe->value >= t.ncu_tensor_pipe_low ||
             s.operator_type != "cube") {
           return {};
         }
         return Make("ncu.tensor_pipe_idle", "implementation", "medium",
                     "high compute throughput but the tensor pipe is mostly "
                     "idle: the math runs on the SIMT pipes",
                     absl::StrCat(s.ncu_tensor_pipe->Text(1), " < ",
                                  F(t.ncu_tensor_pipe_low)));
       }},
  };
  return *rules;
}

}  // namespace

std::string Cite::Text(int precision) const {
  return absl::StrCat("`", file, "` ", column, "=",
                      absl::StrFormat("%.*f", precision, value));
}

const ChipFacts* FindChip(std::string_view chip) {
  std::string c = Lower(chip);
  if (c.empty()) return nullptr;
  for (const ChipFacts& f : kChips) {
    if (absl::StartsWith(c, Lower(f.chip_prefix)) ||
        absl::StrContains(c, Lower(f.chip_prefix))) {
      return &f;
    }
  }
  return nullptr;
}

Thresholds ThresholdsFor(std::string_view profiler, std::string_view chip) {
  Thresholds t;
  std::string c = Lower(chip);
  for (const ThresholdRow& row : kThresholdRows) {
    if (!row.profiler.empty() && row.profiler != profiler) continue;
    if (!row.chip_prefix.empty() &&
        !absl::StartsWith(c, Lower(row.chip_prefix))) {
      continue;
    }
    row.apply(t);
    absl::StrAppend(
        &t.source, "+",
        Av(row.chip_prefix.empty() ? row.profiler : row.chip_prefix));
  }
  return t;
}

namespace {

// Words of a name split at every non-alphanumeric character, lower case:
// "aclnnTranspose_TransposeAiCore_Transpose" -> aclnntranspose,
// transposeaicore, transpose. CamelCase is not split, so
// "TransposeBatchMatMul" or "GroupedMatmul" hold no data-movement word.
std::vector<std::string> NameWords(std::string_view name) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : name) {
    if (absl::ascii_isalnum(static_cast<unsigned char>(c))) {
      cur.push_back(absl::ascii_tolower(static_cast<unsigned char>(c)));
    } else if (!cur.empty()) {
      out.push_back(std::move(cur));
      cur.clear();
    }
  }
  if (!cur.empty()) out.push_back(std::move(cur));
  return out;
}

bool NamesDataMovement(std::string_view name) {
  for (const std::string& w : NameWords(name)) {
    for (std::string_view k :
         {"copy", "memcpy", "transdata", "dma", "memset", "transpose",
          "tensormove", "identity", "contiguous", "viewcopy", "asstrided"}) {
      if (w == k) return true;
    }
  }
  return false;
}

}  // namespace

void Classify(Signals& s, const Thresholds& t) {
  // Operator type: the core type and the cycle counters first (a kernel
  // labelled AI_CORE with no cube cycles ran on the vector side), the
  // pipe ratios next, the name only as a last hint.
  std::string core = absl::AsciiStrToUpper(s.slice_core.empty() ? s.hotspot_core
                                                                : s.slice_core);
  auto set = [&](std::string type, std::string why) {
    s.operator_type = std::move(type);
    s.operator_type_evidence = std::move(why);
  };
  const bool cycles = s.aic_cycles >= 0 && s.aiv_cycles >= 0 &&
                      (s.aic_cycles > 0 || s.aiv_cycles > 0);
  const bool times = s.aic_time_us >= 0 && s.aiv_time_us >= 0 &&
                     (s.aic_time_us > 0 || s.aiv_time_us > 0);
  if (s.side == "gpu") {
    if (s.ncu_tensor_pipe && s.ncu_tensor_pipe->value >= 20) {
      set("cube",
          absl::StrCat(s.ncu_tensor_pipe->Text(1), " (tensor pipe busy)"));
    } else if (s.ncu_tensor_pipe) {
      set("vector",
          absl::StrCat(s.ncu_tensor_pipe->Text(1), " (SIMT pipes only)"));
    }
  } else if (absl::StrContains(core, "AI_CPU") ||
             absl::StrContains(core, "AICPU")) {
    set("aicpu", absl::StrCat("core type ", core,
                              ": runs on the AI CPU, not the AI Cores"));
  } else if (cycles || times) {
    const double c = cycles ? s.aic_cycles : s.aic_time_us;
    const double v = cycles ? s.aiv_cycles : s.aiv_time_us;
    std::string ev = cycles ? absl::StrFormat(
                                  "aic_total_cycles=%.0f, "
                                  "aiv_total_cycles=%.0f",
                                  s.aic_cycles, s.aiv_cycles)
                            : absl::StrFormat(
                                  "aicore_time=%.3f us, "
                                  "aiv_time=%.3f us",
                                  s.aic_time_us, s.aiv_time_us);
    if (!core.empty()) absl::StrAppend(&ev, " (core type ", core, ")");
    if (c > 0 && v > 0) {
      set("mixed", ev);
    } else if (c > 0) {
      set("cube", ev);
    } else {
      set("vector", absl::StrCat(ev, core == "AI_CORE"
                                         ? ": labelled AI_CORE but only the "
                                           "vector side ran"
                                         : ""));
    }
  } else if (absl::StrContains(core, "MIX")) {
    set("mixed", absl::StrCat("core type ", s.hotspot_core));
  } else if (absl::StrContains(core, "VECTOR") ||
             absl::StrContains(core, "AIV")) {
    set("vector", absl::StrCat("core type ", core));
  } else if (s.compute) {
    double thr = s.side == "aic" ? t.op_type_cube : t.op_type_vector;
    if (s.compute->value >= thr) {
      set(s.side == "aic" ? "cube" : "vector",
          absl::StrCat(s.compute->Text(), " >= ", F(thr)));
    } else if (core == "AI_CORE" || absl::StrContains(core, "CUBE")) {
      set("cube", absl::StrCat("core type ", core, " (label only; ",
                               s.compute->Text(), " is low)"));
    }
  } else if (core == "AI_CORE" || absl::StrContains(core, "CUBE")) {
    set("cube",
        absl::StrCat("core type ", core, " (label only: no cycle counters)"));
  }
  if (s.operator_type == "unknown") {
    std::string name = s.hotspot_type.empty() ? s.hotspot : s.hotspot_type;
    if (NamesDataMovement(name) || NamesDataMovement(s.hotspot)) {
      set("copy", absl::StrCat("op `", s.hotspot,
                               "` names data movement (a whole word of the "
                               "name; no core type or cycle counters)"));
    }
  }

  // Compute vs memory vs latency.
  // SOLBottleneck needs both sides: with one missing, only a side at or
  // above the bound band is conclusive.
  if ((s.ncu_compute_sol || s.ncu_memory_sol) &&
      !(s.ncu_compute_sol && s.ncu_memory_sol)) {
    const Cite& one =
        s.ncu_compute_sol ? *s.ncu_compute_sol : *s.ncu_memory_sol;
    if (one.value >= t.ncu_no_bound) {
      s.bound = s.ncu_compute_sol ? "compute" : "memory";
      s.bound_evidence = absl::StrCat(one.Text(1), " >= ", F(t.ncu_no_bound),
                                      " % (the other SOL metric is absent)");
    }
    return;
  }
  if (s.ncu_tensor_pipe && s.ncu_tensor_pipe->value >= t.ncu_tensor_saturated) {
    // Pipe utilisation is first-class: a tensor pipe near its peak is the
    // compute roof whatever the memory SOL says (L1 traffic of a GEMM
    // feeding the tensor cores reads as high memory throughput).
    s.bound = "compute";
    s.saturated = true;
    s.bound_evidence = absl::StrCat(
        s.ncu_tensor_pipe->Text(1), " >= ", F(t.ncu_tensor_saturated),
        " %: tensor pipe near peak, compute-bound at the roofline "
        "(saturated)",
        s.ncu_compute_sol ? absl::StrCat("; ", s.ncu_compute_sol->Text(1)) : "",
        s.ncu_dram ? absl::StrCat("; ", s.ncu_dram->Text(1)) : "");
    return;
  }
  if (s.ncu_compute_sol || s.ncu_memory_sol) {
    double c = s.ncu_compute_sol ? s.ncu_compute_sol->value : 0;
    double m = s.ncu_memory_sol ? s.ncu_memory_sol->value : 0;
    std::string ev = absl::StrCat(
        s.ncu_compute_sol ? s.ncu_compute_sol->Text(1) : "no compute SOL", ", ",
        s.ncu_memory_sol ? s.ncu_memory_sol->Text(1) : "no memory SOL");
    if (std::max(c, m) >= t.ncu_no_bound) {
      s.bound = c >= m ? "compute" : "memory";
      s.bound_evidence = absl::StrCat(ev, "; max >= ", F(t.ncu_no_bound),
                                      " % (ncu 'High Throughput')");
    } else if (std::max(c, m) < t.ncu_latency) {
      s.bound = "latency";
      s.bound_evidence = absl::StrCat(ev, "; both < ", F(t.ncu_latency),
                                      " % (ncu 'Latency Issue')");
    } else if (std::abs(c - m) >= t.ncu_balanced) {
      s.bound = c > m ? "compute" : "memory";
      s.bound_evidence =
          absl::StrCat(ev, "; gap >= ", F(t.ncu_balanced), " points");
    } else {
      s.bound = c >= m ? "compute" : "memory";
      s.bound_evidence = absl::StrCat(
          ev, "; balanced within ", F(t.ncu_balanced),
          " points (ncu 'Balanced Throughput'), larger side named");
    }
    if (s.bound == "memory") {
      // Which level carries the traffic: DRAM-bound and L1/shared-bound
      // kernels need opposite moves.
      double dram = s.ncu_dram ? s.ncu_dram->value : -1;
      double l1 = s.ncu_l1 ? s.ncu_l1->value : -1;
      double l2 = s.ncu_l2 ? s.ncu_l2->value : -1;
      if (dram >= t.ncu_latency || (dram < 0 && l1 < 0 && l2 < 0)) {
        s.memory_level = "dram";
      } else if (l1 >= l2 && l1 >= 0) {
        s.memory_level = "l1";
      } else if (l2 >= 0) {
        s.memory_level = "l2";
      } else {
        s.memory_level = "dram";
      }
      absl::StrAppend(
          &s.bound_evidence, "; traffic level ", s.memory_level,
          s.ncu_dram ? absl::StrCat(" (", s.ncu_dram->Text(1), ")") : "");
    }
    return;
  }
  if (s.compute || s.memory) {
    double c = s.compute ? s.compute->value : 0;
    double m = s.memory ? s.memory->value : 0;
    std::string ev =
        absl::StrCat(s.memory ? s.memory->Text() : "no load ratio", " vs ",
                     s.compute ? s.compute->Text() : "no compute ratio");
    if (std::max(c, m) < t.pipe_busy) {
      s.bound = "latency";
      s.bound_evidence = absl::StrCat(ev, "; both < ", F(t.pipe_busy),
                                      ": time goes to scalar, sync, launch");
    } else {
      s.bound = m > c ? "memory" : "compute";
      s.bound_evidence = absl::StrCat(ev, "; larger side >= ", F(t.pipe_busy));
    }
    return;
  }
  if (s.achieved_bw && s.peak_bw_gbps > 0) {
    double frac = s.achieved_bw->value / s.peak_bw_gbps;
    if (frac >= t.ncu_latency / 100) {
      s.bound = "memory";
      s.bound_evidence = absl::StrFormat(
          "%s GB/s achieved = %.0f %% of the %.0f GB/s HBM peak",
          s.achieved_bw->Text(1), 100 * frac, s.peak_bw_gbps);
      return;
    }
    s.bound = "latency";
    s.bound_evidence = absl::StrFormat(
        "%s GB/s achieved = %.0f %% of the %.0f GB/s HBM peak: not "
        "bandwidth-bound; no pipe ratios to tell compute from latency, "
        "latency assumed",
        s.achieved_bw->Text(1), 100 * frac, s.peak_bw_gbps);
    return;
  }
  if (s.idle_ratio && s.short_kernels &&
      s.idle_ratio->value >= t.idle_ratio_high &&
      s.short_kernels->value >= t.short_kernel_share) {
    s.bound = "latency";
    s.bound_evidence =
        absl::StrCat(s.idle_ratio->Text(), ", ", s.short_kernels->Text(),
                     ": launch-bound timeline");
  }
}

std::vector<Finding> ApplyRules(const Signals& s, const Thresholds& t) {
  std::vector<Finding> out;
  for (const RuleRow& row : Rules()) {
    if (std::optional<Finding> f = row.fn(s, t)) out.push_back(*std::move(f));
  }
  return out;
}

}  // namespace tunefarm
