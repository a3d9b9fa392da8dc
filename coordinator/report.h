// The tuning report of a sweep: a model built from its stored records (sweep,
// rounds with their diagnoses, boards) as a versioned JSON document
// (docs/report.md), from which every rendering (Markdown, SVG, DOT;
// coordinator/report_render.h) is made. Pure functions; thread-safe.
#ifndef TUNEFARM_COORDINATOR_REPORT_H_
#define TUNEFARM_COORDINATOR_REPORT_H_

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

// The report JSON of `sweep`. `rounds` are the sweep's rounds ascending by
// round_id; `boards` (may be empty) give the kind and chip of the boards the
// rounds ran on. Works for a running sweep too (its duration runs to the
// newest finished round). Numbers from simulated boards are flagged
// "simulated" wherever they appear.
nlohmann::json BuildReport(const v1::Sweep& sweep,
                           const std::vector<v1::Round>& rounds,
                           const std::vector<v1::BoardInfo>& boards = {});

// BuildReport rendered as Markdown (what the coordinator writes when a sweep
// ends).
std::string RenderReport(const v1::Sweep& sweep,
                         const std::vector<v1::Round>& rounds);

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_REPORT_H_
