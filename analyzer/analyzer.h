// Analyze: one profile bundle in, one structured diagnosis out.
//
// The analyzer reads the profiler tables it finds in the bundle, matched by
// file name anywhere in the bundle:
//   - kernel_details*.csv (torch_npu) or op_summary*.csv (msprof): one row
//     per device task; the source of hotspots and pipe ratios. torch_npu
//     also writes a PROF_*/ op_summary, so kernel_details wins when both
//     exist (as in the Helix profile-report); among several files of one
//     kind the newest time stamp in the name wins.
//   - op_statistic*.csv: per-type totals; the hotspot source when no
//     per-task table is readable, and a cross-check otherwise.
// It aggregates task time per op name (hotspots, largest first), guesses
// what bounds the hotspot from its pipe ratios (fractions 0..1), and applies
// a small table of rules that turn signals into parameter moves. A file it
// cannot read or parse becomes an EvidenceGap, never an error: Analyze
// never fails, never throws, and always fills perf_analysis_md.
//
// Pure and thread-safe. The caller fills analyzer_id and analyzed_unix_ms.
#ifndef TUNEFARM_ANALYZER_ANALYZER_H_
#define TUNEFARM_ANALYZER_ANALYZER_H_

#include "tunefarm/v1/pipeline.pb.h"
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

// At most this many hotspots are listed; total_device_us covers all ops.
inline constexpr int kMaxHotspots = 10;

v1::Diagnosis Analyze(const v1::ProfileBundle& bundle);

}  // namespace tunefarm

#endif  // TUNEFARM_ANALYZER_ANALYZER_H_
