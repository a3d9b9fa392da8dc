#include "analyzer/perf_analysis_md.h"

#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/params.h"

namespace tunefarm {
namespace {

absl::string_view Av(std::string_view s) { return {s.data(), s.size()}; }

std::string Md(std::string_view s) {
  return absl::StrReplaceAll(Av(s), {{"|", "\\|"}, {"\n", " "}});
}
std::string F3(double v) { return absl::StrFormat("%.3f", v); }
std::string Pct(double frac) { return absl::StrFormat("%.1f %%", 100 * frac); }

void Findings(std::string& md, const v1::Diagnosis& d,
              std::string_view category) {
  bool any = false;
  for (const v1::Bottleneck& b : d.bottlenecks()) {
    if (b.category() != category) continue;
    any = true;
    absl::StrAppend(&md, "- Inference (", b.severity(), ", rule `", b.rule(),
                    "`): ", Md(b.summary()), ". Facts: ", Md(b.evidence()),
                    ".\n");
  }
  if (!any) absl::StrAppend(&md, "No rule fired.\n");
  absl::StrAppend(&md, "\n");
}

}  // namespace

std::string RenderPerfAnalysis(const v1::Diagnosis& d,
                               const v1::ProfileBundle& bundle,
                               const ProfileData& p, const Signals& s,
                               const Thresholds& th, const ParentView* parent) {
  std::string md = "# Round Performance Analysis\n\n";
  absl::StrAppend(&md, "Bundle `", Md(bundle.bundle_id()), "`");
  if (!bundle.sweep_id().empty()) {
    absl::StrAppend(&md, ", sweep `", Md(bundle.sweep_id()), "` round ",
                    bundle.round_id());
  }
  if (!bundle.board_id().empty()) {
    absl::StrAppend(&md, ", board `", Md(bundle.board_id()), "`");
  }
  std::vector<std::string> kind;
  if (!bundle.board_kind().empty()) kind.push_back(Md(bundle.board_kind()));
  if (!bundle.chip().empty()) kind.push_back(Md(bundle.chip()));
  if (!kind.empty()) absl::StrAppend(&md, " (", absl::StrJoin(kind, ", "), ")");
  absl::StrAppend(
      &md, ". Formats read: ",
      d.formats_size() == 0 ? "none" : absl::StrJoin(d.formats(), ", "),
      bundle.simulated() ? " (simulated)" : "", ". Thresholds: ", th.source,
      ".\n\n");

  // ---------------------------------------------------------------------
  absl::StrAppend(&md, "## Executive Summary\n\n");
  if (d.stories_size() > 0) {
    const v1::Story& top = d.stories(0);
    absl::StrAppend(&md, "- Inference: the largest story is **", top.kind(),
                    "**, ", F3(top.time_us()), " us (", Pct(top.share()),
                    " of the stories' time): ", Md(top.summary()),
                    ". Facts: ", Md(top.evidence()), ".\n");
    if (d.stories_size() > 1) {
      std::vector<std::string> rest;
      for (int i = 1; i < d.stories_size(); ++i) {
        rest.push_back(absl::StrCat(d.stories(i).kind(), " ",
                                    F3(d.stories(i).time_us()), " us (",
                                    Pct(d.stories(i).share()), ")"));
      }
      absl::StrAppend(&md, "- Then: ", absl::StrJoin(rest, "; "), ".\n");
    }
  }
  if (d.hotspots_size() == 0) {
    absl::StrAppend(&md,
                    "No hotspot: no readable profile table gives per-op "
                    "device time (see Evidence Gaps).\n\n");
  } else {
    const v1::Hotspot& h = d.hotspots(0);
    absl::StrAppend(&md, "- Fact: hotspot `", Md(h.op_name()), "` takes ",
                    F3(h.duration_us()), " us over ", h.count(), " launches, ",
                    Pct(h.share()), " of ", F3(d.total_device_us()),
                    " us device time (`", Md(h.source_file()), "`, column ",
                    Md(h.source_column()), ").\n");
    absl::StrAppend(&md, "- Inference: operator type ", d.operator_type(),
                    "; bound ", d.bound(),
                    d.bound_evidence().empty()
                        ? std::string(" (no ratio or throughput evidence)")
                        : absl::StrCat(" (", Md(d.bound_evidence()), ")"),
                    ".\n");
    for (const v1::Suggestion& g : d.suggestions()) {
      if (g.parameter().empty()) {
        absl::StrAppend(&md, "- Next move: ", Md(g.advice()), " (rule `",
                        Md(g.rule().substr(0, g.rule().find(':'))),
                        "`; the round has no parameter for it).\n");
        continue;
      }
      absl::StrAppend(
          &md, "- Next move: ", g.direction(), " `", g.parameter(), "`",
          g.has_value() ? absl::StrCat(" to ", ParamValueToString(g.value()))
                        : "",
          " (rule `", Md(g.rule().substr(0, g.rule().find(':'))), "`).\n");
    }
    if (parent != nullptr) {
      if (parent->hotspot_us > 0) {
        double delta = h.duration_us() - parent->hotspot_us;
        absl::StrAppend(
            &md, "- Fact: against parent `", Md(parent->bundle_id), "` (round ",
            parent->round_id, "), `", Md(h.op_name()), "` went from ",
            F3(parent->hotspot_us), " us to ", F3(h.duration_us()), " us (",
            absl::StrFormat("%+.1f %%", 100 * delta / parent->hotspot_us),
            "); device total ", F3(parent->total_us), " -> ",
            F3(d.total_device_us()), " us.\n");
      } else {
        absl::StrAppend(&md, "- Parent `", Md(parent->bundle_id),
                        "`: the hotspot op is not in its profile; no "
                        "like-for-like comparison.\n");
      }
    }
    absl::StrAppend(&md, "\n");
  }

  // ---------------------------------------------------------------------
  absl::StrAppend(&md, "## Profile Signals\n\n### Hotspots\n\n");
  if (d.hotspots_size() == 0) {
    absl::StrAppend(&md, "None.\n\n");
  } else {
    absl::StrAppend(&md,
                    "| # | Op | Type | Core | Count | Total (us) | Avg (us) | "
                    "Share |\n|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < d.hotspots_size(); ++i) {
      const v1::Hotspot& h = d.hotspots(i);
      absl::StrAppend(&md, "| ", i + 1, " | `", Md(h.op_name()), "` | ",
                      Md(h.op_type()), " | ", Md(h.core_type()), " | ",
                      h.count(), " | ", F3(h.duration_us()), " | ",
                      F3(h.avg_us()), " | ", Pct(h.share()), " |\n");
    }
    absl::StrAppend(
        &md, "\nSource: `", Md(d.hotspots(0).source_file()), "`, column ",
        Md(d.hotspots(0).source_column()), " summed per ",
        s.side == "gpu" ? "kernel name (every launch)" : "op name", ".\n");
    bool rolled = false;
    if (p.tasks.has_value()) {
      for (const TypeRollup& r : p.tasks->by_type) rolled |= r.names > 1;
    }
    if (rolled && d.hotspot_types_size() > 0) {
      absl::StrAppend(&md,
                      "\nThe same time per op type (graph-mode names such as "
                      "Conv2D1..Conv2D4 or TransData_0..n folded into their "
                      "type):\n\n| # | Type | Core | Names | Count | Total "
                      "(us) | Share |\n|---|---|---|---|---|---|---|\n");
      for (int i = 0; i < d.hotspot_types_size(); ++i) {
        const v1::Hotspot& h = d.hotspot_types(i);
        int64_t names = 0;
        for (const TypeRollup& r : p.tasks->by_type) {
          if (r.type == h.op_type()) names = r.names;
        }
        absl::StrAppend(&md, "| ", i + 1, " | ", Md(h.op_type()), " | ",
                        Md(h.core_type()), " | ", names, " | ", h.count(),
                        " | ", F3(h.duration_us()), " | ", Pct(h.share()),
                        " |\n");
      }
    }
    if (p.tasks.has_value()) {
      std::string comm;
      double comm_us = 0;
      for (const OpAggregate& op : p.tasks->ops) {
        if (!IsCommunicationOp(op)) continue;
        comm_us += op.total_us;
        absl::StrAppend(&comm, "- `", Md(op.name), "` (", Md(op.core),
                        "): ", F3(op.total_us), " us over ", op.count,
                        " launches\n");
      }
      if (!comm.empty()) {
        absl::StrAppend(&md, "\nCommunication (HCCL) ops, ", F3(comm_us),
                        " us, excluded from the compute hotspots and their "
                        "shares (`",
                        Md(p.tasks->file), "`):\n\n", comm);
      }
    }
    if (p.op_statistic.has_value() && p.tasks.has_value()) {
      for (const OpStatRow& r : p.op_statistic->rows) {
        if (r.type != d.hotspots(0).op_type()) continue;
        absl::StrAppend(&md, "Cross-check: `", Md(p.op_statistic->file),
                        "` (OP Type, Count, Total Time(us)) gives type `",
                        Md(r.type), "` ", F3(r.total_us), " us over ", r.count,
                        " launches, Ratio(%) ", F3(r.ratio_pct), ".\n");
      }
    }
    absl::StrAppend(&md, "\n");
  }

  absl::StrAppend(&md, "### Pipeline Ratios\n\n");
  if (d.pipeline_ratios_size() > 0) {
    absl::StrAppend(&md, "Hotspot `", Md(s.hotspot), "`, over its rows of `",
                    Md(d.pipeline_ratios(0).file()),
                    "`, one set per core type (ratios are fractions 0..1, the "
                    "mean weighted by each row's duration; cube_utilization "
                    "is occupancy, shown /100):\n\n| Core | Column | "
                    "Weighted mean | Row mean | Min | Max | Rows "
                    "|\n|---|---|---|---|---|---|---|\n");
    for (const v1::PipelineRatio& r : d.pipeline_ratios()) {
      absl::StrAppend(&md, "| ", Md(r.core_type()), " | ", Md(r.column()),
                      " | ", F3(r.mean()), " | ", F3(r.unweighted_mean()),
                      " | ", F3(r.min()), " | ", F3(r.max()), " | ", r.rows(),
                      " |\n");
    }
    if (!s.core_split.empty()) {
      absl::StrAppend(&md, "\nThe hotspot ran on more than one core type (",
                      Md(s.core_split), ").\n");
    }
    if (!s.side_evidence.empty()) {
      absl::StrAppend(&md, "\nSide read: ", s.side, " (", Md(s.side_evidence),
                      ").\n");
    }
    absl::StrAppend(&md, "\n");
  } else if (s.side == "gpu") {
    absl::StrAppend(&md, "Nsight Compute throughput (% of peak), kernel `",
                    Md(s.hotspot), "`:\n\n");
    for (const auto* c :
         {&s.ncu_compute_sol, &s.ncu_memory_sol, &s.ncu_dram, &s.ncu_l1,
          &s.ncu_l2, &s.ncu_tensor_pipe, &s.ncu_occupancy, &s.ncu_waves}) {
      if (c->has_value()) absl::StrAppend(&md, "- ", (*c)->Text(2), "\n");
    }
    for (const NcuKernel& k : p.ncu->kernels) {
      if (k.name != s.hotspot) continue;
      for (const NcuRule& r : k.rules) {
        absl::StrAppend(
            &md, "- ncu rule ", Md(r.name), " (", Md(r.type),
            r.speedup > 0 ? absl::StrFormat(", est. speedup %.0f %%", r.speedup)
                          : "",
            "): ", Md(r.description.substr(0, 200)),
            r.description.size() > 200 ? "..." : "", "\n");
      }
      break;
    }
    absl::StrAppend(&md, "\n");
  } else {
    absl::StrAppend(&md, "No pipe ratios in the profile.\n\n");
  }

  absl::StrAppend(&md, "### Timeline And Wait\n\n");
  const v1::TimelineSignals& tl = d.timeline();
  bool any_tl = false;
  if (tl.device_tasks() > 0) {
    any_tl = true;
    absl::StrAppend(&md, "- `", Md(tl.file()), "`: ", tl.device_tasks(),
                    " device tasks over a ", F3(tl.window_us()),
                    " us window, busy ", F3(tl.busy_us()), " us, idle ratio ",
                    Pct(tl.idle_ratio()), ", ", tl.gaps(), " gaps (max ",
                    F3(tl.max_gap_us()), " us), ", tl.overlaps(),
                    " overlapping starts.\n");
  }
  if (tl.launches() > 0) {
    any_tl = true;
    absl::StrAppend(
        &md, "- Launches joined to device tasks: ", tl.launches(),
        "; kernels shorter than their launch call: ", tl.short_kernels(),
        "; median launch delay ", F3(tl.median_launch_delay_us()), " us",
        tl.median_launch_delay_us() < 0
            ? absl::StrCat(" (negative: ", tl.negative_launch_delays(),
                           " kernels started before their launch call "
                           "returned, since the call returns after "
                           "queueing; delay = kernel start - call end)")
            : std::string(),
        ".\n");
  }
  if (p.tasks.has_value() && !p.tasks->wait_col.empty()) {
    any_tl = true;
    absl::StrAppend(&md, "- `", Md(p.tasks->file), "` column ",
                    Md(p.tasks->wait_col), " sums to ", F3(tl.total_wait_us()),
                    " us over all tasks (the gap before each task starts, "
                    "not a stall inside a kernel).\n");
  }
  if (p.step_trace.has_value()) {
    any_tl = true;
    absl::StrAppend(&md, "- `", Md(p.step_trace->file), "` over ",
                    p.step_trace->steps, " step(s): Computing ",
                    F3(tl.computing_us()), " us, Free ", F3(tl.free_us()),
                    " us, Bubble ", F3(tl.bubble_us()),
                    " us, Communication(Not Overlapped) ",
                    F3(tl.communication_not_overlapped_us()), " us.\n");
  }
  if (p.pypto.has_value()) {
    any_tl = true;
    const PyptoSummary& py = *p.pypto;
    absl::StrAppend(
        &md, "- PyPTO (`", Md(py.file), "`, ", py.source, ", ", py.cores.size(),
        " cores): core utilisation ",
        absl::StrFormat("%.1f %% (AIC %.1f, AIV %.1f)", py.avg_utilization_pct,
                        py.aic_utilization_pct, py.aiv_utilization_pct),
        ", bubble rate ",
        absl::StrFormat("%.2f %% (AIC %.1f, AIV %.1f)", py.avg_bubble_pct,
                        py.aic_bubble_pct, py.aiv_bubble_pct),
        ", load balance ", absl::StrFormat("%.1f %%", py.load_balance_pct),
        ", execution ", F3(py.execution_us), " us, max AIC wait predecessor ",
        F3(py.max_aic_wait_predecessor_us), " us",
        py.whole_trace_utilization_pct > 0
            ? absl::StrFormat(", whole-trace AICore utilisation %.1f %%",
                              py.whole_trace_utilization_pct)
            : "",
        ".\n");
  }
  if (p.operator_details.has_value()) {
    any_tl = true;
    const OperatorDetails& o = *p.operator_details;
    absl::StrAppend(&md, "- `", Md(o.file), "` over ", o.rows,
                    " framework ops: Host Self Duration ", F3(o.host_self_us),
                    " us vs Device Self Duration ", F3(o.device_self_us), " us",
                    o.device_self_us > 0
                        ? absl::StrFormat(" (host / device %.2f)",
                                          o.host_self_us / o.device_self_us)
                        : std::string(),
                    "; largest host self time `", Md(o.top_host_op), "` ",
                    F3(o.top_host_op_us), " us.\n");
  }
  if (!any_tl) absl::StrAppend(&md, "No timeline in the profile.\n");
  absl::StrAppend(&md, "\n### Host API Overhead\n\n");
  if (d.has_host_api() && d.host_api().top_size() > 0) {
    const v1::HostApiSignals& h = d.host_api();
    absl::StrAppend(&md, "`", Md(h.file()),
                    "` (API Name, Time(us), Count): ", F3(h.total_us()),
                    " us host API time (", Md(h.total_level()),
                    "; runtime calls nest inside acl calls and are not added "
                    "again), of which ",
                    F3(h.launch_related_us()), " us kernel-launch calls; ",
                    F3(h.synchronize_us()),
                    " us in Synchronize calls (the host waiting on the "
                    "device).\n\n| API | Level | "
                    "Time (us) | Count | Avg (us) |\n|---|---|---|---|---|\n");
    for (const v1::HostApi& a : h.top()) {
      absl::StrAppend(&md, "| `", Md(a.name()), "` | ", Md(a.level()), " | ",
                      F3(a.time_us()), " | ", a.count(), " | ", F3(a.avg_us()),
                      " |\n");
    }
    absl::StrAppend(&md, "\n");
  } else {
    absl::StrAppend(&md, "No host API table in the profile.\n\n");
  }

  // ---------------------------------------------------------------------
  absl::StrAppend(&md, "## Binary Signals\n\n");
  if (s.side == "gpu" && p.ncu.has_value()) {
    bool any = false;
    for (const NcuKernel& k : p.ncu->kernels) {
      if (k.name != s.hotspot) continue;
      for (const char* m :
           {"launch__registers_per_thread", "Registers Per Thread",
            "launch__shared_mem_per_block_dynamic",
            "launch__shared_mem_per_block_static", "Block Size", "Grid Size"}) {
        const NcuMetric* v = k.Find({m});
        if (v != nullptr) {
          any = true;
          absl::StrAppend(&md, "- `", Md(p.ncu->file), "` ", m, "=", v->text,
                          "\n");
        }
      }
      absl::StrAppend(&md, "- Launch shape: block ", Md(k.block_size),
                      ", grid ", Md(k.grid_size), " (`", Md(p.ncu->file),
                      "`).\n");
      any = true;
      break;
    }
    if (!any) absl::StrAppend(&md, "None.\n");
    absl::StrAppend(&md, "\n");
  } else {
    absl::StrAppend(&md,
                    "No msOpProf visualize_data.bin in the profile: no "
                    "per-block pipe or memory-path evidence.\n\n");
  }
  absl::StrAppend(&md,
                  "## IR Signals\n\nNo IR dumps in the profile; "
                  "attribution to IR stages not attempted.\n\n");

  // ---------------------------------------------------------------------
  absl::StrAppend(&md, "## Diagnosis\n\n### Operator Type Fit\n\n");
  absl::StrAppend(&md, "Inference: ", d.operator_type(),
                  s.operator_type_evidence.empty()
                      ? std::string(" (no evidence)")
                      : absl::StrCat(" (", Md(s.operator_type_evidence), ")"),
                  ".\n\n");
  absl::StrAppend(&md, "### Compute vs Memory Bound\n\nInference: ", d.bound(),
                  d.bound_evidence().empty()
                      ? std::string(".")
                      : absl::StrCat(" (", Md(d.bound_evidence()), ")."),
                  "\n");
  const v1::RooflineSignals& r = d.roofline();
  if (r.peak_tflops() > 0) {
    absl::StrAppend(
        &md, "Roofline (", Md(r.source()), "): peak ",
        absl::StrFormat("%.1f", r.peak_tflops()), " TFLOPS, ",
        absl::StrFormat("%.0f", r.bandwidth_gbps()), " GB/s, ridge ",
        absl::StrFormat("%.1f", r.ridge_flop_per_byte()), " FLOP/B");
    if (r.arithmetic_intensity() > 0) {
      absl::StrAppend(
          &md, "; kernel AI ",
          absl::StrFormat("%.2f", r.arithmetic_intensity()), " FLOP/B (",
          r.arithmetic_intensity() < r.ridge_flop_per_byte()
              ? "left of the ridge: memory side"
              : "right of the ridge: compute side",
          "), attainable ", absl::StrFormat("%.2f", r.attainable_tflops()),
          " TFLOPS");
    }
    if (r.achieved_tflops() > 0) {
      absl::StrAppend(&md, "; achieved ",
                      absl::StrFormat("%.3f", r.achieved_tflops()), " TFLOPS (",
                      absl::StrFormat("%.1f %%", 100 * r.achieved_tflops() /
                                                     r.peak_tflops()),
                      " of peak)");
    }
    absl::StrAppend(&md, ".\n");
  }
  absl::StrAppend(&md, "\n### Pipeline Bottlenecks\n\n");
  Findings(md, d, "pipeline");
  absl::StrAppend(&md, "### Memory Hierarchy Bottlenecks\n\n");
  Findings(md, d, "memory_hierarchy");
  absl::StrAppend(&md, "### Concurrency And Scheduling Bottlenecks\n\n");
  Findings(md, d, "concurrency");
  absl::StrAppend(&md, "## Operator Implementation Issues\n\n");
  std::string impl;
  Findings(impl, d, "implementation");
  std::string host;
  Findings(host, d, "host");
  if (impl != "No rule fired.\n\n") absl::StrAppend(&md, impl);
  if (host != "No rule fired.\n\n") absl::StrAppend(&md, host);
  if (impl == "No rule fired.\n\n" && host == "No rule fired.\n\n") {
    absl::StrAppend(&md, "No rule fired.\n\n");
  }

  absl::StrAppend(&md, "## Optimization Suggestions\n\n");
  if (d.suggestions_size() == 0) absl::StrAppend(&md, "None.\n\n");
  for (const v1::Suggestion& g : d.suggestions()) {
    if (g.parameter().empty()) {
      absl::StrAppend(&md, "- In words (the round has no parameter for it): ",
                      Md(g.advice()), ": ", Md(g.rule()),
                      ". Evidence: ", Md(g.evidence()), ". Confidence ",
                      absl::StrFormat("%.1f", g.confidence()), ".\n");
      continue;
    }
    absl::StrAppend(
        &md, "- ", g.direction(), " `", g.parameter(), "`",
        g.has_value() ? absl::StrCat(" to ", ParamValueToString(g.value()))
                      : "",
        ": ", Md(g.rule()), ". Evidence: ", Md(g.evidence()), ". Confidence ",
        absl::StrFormat("%.1f", g.confidence()), ".\n");
  }
  if (d.suggestions_size() > 0) absl::StrAppend(&md, "\n");

  absl::StrAppend(&md, "## Evidence Gaps\n\n");
  if (d.evidence_gaps_size() == 0) absl::StrAppend(&md, "None.\n");
  for (const v1::EvidenceGap& g : d.evidence_gaps()) {
    absl::StrAppend(&md, "- `", Md(g.file()), "`: ", Md(g.reason()), "\n");
  }
  return md;
}

}  // namespace tunefarm
