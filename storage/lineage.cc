#include "storage/lineage.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tunefarm {

absl::StatusOr<std::vector<int64_t>> AncestorsOf(
    const std::vector<v1::Round>& rounds, int64_t round_id) {
  std::unordered_map<int64_t, int64_t> parent_of;  // round id -> parent id
  parent_of.reserve(rounds.size());
  for (const v1::Round& r : rounds) {
    if (!parent_of.emplace(r.round_id(), r.parent_round()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("lineage: round ", r.round_id(), " of sweep '",
                       r.sweep_id(), "' appears more than once"));
    }
  }
  auto it = parent_of.find(round_id);
  if (it == parent_of.end()) {
    return absl::NotFoundError(
        absl::StrCat("lineage: round ", round_id, " not found"));
  }
  std::vector<int64_t> ancestors;
  // Path from round_id so far, to name the cycle when one closes.
  std::vector<int64_t> path = {round_id};
  std::unordered_set<int64_t> seen = {round_id};
  int64_t current = round_id;
  for (int64_t parent = it->second; parent != -1;) {
    if (seen.count(parent) != 0) {
      path.push_back(parent);
      return absl::DataLossError(absl::StrCat(
          "lineage: parent links form a cycle: ", absl::StrJoin(path, " -> ")));
    }
    auto pit = parent_of.find(parent);
    if (pit == parent_of.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("lineage: round ", current, " names parent round ",
                       parent, ", which does not exist"));
    }
    ancestors.push_back(parent);
    path.push_back(parent);
    seen.insert(parent);
    current = parent;
    parent = pit->second;
  }
  return ancestors;
}

std::vector<int64_t> ChildrenOf(const std::vector<v1::Round>& rounds,
                                int64_t round_id) {
  std::vector<int64_t> children;
  for (const v1::Round& r : rounds) {
    // A self-parent is a cycle, not a child.
    if (r.parent_round() == round_id && r.round_id() != round_id) {
      children.push_back(r.round_id());
    }
  }
  std::sort(children.begin(), children.end());
  return children;
}

absl::StatusOr<std::vector<int64_t>> KeptPathTo(
    const std::vector<v1::Round>& rounds, int64_t best_round_id) {
  if (best_round_id < 0) return std::vector<int64_t>{};
  absl::StatusOr<std::vector<int64_t>> ancestors =
      AncestorsOf(rounds, best_round_id);
  if (!ancestors.ok()) return ancestors.status();
  std::vector<int64_t> path(ancestors->rbegin(), ancestors->rend());
  path.push_back(best_round_id);
  return path;
}

}  // namespace tunefarm
