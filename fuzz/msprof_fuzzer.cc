// libFuzzer target for analyzer/msprof.cc: the per-task table
// (op_summary / kernel_details), op_statistic, api_statistic and task_time.
#include "analyzer/profile.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tunefarm;
  std::string_view text = fuzz::AsText(data, size);
  absl::StatusOr<TaskTable> tasks = ParseTaskTable(text, fuzz::kFile);
  fuzz::CheckContract(tasks, fuzz::kFile, "ParseTaskTable");
  if (tasks.ok()) {
    // Largest first, as the header promises.
    for (size_t i = 1; i < tasks->ops.size(); ++i) {
      if (tasks->ops[i].total_us > tasks->ops[i - 1].total_us) std::abort();
    }
  }
  fuzz::CheckContract(ParseOpStatistic(text, fuzz::kFile), fuzz::kFile,
                      "ParseOpStatistic");
  fuzz::CheckContract(ParseApiStatistic(text, fuzz::kFile), fuzz::kFile,
                      "ParseApiStatistic");
  fuzz::CheckContract(ParseTaskTime(text, fuzz::kFile), fuzz::kFile,
                      "ParseTaskTime");
  return 0;
}
