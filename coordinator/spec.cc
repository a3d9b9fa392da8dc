#include "coordinator/spec.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/params.h"
#include "common/status_macros.h"
#include "common/text.h"
#include "coordinator/guided_strategy.h"
#include "coordinator/hybrid_strategy.h"
#include "coordinator/saturation.h"
#include "coordinator/workloads.h"
#include "ops/yaml_fields.h"
#include "tuning_db/database.h"
#include "tuning_db/warm_start.h"

namespace tunefarm {
namespace {

using yamlf::Child;
using yamlf::FieldError;
using yamlf::Get;
using yamlf::Has;

constexpr double kDefaultMinGain = 0.02;
constexpr int32_t kDefaultWarmup = 5;
constexpr bool kDefaultFlushCache = true;
constexpr uint64_t kDefaultSeed = 1;
constexpr int32_t kDefaultMaxRounds = 50;
constexpr int64_t kDefaultTimeLimitS = 12 * 3600;
constexpr int32_t kDefaultMaxRoundsWithoutGain = 20;
constexpr int32_t kDefaultSamples = 30;
constexpr double kDefaultTargetRelSpread = 0.01;
constexpr double kDefaultConfidence = 0.95;
constexpr double kMaxSpeedup = 1e6;
constexpr double kMaxTargetUs = 1e12;
constexpr size_t kMaxMapEntries = 64;
constexpr size_t kMaxLabelBytes = 128;

// Strategies a spec may name, with the options each accepts.
const std::map<std::string, std::vector<std::string>>& StrategyOptions() {
  static const auto* known =
      new std::map<std::string, std::vector<std::string>>{
          {"grid", {}},
          {"random", {}},
          {"guided", GuidedOptionNames()},
          {"hybrid", HybridOptionNames()},
          {"tpe", {"candidates", "gamma_pct", "startup", "use_diagnosis"}}};
  return *known;
}
std::string Quote(absl::string_view text) {
  return absl::StrCat("'", absl::CHexEscape(text.substr(0, 64)),
                      text.size() > 64 ? "..." : "", "'");
}

std::string FormatDuration(int64_t s) {
  if (s % 86400 == 0) return absl::StrCat(s / 86400, "d");
  if (s % 3600 == 0) return absl::StrCat(s / 3600, "h");
  if (s % 60 == 0) return absl::StrCat(s / 60, "m");
  return absl::StrCat(s, "s");
}

// Sweep and team names end up in file names and report titles.
absl::Status CheckSweepName(absl::string_view path, absl::string_view value) {
  if (value.empty()) return FieldError(path, "is required");
  bool ok = value.size() <= 64 && absl::ascii_isalnum(value[0]);
  for (char c : value) {
    ok = ok && (absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-');
  }
  if (!ok) {
    return FieldError(
        path, absl::StrCat("must match [A-Za-z0-9][A-Za-z0-9._-]{0,63}, got ",
                           Quote(value)));
  }
  return absl::OkStatus();
}

// Bounded, printable label-like text (chip, labels, strategy options).
absl::Status CheckLabel(absl::string_view path, absl::string_view value) {
  return yamlf::CheckText(path, value, kMaxLabelBytes);
}

absl::Status CheckInt(absl::string_view path, int64_t v, int64_t lo,
                      int64_t hi) {
  if (v < lo || v > hi) {
    return FieldError(
        path, absl::StrCat("must be between ", lo, " and ", hi, ", got ", v));
  }
  return absl::OkStatus();
}

absl::Status CheckSpeedup(double v) {
  if (!std::isfinite(v) || v <= 1 || v > kMaxSpeedup) {
    return FieldError(
        "goal.speedup",
        absl::StrCat("must be a number > 1 and <= ", kMaxSpeedup, ", got ", v));
  }
  return absl::OkStatus();
}

absl::Status CheckTargetUs(double v) {
  if (!std::isfinite(v) || v <= 0 || v > kMaxTargetUs) {
    return FieldError("goal.target_us",
                      absl::StrCat("must be a number > 0 and <= ", kMaxTargetUs,
                                   ", got ", v));
  }
  return absl::OkStatus();
}

absl::Status CheckMinGain(double v) {
  if (!std::isfinite(v) || v < 0 || v >= 1) {
    return FieldError("min_gain",
                      absl::StrCat("must be a fraction in [0, 1), got ", v));
  }
  return absl::OkStatus();
}

absl::Status CheckTargetSpread(double v) {
  if (!std::isfinite(v) || v <= 0 || v > 0.5) {
    return FieldError("measurement.target_rel_spread",
                      absl::StrCat("must be a fraction in (0, 0.5], got ", v));
  }
  return absl::OkStatus();
}

absl::Status CheckConfidence(double v) {
  if (!std::isfinite(v) || v < 0.5 || v > 0.999) {
    return FieldError("measurement.confidence",
                      absl::StrCat("must be in [0.5, 0.999], got ", v));
  }
  return absl::OkStatus();
}

absl::Status CheckTimeLimit(int64_t s) {
  if (s < 1 || s > kMaxTimeLimitS) {
    return FieldError(
        "budget.time_limit",
        absl::StrCat("must be between 1s and ", FormatDuration(kMaxTimeLimitS),
                     ", got ",
                     s < 1 ? absl::StrCat(s, "s") : FormatDuration(s)));
  }
  return absl::OkStatus();
}

// A map of user-chosen string keys to scalar values (labels, options).
absl::Status ParseStringMap(
    const YAML::Node& node, absl::string_view path,
    google::protobuf::Map<std::string, std::string>* out) {
  TF_RETURN_IF_ERROR(yamlf::CheckOpenMap(node, path));
  if (node.size() > kMaxMapEntries) {
    return FieldError(
        path, absl::StrCat("has ", node.size(), " entries; the limit is ",
                           kMaxMapEntries));
  }
  for (auto it = node.begin(); it != node.end(); ++it) {
    const std::string& key = it->first.Scalar();
    const std::string p = Child(path, key);
    TF_ASSIGN_OR_RETURN(std::string value, yamlf::GetString(it->second, p));
    (*out)[key] = std::move(value);
  }
  return absl::OkStatus();
}

absl::Status CheckStringMap(
    absl::string_view path,
    const google::protobuf::Map<std::string, std::string>& m) {
  if (m.size() > kMaxMapEntries) {
    return FieldError(path,
                      absl::StrCat("has ", m.size(), " entries; the limit is ",
                                   kMaxMapEntries));
  }
  std::map<std::string, std::string> sorted(m.begin(), m.end());
  for (const auto& [key, value] : sorted) {
    if (key.empty()) return FieldError(path, "keys must not be empty");
    TF_RETURN_IF_ERROR(CheckLabel(path, key));
    TF_RETURN_IF_ERROR(CheckLabel(Child(path, key), value));
  }
  return absl::OkStatus();
}

absl::Status ParseWorkload(const YAML::Node& node, const std::string& path,
                           v1::Workload* out) {
  if (node.IsScalar()) {
    out->set_name(node.Scalar());
    return absl::OkStatus();
  }
  TF_RETURN_IF_ERROR(yamlf::CheckMap(node, path, {"name", "dtype", "dims"}));
  if (Has(node, "name")) {
    TF_ASSIGN_OR_RETURN(
        *out->mutable_name(),
        yamlf::GetString(Get(node, "name"), Child(path, "name")));
  }
  if (Has(node, "dtype")) {
    TF_ASSIGN_OR_RETURN(
        *out->mutable_dtype(),
        yamlf::GetString(Get(node, "dtype"), Child(path, "dtype")));
  }
  const std::string dims_path = Child(path, "dims");
  if (!Has(node, "dims")) return FieldError(dims_path, "is required");
  const YAML::Node dims = Get(node, "dims");
  TF_RETURN_IF_ERROR(yamlf::CheckOpenMap(dims, dims_path));
  if (dims.size() == 0) return FieldError(dims_path, "must not be empty");
  for (auto it = dims.begin(); it != dims.end(); ++it) {
    const std::string& key = it->first.Scalar();
    TF_ASSIGN_OR_RETURN(int64_t v,
                        yamlf::GetInt(it->second, Child(dims_path, key)));
    (*out->mutable_dims())[key] = v;
  }
  return absl::OkStatus();
}

// `workloads:` a list of workload names or inline shapes.
absl::Status ParseWorkloads(const YAML::Node& node, v1::SweepSpec* spec) {
  if (!node.IsSequence()) {
    return FieldError("workloads",
                      absl::StrCat("expected a list of workloads, got ",
                                   yamlf::Describe(node)));
  }
  if (node.size() == 0) {
    return FieldError("workloads", "must name at least one workload");
  }
  if (node.size() > kMaxWorkloads) {
    return FieldError("workloads",
                      absl::StrCat("has ", node.size(),
                                   " entries; the limit is ", kMaxWorkloads));
  }
  for (size_t i = 0; i < node.size(); ++i) {
    TF_RETURN_IF_ERROR(ParseWorkload(
        node[i], absl::StrCat("workloads[", i, "]"), spec->add_workloads()));
  }
  return absl::OkStatus();
}

// `objective: per_workload`, or `{name: one_config, weights: {w: 2, ...}}`.
absl::Status ParseObjective(const YAML::Node& node, v1::SweepSpec* spec) {
  std::string name;
  if (node.IsScalar()) {
    name = node.Scalar();
  } else {
    TF_RETURN_IF_ERROR(yamlf::CheckMap(node, "objective", {"name", "weights"}));
    if (Has(node, "name")) {
      TF_ASSIGN_OR_RETURN(
          name, yamlf::GetString(Get(node, "name"), "objective.name"));
    }
    if (Has(node, "weights")) {
      const YAML::Node weights = Get(node, "weights");
      TF_RETURN_IF_ERROR(yamlf::CheckOpenMap(weights, "objective.weights"));
      for (auto it = weights.begin(); it != weights.end(); ++it) {
        const std::string& key = it->first.Scalar();
        TF_ASSIGN_OR_RETURN(
            double w,
            yamlf::GetDouble(it->second, Child("objective.weights", key)));
        (*spec->mutable_workload_weights())[key] = w;
      }
    }
  }
  if (name == "per_workload") {
    spec->set_objective(v1::WORKLOAD_OBJECTIVE_PER_WORKLOAD);
  } else if (name == "one_config") {
    spec->set_objective(v1::WORKLOAD_OBJECTIVE_ONE_CONFIG);
  } else {
    return FieldError(
        node.IsScalar() ? "objective" : "objective.name",
        absl::StrCat("must be per_workload or one_config, got ", Quote(name)));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> ParseSeed(const YAML::Node& node) {
  uint64_t v = 0;
  if (!node.IsScalar() || !absl::SimpleAtoi(node.Scalar(), &v)) {
    return FieldError("strategy.seed",
                      absl::StrCat("expected an integer in [0, 2^64), got ",
                                   yamlf::Describe(node)));
  }
  return v;
}

absl::Status ParseStrategy(const YAML::Node& node, v1::StrategySpec* out) {
  out->set_name(kDefaultStrategyName);
  out->set_seed(kDefaultSeed);
  if (node.IsScalar()) {  // `strategy: grid`
    out->set_name(node.Scalar());
    return absl::OkStatus();
  }
  TF_RETURN_IF_ERROR(
      yamlf::CheckMap(node, "strategy", {"name", "seed", "options"}));
  if (Has(node, "name")) {
    TF_ASSIGN_OR_RETURN(*out->mutable_name(),
                        yamlf::GetString(Get(node, "name"), "strategy.name"));
  }
  if (Has(node, "seed")) {
    TF_ASSIGN_OR_RETURN(uint64_t seed, ParseSeed(Get(node, "seed")));
    out->set_seed(seed);
  }
  if (Has(node, "options")) {
    TF_RETURN_IF_ERROR(ParseStringMap(Get(node, "options"), "strategy.options",
                                      out->mutable_options()));
  }
  return absl::OkStatus();
}

absl::Status ParseBudget(const YAML::Node& node, v1::Budget* out) {
  TF_RETURN_IF_ERROR(yamlf::CheckMap(
      node, "budget", {"max_rounds", "time_limit", "max_rounds_without_gain"}));
  if (Has(node, "max_rounds")) {
    TF_ASSIGN_OR_RETURN(int64_t v, yamlf::GetIntInRange(Get(node, "max_rounds"),
                                                        "budget.max_rounds", 1,
                                                        kMaxRoundsLimit));
    out->set_max_rounds(static_cast<int32_t>(v));
  }
  if (Has(node, "time_limit")) {
    const YAML::Node t = Get(node, "time_limit");
    if (!t.IsScalar()) {
      return FieldError(
          "budget.time_limit",
          absl::StrCat("expected a duration like 90s, 30m, 12h or "
                       "integer seconds, got ",
                       yamlf::Describe(t)));
    }
    absl::StatusOr<int64_t> s = ParseDurationSeconds(t.Scalar());
    if (!s.ok()) return FieldError("budget.time_limit", s.status().message());
    TF_RETURN_IF_ERROR(CheckTimeLimit(*s));
    out->set_time_limit_s(*s);
  }
  if (Has(node, "max_rounds_without_gain")) {
    TF_ASSIGN_OR_RETURN(
        int64_t v, yamlf::GetIntInRange(Get(node, "max_rounds_without_gain"),
                                        "budget.max_rounds_without_gain", 1,
                                        kMaxRoundsLimit));
    out->set_max_rounds_without_gain(static_cast<int32_t>(v));
  }
  return absl::OkStatus();
}

// saturation: {core_utilization_pct, bubble_rate_pct, roofline_margin,
// enabled}; omitted keys keep the defaults (saturation.h).
absl::Status ParseSaturation(const YAML::Node& node,
                             v1::SaturationPolicy* out) {
  TF_RETURN_IF_ERROR(yamlf::CheckMap(node, "saturation",
                                     {"core_utilization_pct", "bubble_rate_pct",
                                      "roofline_margin", "enabled"}));
  const std::map<std::string, void (v1::SaturationPolicy::*)(double)> numbers =
      {{"core_utilization_pct",
        &v1::SaturationPolicy::set_min_core_utilization_pct},
       {"bubble_rate_pct", &v1::SaturationPolicy::set_max_bubble_rate_pct},
       {"roofline_margin", &v1::SaturationPolicy::set_roofline_margin}};
  for (const auto& [key, set] : numbers) {
    if (!Has(node, key)) continue;
    TF_ASSIGN_OR_RETURN(
        double v, yamlf::GetDouble(Get(node, key), Child("saturation", key)));
    (out->*set)(v);
  }
  if (Has(node, "enabled")) {
    TF_ASSIGN_OR_RETURN(
        bool v, yamlf::GetBool(Get(node, "enabled"), "saturation.enabled"));
    out->set_disabled(!v);
  }
  return CheckSaturationPolicy(*out);
}

absl::Status ParseSpecNode(const YAML::Node& doc, v1::SweepSpec* spec) {
  TF_RETURN_IF_ERROR(yamlf::CheckMap(
      doc, "",
      {"name", "team", "operator", "workload", "workloads", "objective", "goal",
       "strategy", "budget", "min_gain", "boards", "measurement", "baseline",
       "priority", "saturation"}));

  if (Has(doc, "name")) {
    TF_ASSIGN_OR_RETURN(*spec->mutable_name(),
                        yamlf::GetString(Get(doc, "name"), "name"));
  }
  if (Has(doc, "team")) {
    TF_ASSIGN_OR_RETURN(*spec->mutable_team(),
                        yamlf::GetString(Get(doc, "team"), "team"));
  }
  if (Has(doc, "operator")) {
    TF_ASSIGN_OR_RETURN(*spec->mutable_operator_name(),
                        yamlf::GetString(Get(doc, "operator"), "operator"));
  }
  if (Has(doc, "workload")) {
    TF_RETURN_IF_ERROR(ParseWorkload(Get(doc, "workload"), "workload",
                                     spec->mutable_workload()));
  }
  if (Has(doc, "workloads")) {
    TF_RETURN_IF_ERROR(ParseWorkloads(Get(doc, "workloads"), spec));
  }
  if (Has(doc, "objective")) {
    TF_RETURN_IF_ERROR(ParseObjective(Get(doc, "objective"), spec));
  }
  if (Has(doc, "goal")) {
    const YAML::Node goal = Get(doc, "goal");
    TF_RETURN_IF_ERROR(yamlf::CheckMap(goal, "goal", {"speedup", "target_us"}));
    if (Has(goal, "speedup")) {
      TF_ASSIGN_OR_RETURN(
          double v, yamlf::GetDouble(Get(goal, "speedup"), "goal.speedup"));
      TF_RETURN_IF_ERROR(CheckSpeedup(v));
      spec->mutable_goal()->set_speedup(v);
    }
    if (Has(goal, "target_us")) {
      TF_ASSIGN_OR_RETURN(
          double v, yamlf::GetDouble(Get(goal, "target_us"), "goal.target_us"));
      TF_RETURN_IF_ERROR(CheckTargetUs(v));
      spec->mutable_goal()->set_target_us(v);
    }
  }
  spec->mutable_strategy()->set_name(kDefaultStrategyName);
  spec->mutable_strategy()->set_seed(kDefaultSeed);
  if (Has(doc, "strategy")) {
    TF_RETURN_IF_ERROR(
        ParseStrategy(Get(doc, "strategy"), spec->mutable_strategy()));
  }
  if (Has(doc, "budget")) {
    TF_RETURN_IF_ERROR(ParseBudget(Get(doc, "budget"), spec->mutable_budget()));
  }
  spec->set_min_gain(kDefaultMinGain);
  if (Has(doc, "min_gain")) {
    TF_ASSIGN_OR_RETURN(double v,
                        yamlf::GetDouble(Get(doc, "min_gain"), "min_gain"));
    TF_RETURN_IF_ERROR(CheckMinGain(v));
    spec->set_min_gain(v);
  }
  if (Has(doc, "boards")) {
    const YAML::Node boards = Get(doc, "boards");
    TF_RETURN_IF_ERROR(yamlf::CheckMap(
        boards, "boards", {"kind", "chip", "labels", "reserved_only"}));
    v1::BoardSelector* sel = spec->mutable_boards();
    if (Has(boards, "kind")) {
      TF_ASSIGN_OR_RETURN(*sel->mutable_kind(),
                          yamlf::GetString(Get(boards, "kind"), "boards.kind"));
    }
    if (Has(boards, "chip")) {
      TF_ASSIGN_OR_RETURN(*sel->mutable_chip(),
                          yamlf::GetString(Get(boards, "chip"), "boards.chip"));
    }
    if (Has(boards, "labels")) {
      TF_RETURN_IF_ERROR(ParseStringMap(Get(boards, "labels"), "boards.labels",
                                        sel->mutable_labels()));
    }
    if (Has(boards, "reserved_only")) {
      TF_ASSIGN_OR_RETURN(bool v, yamlf::GetBool(Get(boards, "reserved_only"),
                                                 "boards.reserved_only"));
      sel->set_reserved_only(v);
    }
  }
  v1::MeasurementPolicy* m = spec->mutable_measurement();
  m->set_warmup(kDefaultWarmup);
  m->set_flush_cache(kDefaultFlushCache);
  if (Has(doc, "measurement")) {
    const YAML::Node node = Get(doc, "measurement");
    TF_RETURN_IF_ERROR(yamlf::CheckMap(
        node, "measurement",
        {"warmup", "samples", "flush_cache", "mode", "target_rel_spread",
         "max_samples", "confidence", "isolation", "closing_check"}));
    if (Has(node, "warmup")) {
      TF_ASSIGN_OR_RETURN(
          int64_t v, yamlf::GetIntInRange(Get(node, "warmup"),
                                          "measurement.warmup", 0, kMaxWarmup));
      m->set_warmup(static_cast<int32_t>(v));
    }
    if (Has(node, "samples")) {
      TF_ASSIGN_OR_RETURN(
          int64_t v,
          yamlf::GetIntInRange(Get(node, "samples"), "measurement.samples",
                               kMinSamples, kMaxSamples));
      m->set_samples(static_cast<int32_t>(v));
    }
    if (Has(node, "flush_cache")) {
      TF_ASSIGN_OR_RETURN(bool v, yamlf::GetBool(Get(node, "flush_cache"),
                                                 "measurement.flush_cache"));
      m->set_flush_cache(v);
    }
    if (Has(node, "closing_check")) {
      TF_ASSIGN_OR_RETURN(bool v, yamlf::GetBool(Get(node, "closing_check"),
                                                 "measurement.closing_check"));
      m->set_skip_closing_check(!v);
    }
    if (Has(node, "mode")) {
      TF_ASSIGN_OR_RETURN(std::string v, yamlf::GetString(Get(node, "mode"),
                                                          "measurement.mode"));
      if (v == "ab") {
        m->set_mode(v1::MEASUREMENT_MODE_AB);
      } else if (v == "independent") {
        m->set_mode(v1::MEASUREMENT_MODE_INDEPENDENT);
      } else {
        return FieldError(
            "measurement.mode",
            absl::StrCat("must be ab or independent, got ", Quote(v)));
      }
    }
    if (Has(node, "isolation")) {
      TF_ASSIGN_OR_RETURN(
          std::string v,
          yamlf::GetString(Get(node, "isolation"), "measurement.isolation"));
      if (v == "runner") {
        m->set_isolation(v1::ISOLATION_RUNNER);
      } else if (v == "process") {
        m->set_isolation(v1::ISOLATION_PROCESS);
      } else {
        return FieldError(
            "measurement.isolation",
            absl::StrCat("must be runner or process, got ", Quote(v)));
      }
    }
    if (Has(node, "target_rel_spread")) {
      TF_ASSIGN_OR_RETURN(double v,
                          yamlf::GetDouble(Get(node, "target_rel_spread"),
                                           "measurement.target_rel_spread"));
      TF_RETURN_IF_ERROR(CheckTargetSpread(v));
      m->set_target_rel_spread(v);
    }
    if (Has(node, "max_samples")) {
      TF_ASSIGN_OR_RETURN(int64_t v,
                          yamlf::GetIntInRange(Get(node, "max_samples"),
                                               "measurement.max_samples",
                                               kMinSamples, kMaxTimedSamples));
      m->set_max_samples(static_cast<int32_t>(v));
    }
    if (Has(node, "confidence")) {
      TF_ASSIGN_OR_RETURN(double v, yamlf::GetDouble(Get(node, "confidence"),
                                                     "measurement.confidence"));
      TF_RETURN_IF_ERROR(CheckConfidence(v));
      m->set_confidence(v);
    }
  }
  if (Has(doc, "baseline")) {
    const YAML::Node node = Get(doc, "baseline");
    TF_RETURN_IF_ERROR(yamlf::CheckOpenMap(node, "baseline"));
    for (auto it = node.begin(); it != node.end(); ++it) {
      const std::string& key = it->first.Scalar();
      if (key == "from_db") {  // warm start (tuning_db/warm_start.h)
        TF_ASSIGN_OR_RETURN(
            *spec->mutable_baseline_from_db(),
            yamlf::GetString(it->second, Child("baseline", key)));
        TF_RETURN_IF_ERROR(yamlf::CheckText(Child("baseline", key),
                                            spec->baseline_from_db(), 4096));
        if (spec->baseline_from_db().empty()) {
          return FieldError("baseline.from_db", "must name a database file");
        }
        continue;
      }
      TF_RETURN_IF_ERROR(yamlf::CheckIdentifier(Child("baseline", key), key));
      TF_ASSIGN_OR_RETURN(
          v1::ParamValue v,
          yamlf::GetParamValue(it->second, Child("baseline", key)));
      (*spec->mutable_baseline_params())[key] = std::move(v);
    }
  }
  if (Has(doc, "saturation")) {
    TF_RETURN_IF_ERROR(
        ParseSaturation(Get(doc, "saturation"), spec->mutable_saturation()));
  }
  if (Has(doc, "priority")) {
    TF_ASSIGN_OR_RETURN(int64_t v,
                        yamlf::GetIntInRange(Get(doc, "priority"), "priority",
                                             -kMaxPriority, kMaxPriority));
    spec->set_priority(static_cast<int32_t>(v));
  }
  return absl::OkStatus();
}

std::string JoinWorkloadNames(const v1::OperatorManifest& op) {
  std::vector<std::string> names;
  for (const auto& w : op.workloads()) names.push_back(w.name());
  return names.empty() ? std::string("(none)") : absl::StrJoin(names, ", ");
}

absl::Status ValidateWorkloadField(const v1::OperatorManifest& op,
                                   v1::Workload* w,
                                   const std::string& path = "workload") {
  if (w->dims().empty()) {
    if (w->name().empty()) {
      if (path != "workload") return FieldError(path, "names no workload");
      if (op.workloads().empty()) {
        return FieldError("workload",
                          absl::StrCat("is required: operator ", op.name(),
                                       " declares no workloads"));
      }
      *w = op.workloads(0);
      return absl::OkStatus();
    }
    for (const v1::Workload& known : op.workloads()) {
      if (known.name() == w->name()) {
        if (!w->dtype().empty() && w->dtype() != known.dtype()) {
          return FieldError(
              Child(path, "dtype"),
              absl::StrCat("workload ", known.name(), " is ", known.dtype(),
                           ", not ", Quote(w->dtype())));
        }
        *w = known;
        return absl::OkStatus();
      }
    }
    return FieldError(path, absl::StrCat("unknown workload ", Quote(w->name()),
                                         " of operator ", op.name(),
                                         "; known: ", JoinWorkloadNames(op)));
  }
  if (w->name().empty()) return FieldError(Child(path, "name"), "is required");
  if (w->dtype().empty()) {
    return FieldError(Child(path, "dtype"), "is required");
  }
  return ValidateWorkload(*w, path);
}

// `workloads:` and `objective:` (docs/sweep-spec.md, "Several workloads").
absl::Status ValidateWorkloads(const v1::OperatorManifest& op,
                               v1::SweepSpec* spec) {
  if (spec->workloads().empty()) {
    if (spec->objective() != v1::WORKLOAD_OBJECTIVE_UNSPECIFIED) {
      return FieldError("objective", "needs a list of workloads (workloads:)");
    }
    if (!spec->workload_weights().empty()) {
      return FieldError("objective.weights",
                        "needs a list of workloads (workloads:)");
    }
    return ValidateWorkloadField(op, spec->mutable_workload());
  }
  if (spec->has_workload()) {
    return FieldError("workloads",
                      "name either workload or workloads, not both");
  }
  if (spec->workloads_size() > static_cast<int>(kMaxWorkloads)) {
    return FieldError("workloads",
                      absl::StrCat("has ", spec->workloads_size(),
                                   " entries; the limit is ", kMaxWorkloads));
  }
  std::map<std::string, int> seen;
  for (int i = 0; i < spec->workloads_size(); ++i) {
    const std::string path = absl::StrCat("workloads[", i, "]");
    v1::Workload* w = spec->mutable_workloads(i);
    TF_RETURN_IF_ERROR(ValidateWorkloadField(op, w, path));
    // Two entries for one name would share a lineage and a database key.
    auto [it, added] = seen.emplace(w->name(), i);
    if (!added) {
      return FieldError(path,
                        absl::StrCat("duplicate workload ", Quote(w->name()),
                                     " (also workloads[", it->second, "])"));
    }
    for (int j = 0; j < i; ++j) {
      const v1::Workload& other = spec->workloads(j);
      if (other.dtype() == w->dtype() &&
          std::map<std::string, int64_t>(other.dims().begin(),
                                         other.dims().end()) ==
              std::map<std::string, int64_t>(w->dims().begin(),
                                             w->dims().end())) {
        return FieldError(
            path, absl::StrCat("duplicate workload: ", Quote(w->name()),
                               " has the dtype and dims of workloads[", j,
                               "] (", Quote(other.name()), ")"));
      }
    }
  }
  if (spec->objective() == v1::WORKLOAD_OBJECTIVE_UNSPECIFIED) {
    spec->set_objective(v1::WORKLOAD_OBJECTIVE_PER_WORKLOAD);
  }
  if (!v1::WorkloadObjective_IsValid(spec->objective())) {
    return FieldError("objective",
                      absl::StrCat("unknown objective ", spec->objective()));
  }
  const auto& weights = spec->workload_weights();
  if (spec->objective() != v1::WORKLOAD_OBJECTIVE_ONE_CONFIG) {
    if (!weights.empty()) {
      return FieldError("objective.weights",
                        "only objective one_config weighs workloads");
    }
    return absl::OkStatus();
  }
  std::map<std::string, double> sorted(weights.begin(), weights.end());
  for (const auto& [name, weight] : sorted) {
    if (!seen.contains(name)) {
      return FieldError(
          Child("objective.weights", name),
          absl::StrCat("is not a workload of this sweep; "
                       "workloads: ",
                       absl::StrJoin(WorkloadNames(*spec), ", ")));
    }
    if (!std::isfinite(weight) || weight <= 0 || weight > kMaxWorkloadWeight) {
      return FieldError(Child("objective.weights", name),
                        absl::StrCat("must be a finite number > 0 and <= ",
                                     kMaxWorkloadWeight, ", got ", weight));
    }
  }
  for (const v1::Workload& w : spec->workloads()) {
    if (!weights.contains(w.name())) {
      return FieldError(
          "objective.weights",
          absl::StrCat("no weight for workload ", Quote(w.name()),
                       ": one_config needs a weight (> 0) for every workload"));
    }
  }
  if (spec->goal().target_us() != 0) {
    return FieldError("goal.target_us",
                      "one time cannot be the goal of several workloads: "
                      "objective one_config takes goal.speedup (of the "
                      "weighted geometric mean)");
  }
  return absl::OkStatus();
}

absl::Status ValidateStrategy(v1::StrategySpec* s) {
  if (s->name().empty()) s->set_name(kDefaultStrategyName);
  const auto& known = StrategyOptions();
  std::vector<std::string> names;
  for (const auto& [name, opts] : known) names.push_back(name);
  auto it = known.find(s->name());
  if (it == known.end()) {
    return FieldError("strategy.name",
                      absl::StrCat("unknown strategy ", Quote(s->name()),
                                   "; known: ", absl::StrJoin(names, ", ")));
  }
  TF_RETURN_IF_ERROR(CheckStringMap("strategy.options", s->options()));
  std::map<std::string, std::string> sorted(s->options().begin(),
                                            s->options().end());
  for (const auto& [key, value] : sorted) {
    const auto& accepted = it->second;
    if (std::find(accepted.begin(), accepted.end(), key) == accepted.end()) {
      return FieldError(
          Child("strategy.options", key),
          absl::StrCat("unknown option for strategy ", s->name(), "; it takes ",
                       accepted.empty() ? std::string("none")
                                        : absl::StrJoin(accepted, ", ")));
    }
  }
  if (s->name() == kGuidedStrategyName) {  // values too: counts
    TF_RETURN_IF_ERROR(GuidedOptionsFromSpec(*s).status());
  }
  if (s->name() == kHybridStrategyName || s->name() == kTpeStrategyName) {
    TF_RETURN_IF_ERROR(
        HybridOptionsFromSpec(*s, s->name() == kHybridStrategyName).status());
  }
  return absl::OkStatus();
}

absl::Status ValidateBoards(const v1::OperatorManifest& op,
                            v1::BoardSelector* sel) {
  const auto& kinds = KnownBoardKinds();
  std::vector<std::string> has;
  for (const std::string& k : kinds) {
    if (op.backends().contains(k)) has.push_back(k);
  }
  if (sel->kind().empty()) {
    if (has.empty()) {
      return FieldError("boards.kind", absl::StrCat("operator ", op.name(),
                                                    " declares no backend"));
    }
    sel->set_kind(has.front());
  }
  if (std::find(kinds.begin(), kinds.end(), sel->kind()) == kinds.end()) {
    return FieldError("boards.kind",
                      absl::StrCat("unknown board kind ", Quote(sel->kind()),
                                   "; known: ", absl::StrJoin(kinds, ", ")));
  }
  if (!op.backends().contains(sel->kind())) {
    return FieldError("boards.kind",
                      absl::StrCat("operator ", op.name(), " has no '",
                                   sel->kind(), "' backend; it has: ",
                                   has.empty() ? std::string("(none)")
                                               : absl::StrJoin(has, ", ")));
  }
  TF_RETURN_IF_ERROR(CheckLabel("boards.chip", sel->chip()));
  TF_RETURN_IF_ERROR(CheckStringMap("boards.labels", sel->labels()));
  // Agents carry only labels of this syntax: any other selector would wait
  // forever for a board that cannot exist.
  for (const auto& [key, value] : sel->labels()) {
    if (!IsBoardLabelText(key) || !IsBoardLabelText(value)) {
      return FieldError(
          "boards.labels",
          absl::StrCat(Quote(key), ": ", Quote(value),
                       " can match no board: board labels (agent --label) "
                       "are ",
                       kBoardLabelSyntax));
    }
  }
  return absl::OkStatus();
}

// `baseline: {from_db: PATH}`: the database's parameters for the nearest
// workload become the baseline under the spec's explicit overrides, and the
// sweep records where they came from (baseline_source).
absl::Status ResolveBaselineFromDb(const v1::OperatorManifest& op,
                                   v1::SweepSpec* spec) {
  if (spec->baseline_from_db().empty()) {
    if (!spec->baseline_db_json().empty()) {
      return FieldError("baseline.from_db",
                        "is required when the database's content is sent");
    }
    return absl::OkStatus();
  }
  if (spec->baseline_db_json().empty()) {
    return FieldError(
        "baseline.from_db",
        absl::StrCat("the content of ", Quote(spec->baseline_from_db()),
                     " was not sent (the coordinator does not read your "
                     "files): submit with `tunefarm submit`, which does"));
  }
  if (spec->baseline_db_json().size() > kMaxBaselineDbBytes) {
    return FieldError(
        "baseline.from_db",
        absl::StrCat("the database sent is ", spec->baseline_db_json().size(),
                     " bytes; the limit is ", kMaxBaselineDbBytes));
  }
  absl::StatusOr<TuningDb> db = ParseTuningDb(
      spec->baseline_db_json(),
      absl::StrCat("baseline.from_db ", spec->baseline_from_db()));
  if (!db.ok()) return absl::InvalidArgumentError(db.status().message());
  WarmStart ws = ResolveWarmStart(
      *db, spec->baseline_from_db(), op, spec->boards().kind(),
      spec->boards().chip(),
      // Several workloads: the first one's (one baseline).
      spec->workloads().empty() ? spec->workload() : spec->workloads(0));
  for (const auto& [name, value] : ws.params) {
    spec->mutable_baseline_params()->insert({name, value});  // overrides win
  }
  spec->set_baseline_source(ws.source);
  spec->clear_baseline_db_json();
  return absl::OkStatus();
}

absl::Status ValidateBaseline(const v1::OperatorManifest& op,
                              ParamMap* params) {
  ParamMap merged = DefaultParams(op);
  std::map<std::string, v1::ParamValue> overrides(params->begin(),
                                                  params->end());
  for (auto& [name, value] : overrides) {
    const std::string path = Child("baseline", name);
    const v1::ParameterDomain* p = FindParameter(op, name);
    if (p == nullptr) {
      std::vector<std::string> known;
      for (const auto& d : op.parameters()) known.push_back(d.name());
      return FieldError(
          path, absl::StrCat("unknown parameter of operator ", op.name(),
                             "; known: ", absl::StrJoin(known, ", ")));
    }
    // YAML reads "1" as an integer; in a domain of doubles it means 1.0.
    if (value.has_int_value() && p->values_size() > 0 &&
        p->values(0).has_double_value()) {
      value.set_double_value(static_cast<double>(value.int_value()));
    }
    ParamMap single = merged;
    single[name] = value;
    absl::Status s = ValidateParams(op, single);
    if (!s.ok()) return FieldError(path, s.message());
    merged[name] = value;
  }
  TF_RETURN_IF_ERROR(ValidateParams(op, merged));
  *params = std::move(merged);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int64_t> ParseDurationSeconds(std::string_view text_in) {
  const absl::string_view text(text_in.data(), text_in.size());
  const std::string bad = absl::StrCat(
      "expected a duration like 90s, 30m, 12h, 7d or integer seconds, got ",
      Quote(text));
  int64_t whole = 0;
  if (absl::SimpleAtoi(text, &whole)) return whole;
  if (text.empty() || text.size() > 32) return absl::InvalidArgumentError(bad);
  int64_t total = 0;
  size_t i = 0;
  while (i < text.size()) {
    int64_t n = 0;
    size_t digits = 0;
    while (i < text.size() && absl::ascii_isdigit(text[i])) {
      if (++digits > 12) return absl::InvalidArgumentError(bad);
      n = n * 10 + (text[i] - '0');
      ++i;
    }
    if (digits == 0 || i == text.size()) return absl::InvalidArgumentError(bad);
    int64_t unit = 0;
    switch (text[i]) {
      case 's':
        unit = 1;
        break;
      case 'm':
        unit = 60;
        break;
      case 'h':
        unit = 3600;
        break;
      case 'd':
        unit = 86400;
        break;
      default:
        return absl::InvalidArgumentError(bad);
    }
    ++i;
    total += n * unit;  // <= 10^12 * 86400 * 16 terms: fits in int64
  }
  return total;
}

namespace {

// Walks `node` as a consumer would, counting every node visited (an alias
// is visited again each time it is used), so that a small document that
// expands into a huge tree ("billion laughs") or nests absurdly deep is
// refused before anything reads it.
absl::Status CheckYamlShape(const YAML::Node& node, int depth,
                            int64_t* visited) {
  if (depth > kMaxSpecYamlDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec nests deeper than ", kMaxSpecYamlDepth, " levels"));
  }
  if (++*visited > kMaxSpecYamlNodes) {
    return absl::InvalidArgumentError(absl::StrCat("spec expands to more than ",
                                                   kMaxSpecYamlNodes,
                                                   " YAML nodes (aliases?)"));
  }
  if (node.IsMap()) {
    for (const auto& kv : node) {
      TF_RETURN_IF_ERROR(CheckYamlShape(kv.first, depth + 1, visited));
      TF_RETURN_IF_ERROR(CheckYamlShape(kv.second, depth + 1, visited));
    }
  } else if (node.IsSequence()) {
    for (const auto& item : node) {
      TF_RETURN_IF_ERROR(CheckYamlShape(item, depth + 1, visited));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::SweepSpec> ParseSweepSpec(std::string_view yaml) {
  if (size_t bad = 0;
      !IsValidUtf8(absl::string_view(yaml.data(), yaml.size()), &bad)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spec is not UTF-8 text (invalid byte at offset ", bad, ")"));
  }
  size_t aliases = 0;
  for (size_t i = 0; i < yaml.size(); ++i) {
    // A '*' starting a token; an over-count (a '*' in a quoted string) only
    // makes the limit stricter.
    if (yaml[i] == '*' &&
        (i == 0 || yaml[i - 1] == ' ' || yaml[i - 1] == '[' ||
         yaml[i - 1] == ',' || yaml[i - 1] == '\n' || yaml[i - 1] == '{')) {
      ++aliases;
    }
  }
  if (aliases > kMaxSpecYamlAliases) {
    return absl::InvalidArgumentError(
        absl::StrCat("spec uses ", aliases, " YAML aliases; the limit is ",
                     kMaxSpecYamlAliases));
  }
  TF_ASSIGN_OR_RETURN(
      YAML::Node doc,
      yamlf::ParseYamlDocument(absl::string_view(yaml.data(), yaml.size())));
  v1::SweepSpec spec;
  try {
    int64_t visited = 0;
    TF_RETURN_IF_ERROR(CheckYamlShape(doc, 0, &visited));
    TF_RETURN_IF_ERROR(ParseSpecNode(doc, &spec));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("YAML error at line ", e.mark.line + 1, ", column ",
                     e.mark.column + 1, ": ", e.msg));
  }
  return spec;
}

absl::StatusOr<v1::SweepSpec> ValidateSweepSpec(
    v1::SweepSpec spec, const OperatorCatalog& catalog) {
  TF_RETURN_IF_ERROR(CheckSweepName("name", spec.name()));
  TF_RETURN_IF_ERROR(CheckSweepName("team", spec.team()));

  if (spec.operator_name().empty())
    return FieldError("operator", "is required");
  absl::StatusOr<const v1::OperatorManifest*> found =
      catalog.Find(spec.operator_name());
  if (!found.ok()) return FieldError("operator", found.status().message());
  const v1::OperatorManifest& op = **found;

  TF_RETURN_IF_ERROR(ValidateWorkloads(op, &spec));

  const v1::Goal& goal = spec.goal();
  if (goal.speedup() == 0 && goal.target_us() == 0) {
    return FieldError("goal", "set speedup (> 1) and/or target_us (> 0)");
  }
  if (goal.speedup() != 0) TF_RETURN_IF_ERROR(CheckSpeedup(goal.speedup()));
  if (goal.target_us() != 0)
    TF_RETURN_IF_ERROR(CheckTargetUs(goal.target_us()));

  TF_RETURN_IF_ERROR(ValidateStrategy(spec.mutable_strategy()));

  v1::Budget* budget = spec.mutable_budget();
  if (budget->max_rounds() == 0) budget->set_max_rounds(kDefaultMaxRounds);
  TF_RETURN_IF_ERROR(
      CheckInt("budget.max_rounds", budget->max_rounds(), 1, kMaxRoundsLimit));
  if (budget->time_limit_s() == 0) budget->set_time_limit_s(kDefaultTimeLimitS);
  TF_RETURN_IF_ERROR(CheckTimeLimit(budget->time_limit_s()));
  if (budget->max_rounds_without_gain() == 0) {
    budget->set_max_rounds_without_gain(kDefaultMaxRoundsWithoutGain);
  }
  TF_RETURN_IF_ERROR(CheckInt("budget.max_rounds_without_gain",
                              budget->max_rounds_without_gain(), 1,
                              kMaxRoundsLimit));

  TF_RETURN_IF_ERROR(CheckMinGain(spec.min_gain()));
  TF_RETURN_IF_ERROR(ValidateBoards(op, spec.mutable_boards()));

  v1::MeasurementPolicy* m = spec.mutable_measurement();
  TF_RETURN_IF_ERROR(
      CheckInt("measurement.warmup", m->warmup(), 0, kMaxWarmup));
  if (m->samples() == 0) m->set_samples(kDefaultSamples);
  TF_RETURN_IF_ERROR(
      CheckInt("measurement.samples", m->samples(), kMinSamples, kMaxSamples));
  if (m->mode() == v1::MEASUREMENT_MODE_UNSPECIFIED) {
    m->set_mode(v1::MEASUREMENT_MODE_AB);
  }
  if (!v1::MeasurementMode_IsValid(m->mode())) {
    return FieldError("measurement.mode",
                      absl::StrCat("unknown mode ", m->mode()));
  }
  if (m->target_rel_spread() == 0) {
    m->set_target_rel_spread(kDefaultTargetRelSpread);
  }
  TF_RETURN_IF_ERROR(CheckTargetSpread(m->target_rel_spread()));
  if (m->max_samples() == 0) {
    m->set_max_samples(std::min(4 * m->samples(), kMaxTimedSamples));
  }
  if (m->max_samples() < m->samples() || m->max_samples() > kMaxTimedSamples) {
    return FieldError(
        "measurement.max_samples",
        absl::StrCat("must be between measurement.samples (", m->samples(),
                     ") and ", kMaxTimedSamples, ", got ", m->max_samples()));
  }
  if (m->confidence() == 0) m->set_confidence(kDefaultConfidence);
  TF_RETURN_IF_ERROR(CheckConfidence(m->confidence()));

  spec.set_operator_source_hash(op.source_hash());
  // The baseline is checked against the parameters of the sweep's board kind
  // only (ValidateBoards has settled the kind): a cuda-only parameter is
  // unknown to a cpu sweep.
  const v1::OperatorManifest projected =
      ProjectManifest(op, spec.boards().kind());
  TF_RETURN_IF_ERROR(ResolveBaselineFromDb(projected, &spec));
  TF_RETURN_IF_ERROR(
      ValidateBaseline(projected, spec.mutable_baseline_params()));
  TF_RETURN_IF_ERROR(
      CheckInt("priority", spec.priority(), -kMaxPriority, kMaxPriority));
  TF_RETURN_IF_ERROR(CheckSaturationPolicy(spec.saturation()));
  return spec;
}

}  // namespace tunefarm
