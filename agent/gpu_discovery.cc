#include "agent/gpu_discovery.h"

#include <cmath>
#include <cstdlib>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/process_runner.h"
#include "common/files.h"
#include "common/status_macros.h"

namespace tunefarm {
namespace {

constexpr int kFields = 7;

std::optional<double> Number(absl::string_view cell) {
  cell = absl::StripAsciiWhitespace(cell);
  double v = 0;
  if (cell.empty() || cell[0] == '[' || !absl::SimpleAtod(cell, &v) ||
      !std::isfinite(v)) {
    return std::nullopt;
  }
  return v;
}

struct TableRow {
  const char* needle;  // matched case-insensitively inside the name
  GpuSpec spec;
};

// Vendor datasheet figures. Order matters: more specific names first
// ("H100 PCIe" before "H100").
const TableRow kTable[] = {
    {"GH200", {"GH200", 132, 9, 0, 4000, 128}},
    {"H200", {"H200", 132, 9, 0, 4800, 128}},
    {"H100 PCIe", {"H100-PCIe", 114, 9, 0, 2000, 128}},
    {"H100 NVL", {"H100-NVL", 132, 9, 0, 3900, 128}},
    {"H100", {"H100-SXM", 132, 9, 0, 3350, 128}},
    {"H20", {"H20", 78, 9, 0, 4000, 128}},
    {"A100-PCIE-40GB", {"A100-PCIe-40GB", 108, 8, 0, 1555, 64}},
    {"A100", {"A100", 108, 8, 0, 2039, 64}},
    {"A10G", {"A10G", 80, 8, 6, 600, 128}},
    {"L40S", {"L40S", 142, 8, 9, 864, 128}},
    {"L4", {"L4", 58, 8, 9, 300, 128}},
    {"RTX 4090", {"RTX-4090", 128, 8, 9, 1008, 128}},
    {"T4", {"T4", 40, 7, 5, 320, 64}},
    {"V100", {"V100", 80, 7, 0, 900, 64}},
};

}  // namespace

std::vector<std::string> NvidiaSmiQueryArgv(const std::string& nvidia_smi) {
  return {nvidia_smi, absl::StrCat("--query-gpu=", kNvidiaSmiQueryFields),
          "--format=csv,noheader,nounits"};
}

absl::StatusOr<std::vector<GpuInfo>> ParseNvidiaSmiGpus(std::string_view text) {
  std::vector<GpuInfo> gpus;
  int line_no = 0;
  for (absl::string_view line :
       absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    std::vector<absl::string_view> f = absl::StrSplit(line, ',');
    if (f.size() != kFields) {
      return absl::InvalidArgumentError(
          absl::StrCat("nvidia-smi output line ", line_no, ": expected ",
                       kFields, " fields (", kNvidiaSmiQueryFields, "), got ",
                       f.size(), ": \"", line, "\""));
    }
    GpuInfo g;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(f[0]), &g.index) ||
        g.index < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("nvidia-smi output line ", line_no, ": index \"", f[0],
                       "\" is not a GPU index"));
    }
    g.name = std::string(absl::StripAsciiWhitespace(f[1]));
    g.uuid = std::string(absl::StripAsciiWhitespace(f[2]));
    g.memory_total_mib = Number(f[3]);
    g.max_sm_clock_mhz = Number(f[4]);
    g.temperature_c = Number(f[5]);
    g.power_draw_w = Number(f[6]);
    gpus.push_back(std::move(g));
  }
  return gpus;
}

absl::StatusOr<std::vector<GpuInfo>> QueryGpus(const std::string& nvidia_smi,
                                               absl::Duration timeout) {
  TF_ASSIGN_OR_RETURN(std::string dir, MakeTempDir("tf-nvidia-smi"));
  ProcessSpec spec;
  spec.argv = NvidiaSmiQueryArgv(nvidia_smi);
  spec.stdout_path = dir + "/out";
  spec.stderr_path = dir + "/err";
  spec.timeout = timeout;
  absl::StatusOr<ProcessResult> r = RunProcess(spec);
  if (!r.ok()) {
    (void)RemoveAll(dir);
    return absl::NotFoundError(
        absl::StrCat("cannot run ", nvidia_smi,
                     " (no NVIDIA driver here?): ", r.status().message()));
  }
  absl::StatusOr<std::string> out = ReadFile(dir + "/out");
  (void)RemoveAll(dir);
  if (r->timed_out || r->exit_code != 0) {
    return absl::UnavailableError(absl::StrCat(
        nvidia_smi,
        r->timed_out ? " timed out"
                     : absl::StrCat(" exited with code ", r->exit_code),
        ": ", absl::StripAsciiWhitespace(r->stderr_tail),
        out.ok() ? absl::StrCat(" ", absl::StripAsciiWhitespace(*out)) : ""));
  }
  if (!out.ok()) return out.status();
  return ParseNvidiaSmiGpus(*out);
}

std::optional<GpuSpec> LookupGpuSpec(std::string_view name) {
  const std::string lower = absl::AsciiStrToLower(std::string(name));
  for (const TableRow& row : kTable) {
    if (absl::StrContains(lower, absl::AsciiStrToLower(row.needle))) {
      // "H20" must not match "H200": require a word end after the needle.
      const size_t at = lower.find(absl::AsciiStrToLower(row.needle));
      const size_t end = at + std::string_view(row.needle).size();
      if (end < lower.size() && absl::ascii_isalnum(lower[end])) continue;
      return row.spec;
    }
  }
  return std::nullopt;
}

std::string NvccArch(int cc_major, int cc_minor) {
  if (cc_major == 9 && cc_minor == 0) return "sm_90a";
  return absl::StrCat("sm_", cc_major, cc_minor);
}

v1::BoardCapabilities GpuCapabilities(const GpuInfo& gpu, const GpuSpec& spec) {
  v1::BoardCapabilities c;
  c.set_vector_cores(spec.sms);
  c.set_memory_bandwidth_gbps(spec.memory_bandwidth_gbps);
  const double clock = gpu.max_sm_clock_mhz.value_or(0);
  c.set_clock_mhz(clock);
  c.set_peak_tflops(spec.sms * spec.fp32_lanes_per_sm * 2.0 * clock * 1e6 /
                    1e12);
  c.set_launch_overhead_us(5.0);  // cuda-backend.md §2.3: ~5 µs per launch
  auto& extra = *c.mutable_extra();
  extra["uuid"] = gpu.uuid;
  extra["gpu_index"] = absl::StrCat(gpu.index);
  extra["compute_capability"] = absl::StrCat(spec.cc_major, ".", spec.cc_minor);
  extra["nvcc_arch"] = NvccArch(spec.cc_major, spec.cc_minor);
  extra["peak_precision"] = "fp32 (CUDA cores, FMA = 2 FLOP)";
  if (gpu.memory_total_mib)
    extra["memory_total_mib"] = absl::StrCat(*gpu.memory_total_mib);
  return c;
}

std::string GpuHealthLine(const GpuInfo& gpu) {
  auto opt = [](const std::optional<double>& v, const char* unit) {
    return v ? absl::StrFormat("%.1f %s", *v, unit) : absl::StrCat("? ", unit);
  };
  return absl::StrCat(
      "gpu ", gpu.index, " ", gpu.name, ": ", opt(gpu.temperature_c, "C"), ", ",
      opt(gpu.power_draw_w, "W"), ", ", opt(gpu.memory_total_mib, "MiB"));
}

}  // namespace tunefarm
