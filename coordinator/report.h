// The tuning report of a sweep, rendered as Markdown from its stored
// records. Pure function, thread-safe.
#ifndef TUNEFARM_COORDINATOR_REPORT_H_
#define TUNEFARM_COORDINATOR_REPORT_H_

#include <string>
#include <vector>

#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

// `rounds` ascending by round_id. Numbers from simulated boards are marked
// as such wherever they appear.
std::string RenderReport(const v1::Sweep& sweep,
                         const std::vector<v1::Round>& rounds);

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_REPORT_H_
