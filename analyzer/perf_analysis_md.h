// Renders perf-analysis.md from a filled Diagnosis and the profile it came
// from. The sections and their order are the round-analysis contract
// (ascend-formats.md §1.1.1): Executive Summary; Profile Signals (Hotspots,
// Pipeline Ratios, Timeline And Wait, Host API Overhead); Binary Signals;
// IR Signals; Diagnosis (Operator Type Fit, Compute vs Memory Bound,
// Pipeline Bottlenecks, Memory Hierarchy Bottlenecks, Concurrency And
// Scheduling Bottlenecks); Operator Implementation Issues; Optimization
// Suggestions; Evidence Gaps. Profile Signals hold facts only (numbers with
// file and column); Diagnosis holds inferences, each marked and citing the
// rule and the facts. Pure, thread-safe, deterministic (golden-tested).
#ifndef TUNEFARM_ANALYZER_PERF_ANALYSIS_MD_H_
#define TUNEFARM_ANALYZER_PERF_ANALYSIS_MD_H_

#include <string>

#include "analyzer/profile.h"
#include "analyzer/rules.h"
#include "tunefarm/v1/pipeline.pb.h"
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

struct ParentView {
  std::string bundle_id;
  double hotspot_us = 0;  // same op name as the current hotspot; 0 = absent
  double total_us = 0;
  std::string bound;
  int64_t round_id = 0;
};

std::string RenderPerfAnalysis(const v1::Diagnosis& d,
                               const v1::ProfileBundle& bundle,
                               const ProfileData& profile,
                               const Signals& signals,
                               const Thresholds& thresholds,
                               const ParentView* parent);

}  // namespace tunefarm

#endif  // TUNEFARM_ANALYZER_PERF_ANALYSIS_MD_H_
