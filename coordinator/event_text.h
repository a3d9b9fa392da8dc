// The words of sweep events and decisions, shared by the coordinator's
// parts so that every event says a round, a time or a gain the same way.
// Pure functions; thread-safe.
#ifndef TUNEFARM_COORDINATOR_EVENT_TEXT_H_
#define TUNEFARM_COORDINATOR_EVENT_TEXT_H_

#include <string>

#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

// "12.3 µs".
std::string FormatUs(double us);
// " [workload]" for a round of a multi-workload sweep, "" otherwise.
std::string WorkloadTag(const v1::Round& round);
// " [simulated]" or " [replayed]" when a result's numbers came from no card.
std::string MeasuredTag(const v1::Measurement& m);
// "round 7 [workload] (the change)" or "(baseline)".
std::string RoundAndChange(const v1::Round& round);
// A round against its parent in words: a gain is 1 - candidate / parent, so
// "-155%" read as a time change looked like a speed-up; say which way.
std::string VsParent(double gain);

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_EVENT_TEXT_H_
