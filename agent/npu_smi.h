// ParseNpuSmiInfo: reads the table `npu-smi info` prints into one NpuChip per
// chip, and AscendChipSpecFor: the roofline figures of a chip name (the
// A2/A3/950 table of shared/reference/ascend-formats.md §4).
//
// The layout parsed is the real one, checked against public samples kept in
// tests/ascend_standins/ (910B3 x8 with npu-smi 24.1.0.3; 310P3 with
// 25.3.rc1, whose second header row is "Chip    Device"). Each chip is two
// table rows between '+' rules:
//   | <npu>  <name>  | <health>  | <power W|NA|->  <temp C>  <hp used> / <hp
//   total> | | <chip> [<dev>] | <bus-id>  | <aicore %>  <mem used> / <total>
//   [<hbm used> / <total>] |
// A3 parts list two chips per NPU (chip 0 and 1, the second with power "-").
// The process table that follows ("Process id" header) is skipped. Numbers
// may touch the slash ("54592/ 65536"). Cells are split on '|', never by
// column position, because column widths differ between npu-smi versions.
//
// Pure functions; thread-safe.
#ifndef TUNEFARM_AGENT_NPU_SMI_H_
#define TUNEFARM_AGENT_NPU_SMI_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

struct NpuChip {
  int npu_id = -1;     // the NPU column (physical card id)
  int chip_id = 0;     // chip within the card (A3: 0 or 1)
  int device_id = -1;  // the "Device"/"Phy-ID" column when printed, else -1
  std::string name;    // e.g. "910B3", "310P3", "Ascend910"
  std::string health;  // "OK", "Warning", "Alarm", "Critical", ...
  bool has_power = false;
  double power_w = 0;
  double temp_c = 0;
  double aicore_pct = 0;
  std::string bus_id;
  int64_t memory_used_mb = 0, memory_total_mb = 0;
  bool has_hbm = false;
  int64_t hbm_used_mb = 0, hbm_total_mb = 0;
};

// INVALID_ARGUMENT naming the line for a chip row that does not parse;
// NOT_FOUND when the text holds no chip table at all.
absl::StatusOr<std::vector<NpuChip>> ParseNpuSmiInfo(absl::string_view text);

// Figures for the roofline. Unknown chips get known=false and zeros.
struct AscendChipSpec {
  bool known = false;
  std::string family;  // A2 | A3 | 950 | 310P
  int cube_cores = 0, vector_cores = 0;
  int64_t ub_bytes = 0, l1_bytes = 0, l0c_bytes = 0, l2_bytes = 0;
  double hbm_gbps = 0;  // 0 = not known authoritatively
  double cube_mhz = 0;
  double peak_tflops_fp16 = 0;  // cube, n_AIC * 16*16*16 * 2 * f
  std::string note;  // where the figures come from / what is inferred
};
AscendChipSpec AscendChipSpecFor(const std::string& chip_name);

// The spec as BoardCapabilities (extra: family, l1/l0c/l2 bytes, note).
v1::BoardCapabilities AscendCapabilities(const AscendChipSpec& spec);

}  // namespace tunefarm

#endif  // TUNEFARM_AGENT_NPU_SMI_H_
