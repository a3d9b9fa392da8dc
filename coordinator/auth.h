// Identity for the coordinator's services: bearer tokens in gRPC metadata
// ("authorization: Bearer <token>"), each mapped to a principal (a team
// member, an admin, or an agent) by a tokens file the operator manages.
// Roles do not overlap: users use the user service for their team's sweeps;
// admins use it for every team and manage boards and quotas, but are not
// agents; only agent credentials may use the agent service (docs/security.md).
//
// A TokenTable is immutable after Load and thread-safe.
#ifndef TUNEFARM_COORDINATOR_AUTH_H_
#define TUNEFARM_COORDINATOR_AUTH_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tunefarm {

enum class Role { kUser, kAdmin, kAgent };

struct Principal {
  std::string name;  // for logs: who called
  std::string team;  // users: their team; admins and agents: may be empty
  Role role = Role::kUser;

  bool is_admin() const { return role == Role::kAdmin; }
  // May this principal see or act on a sweep of `sweep_team`?
  bool CanAccessTeam(absl::string_view sweep_team) const {
    return role == Role::kAdmin || (role == Role::kUser && team == sweep_team);
  }
};

// What a caller gets for a sweep it may not see: the very error an unknown
// id gets (the store's NOT_FOUND), so that sweep ids of other teams cannot
// be told apart from ids that do not exist.
absl::Status SweepNotFound(absl::string_view sweep_id);

// The principal used when authentication is off (no tokens file): local
// development only; the coordinator logs a warning at start.
Principal AnonymousAdmin();

class TokenTable {
 public:
  // Tokens file, YAML:
  //   tokens:
  //     - {name: alice, team: vision, role: user, token: "s3cret…"}
  //     - {name: ops, role: admin, token: "…"}
  //     - {name: rack1, role: agent, token: "…"}
  // Errors name the file and the entry. Tokens must be at least 16
  // characters; duplicates are refused.
  static absl::StatusOr<TokenTable> Load(const std::string& path);
  static absl::StatusOr<TokenTable> Parse(absl::string_view yaml,
                                          absl::string_view source);

  // UNAUTHENTICATED for an unknown token (compared in constant time).
  absl::StatusOr<Principal> Lookup(absl::string_view token) const;

  // Principal for the value of an "authorization" metadata entry.
  absl::StatusOr<Principal> FromAuthorizationHeader(
      absl::string_view header) const;

  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    std::string token;
    Principal principal;
  };
  std::vector<Entry> entries_;
};

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_AUTH_H_
