// libFuzzer target for analyzer/pypto.cc: bubble_analysis.log and
// merged_swimlane.json.
#include "analyzer/profile.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tunefarm;
  std::string_view text = fuzz::AsText(data, size);
  fuzz::CheckContract(ParseBubbleAnalysisLog(text, fuzz::kFile), fuzz::kFile,
                      "ParseBubbleAnalysisLog");
  fuzz::CheckContract(ParsePyptoSwimlane(text, fuzz::kFile), fuzz::kFile,
                      "ParsePyptoSwimlane");
  return 0;
}
