// Small helpers shared by the search strategies (strategy.cc,
// guided_strategy.cc, hybrid_strategy.cc): domain order, a platform-stable hash
// for tie-breaks, where an analyzer suggestion points in a domain, and how much
// a domain's order explains the times seen (the hybrid's model, OrderWeight),
// and HistoryCursor, for strategies that keep what they read between calls.
//
// The functions are pure and thread-safe; a HistoryCursor is not
// thread-safe (its strategy's control thread only).
#ifndef TUNEFARM_COORDINATOR_STRATEGY_UTIL_H_
#define TUNEFARM_COORDINATOR_STRATEGY_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "coordinator/strategy.h"
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

inline bool IsNumber(const v1::ParamValue& v) {
  return v.kind_case() == v1::ParamValue::kIntValue ||
         v.kind_case() == v1::ParamValue::kDoubleValue;
}

inline double AsDouble(const v1::ParamValue& v) {
  return v.kind_case() == v1::ParamValue::kIntValue
             ? static_cast<double>(v.int_value())
             : v.double_value();
}

// FNV-1a: a tie-break that is the same on every platform and build.
inline uint64_t Fnv(std::string_view s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// A domain's values in walking order: numeric domains by value ("up" is
// larger), others as declared.
std::vector<v1::ParamValue> OrderedValues(const v1::ParameterDomain& domain);

// The position a suggestion moves a parameter to, from position `from` in a
// domain of `size` values, `given` being the suggestion's value's position
// (-1 when it names none or one outside the domain): "set" goes to `given`,
// "raise"/"lower" to `given` when it lies that way, else one step. -1 when
// it points nowhere new.
int SuggestedPosition(const v1::Suggestion& s, int from, int given, int size);

// How much a domain's order explains the times observed so far, in [0, 1]
// (0: the values behave as unordered categories; 1: neighbours in the order
// have alike times). `times[j]` holds the log times observed at position j
// of a domain of times.size() values. With the mean log time per observed
// value, it is 1 - (mean difference between neighbouring observed values) /
// (mean difference between any two observed values): a random order scores
// about 0, a monotone or smooth one close to 1. `undetermined` when fewer
// than 3 values were observed or every value has the same mean.
double OrderWeight(const std::vector<std::vector<double>>& times,
                   double undetermined);

// The history's round `id` (rounds ascend by round_id: a binary search);
// nullptr when there is none.
const v1::Round* FindRound(const SearchHistory& h, int64_t id);

// Round.stage of a re-race: an inconclusive round's configuration measured
// again against the current best.
inline constexpr char kRerace[] = "rerace";

// The re-race the history calls for, if any: the fastest round the keep
// rule left inconclusive (only noise stood between its estimate and
// min_gain) whose configuration was measured once only and whose median
// beats the current best's by min_gain, proposed again with the best as
// parent (stage kRerace), so that the keep rule judges it with fresh
// samples against the best. `skip` lists configurations (ParamsKey)
// already re-raced by this call's earlier proposals.
std::optional<Candidate> RaceAgainCandidate(
    const SearchHistory& h, const std::vector<std::string>& skip);
// The same for a caller that keeps what it needs between calls (the
// hybrid's round index): `inconclusive` the positions in h.rounds of the
// done, inconclusive rounds, `measured(pos)` how many rounds of the history
// have the configuration of the round at `pos`.
std::optional<Candidate> RaceAgainCandidate(
    const SearchHistory& h, const std::vector<std::string>& skip,
    std::span<const size_t> inconclusive,
    absl::FunctionRef<int(size_t)> measured);

// How far a strategy that keeps what it derived from a history across
// Propose calls (so that a proposal costs O(new rounds), not O(history))
// has read it. The coordinator only appends rounds and moves them forward
// (queued, leased, done, decided; a done round waiting for its parent's
// result may be queued to be measured again), except when it undoes a
// failed commit, which SearchHistory.rewinds counts. A history in another
// vector or of another operator manifest, a shorter one, one rewound since,
// or one whose last round read has other parameters is taken as another
// history, and the reader starts over. Owned by its strategy.
class HistoryCursor {
 public:
  // How many of h's first rounds were read before and are still the same:
  // read(), or 0 when h is another history (then the reader drops what it
  // derived and reads h from its first round).
  size_t Resume(const SearchHistory& h);
  // Marks every round of h as read.
  void ReadAll(const SearchHistory& h);
  // How many times Resume started from the first round, the first call
  // included (what a reader derived under another count is stale).
  int64_t starts() const { return starts_; }

 private:
  const std::vector<v1::Round>* rounds_ = nullptr;
  const v1::OperatorManifest* op_ = nullptr;
  int64_t rewinds_ = 0;
  size_t read_ = 0;
  std::string last_;  // ParamsKey of the last round read
  int64_t starts_ = 0;
};

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_STRATEGY_UTIL_H_
