// libFuzzer target for analyzer/msprof.cc: the per-task table
// (op_summary / kernel_details, also read in blocks on several threads),
// op_statistic, api_statistic and task_time.
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
  // Cut into tiny blocks: one thread and three must agree exactly, whatever
  // quoting the cuts land in, and the blocked read must fail where the
  // whole read fails.
  ParseOptions one, three;
  one.block_bytes = three.block_bytes = 16;
  one.threads = 1;
  three.threads = 3;
  absl::StatusOr<TaskTable> a = ParseTaskTable(text, fuzz::kFile, one);
  absl::StatusOr<TaskTable> b = ParseTaskTable(text, fuzz::kFile, three);
  if (a.ok() != tasks.ok() || b.ok() != a.ok()) std::abort();
  if (!a.ok() && a.status() != b.status()) std::abort();
  if (a.ok() &&
      (a->rows_used != tasks->rows_used || a->rows_used != b->rows_used ||
       a->ragged != b->ragged || a->ragged != tasks->ragged ||
       a->total_us != b->total_us || a->ops.size() != tasks->ops.size())) {
    std::abort();
  }
  fuzz::CheckContract(ParseOpStatistic(text, fuzz::kFile), fuzz::kFile,
                      "ParseOpStatistic");
  fuzz::CheckContract(ParseApiStatistic(text, fuzz::kFile), fuzz::kFile,
                      "ParseApiStatistic");
  fuzz::CheckContract(ParseTaskTime(text, fuzz::kFile), fuzz::kFile,
                      "ParseTaskTime");
  return 0;
}
