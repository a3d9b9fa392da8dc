#include "coordinator/policy.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "yaml-cpp/yaml.h"

namespace tunefarm {
namespace {

absl::StatusOr<v1::TeamQuota> ParseQuota(const YAML::Node& node,
                                         const std::string& where,
                                         const std::string& team) {
  v1::TeamQuota q;
  q.set_team(team);
  q.set_weight(1);
  if (!node.IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": not a mapping"));
  }
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>("");
    const std::string field = absl::StrCat(where, ".", key);
    try {
      if (key == "weight") {
        const double w = kv.second.as<double>();
        if (!std::isfinite(w) || w < 0 || w > 1e6) {
          return absl::InvalidArgumentError(
              absl::StrCat(field, ": must be between 0 and 1e6"));
        }
        q.set_weight(w);
      } else if (key == "max_boards" || key == "max_active_sweeps") {
        const int v = kv.second.as<int>();
        if (v < 0 || v > 1000000) {
          return absl::InvalidArgumentError(
              absl::StrCat(field, ": must be between 0 and 1000000"));
        }
        if (key == "max_boards") {
          q.set_max_boards(v);
        } else {
          q.set_max_active_sweeps(v);
        }
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            field, ": unknown key (known: weight, max_boards, "
                   "max_active_sweeps)"));
      }
    } catch (const YAML::Exception&) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": expected a number"));
    }
  }
  return q;
}

}  // namespace

absl::StatusOr<TeamPolicy> ParseTeamPolicy(absl::string_view yaml,
                                           absl::string_view source) {
  const std::string src(source);
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(src, ": not valid YAML: ", e.what()));
  }
  TeamPolicy policy;
  policy.default_quota.set_weight(1);
  if (root.IsNull()) return policy;
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat(src, ": not a mapping"));
  }
  for (const auto& kv : root) {
    const std::string key = kv.first.as<std::string>("");
    if (key == "default") {
      TF_ASSIGN_OR_RETURN(policy.default_quota,
                          ParseQuota(kv.second, src + ": default", ""));
    } else if (key == "teams") {
      if (!kv.second.IsMap()) {
        return absl::InvalidArgumentError(
            absl::StrCat(src, ": teams: not a mapping"));
      }
      for (const auto& t : kv.second) {
        const std::string team = t.first.as<std::string>("");
        TF_ASSIGN_OR_RETURN(
            policy.teams[team],
            ParseQuota(t.second, absl::StrCat(src, ": teams.", team), team));
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          src, ": ", key, ": unknown key (known: default, teams)"));
    }
  }
  return policy;
}

absl::StatusOr<TeamPolicy> LoadTeamPolicy(const std::string& path) {
  TF_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseTeamPolicy(text, path);
}

}  // namespace tunefarm
