// ComparePrecision: the farm's own precision verdict on a variant's output
// against the operator's reference output. The kernel never judges itself.
// A function of two files; thread-safe. It keeps the last reference it read
// in memory (consecutive rounds share the cached reference file), keyed by
// path, size, inode and modification time.
#ifndef TUNEFARM_AGENT_PRECISION_H_
#define TUNEFARM_AGENT_PRECISION_H_

#include <string>

#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

// Both files hold raw float32 little-endian elements. An element passes when
// |out - ref| <= atol + rtol * |ref|. Fails (passed=false, with a detail
// saying why) on a missing, unreadable, short or over-long output, a missing
// reference, any NaN/Inf in the output (unwritten outputs are NaN-poisoned),
// NaN/Inf in the reference, or any mismatch. Counts mismatches and NaNs and
// records the largest absolute and relative errors of finite elements.
v1::PrecisionCheck ComparePrecision(const std::string& output_path,
                                    const std::string& reference_path,
                                    const v1::Tolerances& tol);

}  // namespace tunefarm

#endif  // TUNEFARM_AGENT_PRECISION_H_
