#include "coordinator/health.h"

#include <cmath>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "coordinator/spec.h"
#include "yaml-cpp/yaml.h"

namespace tunefarm {

absl::StatusOr<HealthCheck> ParseHealthCheck(absl::string_view yaml,
                                             absl::string_view source,
                                             absl::string_view default_kind,
                                             const OperatorCatalog& catalog) {
  const std::string src(source);
  YAML::Node doc;
  try {
    doc = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(src, ": not valid YAML: ", e.what()));
  }
  if (!doc.IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat(src, ": not a mapping"));
  }
  HealthCheck check;
  check.source = src;
  check.kind = std::string(default_kind);
  // The golden is a sweep spec's run part (operator, workload, baseline,
  // measurement) plus the expectation: parse and validate it the same way.
  YAML::Node spec = YAML::Node(YAML::NodeType::Map);
  for (const auto& kv : doc) {
    const std::string key = kv.first.as<std::string>("");
    if (key == "kind") {
      check.kind = kv.second.as<std::string>("");
    } else if (key == "expect_us") {
      const YAML::Node& e = kv.second;
      if (!e.IsMap() || !e["min"] || !e["max"] || e.size() != 2) {
        return absl::InvalidArgumentError(absl::StrCat(
            src,
            ": expect_us: expected {min: MICROSECONDS, max: MICROSECONDS}"));
      }
      try {
        check.min_us = e["min"].as<double>();
        check.max_us = e["max"].as<double>();
      } catch (const YAML::Exception&) {
        return absl::InvalidArgumentError(
            absl::StrCat(src, ": expect_us: min and max must be numbers"));
      }
      if (!(std::isfinite(check.min_us) && std::isfinite(check.max_us) &&
            check.min_us >= 0 && check.max_us > check.min_us)) {
        return absl::InvalidArgumentError(
            absl::StrCat(src, ": expect_us: need 0 <= min < max, got [",
                         check.min_us, ", ", check.max_us, "]"));
      }
    } else if (key == "operator" || key == "workload" || key == "baseline" ||
               key == "measurement") {
      spec[key] = kv.second;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          src, ": ", key,
          ": unknown key (known: kind, operator, workload, baseline, "
          "measurement, expect_us)"));
    }
  }
  if (check.kind.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(src, ": kind: missing"));
  }
  if (!doc["expect_us"]) {
    return absl::InvalidArgumentError(
        absl::StrCat(src, ": expect_us: missing"));
  }
  if (!doc["operator"]) {
    return absl::InvalidArgumentError(absl::StrCat(src, ": operator: missing"));
  }
  spec["name"] = "health-" + check.kind;
  spec["team"] = "farm";
  spec["goal"]["speedup"] = 2;
  spec["boards"]["kind"] = check.kind;
  YAML::Emitter out;
  out << spec;
  auto parsed = ParseSweepSpec(out.c_str());
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(src, ": ", parsed.status().message()));
  }
  auto valid = ValidateSweepSpec(*std::move(parsed), catalog);
  if (!valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(src, ": ", valid.status().message()));
  }
  check.spec = *std::move(valid);
  return check;
}

absl::StatusOr<std::map<std::string, HealthCheck>> LoadHealthChecks(
    const std::string& dir, const OperatorCatalog& catalog) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(
        absl::StrCat("health-check folder '", dir, "' does not exist"));
  }
  std::map<std::string, HealthCheck> checks;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    const fs::path& p = it->path();
    if (p.extension() != ".yaml") continue;
    TF_ASSIGN_OR_RETURN(std::string text, ReadFile(p.string()));
    TF_ASSIGN_OR_RETURN(
        HealthCheck check,
        ParseHealthCheck(text, p.string(), p.stem().string(), catalog));
    if (checks.contains(check.kind)) {
      return absl::InvalidArgumentError(absl::StrCat(
          p.string(), ": kind ", check.kind, ": already has a golden in ",
          checks[check.kind].source));
    }
    checks[check.kind] = std::move(check);
  }
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot list '", dir, "': ", ec.message()));
  }
  return checks;
}

}  // namespace tunefarm
