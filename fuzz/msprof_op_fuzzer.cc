// libFuzzer target for analyzer/msprof_op.cc: `msprof op` OpBasicInfo.csv
// and the per-block metric-group CSVs (block_id / sub_block_id rows, NA
// cells).
#include "analyzer/profile.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tunefarm;
  std::string_view text = fuzz::AsText(data, size);
  absl::StatusOr<OpProfBasic> b = ParseOpBasicInfo(text, fuzz::kFile);
  fuzz::CheckContract(b, fuzz::kFile, "ParseOpBasicInfo");
  absl::StatusOr<OpProfGroup> g = ParseOpProfGroup(text, fuzz::kFile);
  fuzz::CheckContract(g, fuzz::kFile, "ParseOpProfGroup");
  if (g.ok()) {
    (void)g->cube_block_us.mean();
    (void)g->vector_block_us.mean();
  }
  return 0;
}
