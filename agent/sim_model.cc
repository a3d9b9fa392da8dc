#include "agent/sim_model.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tunefarm {
namespace {

// Cycle costs of the model. Chosen so that the parameter space matters: small
// tiles waste fractals and pay per-k-step overheads, one buffer serialises
// load and compute, more buffers cost sync and UB, block_dim above the core
// count runs in two uneven waves.
constexpr double kDmaSetupCycles = 64;  // per MTE2 transfer
constexpr double kMte1SetupCycles = 8;
constexpr double kScalarStepCycles = 24;  // loop and address bookkeeping
constexpr double kScalarPerBufferCycles = 6;
constexpr double kSyncPerBufferCycles = 12;  // set_flag / wait_flag per buffer
constexpr double kTileSetupCycles = 200;
constexpr double kFixpipeSetupCycles = 40;
constexpr int64_t kMaxDim = int64_t{1} << 20;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// How much of the smaller of load and compute hides under the larger one.
double OverlapFraction(int64_t buffers) {
  switch (buffers) {
    case 1:
      return 0.0;
    case 2:
      return 0.80;
    case 3:
      return 0.92;
    default:
      return 0.96;
  }
}

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

}  // namespace

SimChip DefaultSimChip() {
  SimChip c;
  c.name = "Ascend910B-sim";
  c.cube_cores = 24;
  c.vector_cores = 48;
  c.ub_bytes = 196608;
  c.l1_bytes = 524288;
  c.hbm_gbps = 1600;
  c.clock_mhz = 1800;
  c.launch_overhead_us = 5.0;
  c.fractal = 16;
  c.l2_bytes_per_cycle = 110;  // the A2 ini's l2_rate
  c.l1_to_l0_bytes_per_cycle = 256;
  c.fixpipe_bytes_per_cycle = 64;
  return c;
}

v1::BoardCapabilities SimChipCapabilities(const SimChip& chip) {
  v1::BoardCapabilities caps;
  caps.set_cube_cores(chip.cube_cores);
  caps.set_vector_cores(chip.vector_cores);
  caps.set_ub_bytes(chip.ub_bytes);
  caps.set_memory_bandwidth_gbps(chip.hbm_gbps);
  caps.set_clock_mhz(chip.clock_mhz);
  const double f3 =
      static_cast<double>(chip.fractal) * chip.fractal * chip.fractal;
  caps.set_peak_tflops(chip.cube_cores * f3 * 2 * chip.clock_mhz * 1e6 / 1e12);
  caps.set_launch_overhead_us(chip.launch_overhead_us);
  (*caps.mutable_extra())["l1_bytes"] = absl::StrCat(chip.l1_bytes);
  (*caps.mutable_extra())["cube_fractal"] =
      absl::StrCat(chip.fractal, "x", chip.fractal, "x", chip.fractal, " fp16");
  (*caps.mutable_extra())["simulated"] = "true";
  return caps;
}

const std::vector<SimParamDomain>& SimMatmulDomain() {
  static const std::vector<SimParamDomain>* domain =
      new std::vector<SimParamDomain>{
          {"tile_m", {16, 32, 64, 128, 256}, 32, "tiling"},
          {"tile_n", {16, 32, 64, 128, 256}, 32, "tiling"},
          {"tile_k", {16, 32, 64, 128}, 32, "tiling"},
          {"buffer_count", {1, 2, 3, 4}, 1, "pipeline"},
          {"block_dim", {8, 16, 24, 32}, 16, "tiling"},
      };
  return *domain;
}

absl::StatusOr<MatmulConfig> ParseMatmulConfig(const ParamMap& params) {
  std::set<std::string> known;
  for (const SimParamDomain& d : SimMatmulDomain()) known.insert(d.name);
  for (const auto& [name, value] : params) {
    if (known.count(name) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown parameter \"", name.substr(0, 64),
          "\" (sim_matmul has: ", absl::StrJoin(known, ", "), ")"));
    }
  }
  MatmulConfig c;
  for (const SimParamDomain& d : SimMatmulDomain()) {
    auto it = params.find(d.name);
    if (it == params.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter ", d.name, " is missing"));
    }
    if (it->second.kind_case() != v1::ParamValue::kIntValue) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter ", d.name, " must be an integer, got \"",
                       ParamValueToString(it->second).substr(0, 64), "\""));
    }
    const int64_t v = it->second.int_value();
    if (std::find(d.values.begin(), d.values.end(), v) == d.values.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter ", d.name, "=", v, " is outside its domain [",
                       absl::StrJoin(d.values, ", "), "]"));
    }
    if (d.name == "tile_m") c.tile_m = v;
    if (d.name == "tile_n") c.tile_n = v;
    if (d.name == "tile_k") c.tile_k = v;
    if (d.name == "buffer_count") c.buffer_count = v;
    if (d.name == "block_dim") c.block_dim = v;
  }
  return c;
}

absl::StatusOr<MatmulShape> ParseMatmulShape(const v1::Workload& workload) {
  if (workload.dtype() != "fp16") {
    return absl::InvalidArgumentError(
        absl::StrCat("workload ", workload.name(), ": dtype \"",
                     workload.dtype().substr(0, 32),
                     "\" is not supported (sim_matmul is fp16 only)"));
  }
  MatmulShape s;
  for (const char* dim : {"m", "n", "k"}) {
    auto it = workload.dims().find(dim);
    if (it == workload.dims().end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "workload ", workload.name(), ": dim ", dim, " is missing"));
    }
    if (it->second < 1 || it->second > kMaxDim) {
      return absl::InvalidArgumentError(
          absl::StrCat("workload ", workload.name(), ": dim ", dim, "=",
                       it->second, " is outside [1, ", kMaxDim, "]"));
    }
    (dim[0] == 'm' ? s.m : dim[0] == 'n' ? s.n : s.k) = it->second;
  }
  for (const auto& [name, value] : workload.dims()) {
    if (name != "m" && name != "n" && name != "k") {
      return absl::InvalidArgumentError(
          absl::StrCat("workload ", workload.name(), ": unknown dim \"",
                       name.substr(0, 32), "\" (sim_matmul has m, n, k)"));
    }
  }
  return s;
}

int64_t MatmulUbBytes(const MatmulConfig& c) {
  return c.buffer_count * (c.tile_m * c.tile_k + c.tile_k * c.tile_n) * 2 +
         c.tile_m * c.tile_n * 4;
}

absl::Status CheckMatmulBuild(const SimChip& chip, const MatmulConfig& c) {
  const int64_t need = MatmulUbBytes(c);
  if (need > chip.ub_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "UB overflow: tile_m=", c.tile_m, " tile_n=", c.tile_n,
        " tile_k=", c.tile_k, " buffer_count=", c.buffer_count, " needs ", need,
        " bytes, UB holds ", chip.ub_bytes, " bytes"));
  }
  return absl::OkStatus();
}

bool MatmulHasTailBug(const MatmulConfig& c, int64_t n) {
  return c.tile_n >= 128 && n % c.tile_n != 0;
}

absl::StatusOr<SimKernelTiming> ModelMatmul(const SimChip& chip,
                                            const MatmulShape& s,
                                            const MatmulConfig& c) {
  if (absl::Status st = CheckMatmulBuild(chip, c); !st.ok()) return st;
  const double fr = chip.fractal;
  // One k-step of one tile on one core, in cycles.
  const double mac = std::ceil(c.tile_m / fr) * std::ceil(c.tile_n / fr) *
                     std::ceil(c.tile_k / fr);
  const double load_bytes =
      static_cast<double>(c.tile_m * c.tile_k + c.tile_k * c.tile_n) * 2;
  const double mte2 = load_bytes / chip.l2_bytes_per_cycle + kDmaSetupCycles;
  const double mte1 =
      load_bytes / chip.l1_to_l0_bytes_per_cycle + kMte1SetupCycles;
  const double scalar =
      kScalarStepCycles + kScalarPerBufferCycles * c.buffer_count;
  const double sync = kSyncPerBufferCycles * c.buffer_count;
  const double compute = std::max(mac, mte1);
  const double ov = OverlapFraction(c.buffer_count);
  const double step = std::max(mte2, compute) +
                      (1 - ov) * std::min(mte2, compute) + scalar + sync;
  const int64_t k_steps = CeilDiv(s.k, c.tile_k);
  const double prologue = c.buffer_count > 1 ? mte2 : 0;
  const double fixpipe = static_cast<double>(c.tile_m * c.tile_n * 2) /
                             chip.fixpipe_bytes_per_cycle +
                         kFixpipeSetupCycles;
  const double tile_cycles =
      k_steps * step + prologue + fixpipe + kTileSetupCycles;

  SimKernelTiming t;
  t.tiles = CeilDiv(s.m, c.tile_m) * CeilDiv(s.n, c.tile_n);
  t.block_dim = c.block_dim;
  t.cores_used = std::min<int64_t>({c.block_dim, chip.cube_cores, t.tiles});
  // Tiles go round-robin to blocks; blocks beyond the core count run in a
  // second (uneven) wave on the same cores.
  const int64_t tiles_per_block = CeilDiv(t.tiles, c.block_dim);
  const int64_t block_waves = CeilDiv(c.block_dim, chip.cube_cores);
  t.waves = tiles_per_block * block_waves;
  const double core_cycles = t.waves * tile_cycles;
  const double f_mhz = chip.clock_mhz;
  t.aicore_time_us = core_cycles / f_mhz;
  t.mac_us = t.waves * k_steps * mac / f_mhz;
  t.mte1_us = t.waves * k_steps * mte1 / f_mhz;
  t.mte2_us = t.waves * (k_steps * mte2 + prologue) / f_mhz;
  t.scalar_us =
      t.waves * (k_steps * (scalar + sync) + kTileSetupCycles) / f_mhz;
  t.fixpipe_us = t.waves * fixpipe / f_mhz;
  const double unique_bytes =
      static_cast<double>(s.m * s.k + s.k * s.n + s.m * s.n) * 2;
  t.hbm_bound_us = unique_bytes / (chip.hbm_gbps * 1e3);
  const double device_us = std::max(t.aicore_time_us, t.hbm_bound_us);
  t.latency_us = chip.launch_overhead_us + device_us;
  t.mac_ratio = t.mac_us / t.aicore_time_us;
  t.mte1_ratio = t.mte1_us / t.aicore_time_us;
  t.mte2_ratio = t.mte2_us / t.aicore_time_us;
  t.scalar_ratio = t.scalar_us / t.aicore_time_us;
  t.fixpipe_ratio = t.fixpipe_us / t.aicore_time_us;
  t.icache_miss_rate = 0.02 + 0.01 * c.buffer_count;
  // Busy cycles summed over blocks: every block runs ~tiles/block_dim tiles.
  t.total_cycles = static_cast<int64_t>(
      std::llround(static_cast<double>(t.tiles) * tile_cycles));
  t.cube_utilization_pct =
      100.0 * t.total_cycles / (f_mhz * chip.cube_cores * t.latency_us);
  return t;
}

absl::StatusOr<SimKernelTiming> ModelMatmul(const SimChip& chip,
                                            const v1::Workload& workload,
                                            const ParamMap& params) {
  absl::StatusOr<MatmulShape> shape = ParseMatmulShape(workload);
  if (!shape.ok()) return shape.status();
  absl::StatusOr<MatmulConfig> config = ParseMatmulConfig(params);
  if (!config.ok()) return config.status();
  return ModelMatmul(chip, *shape, *config);
}

double SimNoisySample(double latency_us, uint64_t seed,
                      const std::string& params_key, int64_t index) {
  const uint64_t h = SplitMix64(SplitMix64(seed ^ Fnv1a(params_key)) +
                                static_cast<uint64_t>(index));
  const double u = static_cast<double>(h >> 11) * 0x1.0p-53;  // [0, 1)
  return latency_us * (1.0 + (2.0 * u - 1.0) * 0.0075);
}

double SimInjectedNoiseSample(double latency_us, double noise,
                              uint64_t noise_seed,
                              const std::string& params_key, int64_t index) {
  auto uniform = [](uint64_t h) {  // [-1, 1)
    return 2.0 * (static_cast<double>(h >> 11) * 0x1.0p-53) - 1.0;
  };
  const double offset =
      uniform(SplitMix64(SplitMix64(noise_seed) ^ 0x5eed0ff5e7ULL));
  const double jitter =
      uniform(SplitMix64(SplitMix64(noise_seed ^ Fnv1a(params_key)) +
                         static_cast<uint64_t>(index)));
  return latency_us * (1.0 + offset * noise) * (1.0 + jitter * noise);
}

}  // namespace tunefarm
