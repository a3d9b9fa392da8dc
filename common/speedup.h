// A one-workload sweep's speedup over its baseline, and what its closing
// check (v1::ClosingCheck) says of it: the one reading of these fields for
// the coordinator's summary and report, the CLI and the tuning database.
// Pure functions of the protos; thread-safe.
#ifndef TUNEFARM_COMMON_SPEEDUP_H_
#define TUNEFARM_COMMON_SPEEDUP_H_

#include <string>

#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

// baseline_us / best_us: two medians, timed in different leases and perhaps
// on different boards; 0 without a best.
double LeaseSpeedup(const v1::Sweep& sweep);

// True once the closing check timed the best against the baseline side by
// side and gave a paired speedup.
bool CheckedSideBySide(const v1::Sweep& sweep);

// The sweep's speedup: the closing check's paired one when it gave one (the
// one measurement that compares the two on the same board at the same
// time), else the leases'. 0 without a best.
double SweepSpeedup(const v1::Sweep& sweep);

// How SweepSpeedup was measured: "side by side" or "two leases' medians".
const char* SpeedupBasis(const v1::Sweep& sweep);

// The closing check's lower bound does not clear 1: the best was not shown
// faster than the baseline.
bool NotShownFaster(const v1::ClosingCheck& check);

// The check in words: its outcome once in, else that it runs.
std::string ClosingCheckText(const v1::ClosingCheck& check);

}  // namespace tunefarm

#endif  // TUNEFARM_COMMON_SPEEDUP_H_
