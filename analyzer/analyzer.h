// Analyze: one profile bundle in, one structured diagnosis out.
//
// The bundle's files are classified and parsed by ReadProfile (profile.h):
// msprof, torch_npu, PyPTO, Nsight Compute and kineto layouts, one file or a
// whole tree. The analyzer turns what it read into format-neutral Signals,
// classifies operator type and bound, runs the rule table (rules.h) and
// renders perf-analysis.md (perf_analysis_md.h). With a parent bundle (the
// parent round's profile) the diagnosis and the markdown compare the two.
//
// A file it cannot read becomes an EvidenceGap naming the file and why:
// Analyze never fails, never throws, and always fills perf_analysis_md.
// Pure and thread-safe. The caller fills analyzer_id and analyzed_unix_ms.
#ifndef TUNEFARM_ANALYZER_ANALYZER_H_
#define TUNEFARM_ANALYZER_ANALYZER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "analyzer/profile.h"
#include "google/protobuf/message.h"
#include "tunefarm/v1/pipeline.pb.h"
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

// At most this many hotspots are listed; total_device_us covers all ops.
inline constexpr int kMaxHotspots = 10;
// At most this many suggestions: the moves the tuner tries next.
inline constexpr int kMaxSuggestions = 3;

// `parent` may be null (no parent round, or the coordinator did not send
// its profile).
// `options` says how large tables are read (threads); the diagnosis does
// not depend on it.
v1::Diagnosis Analyze(const v1::ProfileBundle& bundle,
                      const v1::ProfileBundle* parent = nullptr,
                      const ParseOptions& options = {});

// As Analyze, on `files` (views the caller keeps alive, e.g. a mapped file)
// instead of bundle.files(), which is ignored; the rest of `bundle` (ids,
// chip, params, capabilities) still applies. Saves copying tens of MB of
// profile into a bundle when the files are on disk.
v1::Diagnosis AnalyzeFiles(const v1::ProfileBundle& bundle,
                           const std::vector<InputFile>& files,
                           const v1::ProfileBundle* parent = nullptr,
                           const ParseOptions& options = {});

// The diagnosis (or any message) as JSON for people and scripts: proto
// field names, every primitive field printed even at its zero value (a
// consumer can tell 0 from an absent column only by the field being
// there), 64-bit integers as JSON numbers (not strings as the proto3 JSON
// mapping writes them), enums by name; unset sub-messages and oneof members
// are left out. Two-space indentation, deterministic field order.
std::string MessageToJsonAlways(const google::protobuf::Message& m);

// Parse errors counted by format: the evidence gaps that name a format (a
// file that failed to parse, or a task table with malformed rows dropped).
// Gaps about missing evidence rather than broken files have no format.
std::map<std::string, int64_t> ParseErrorsByFormat(const v1::Diagnosis& d);

}  // namespace tunefarm

#endif  // TUNEFARM_ANALYZER_ANALYZER_H_
