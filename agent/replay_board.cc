#include "agent/replay_board.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/params.h"

namespace tunefarm {
namespace {

// Linear-interpolated quantile of sorted values.
double Quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] +
         (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

uint64_t Fnv(const std::string& s, uint64_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

class ReplayBoard : public Board {
 public:
  ReplayBoard(ReplayBoardOptions options, std::shared_ptr<const Space> space)
      : options_(std::move(options)), space_(std::move(space)) {
    info_.set_board_id(options_.board_id);
    info_.set_agent_id(options_.agent_id);
    info_.set_node(options_.node);
    info_.set_kind(kReplayBoardKind);
    info_.set_chip(space_->device.empty() ? "unnamed GPU" : space_->device);
    for (const auto& [k, v] : options_.labels) (*info_.mutable_labels())[k] = v;
    (*info_.mutable_labels())["replay"] = space_->file;
    info_.set_simulated(false);
    info_.set_state(v1::BOARD_STATE_IDLE);
    for (const SpaceParameter& p : space_->parameters) {
      const std::string manifest_name = ManifestParameterName(p.name);
      if (manifest_name != p.name) names_[manifest_name] = p.name;
    }
    policy_ = absl::StrCat("replayed from ", space_->file, ": measured on ",
                           info_.chip(), " by ", space_->tool);
    if (options_.noise > 0) {
      absl::StrAppend(&policy_, "; with injected noise, relative sd ",
                      options_.noise);
    }
  }

  v1::BoardInfo info() const override { return info_; }

  // Work from a coordinator names parameters as its manifest does
  // (ManifestParameterName: "mwg" for the file's "MWG").
  ParamMap SpaceNames(const ParamMap& params) const {
    ParamMap out;
    for (const auto& [name, value] : params) {
      auto it = names_.find(name);
      out[it == names_.end() ? name : it->second] = value;
    }
    return out;
  }

  absl::StatusOr<Evaluation> Evaluate(
      const v1::WorkItem& work, const std::atomic<bool>& cancel) override {
    if (cancel.load()) {
      return absl::CancelledError(
          absl::StrCat("evaluation of ", work.sweep_id(), " round ",
                       work.round_id(), " cancelled (lease revoked)"));
    }
    Evaluation ev;
    v1::RoundResult& r = ev.result;
    // No A/B: both variants' numbers come from the table, not from timing
    // them side by side; the coordinator's keep rule falls back on spreads.
    r.mutable_measurement()->set_policy(
        work.has_reference()
            ? absl::StrCat(policy_, "; no A/B with parent round ",
                           work.reference_round(),
                           " (replayed numbers: compared by spread)")
            : policy_);
    const SpaceConfig* c = space_->Find(SpaceNames(work.params()));
    if (c == nullptr) {
      r.set_outcome(v1::OUTCOME_BUILD_FAILED);
      r.set_detail(absl::StrCat(ParamsKey(work.params()),
                                " is not in the space (constraint): ",
                                space_->file, " has no such configuration"));
      return ev;
    }
    if (c->outcome != SpaceOutcome::kOk) {
      const bool compile = c->outcome == SpaceOutcome::kCompileFailed;
      r.set_outcome(compile ? v1::OUTCOME_BUILD_FAILED
                            : v1::OUTCOME_RUN_CRASHED);
      r.set_detail(
          absl::StrCat("recorded as ", c->failure, " in ", space_->file));
      return ev;
    }
    // Deterministic noise per (seed, work seed, configuration, epoch).
    std::mt19937_64 rng(
        Fnv(absl::StrCat(options_.seed, "/", work.seed(), "/",
                         ParamsKey(work.params()), "/", work.epoch()),
            1469598103934665603ull));
    auto noisy = [&](double x) {
      if (options_.noise <= 0) return x;
      // Box-Muller from raw 53-bit draws: the same numbers everywhere.
      const double u1 = (static_cast<double>(rng() >> 11) + 1.0) * 0x1.0p-53;
      const double u2 = static_cast<double>(rng() >> 11) * 0x1.0p-53;
      const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * M_PI * u2);
      return x * std::max(0.05, 1.0 + options_.noise * z);
    };
    std::vector<double> samples;
    for (double s : c->samples_us) samples.push_back(noisy(s));
    std::sort(samples.begin(), samples.end());
    v1::Measurement* m = r.mutable_measurement();
    m->set_median_us(noisy(c->time_us));
    if (samples.empty()) {
      m->set_p20_us(m->median_us());
      m->set_p80_us(m->median_us());
      m->set_min_us(m->median_us());
      m->set_max_us(m->median_us());
      m->set_samples(1);
    } else {
      m->set_p20_us(Quantile(samples, 0.2));
      m->set_p80_us(Quantile(samples, 0.8));
      m->set_min_us(samples.front());
      m->set_max_us(samples.back());
      m->set_samples(static_cast<int>(samples.size()));
    }
    m->set_simulated(false);
    m->set_replayed(true);
    r.set_outcome(v1::OUTCOME_OK);
    r.mutable_precision()->set_passed(true);
    r.mutable_precision()->set_detail(absl::StrCat(
        "replayed: ", space_->tool,
        " recorded this configuration as correct; not re-checked here"));
    r.set_detail(absl::StrCat("replayed from ", space_->file));
    return ev;
  }

 private:
  ReplayBoardOptions options_;
  std::shared_ptr<const Space> space_;
  v1::BoardInfo info_;
  std::string policy_;
  std::map<std::string, std::string> names_;  // manifest name -> file name
};

}  // namespace

absl::StatusOr<std::unique_ptr<Board>> NewReplayBoard(
    ReplayBoardOptions options) {
  if (!(options.noise >= 0) || !std::isfinite(options.noise)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "replay board ", options.board_id, ": noise ", options.noise,
        " must be a finite relative standard deviation >= 0"));
  }
  std::shared_ptr<const Space> space = options.space;
  if (space == nullptr) {
    absl::StatusOr<Space> loaded = LoadSpaceFile(options.space_file);
    if (!loaded.ok()) return loaded.status();
    space = std::make_shared<const Space>(*std::move(loaded));
  }
  return std::unique_ptr<Board>(
      std::make_unique<ReplayBoard>(std::move(options), std::move(space)));
}

}  // namespace tunefarm
