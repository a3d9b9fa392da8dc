// A deterministic, seeded performance model of an Ascend-like NPU (the sim
// chip "Ascend910B-sim") and of the shipped sim_matmul operator on it. Every
// number it gives is simulated. Used by the sim board (capabilities) and by
// the tunefarm-sim-matmul kernel program (build check, timing, profile).
//
// All functions are pure and thread-safe.
#ifndef TUNEFARM_AGENT_SIM_MODEL_H_
#define TUNEFARM_AGENT_SIM_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/params.h"
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

struct SimChip {
  std::string name;
  int cube_cores = 0;
  int vector_cores = 0;
  int64_t ub_bytes = 0;
  int64_t l1_bytes = 0;
  double hbm_gbps = 0;
  double clock_mhz = 0;
  double launch_overhead_us = 0;
  int fractal = 16;  // cube MAC shape: fractal^3 fp16 MACs/cycle/core
  double l2_bytes_per_cycle =
      0;  // per-core GM→L1 (MTE2) rate when data is in L2
  double l1_to_l0_bytes_per_cycle = 0;  // MTE1
  double fixpipe_bytes_per_cycle = 0;   // L0C→GM
};

// 24 AIC / 48 AIV, UB 192 KiB, L1 512 KiB, HBM 1600 GB/s, 1800 MHz, launch
// overhead 5 µs, 16x16x16 fp16 fractals.
SimChip DefaultSimChip();

// The chip as a roofline sees it (peak TFLOPS from fractals × cores × clock).
v1::BoardCapabilities SimChipCapabilities(const SimChip& chip);

// One tunable parameter of sim_matmul, as its kernel implements it. The
// operator manifest (ops/sim_matmul/operator.yaml) lists the same domain.
struct SimParamDomain {
  std::string name;
  std::vector<int64_t> values;
  int64_t default_value;
  std::string stage;
};
const std::vector<SimParamDomain>& SimMatmulDomain();

struct MatmulConfig {
  int64_t tile_m = 0, tile_n = 0, tile_k = 0, buffer_count = 0, block_dim = 0;
};
struct MatmulShape {
  int64_t m = 0, n = 0, k = 0;
};

// Validates names, types and values against SimMatmulDomain():
// INVALID_ARGUMENT naming the field for an unknown or missing parameter, a
// non-integer, or a value outside the domain.
absl::StatusOr<MatmulConfig> ParseMatmulConfig(const ParamMap& params);
// m, n, k from the workload; INVALID_ARGUMENT naming the dim when one is
// missing or outside [1, 1048576], or the dtype is not fp16.
absl::StatusOr<MatmulShape> ParseMatmulShape(const v1::Workload& workload);

// Bytes of UB one core needs: buffer_count × (A tile + B tile) in fp16 plus
// the fp32 C accumulator tile.
int64_t MatmulUbBytes(const MatmulConfig& config);
// The "compiler" check: RESOURCE_EXHAUSTED "UB overflow: tile_m=… needs N
// bytes, UB holds M bytes" when the tiles do not fit.
absl::Status CheckMatmulBuild(const SimChip& chip, const MatmulConfig& config);

// The deliberate ragged-tail bug of the shipped kernel: when n is not a
// multiple of tile_n and tile_n >= 128, the vectorised tail store drops the
// last partial column tile.
bool MatmulHasTailBug(const MatmulConfig& config, int64_t n);

// Where one launch of the matmul kernel spends its time.
struct SimKernelTiming {
  double latency_us = 0;      // Task Duration: launch overhead + device time
  double aicore_time_us = 0;  // per-core busy time (the slowest core)
  double mac_us = 0, mte1_us = 0, mte2_us = 0, scalar_us = 0, fixpipe_us = 0;
  // Fractions of aicore_time_us (may sum above 1: pipes overlap).
  double mac_ratio = 0, mte1_ratio = 0, mte2_ratio = 0, scalar_ratio = 0,
         fixpipe_ratio = 0;
  double icache_miss_rate = 0;
  int64_t block_dim = 0;   // blocks launched
  int64_t cores_used = 0;  // min(block_dim, cube cores)
  int64_t tiles = 0;
  int64_t waves = 0;                // tile rounds on the busiest core
  int64_t total_cycles = 0;         // aic_total_cycles: sum over blocks
  double cube_utilization_pct = 0;  // msprof's whole-chip occupancy
  double hbm_bound_us = 0;          // compulsory HBM traffic / bandwidth
};

// The modelled latency of one launch of sim_matmul.
absl::StatusOr<SimKernelTiming> ModelMatmul(const SimChip& chip,
                                            const MatmulShape& shape,
                                            const MatmulConfig& config);
// Same, from the wire types (parses and build-checks first).
absl::StatusOr<SimKernelTiming> ModelMatmul(const SimChip& chip,
                                            const v1::Workload& workload,
                                            const ParamMap& params);

// Deterministic noise: sample i = latency × (1 + noise), noise roughly
// uniform in ±0.75 %, a function of (seed, params_key, i) only.
double SimNoisySample(double latency_us, uint64_t seed,
                      const std::string& params_key, int64_t index);

// Injected noise (tests and demos of a noisy board): sample i of one run =
// latency × (1 + offset) × (1 + jitter_i), offset and jitter_i uniform in
// ±noise; offset depends on noise_seed only (the board's speed during that
// run, the same for every variant), jitter_i on (noise_seed, params_key, i).
double SimInjectedNoiseSample(double latency_us, double noise,
                              uint64_t noise_seed,
                              const std::string& params_key, int64_t index);

}  // namespace tunefarm

#endif  // TUNEFARM_AGENT_SIM_MODEL_H_
