// Hardware counters on the agent side: whether this machine lets a process
// count cycles/instructions through perf_event_open (reported with a cpu
// board's capabilities), and the reader of the counters.csv an operator
// program's profile stage writes (ops/common/harness.h). The counting itself
// happens inside the operator program, around its timed loop only.
//
// Pure functions; thread-safe.
#ifndef TUNEFARM_AGENT_PERF_COUNTERS_H_
#define TUNEFARM_AGENT_PERF_COUNTERS_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tunefarm {

// OK when cycles and instructions of this process can be counted;
// otherwise UNAVAILABLE saying why (EACCES: perf_event_paranoid or container
// policy; ENOENT/ENODEV: no PMU exposed).
absl::Status ProbePerfCounters();

// Parses "counter,value" rows (header "counter,value"); rows whose value is
// "unavailable" are skipped. INVALID_ARGUMENT naming the line otherwise.
absl::StatusOr<std::map<std::string, uint64_t>> ParseCountersCsv(
    const std::string& text);

}  // namespace tunefarm

#endif  // TUNEFARM_AGENT_PERF_COUNTERS_H_
