#include "agent/measurement.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return Quantile(v, 0.5);
}

constexpr int kMinPairs = 6;

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
    return absl::Status(
        text.status().code(),
        absl::StrCat("timing file ", path, ": ", text.status().message()));
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
      return absl::InvalidArgumentError(absl::StrCat(
          "timing file ", path, " line ", line_no, ": \"", shown,
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

ResolvedPolicy ResolveMeasurementPolicy(const v1::MeasurementPolicy& policy) {
  ResolvedPolicy r;
  if (policy.warmup() != 0 || policy.samples() != 0) {
    r.warmup = policy.warmup();
    r.samples = policy.samples() <= 0 ? 20 : policy.samples();
  }
  r.warmup = std::clamp(r.warmup, 0, 1000);
  r.samples = std::clamp(r.samples, 1, 10000);
  r.max_samples = policy.max_samples() > 0 ? policy.max_samples() : r.samples;
  r.max_samples = std::clamp(r.max_samples, r.samples, 100000);
  if (policy.target_rel_spread() > 0) {
    r.target_rel_spread = std::min(policy.target_rel_spread(), 1.0);
  }
  if (policy.confidence() > 0) {
    r.confidence = std::clamp(policy.confidence(), 0.5, 0.999);
  }
  r.ab = policy.mode() != v1::MEASUREMENT_MODE_INDEPENDENT;
  return r;
}

int MedianBoundRank(int n, double confidence) {
  if (n <= 0) return 0;
  // P(Binomial(n, 1/2) = i) in log space: 0.5^n underflows for large n.
  const double log_norm = std::lgamma(n + 1.0) - n * std::log(2.0);
  double cdf = 0;
  for (int k = 1; k <= n; ++k) {
    const int i = k - 1;
    cdf += std::exp(log_norm - std::lgamma(i + 1.0) - std::lgamma(n - i + 1.0));
    // The upper bound must lie above the median: k - 1 >= n / 2 at least.
    if (cdf >= confidence && 2 * k > n) return k;
  }
  return 0;
}

int MinPairs(double confidence) {
  int n = kMinPairs;
  while (MedianBoundRank(n, confidence) == 0) ++n;
  return n;
}

PairedGain EstimatePairedGain(const std::vector<double>& candidate_medians,
                              const std::vector<double>& reference_medians,
                              double confidence) {
  PairedGain g;
  std::vector<double> ratios;
  const size_t n = std::min(candidate_medians.size(), reference_medians.size());
  for (size_t j = 0; j < n; ++j) {
    if (reference_medians[j] > 0) {
      ratios.push_back(candidate_medians[j] / reference_medians[j]);
    }
  }
  g.pairs = static_cast<int>(ratios.size());
  if (ratios.empty()) return g;
  std::sort(ratios.begin(), ratios.end());
  const double median = Quantile(ratios, 0.5);
  g.gain = 1.0 - median;
  const int k = MedianBoundRank(g.pairs, confidence);
  if (k == 0 || median <= 0) return g;
  const double hi = ratios[k - 1];
  const double lo = ratios[g.pairs - k];
  g.gain_lower = 1.0 - hi;
  g.gain_upper = 1.0 - lo;
  g.rel_spread = (hi - lo) / 2.0 / median;
  return g;
}

double MedianRelSpread(std::vector<double> samples, double confidence) {
  const int n = static_cast<int>(samples.size());
  const int k = MedianBoundRank(n, confidence);
  if (k == 0) return 1.0;
  std::sort(samples.begin(), samples.end());
  const double median = Quantile(samples, 0.5);
  if (median <= 0) return 0.0;
  return (samples[k - 1] - samples[n - k]) / 2.0 / median;
}

absl::StatusOr<v1::Measurement> MeasureBlocks(const ResolvedPolicy& policy,
                                              bool with_reference,
                                              const BlockRunner& run_block,
                                              bool simulated,
                                              const std::string& note) {
  const bool ab = policy.ab && with_reference;
  const int min_pairs = MinPairs(policy.confidence);
  // A/B splits `samples` over at least min_pairs blocks per variant.
  const int block =
      ab ? (policy.samples + min_pairs - 1) / min_pairs : policy.samples;
  std::vector<double> cand, ref;  // every timed sample
  std::vector<double> cand_medians, ref_medians;
  auto run = [&](bool reference) -> absl::Status {
    std::vector<double>& medians = reference ? ref_medians : cand_medians;
    absl::StatusOr<std::vector<double>> s = run_block(
        reference, static_cast<int>(medians.size()), policy.warmup, block);
    if (!s.ok()) return s.status();
    medians.push_back(Median(*s));
    std::vector<double>& all = reference ? ref : cand;
    all.insert(all.end(), s->begin(), s->end());
    return absl::OkStatus();
  };
  const std::string tail = note.empty() ? "" : absl::StrCat("; ", note);

  if (!ab) {
    double spread = 1.0;
    for (;;) {
      if (absl::Status st = run(false); !st.ok()) return st;
      spread = MedianRelSpread(cand, policy.confidence);
      if (spread <= policy.target_rel_spread ||
          static_cast<int>(cand.size()) + policy.samples > policy.max_samples) {
        break;
      }
    }
    const int blocks = static_cast<int>(cand_medians.size());
    v1::Measurement m = Summarize(
        cand, 0, simulated,
        absl::StrFormat("%s: %d block(s) of warmup=%d samples=%d; "
                        "median/p20/p80 of %d samples; "
                        "median's %.0f%% interval +/-%.2f%% (target %.2f%%, "
                        "cap %d samples)%s",
                        with_reference ? "independent (candidate only)"
                                       : "independent (no reference variant)",
                        blocks, policy.warmup, policy.samples,
                        static_cast<int>(cand.size()), policy.confidence * 100,
                        spread * 100, policy.target_rel_spread * 100,
                        policy.max_samples, tail));
    m.set_warmup(policy.warmup);
    m.set_confidence(policy.confidence);
    m.set_rel_spread(spread);
    return m;
  }

  const int first_pairs =
      std::max(min_pairs, (policy.samples + block - 1) / block);
  PairedGain g;
  int pair = 0;
  auto run_pair = [&]() -> absl::Status {
    // ABBA: the order flips every pair, so a drift shared by both cancels.
    const bool candidate_first = pair % 2 == 0;
    if (absl::Status st = run(!candidate_first); !st.ok()) return st;
    if (absl::Status st = run(candidate_first); !st.ok()) return st;
    ++pair;
    return absl::OkStatus();
  };
  while (pair < first_pairs) {
    if (absl::Status st = run_pair(); !st.ok()) return st;
  }
  for (;;) {
    g = EstimatePairedGain(cand_medians, ref_medians, policy.confidence);
    if (g.rel_spread <= policy.target_rel_spread ||
        (pair + 2) * block > policy.max_samples) {
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (absl::Status st = run_pair(); !st.ok()) return st;
    }
  }
  const std::string policy_text = absl::StrFormat(
      "A/B interleaved with the parent in one lease: %d ABBA pairs of blocks "
      "of "
      "warmup=%d samples=%d (%d samples per variant); gain = 1 - median of the "
      "per-pair ratios of block medians, %.0f%% lower bound by order "
      "statistics "
      "(sign test); ratio interval +/-%.2f%% (target %.2f%%, cap %d samples)%s",
      pair, policy.warmup, block, static_cast<int>(cand.size()),
      policy.confidence * 100, g.rel_spread * 100,
      policy.target_rel_spread * 100, policy.max_samples, tail);
  v1::Measurement m = Summarize(cand, 0, simulated, policy_text);
  m.set_warmup(policy.warmup);
  *m.mutable_reference() =
      Summarize(ref, 0, simulated, "reference (parent) variant, same lease");
  m.mutable_reference()->set_warmup(policy.warmup);
  m.set_paired(true);
  m.set_gain(g.gain);
  m.set_gain_lower(g.gain_lower);
  m.set_gain_upper(g.gain_upper);
  m.set_pairs(g.pairs);
  m.set_confidence(policy.confidence);
  m.set_rel_spread(g.rel_spread);
  return m;
}

}  // namespace tunefarm
