// Lineage of a sweep's rounds: which variant came from which. Pure functions
// over a vector of rounds (all of one sweep), so the coordinator can run them
// on its in-memory rounds and the store on the persisted ones. The baseline
// has parent_round = -1.
//
// Ownership: the functions only read `rounds`. Thread-safety: reentrant; safe
// to call concurrently as long as nobody mutates `rounds` meanwhile.
#ifndef TUNEFARM_STORAGE_LINEAGE_H_
#define TUNEFARM_STORAGE_LINEAGE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

// The ancestors of `round_id`, parent first, up to and including the
// baseline (empty for the baseline itself). Errors:
//   NOT_FOUND            round_id is not among `rounds`;
//   INVALID_ARGUMENT     a round id appears twice in `rounds`;
//   FAILED_PRECONDITION  a parent on the way is missing (names child and
//                        parent);
//   DATA_LOSS            the parent links form a cycle (names the cycle).
absl::StatusOr<std::vector<int64_t>> AncestorsOf(
    const std::vector<v1::Round>& rounds, int64_t round_id);

// The rounds whose parent is `round_id`, ascending (empty when none or when
// round_id is unknown).
std::vector<int64_t> ChildrenOf(const std::vector<v1::Round>& rounds,
                                int64_t round_id);

// The kept path: baseline first, ending with best_round_id; empty when
// best_round_id < 0 (no passing baseline yet). Errors as AncestorsOf.
absl::StatusOr<std::vector<int64_t>> KeptPathTo(
    const std::vector<v1::Round>& rounds, int64_t best_round_id);

}  // namespace tunefarm

#endif  // TUNEFARM_STORAGE_LINEAGE_H_
