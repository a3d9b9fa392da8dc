#include "coordinator/auth.h"

#include <exception>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "yaml-cpp/yaml.h"

namespace tunefarm {
namespace {

// Equal-length comparison that does not stop at the first difference, so
// response time says nothing about how much of a guess was right.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? a[i] : 0;
    unsigned char y = i < b.size() ? b[i] : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

}  // namespace

absl::Status SweepNotFound(absl::string_view sweep_id) {
  // Word for word the store's message for an unknown id.
  return absl::NotFoundError(absl::StrCat("sweep '", sweep_id, "' not found"));
}

Principal AnonymousAdmin() {
  return Principal{"anonymous (authentication off)", "", Role::kAdmin};
}

absl::StatusOr<TokenTable> TokenTable::Load(const std::string& path) {
  TF_ASSIGN_OR_RETURN(std::string text,
                      ReadFileUpTo(path, 1 << 20, "a tokens file"));
  return Parse(text, path);
}

absl::StatusOr<TokenTable> TokenTable::Parse(absl::string_view yaml,
                                             absl::string_view source) {
  const std::string src(source);
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(src, ": not valid YAML: ", e.what()));
  }
  if (!root.IsMap() || !root["tokens"] || !root["tokens"].IsSequence()) {
    return absl::InvalidArgumentError(
        absl::StrCat(src, ": expected a mapping with a 'tokens' list"));
  }
  TokenTable table;
  const YAML::Node tokens = root["tokens"];
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string where = absl::StrCat(src, ": tokens[", i, "]");
    const YAML::Node e = tokens[i];
    if (!e.IsMap()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": not a mapping"));
    }
    auto text = [&](const char* key) -> std::string {
      try {
        return e[key] ? e[key].as<std::string>() : std::string();
      } catch (const YAML::Exception&) {
        return std::string();
      }
    };
    for (const auto& kv : e) {
      const std::string key = kv.first.as<std::string>("");
      if (key != "name" && key != "team" && key != "role" && key != "token") {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": unknown key '", key, "'"));
      }
    }
    Entry entry;
    entry.token = text("token");
    entry.principal.name = text("name");
    entry.principal.team = text("team");
    const std::string role = text("role").empty() ? "user" : text("role");
    if (role == "user") {
      entry.principal.role = Role::kUser;
    } else if (role == "admin") {
      entry.principal.role = Role::kAdmin;
    } else if (role == "agent") {
      entry.principal.role = Role::kAgent;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ".role: '", role, "' is not one of user, admin, agent"));
    }
    if (entry.principal.name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ".name: missing"));
    }
    if (entry.principal.role == Role::kUser && entry.principal.team.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".team: a user needs a team"));
    }
    if (entry.token.size() < 16) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ".token: must be at least 16 characters"));
    }
    for (const Entry& other : table.entries_) {
      if (other.token == entry.token) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ".token: the same token as '", other.principal.name, "'"));
      }
    }
    table.entries_.push_back(std::move(entry));
  }
  return table;
}

absl::StatusOr<Principal> TokenTable::Lookup(absl::string_view token) const {
  const Principal* found = nullptr;
  for (const Entry& e : entries_) {
    if (ConstantTimeEquals(e.token, token)) found = &e.principal;
  }
  if (found == nullptr) {
    return absl::UnauthenticatedError("unknown token");
  }
  return *found;
}

absl::StatusOr<Principal> TokenTable::FromAuthorizationHeader(
    absl::string_view header) const {
  if (header.empty()) {
    return absl::UnauthenticatedError(
        "no credentials: send 'authorization: Bearer <token>' (tunefarm "
        "--token_file or $TUNEFARM_TOKEN)");
  }
  constexpr absl::string_view kBearer = "bearer ";
  if (header.size() <= kBearer.size() ||
      !absl::EqualsIgnoreCase(header.substr(0, kBearer.size()), kBearer)) {
    return absl::UnauthenticatedError(
        "malformed authorization metadata: expected 'Bearer <token>'");
  }
  return Lookup(absl::StripAsciiWhitespace(header.substr(kBearer.size())));
}

}  // namespace tunefarm
