// libFuzzer target for analyzer/read_profile.cc: classification by name and
// content, then whichever parser the name picks. The first input byte picks
// the file name, so every format's path through ReadProfile is reached;
// ReadProfile itself never fails, it records gaps.
#include <array>
#include <string>
#include <vector>

#include "analyzer/profile.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tunefarm;
  static constexpr std::array<const char*, 16> kNames = {
      "mindstudio_profiler_output/op_summary_1.csv",
      "mindstudio_profiler_output/op_statistic_1.csv",
      "mindstudio_profiler_output/api_statistic_1.csv",
      "mindstudio_profiler_output/task_time_1.csv",
      "mindstudio_profiler_output/msprof_1.json",
      "ASCEND_PROFILER_OUTPUT/kernel_details.csv",
      "ASCEND_PROFILER_OUTPUT/step_trace_time.csv",
      "ASCEND_PROFILER_OUTPUT/operator_details.csv",
      "ASCEND_PROFILER_OUTPUT/l2_cache.csv",
      "ASCEND_PROFILER_OUTPUT/trace_view.json",
      "profiler_info_0.json",
      "output/merged_swimlane.json",
      "output/bubble_analysis.log",
      "report.csv",
      "kineto.json",
      "unknown.txt"};
  if (size == 0) return 0;
  std::string path = kNames[data[0] % kNames.size()];
  std::string_view text = fuzz::AsText(data + 1, size - 1);
  (void)ClassifyFile(path, text);
  ProfileData p = ReadProfile({{path, text}});
  for (const ProfileGap& g : p.gaps) {
    if (g.file.empty() || g.reason.empty()) std::abort();
  }
  return 0;
}
