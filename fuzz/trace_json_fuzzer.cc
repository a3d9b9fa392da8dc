// libFuzzer target for analyzer/trace_json.cc: Chrome-trace timelines
// (msprof JSON, torch_npu trace_view.json, kineto).
#include "analyzer/profile.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tunefarm;
  std::string_view text = fuzz::AsText(data, size);
  absl::StatusOr<TraceSummary> t = ParseChromeTrace(text, fuzz::kFile);
  fuzz::CheckContract(t, fuzz::kFile, "ParseChromeTrace");
  return 0;
}
