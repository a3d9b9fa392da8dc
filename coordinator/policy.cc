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
        return absl::InvalidArgumentError(
            absl::StrCat(field,
                         ": unknown key (known: weight, max_boards, "
                         "max_active_sweeps)"));
      }
    } catch (const YAML::Exception&) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": expected a number"));
    }
  }
  return q;
}

// One entry of `reservations:`: {board: ID | labels: {k: v}, team, reason}.
absl::StatusOr<v1::BoardReservation> ParseReservation(
    const YAML::Node& node, const std::string& where) {
  if (!node.IsMap()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": not a mapping"));
  }
  v1::BoardReservation r;
  r.set_from_policy(true);
  for (const auto& kv : node) {
    const std::string key = kv.first.as<std::string>("");
    const std::string field = absl::StrCat(where, ".", key);
    if (key == "labels") {
      if (!kv.second.IsMap() || kv.second.size() == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ": expected a non-empty mapping"));
      }
      for (const auto& label : kv.second) {
        if (!label.second.IsScalar()) {
          return absl::InvalidArgumentError(absl::StrCat(
              field, ".", label.first.as<std::string>(""), ": expected text"));
        }
        (*r.mutable_labels())[label.first.as<std::string>("")] =
            label.second.as<std::string>("");
      }
    } else if (key == "board" || key == "team" || key == "reason") {
      if (!kv.second.IsScalar() || kv.second.as<std::string>("").empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ": expected non-empty text"));
      }
      const std::string value = kv.second.as<std::string>("");
      if (key == "board") {
        r.set_board_id(value);
      } else if (key == "team") {
        r.set_team(value);
      } else {
        r.set_reason(value);
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ": unknown key (known: board, labels, team, reason)"));
    }
  }
  if (r.board_id().empty() == r.labels().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": name exactly one of board and labels"));
  }
  if (r.team().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ".team: missing"));
  }
  return r;
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
    } else if (key == "reservations") {
      if (!kv.second.IsSequence()) {
        return absl::InvalidArgumentError(
            absl::StrCat(src, ": reservations: not a list"));
      }
      for (size_t i = 0; i < kv.second.size(); ++i) {
        TF_ASSIGN_OR_RETURN(
            v1::BoardReservation r,
            ParseReservation(kv.second[i],
                             absl::StrCat(src, ": reservations[", i, "]")));
        policy.reservations.push_back(std::move(r));
      }
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(src, ": ", key,
                       ": unknown key (known: default, teams, reservations)"));
    }
  }
  return policy;
}

absl::StatusOr<TeamPolicy> LoadTeamPolicy(const std::string& path) {
  TF_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseTeamPolicy(text, path);
}

}  // namespace tunefarm
