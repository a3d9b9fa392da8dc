#include "agent/perf_counters.h"

#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace tunefarm {

absl::Status ProbePerfCounters() {
  for (uint64_t config : {uint64_t{PERF_COUNT_HW_CPU_CYCLES},
                          uint64_t{PERF_COUNT_HW_INSTRUCTIONS}}) {
    perf_event_attr attr;
    std::memset(&attr, 0, sizeof(attr));
    attr.size = sizeof(attr);
    attr.type = PERF_TYPE_HARDWARE;
    attr.config = config;
    attr.disabled = 1;
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    const long fd = syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0);
    if (fd < 0) {
      const int err = errno;
      return absl::UnavailableError(absl::StrCat(
          "perf_event_open(",
          config == PERF_COUNT_HW_CPU_CYCLES ? "cycles" : "instructions",
          "): ", std::strerror(err),
          err == EACCES || err == EPERM
              ? " (kernel.perf_event_paranoid or container policy forbids it)"
          : err == ENOENT || err == ENODEV || err == EOPNOTSUPP
              ? " (no hardware PMU exposed, common in VMs and containers)"
              : ""));
    }
    close(static_cast<int>(fd));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, uint64_t>> ParseCountersCsv(
    const std::string& text) {
  std::map<std::string, uint64_t> out;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripSuffix(line, "\r");
    if (line.empty()) continue;
    if (line_no == 1) {
      if (line != "counter,value") {
        return absl::InvalidArgumentError(absl::StrCat(
            "counters.csv line 1: expected header 'counter,value', got '", line,
            "'"));
      }
      continue;
    }
    std::vector<absl::string_view> cells = absl::StrSplit(line, ',');
    if (cells.size() != 2 || cells[0].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("counters.csv line ", line_no,
                       ": expected 'name,value', got '", line, "'"));
    }
    if (cells[1] == "unavailable") continue;
    uint64_t v = 0;
    if (!absl::SimpleAtoi(cells[1], &v)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "counters.csv line ", line_no, ": '", cells[1], "' is not a count"));
    }
    out[std::string(cells[0])] = v;
  }
  return out;
}

}  // namespace tunefarm
