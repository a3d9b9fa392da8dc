// libFuzzer target for analyzer/ncu.cc: Nsight Compute CSV exports (raw and
// details pages, units rows, BOM / CRLF, thousands separators).
#include "analyzer/profile.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tunefarm;
  std::string_view text = fuzz::AsText(data, size);
  absl::StatusOr<NcuReport> r = ParseNcuCsv(text, fuzz::kFile);
  fuzz::CheckContract(r, fuzz::kFile, "ParseNcuCsv");
  if (r.ok()) {
    for (const NcuKernel& k : r->kernels) {
      (void)k.Find({"gpu__time_duration.sum", "Duration"});
    }
  }
  return 0;
}
