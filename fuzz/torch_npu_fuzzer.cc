// libFuzzer target for analyzer/torch_npu.cc: step_trace_time,
// operator_details, l2_cache and profiler_info_*.json.
#include "analyzer/profile.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tunefarm;
  std::string_view text = fuzz::AsText(data, size);
  fuzz::CheckContract(ParseStepTrace(text, fuzz::kFile), fuzz::kFile,
                      "ParseStepTrace");
  fuzz::CheckContract(ParseOperatorDetails(text, fuzz::kFile), fuzz::kFile,
                      "ParseOperatorDetails");
  fuzz::CheckContract(ParseL2Cache(text, fuzz::kFile), fuzz::kFile,
                      "ParseL2Cache");
  fuzz::CheckContract(ParseProfilerInfo(text, fuzz::kFile), fuzz::kFile,
                      "ParseProfilerInfo");
  return 0;
}
