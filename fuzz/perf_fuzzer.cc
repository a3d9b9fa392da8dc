// libFuzzer target for analyzer/perf.cc: the cpu board's PROF_cpu/
// counters.csv and run_facts.csv.
#include "analyzer/profile.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tunefarm;
  std::string_view text = fuzz::AsText(data, size);
  absl::StatusOr<CpuCounters> c = ParseCpuCounters(text, fuzz::kFile);
  fuzz::CheckContract(c, fuzz::kFile, "ParseCpuCounters");
  absl::StatusOr<CpuRunFacts> f = ParseCpuRunFacts(text, fuzz::kFile);
  fuzz::CheckContract(f, fuzz::kFile, "ParseCpuRunFacts");
  return 0;
}
