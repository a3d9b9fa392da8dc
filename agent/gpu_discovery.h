// GPU discovery for the cuda board: which NVIDIA GPUs this machine has, read
// through `nvidia-smi --query-gpu=... --format=csv,noheader,nounits` (no
// NVML link needed), and what a roofline needs to know about each (SM count,
// clocks, peak fp32 FLOP/s, memory bandwidth, the nvcc -arch to build for)
// from a table of known chips.
//
// The parsers are pure functions; QueryGpus runs nvidia-smi as a child
// process (agent/process_runner.h). All thread-safe; results are plain
// values the caller owns.
#ifndef TUNEFARM_AGENT_GPU_DISCOVERY_H_
#define TUNEFARM_AGENT_GPU_DISCOVERY_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

// One row of nvidia-smi's answer. A field nvidia-smi reports as "[N/A]" or
// "[Not Supported]" is nullopt.
struct GpuInfo {
  int index = -1;
  std::string name;  // e.g. "NVIDIA H200"
  std::string uuid;  // e.g. "GPU-5f3c..."
  std::optional<double> memory_total_mib;
  std::optional<double> max_sm_clock_mhz;
  std::optional<double> temperature_c;
  std::optional<double> power_draw_w;
};

// What the name table knows about a chip.
struct GpuSpec {
  std::string chip;  // the table's name, e.g. "H200"
  int sms = 0;
  int cc_major = 0, cc_minor = 0;
  double memory_bandwidth_gbps = 0;  // vendor figure, GB/s
  int fp32_lanes_per_sm = 128;       // FP32 FMA lanes per SM
};

// The query fields, in the order ParseNvidiaSmiGpus expects them.
inline constexpr char kNvidiaSmiQueryFields[] =
    "index,name,uuid,memory.total,clocks.max.sm,temperature.gpu,power.draw";

// argv that asks `nvidia_smi` for kNvidiaSmiQueryFields.
std::vector<std::string> NvidiaSmiQueryArgv(const std::string& nvidia_smi);

// Parses the noheader,nounits CSV (one GPU per line, ", "-separated). A
// line with the wrong number of fields or a non-numeric index is
// INVALID_ARGUMENT naming the line; empty text gives no GPUs.
absl::StatusOr<std::vector<GpuInfo>> ParseNvidiaSmiGpus(std::string_view text);

// Runs nvidia-smi and parses it. NOT_FOUND when nvidia-smi cannot be
// started (no driver on this machine); UNAVAILABLE when it exits non-zero
// (e.g. "No devices were found"), with its stderr.
absl::StatusOr<std::vector<GpuInfo>> QueryGpus(
    const std::string& nvidia_smi = "nvidia-smi",
    absl::Duration timeout = absl::Seconds(30));

// The table entry for an nvidia-smi name ("NVIDIA H200", "NVIDIA H100 80GB
// HBM3", "NVIDIA A100-SXM4-80GB", ...), or nullopt for a chip it lacks.
std::optional<GpuSpec> LookupGpuSpec(std::string_view name);

// "sm_90a" for compute capability 9.0 (Hopper's arch-specific target),
// "sm_<major><minor>" otherwise.
std::string NvccArch(int cc_major, int cc_minor);

// Capabilities for the board: vector_cores = SMs, clock_mhz = the max SM
// clock, peak_tflops = SMs * lanes * 2 * clock (fp32 FMA), memory
// bandwidth; extra holds uuid, memory, compute capability and arch.
v1::BoardCapabilities GpuCapabilities(const GpuInfo& gpu, const GpuSpec& spec);

// One line of health for BoardInfo.health_detail: temperature, power,
// memory, e.g. "gpu 0 NVIDIA H200: 31 C, 74.5 W, 143771 MiB".
std::string GpuHealthLine(const GpuInfo& gpu);

}  // namespace tunefarm

#endif  // TUNEFARM_AGENT_GPU_DISCOVERY_H_
