#include "agent/measurement.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/files.h"

namespace tunefarm {
namespace {

// Linear interpolation between order statistics of sorted `v` (numpy's
// default), q in [0, 1].
double Quantile(const std::vector<double>& v, double q) {
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

}  // namespace

v1::Measurement Summarize(std::vector<double> samples_us, int warmup,
                          bool simulated, std::string policy) {
  v1::Measurement m;
  m.set_simulated(simulated);
  m.set_policy(std::move(policy));
  const size_t drop =
      std::min(samples_us.size(), static_cast<size_t>(std::max(warmup, 0)));
  m.set_warmup(static_cast<int32_t>(drop));
  samples_us.erase(samples_us.begin(), samples_us.begin() + drop);
  m.set_samples(static_cast<int32_t>(samples_us.size()));
  if (samples_us.empty()) return m;
  std::sort(samples_us.begin(), samples_us.end());
  m.set_median_us(Quantile(samples_us, 0.5));
  m.set_p20_us(Quantile(samples_us, 0.2));
  m.set_p80_us(Quantile(samples_us, 0.8));
  m.set_min_us(samples_us.front());
  m.set_max_us(samples_us.back());
  return m;
}

absl::StatusOr<std::vector<double>> ReadTimingSamples(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat("timing file ", path, ": ",
                                     text.status().message()));
  }
  std::vector<double> samples;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    double v;
    if (!absl::SimpleAtod(line, &v) || !std::isfinite(v) || v < 0) {
      std::string shown(line.substr(0, 40));
      return absl::InvalidArgumentError(
          absl::StrCat("timing file ", path, " line ", line_no, ": \"", shown,
                       "\" is not a finite non-negative number of microseconds"));
    }
    samples.push_back(v);
  }
  if (samples.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("timing file ", path, " holds no samples"));
  }
  return samples;
}

}  // namespace tunefarm
