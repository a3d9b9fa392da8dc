// Timing samples → a Measurement (median and spread), and the reader for the
// timing_us.txt file a kernel's run step writes. Pure functions; thread-safe.
#ifndef TUNEFARM_AGENT_MEASUREMENT_H_
#define TUNEFARM_AGENT_MEASUREMENT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

// Drops the first `warmup` samples and summarises the rest: median, p20, p80
// (linear interpolation between order statistics), min, max. With no samples
// left, every statistic is 0 and samples = 0.
v1::Measurement Summarize(std::vector<double> samples_us, int warmup,
                          bool simulated, std::string policy);

// Reads one sample (µs) per line; blank lines are skipped. INVALID_ARGUMENT
// naming the file and line for anything that is not a finite, non-negative
// number; NOT_FOUND when the file is missing; INVALID_ARGUMENT when it holds
// no samples.
absl::StatusOr<std::vector<double>> ReadTimingSamples(const std::string& path);

}  // namespace tunefarm

#endif  // TUNEFARM_AGENT_MEASUREMENT_H_
