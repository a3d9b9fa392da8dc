#include "analyzer/analyzer.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "analyzer/perf_analysis_md.h"
#include "analyzer/profile.h"
#include "analyzer/rules.h"
#include "common/params.h"

namespace tunefarm {
namespace {

absl::string_view Av(std::string_view s) { return {s.data(), s.size()}; }

std::vector<InputFile> FilesOf(const v1::ProfileBundle& bundle) {
  std::vector<InputFile> files;
  files.reserve(static_cast<size_t>(bundle.files_size()));
  for (const v1::ProfileFile& f : bundle.files()) {
    files.push_back({f.path(), f.content()});
  }
  return files;
}

// The duration-weighted mean of the first present column.
std::optional<Cite> MetricCite(const TaskTable& t, const OpAggregate& op,
                               std::initializer_list<std::string_view> cols) {
  for (std::string_view c : cols) {
    auto it = op.metrics.find(std::string(c));
    if (it != op.metrics.end() && it->second.n > 0) {
      return Cite{t.file, std::string(c), it->second.weighted_mean()};
    }
  }
  return std::nullopt;
}

// The busiest pipe ratio of one side of a slice (0 when none).
double BusiestPipe(const OpAggregate& op, bool aiv) {
  double best = 0;
  for (const auto& [col, st] : op.metrics) {
    if (!absl::EndsWith(col, "_ratio")) continue;
    if (!absl::StartsWith(col, aiv ? "aiv_" : "aic_")) continue;
    best = std::max(best, st.weighted_mean());
  }
  return best;
}

// Which side of the core the slice's time went to: the cycle counters or
// per-side times first (a MIX kernel whose vector side runs 80 ms while its
// cube side runs 10 us is a vector kernel), the busier pipes when both
// sides ran about as long, the core label last.
bool ChooseAiv(const OpAggregate& op, std::string& why) {
  const bool cyc = op.has_aic_cycles && op.has_aiv_cycles &&
                   (op.aic_cycles > 0 || op.aiv_cycles > 0);
  const bool tim = op.has_aic_time && op.has_aiv_time &&
                   (op.aicore_time_us > 0 || op.aiv_time_us > 0);
  if (tim || cyc) {
    const double c = tim ? op.aicore_time_us : op.aic_cycles;
    const double v = tim ? op.aiv_time_us : op.aiv_cycles;
    const std::string what =
        tim ? absl::StrFormat("aicore_time %.3f us vs aiv_time %.3f us",
                              op.aicore_time_us, op.aiv_time_us)
            : absl::StrFormat("aic_total_cycles %.0f vs aiv_total_cycles %.0f",
                              op.aic_cycles, op.aiv_cycles);
    if (c <= 0 || v <= 0 || std::max(c, v) >= 1.5 * std::min(c, v)) {
      why = absl::StrCat(what, ": the time goes to the ",
                         v > c ? "vector" : "cube", " side");
      return v > c;
    }
    const double pc = BusiestPipe(op, false);
    const double pv = BusiestPipe(op, true);
    why = absl::StrFormat(
        "%s (both sides run about as long); busiest pipe ratio cube %.3f vs "
        "vector %.3f",
        what, pc, pv);
    return pv > pc;
  }
  std::string core = absl::AsciiStrToUpper(op.core);
  bool aiv =
      absl::StrContains(core, "VECTOR") || absl::StrContains(core, "AIV");
  why = absl::StrCat("core type ", op.core.empty() ? "(none)" : op.core,
                     " (no cycle counters)");
  return aiv;
}

// `op` is the compute hotspot; `total_us` the compute ops' total.
void FromTaskTable(const TaskTable& t, const OpAggregate& op, double total_us,
                   const v1::ProfileBundle& bundle, const ChipFacts* chip,
                   Signals& s) {
  s.hotspot = op.name;
  s.hotspot_type = op.type;
  s.hotspot_core = op.core;
  s.hotspot_us = op.total_us;
  s.hotspot_count = op.count;
  s.hotspot_share = total_us > 0 ? op.total_us / total_us : 0;
  // Ratios come from the largest core-type slice alone: launches on
  // AI_CORE and on MIX_AIC run different code paths.
  // Operator type and side come from the largest core-type slice: launches
  // on AI_CORE and on MIX_AIC run different code paths.
  const OpAggregate& sl = op.by_core.empty() ? op : op.by_core.front();
  s.slice_core = sl.core;
  if (sl.has_aic_cycles) s.aic_cycles = sl.aic_cycles;
  if (sl.has_aiv_cycles) s.aiv_cycles = sl.aiv_cycles;
  if (sl.has_aic_time) s.aic_time_us = sl.aicore_time_us;
  if (sl.has_aiv_time) s.aiv_time_us = sl.aiv_time_us;
  std::string why;
  const bool vector_first = ChooseAiv(sl, why);
  // The ratios cover the op's whole time: when every slice is read on the
  // same side, they are duration-weighted over all its launches (merged,
  // and said so); otherwise the largest slice's alone.
  bool merge = op.by_core.size() > 1;
  for (const OpAggregate& o : op.by_core) {
    std::string ignored;
    merge = merge && ChooseAiv(o, ignored) == vector_first;
  }
  const OpAggregate& src = merge ? op : sl;
  if (op.by_core.size() > 1) {
    for (const OpAggregate& o : op.by_core) {
      absl::StrAppend(&s.core_split, s.core_split.empty() ? "" : "; ",
                      o.core.empty() ? "(none)" : o.core, " ",
                      absl::StrFormat("%.3f", o.total_us), " us over ", o.count,
                      " launches");
    }
    absl::StrAppend(
        &s.core_split,
        merge ? absl::StrCat("; the diagnosis reads ratios duration-weighted "
                             "over all ",
                             op.count,
                             " launches (core types merged, each "
                             "listed apart below)")
              : absl::StrCat("; the diagnosis reads the ",
                             sl.core.empty() ? "(none)" : sl.core,
                             " launches' ratios only (the core types run on "
                             "different sides)"));
  }
  auto fill = [&](bool aiv) {
    s.side = aiv ? "aiv" : "aic";
    s.compute = aiv ? MetricCite(t, src,
                                 {"aiv_vec_ratio", "aiv_vec_fp16_ratio",
                                  "aiv_vec_fp32_ratio"})
                    : MetricCite(t, src,
                                 {"aic_mac_ratio", "aic_cube_ratio",
                                  "aic_mac_fp16_ratio", "aic_mac_int8_ratio",
                                  "aic_cube_fp16_ratio"});
    s.memory = aiv ? MetricCite(t, src, {"aiv_mte2_ratio"})
                   : MetricCite(t, src, {"aic_mte2_ratio"});
    s.scalar = aiv ? MetricCite(t, src, {"aiv_scalar_ratio"})
                   : MetricCite(t, src, {"aic_scalar_ratio"});
    s.mte3 = aiv ? MetricCite(t, src, {"aiv_mte3_ratio"})
                 : MetricCite(t, src, {"aic_mte3_ratio"});
    s.mte1 = aiv ? std::nullopt : MetricCite(t, src, {"aic_mte1_ratio"});
    s.fixpipe = aiv ? std::nullopt : MetricCite(t, src, {"aic_fixpipe_ratio"});
    if (merge) {
      for (std::optional<Cite>* c :
           {&s.compute, &s.memory, &s.scalar, &s.mte3, &s.mte1, &s.fixpipe}) {
        if (c->has_value()) {
          (*c)->column =
              absl::StrCat((*c)->column, " (weighted over ", op.core, ")");
        }
      }
    }
  };
  auto zero = [](const std::optional<Cite>& c) { return !c || c->value == 0; };
  fill(vector_first);
  s.side_evidence = why;
  // With no counters to go by, an all-zero side says nothing: try the other.
  if (zero(s.compute) && zero(s.memory) &&
      !absl::StrContains(why, "the time goes")) {
    Signals keep = s;
    fill(!vector_first);
    if (zero(s.compute) && zero(s.memory)) {
      s = keep;
    } else {
      s.side_evidence = absl::StrCat(why, "; its ratios are all zero, the ",
                                     s.side, " side's are not");
    }
  }
  s.occupancy = MetricCite(t, src, {"cube_utilization(%)"});
  if (s.occupancy) s.occupancy->column = "cube_utilization(%)/100";
  if (!t.block_col.empty() && sl.max_block_dim > 0) {
    s.block_dim = Cite{t.file, t.block_col, sl.max_block_dim};
  }
  const v1::BoardCapabilities& caps = bundle.capabilities();
  if (s.side == "aiv") {
    s.cores = caps.vector_cores() > 0 ? caps.vector_cores()
                                      : (chip ? chip->vector_cores : 0);
  } else {
    s.cores = caps.cube_cores() > 0 ? caps.cube_cores()
                                    : (chip ? chip->cube_cores : 0);
  }
  // MemoryAccess group: bytes moved to / from main memory over the time.
  double kb = 0;
  for (const auto& [col, st] : op.metrics) {
    if (absl::StrContains(col, "main_memory_datas")) kb += st.sum;
  }
  if (kb > 0 && op.total_us > 0) {
    s.achieved_bw = Cite{t.file,
                         "(read+write)_main_memory_datas(KB) x 1024 / "
                         "duration, GB/s",
                         kb * 1024 / (op.total_us * 1e-6) / 1e9};
    double bw = caps.memory_bandwidth_gbps() > 0 ? caps.memory_bandwidth_gbps()
                                                 : (chip ? chip->hbm_gbps : 0);
    s.peak_bw_gbps = bw;
  }
}

// msprof op: the kernel of OpBasicInfo as a one-op task table whose
// metrics are the metric groups' columns (each group's rows are blocks),
// so the task-table signals and rules apply unchanged.
struct OpProfView {
  TaskTable table;
  OpAggregate op;
};
OpProfView ViewOpProf(const OpProf& o) {
  OpProfView v;
  const OpProfBasic& b = o.basic;
  v.table.file = b.file;
  v.table.format = "msprof_op";
  v.table.kind = "OpBasicInfo";
  v.table.duration_col = "Task Duration(us)";
  v.table.block_col = "Block Dim";
  v.op.name = b.op_name;
  v.op.type = b.op_type;
  v.op.core = b.op_type;
  v.op.total_us = b.duration_us;
  v.op.count = 1;
  v.op.max_block_dim = b.block_dim;
  v.op.max_mix_block_dim = b.mix_block_dim;
  // Per-side time and cycles: means over the sub-blocks that ran them.
  for (const char* g :
       {"PipeUtilization", "ArithmeticUtilization", "Memory", "MemoryL0",
        "MemoryUB", "L2Cache", "ResourceConflictRatio"}) {
    auto it = o.groups.find(g);
    if (it == o.groups.end()) continue;
    const OpProfGroup& grp = it->second;
    if (v.table.file == b.file && std::string(g) == "PipeUtilization") {
      v.table.file = grp.file;
    }
    auto mean_of = [&](const char* col, double& into, bool& has) {
      auto c = grp.columns.find(col);
      if (c == grp.columns.end() || has) return;
      into = c->second.mean();
      has = true;
    };
    mean_of("aic_time(us)", v.op.aicore_time_us, v.op.has_aic_time);
    mean_of("aiv_time(us)", v.op.aiv_time_us, v.op.has_aiv_time);
    mean_of("aic_total_cycles", v.op.aic_cycles, v.op.has_aic_cycles);
    mean_of("aiv_total_cycles", v.op.aiv_cycles, v.op.has_aiv_cycles);
    for (const auto& [col, st] : grp.columns) {
      std::string l = absl::AsciiStrToLower(col);
      bool metric =
          absl::EndsWith(l, "_ratio") || absl::StrContains(l, "(gb/s)") ||
          absl::EndsWith(l, "_fops") || absl::StrContains(l, "rate(%)") ||
          absl::StrContains(l, "(kb)");
      if (!metric || v.op.metrics.count(col) > 0) continue;
      Stat s2 = st;
      if (absl::EndsWith(l, "(%)")) {
        s2.sum /= 100;
        s2.min /= 100;
        s2.max /= 100;
        s2.wsum /= 100;
      }
      v.op.metrics.emplace(col, s2);
    }
  }
  // The block-time columns were checked for presence above; a side with
  // no time in any group is "absent", not zero.
  if (!v.op.has_aic_time || !v.op.has_aiv_time) {
    v.op.has_aic_time = v.op.has_aiv_time = false;
  }
  if (!v.op.has_aic_cycles || !v.op.has_aiv_cycles) {
    v.op.has_aic_cycles = v.op.has_aiv_cycles = false;
  }
  v.op.by_core.push_back(v.op);
  v.table.ops.push_back(v.op);
  v.table.total_us = b.duration_us;
  v.table.rows_used = 1;
  return v;
}

// Launches of one kernel name in an Nsight Compute report, as one hotspot.
struct NcuGroup {
  std::string name, cc;
  int64_t count = 0;
  double total_us = 0;
  // Metrics over the launches: durations, byte and instruction counts
  // (.sum) summed; percentages and rates weighted by duration.
  NcuKernel merged;
};

double NcuDuration(const NcuKernel& k) {
  const NcuMetric* d = k.Find({"gpu__time_duration.sum", "Duration"});
  return d ? std::max(0.0, d->value) : 0.0;
}

std::vector<NcuGroup> GroupNcu(const NcuReport& r) {
  std::vector<NcuGroup> groups;
  std::map<std::string, size_t> index;
  std::map<std::string, std::map<std::string, std::pair<double, double>>>
      wsum;  // group -> metric -> (sum v*w, sum w)
  for (const NcuKernel& k : r.kernels) {
    auto [it, fresh] = index.try_emplace(k.name, groups.size());
    if (fresh) {
      NcuGroup g;
      g.name = k.name;
      g.cc = k.cc;
      g.merged = k;
      g.merged.metrics.clear();
      groups.push_back(std::move(g));
    }
    NcuGroup& g = groups[it->second];
    const double us = NcuDuration(k);
    ++g.count;
    g.total_us += us;
    const double w = us > 0 ? us : 1;
    for (const auto& [name, m] : k.metrics) {
      NcuMetric& into = g.merged.metrics[name];
      const bool summed = absl::EndsWith(name, ".sum") || m.unit == "byte" ||
                          name == "Duration";
      if (!m.numeric) {
        if (into.text.empty()) into = m;
        continue;
      }
      into.numeric = true;
      into.unit = m.unit;
      if (summed) {
        into.value += m.value;
      } else {
        auto& [vw, ww] = wsum[k.name][name];
        vw += m.value * w;
        ww += w;
        into.value = vw / ww;
      }
      into.text = absl::StrFormat("%g", into.value);
    }
    for (const NcuRule& rule : k.rules) {
      bool seen = false;
      for (const NcuRule& have : g.merged.rules) {
        seen = seen || have.name == rule.name;
      }
      if (!seen) g.merged.rules.push_back(rule);
    }
  }
  std::stable_sort(groups.begin(), groups.end(),
                   [](const NcuGroup& a, const NcuGroup& b) {
                     return a.total_us > b.total_us;
                   });
  return groups;
}

void FromNcu(const NcuReport& r, Signals& s) {
  std::vector<NcuGroup> groups = GroupNcu(r);
  if (groups.empty()) return;
  const NcuGroup& g = groups.front();
  const NcuKernel& k = g.merged;
  s.side = "gpu";
  s.hotspot = g.name;
  s.hotspot_type = g.name;
  s.hotspot_core = g.cc.empty() ? "" : absl::StrCat("CC ", g.cc);
  s.hotspot_us = g.total_us;
  s.hotspot_count = g.count;
  double total = 0;
  for (const NcuGroup& o : groups) total += o.total_us;
  s.hotspot_share = total > 0 ? s.hotspot_us / total : 1;
  auto cite = [&](std::initializer_list<std::string_view> names)
      -> std::optional<Cite> {
    for (std::string_view n : names) {
      const NcuMetric* m = k.Find({n});
      if (m != nullptr) {
        return Cite{r.file,
                    g.count > 1
                        ? absl::StrCat(Av(n), " (duration-weighted over ",
                                       g.count, " launches)")
                        : std::string(n),
                    m->value};
      }
    }
    return std::nullopt;
  };
  s.ncu_compute_sol = cite({"sm__throughput.avg.pct_of_peak_sustained_elapsed",
                            "Compute (SM) Throughput"});
  s.ncu_memory_sol =
      cite({"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
            "Memory Throughput"});
  s.ncu_waves = cite({"launch__waves_per_multiprocessor", "Waves Per SM"});
  s.ncu_tensor_pipe =
      cite({"sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_"
            "active"});
  s.ncu_occupancy = cite({"sm__warps_active.avg.pct_of_peak_sustained_active",
                          "Achieved Occupancy"});
  s.ncu_dram = cite({"gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
                     "dram__throughput.avg.pct_of_peak_sustained_elapsed",
                     "DRAM Throughput"});
  s.ncu_l1 = cite({"l1tex__throughput.avg.pct_of_peak_sustained_elapsed",
                   "L1/TEX Cache Throughput"});
  s.ncu_l2 = cite({"lts__throughput.avg.pct_of_peak_sustained_elapsed",
                   "L2 Cache Throughput"});
  std::optional<Cite> hit = cite({"lts__t_sector_hit_rate.pct", "L2 Hit Rate"});
  if (hit) {
    hit->value = std::min(hit->value, 100.0) / 100;  // ncu can read >100 %
    hit->column += "/100";
    s.l2_hit = hit;
  }
}

// Roofline from capabilities (preferred) or the chip table.
void FillRoofline(const v1::ProfileBundle& bundle, const ChipFacts* chip,
                  const ProfileData& p, v1::RooflineSignals& r) {
  const v1::BoardCapabilities& caps = bundle.capabilities();
  double peak = caps.peak_tflops() > 0 ? caps.peak_tflops()
                                       : (chip ? chip->cube_tflops : 0);
  double bw = caps.memory_bandwidth_gbps() > 0 ? caps.memory_bandwidth_gbps()
                                               : (chip ? chip->hbm_gbps : 0);
  if (peak <= 0 || bw <= 0) return;
  r.set_peak_tflops(peak);
  r.set_bandwidth_gbps(bw);
  r.set_ridge_flop_per_byte(peak * 1e12 / (bw * 1e9));
  r.set_source(caps.peak_tflops() > 0 ? "board capabilities"
                                      : std::string(chip->source));
  // Achieved work, where the profile counts it.
  if (p.ncu.has_value() && !p.ncu->kernels.empty()) {
    const std::vector<NcuGroup> groups = GroupNcu(*p.ncu);
    const NcuKernel& k = groups.front().merged;
    const NcuMetric* ffma =
        k.Find({"smsp__sass_thread_inst_executed_op_ffma_pred_on.sum"});
    const NcuMetric* fadd =
        k.Find({"smsp__sass_thread_inst_executed_op_fadd_pred_on.sum"});
    const NcuMetric* fmul =
        k.Find({"smsp__sass_thread_inst_executed_op_fmul_pred_on.sum"});
    const NcuMetric* rd =
        k.Find({"dram__bytes_read.sum", "dram__bytes_op_read.sum"});
    const NcuMetric* wr =
        k.Find({"dram__bytes_write.sum", "dram__bytes_op_write.sum"});
    const NcuMetric* dur = k.Find({"gpu__time_duration.sum", "Duration"});
    double flops = (ffma ? 2 * ffma->value : 0) + (fadd ? fadd->value : 0) +
                   (fmul ? fmul->value : 0);
    double bytes = (rd ? rd->value : 0) + (wr ? wr->value : 0);
    if (flops > 0 && bytes > 0) r.set_arithmetic_intensity(flops / bytes);
    if (flops > 0 && dur != nullptr && dur->value > 0) {
      r.set_achieved_tflops(flops / (dur->value * 1e-6) / 1e12);
    }
    if (r.arithmetic_intensity() > 0) {
      r.set_attainable_tflops(
          std::min(peak, r.arithmetic_intensity() * bw * 1e9 / 1e12));
    }
  } else if (p.tasks.has_value() && !p.tasks->ops.empty()) {
    const OpAggregate* hot = &p.tasks->ops.front();
    for (const OpAggregate& o : p.tasks->ops) {
      if (!IsCommunicationOp(o)) {
        hot = &o;
        break;
      }
    }
    const OpAggregate& op = *hot;
    double fops = 0;
    for (const char* c : {"aic_cube_fops", "aiv_vector_fops"}) {
      auto it = op.metrics.find(c);
      if (it != op.metrics.end()) fops += it->second.sum;
    }
    if (fops > 0 && op.total_us > 0) {
      r.set_achieved_tflops(fops / (op.total_us * 1e-6) / 1e12);
    }
  }
}

// "12KB" / "~390KB" / "262400" -> bytes; nullopt when not a size.
std::optional<double> SizeBytes(std::string_view tok) {
  while (!tok.empty() && (tok.front() == '~' || tok.front() == ' ')) {
    tok.remove_prefix(1);
  }
  size_t n = 0;
  while (n < tok.size() &&
         ((tok[n] >= '0' && tok[n] <= '9') || tok[n] == '.')) {
    ++n;
  }
  if (n == 0) return std::nullopt;
  double v = std::atof(std::string(tok.substr(0, n)).c_str());
  std::string unit = absl::AsciiStrToUpper(Av(tok.substr(n)));
  if (absl::StartsWith(unit, "KB") || absl::StartsWith(unit, "KIB")) v *= 1024;
  if (absl::StartsWith(unit, "MB") || absl::StartsWith(unit, "MIB")) {
    v *= 1024 * 1024;
  }
  return v;
}

// A compiler / build log's Unified Buffer overflow, as the Ascend
// toolchains word it ("ub overflow ... req 262400 > 196608",
// "req ~390KB > 192KB"): the first such line wins.
void FindUbOverflow(const std::vector<InputFile>& files, Signals& s) {
  for (const InputFile& f : files) {
    std::string_view path = f.path;
    std::string_view base = path.substr(path.find_last_of('/') + 1);
    if (!absl::EndsWith(Av(base), ".log") ||
        absl::StartsWith(Av(base), "bubble_analysis")) {
      continue;
    }
    int line_no = 0;
    for (absl::string_view line : absl::StrSplit(Av(f.content), '\n')) {
      ++line_no;
      std::string l = absl::AsciiStrToLower(line);
      if (!absl::StrContains(l, "ub") || !absl::StrContains(l, "req")) continue;
      size_t req = l.find("req");
      size_t gt = l.find('>', req);
      if (gt == std::string::npos) continue;
      size_t sp = l.find_first_of(" =:", req);
      if (sp == std::string::npos || sp > gt) continue;
      std::optional<double> want =
          SizeBytes(std::string_view(line.data() + sp + 1, gt - sp - 1));
      std::optional<double> cap = SizeBytes(
          std::string_view(line.data() + gt + 1, line.size() - gt - 1));
      if (!want || !cap || *cap <= 0 || *want <= *cap) continue;
      s.ub_request = Cite{
          f.path, absl::StrCat("line ", line_no, " UB request (bytes)"), *want};
      s.ub_capacity_bytes = *cap;
      return;
    }
  }
}

// The hotspot's total in a profile, for the parent comparison: every row
// whose name (or, failing that, type) matches, summed over core types.
std::optional<double> OpTotal(const ProfileData& p, const std::string& name,
                              const std::string& type, double* total) {
  if (p.tasks.has_value()) {
    *total = p.tasks->total_us;
    double sum = 0;
    bool any = false;
    for (const OpAggregate& op : p.tasks->ops) {
      if (op.name == name) {
        sum += op.total_us;
        any = true;
      }
    }
    if (!any && !type.empty()) {
      for (const OpAggregate& op : p.tasks->ops) {
        if (op.type == type) {
          sum += op.total_us;
          any = true;
        }
      }
    }
    if (any) return sum;
  } else if (p.op_statistic.has_value()) {
    *total = p.op_statistic->total_us;
    double sum = 0;
    bool any = false;
    for (const OpStatRow& r : p.op_statistic->by_core) {
      if (r.type == name || (!type.empty() && r.type == type)) {
        sum += r.total_us;
        any = true;
      }
    }
    if (any) return sum;
  }
  return std::nullopt;
}

bool IsAiCpuCore(std::string_view core) {
  std::string c = absl::AsciiStrToUpper(Av(core));
  return absl::StrContains(c, "AI_CPU") || absl::StrContains(c, "AICPU");
}

bool IsCommRow(const OpStatRow& r) {
  std::string c = absl::AsciiStrToUpper(r.core);
  std::string t = absl::AsciiStrToLower(r.type);
  return absl::StrContains(c, "HCCL") ||
         absl::StrContains(c, "COMMUNICATION") || absl::StartsWith(t, "hcom") ||
         absl::StrContains(t, "hccl");
}

// The candidate stories of where the time went, largest first:
// communication (exposed HCCL time), AI CPU tasks, host-bound idle device
// time, and the kernels themselves.
void RankStories(const ProfileData& p, const Signals& s, const Thresholds& th,
                 v1::Diagnosis& d) {
  struct In {
    std::string kind;
    double us = 0;
    std::string summary, evidence;
  };
  std::vector<In> in;
  // Communication.
  {
    double ops_us = 0;
    std::string file;
    if (p.tasks.has_value()) {
      for (const OpAggregate& op : p.tasks->ops) {
        if (IsCommunicationOp(op)) ops_us += op.total_us;
      }
      file = p.tasks->file;
    } else if (p.op_statistic.has_value()) {
      for (const OpStatRow& r : p.op_statistic->by_core) {
        if (IsCommRow(r)) ops_us += r.total_us;
      }
      file = p.op_statistic->file;
    } else if (p.trace.has_value()) {
      for (const auto& [name, st] : p.trace->by_name) {
        auto c = p.trace->core_of.find(name);
        std::string core =
            c == p.trace->core_of.end() ? "" : absl::AsciiStrToUpper(c->second);
        if (absl::StrContains(core, "HCCL") ||
            absl::StrContains(core, "COMMUNICATION")) {
          ops_us += st.sum;
        }
      }
      file = p.trace->file;
    }
    In c{"communication"};
    if (p.step_trace.has_value() && p.step_trace->comm_not_overlapped_us > 0) {
      c.us = p.step_trace->comm_not_overlapped_us;
      c.evidence = absl::StrFormat(
          "`%s` Communication(Not Overlapped) %.3f us of Stage %.3f us over "
          "%d step(s)%s",
          p.step_trace->file, c.us, p.step_trace->stage_us, p.step_trace->steps,
          ops_us > 0
              ? absl::StrFormat("; HCCL ops %.3f us in `%s`", ops_us, file)
              : "");
    } else if (ops_us > 0) {
      c.us = ops_us;
      c.evidence = absl::StrFormat(
          "HCCL / communication ops %.3f us in `%s` (overlap "
          "with compute unknown: no step_trace_time)",
          ops_us, file);
    }
    c.summary =
        "collective communication (HCCL) the compute does not hide: the step "
        "waits on the network; overlap it or shrink what is exchanged before "
        "tuning the kernel";
    if (c.us > 0) in.push_back(c);
  }
  // AI CPU.
  {
    double us = 0;
    int64_t n = 0;
    std::string file, top;
    double top_us = 0;
    if (p.tasks.has_value()) {
      file = p.tasks->file;
      for (const OpAggregate& op : p.tasks->ops) {
        for (const OpAggregate& sl : op.by_core) {
          if (!IsAiCpuCore(sl.core)) continue;
          us += sl.total_us;
          n += sl.count;
          if (sl.total_us > top_us) top_us = sl.total_us, top = op.name;
        }
      }
    } else if (p.op_statistic.has_value()) {
      file = p.op_statistic->file;
      for (const OpStatRow& r : p.op_statistic->by_core) {
        if (!IsAiCpuCore(r.core)) continue;
        us += r.total_us;
        n += r.count;
        if (r.total_us > top_us) top_us = r.total_us, top = r.type;
      }
    } else if (p.trace.has_value()) {
      file = p.trace->file;
      for (const auto& [name, st] : p.trace->by_name) {
        auto c = p.trace->core_of.find(name);
        if (c == p.trace->core_of.end() || !IsAiCpuCore(c->second)) continue;
        us += st.sum;
        n += st.n;
        if (st.sum > top_us) top_us = st.sum, top = name;
      }
    }
    if (us > 0) {
      in.push_back(
          {"aicpu", us,
           "operators that fell back to the AI CPU: they run far slower than "
           "on the AI Cores and serialise the stream; move them to an AI Core "
           "kernel (or change dtype / shape so one applies)",
           absl::StrFormat("%d AI_CPU task(s), %.3f us in `%s`; largest `%s` "
                           "%.3f us",
                           n, us, file, top, top_us)});
    }
  }
  // Host-bound: device idle in the step while the host issues work.
  {
    In h{"host"};
    if (p.step_trace.has_value() && p.step_trace->free_us > 0) {
      h.us = p.step_trace->free_us;
      h.evidence =
          absl::StrFormat("`%s` Free %.3f us (device idle in the step)",
                          p.step_trace->file, h.us);
    } else if (d.timeline().window_us() > 0) {
      h.us = d.timeline().window_us() - d.timeline().busy_us();
      h.evidence =
          absl::StrFormat("`%s` idle %.3f us of a %.3f us window",
                          d.timeline().file(), h.us, d.timeline().window_us());
    }
    if (s.host_launch) {
      absl::StrAppend(&h.evidence, "; ", s.host_launch->Text());
    }
    if (s.short_kernels) {
      absl::StrAppend(&h.evidence, "; ", s.short_kernels->Text());
    }
    h.summary =
        "the device sits idle waiting for work: host-side launch, framework "
        "or data-loading time between kernels";
    // Idle time alone can be anything (separate captures, Python between
    // steps): the story needs the step's own Free time, or an idle device
    // together with host-side launch evidence.
    const bool launch_evidence =
        (s.short_kernels && s.short_kernels->value >= th.short_kernel_share) ||
        (s.host_launch && s.host_launch->value >= th.host_launch_share);
    const bool idle = s.idle_ratio && s.idle_ratio->value >= th.idle_ratio_high;
    if (h.us > 0 && (p.step_trace.has_value() || (idle && launch_evidence))) {
      in.push_back(h);
    }
  }
  // Kernels.
  {
    double aicpu = 0;
    for (const In& x : in) {
      if (x.kind == "aicpu") aicpu = x.us;
    }
    double us = std::max(0.0, d.total_device_us() - aicpu);
    if (us > 0) {
      in.push_back(
          {"kernel", us,
           absl::StrCat("device kernels; the largest is `", s.hotspot, "` (",
                        absl::StrFormat("%.1f %%", 100 * s.hotspot_share),
                        " of kernel time)"),
           absl::StrFormat(
               "%.3f us of kernel time in `%s`%s", us,
               d.hotspots_size() > 0 ? d.hotspots(0).source_file() : "",
               p.step_trace.has_value()
                   ? absl::StrFormat("; step Computing %.3f us",
                                     p.step_trace->computing_us)
                   : "")});
    }
  }
  double total = 0;
  for (const In& x : in) total += x.us;
  std::stable_sort(in.begin(), in.end(),
                   [](const In& a, const In& b) { return a.us > b.us; });
  for (const In& x : in) {
    v1::Story* st = d.add_stories();
    st->set_kind(x.kind);
    st->set_time_us(x.us);
    st->set_share(total > 0 ? x.us / total : 0);
    st->set_summary(x.summary);
    st->set_evidence(x.evidence);
  }
}

int SeverityRank(const std::string& s) {
  return s == "high" ? 0 : s == "medium" ? 1 : 2;
}

}  // namespace

v1::Diagnosis Analyze(const v1::ProfileBundle& bundle,
                      const v1::ProfileBundle* parent,
                      const ParseOptions& options) {
  return AnalyzeFiles(bundle, FilesOf(bundle), parent, options);
}

v1::Diagnosis AnalyzeFiles(const v1::ProfileBundle& bundle,
                           const std::vector<InputFile>& files,
                           const v1::ProfileBundle* parent,
                           const ParseOptions& options) {
  v1::Diagnosis d;
  d.set_bundle_id(bundle.bundle_id());
  d.set_sweep_id(bundle.sweep_id());
  d.set_round_id(bundle.round_id());
  d.set_epoch(bundle.epoch());
  d.set_simulated(bundle.simulated());
  d.set_bound("unknown");
  d.set_operator_type("unknown");

  ProfileData p = ReadProfile(files, options);
  for (const std::string& f : p.formats) d.add_formats(f);

  std::string profiler = bundle.profiler();
  if (profiler.empty() && !p.formats.empty()) profiler = p.formats.front();
  const ChipFacts* chip = FindChip(bundle.chip());
  if (chip == nullptr && p.trace.has_value())
    chip = FindChip(p.trace->device_name);
  Thresholds th = ThresholdsFor(profiler, bundle.chip());

  Signals s;
  s.profiler = profiler;
  s.chip = bundle.chip();
  for (const auto& [k, v] : bundle.params()) {
    if (v.kind_case() == v1::ParamValue::kIntValue) s.params[k] = v.int_value();
  }

  // Hotspots: per-task table > op_statistic > ncu > PyPTO > trace.
  std::string hot_file, hot_col;
  auto add_hotspot = [&](const std::string& name, const std::string& type,
                         const std::string& core, double us, int64_t count,
                         double total, double block) {
    if (d.hotspots_size() >= kMaxHotspots) return;
    v1::Hotspot* h = d.add_hotspots();
    h->set_op_name(name);
    h->set_op_type(type);
    h->set_core_type(core);
    h->set_duration_us(us);
    h->set_share(total > 0 ? us / total : 0);
    h->set_count(count);
    h->set_avg_us(count > 0 ? us / static_cast<double>(count) : 0);
    h->set_block_dim(block);
    h->set_source_file(hot_file);
    h->set_source_column(hot_col);
  };
  if (p.tasks.has_value()) {
    const TaskTable& t = *p.tasks;
    hot_file = t.file;
    hot_col = t.duration_col;
    // HCCL ops are listed apart (perf-analysis.md), not as compute
    // hotspots; a table of nothing else keeps them.
    std::vector<const OpAggregate*> compute;
    double compute_us = 0;
    for (const OpAggregate& op : t.ops) {
      if (IsCommunicationOp(op)) continue;
      compute.push_back(&op);
      compute_us += op.total_us;
    }
    if (compute.empty()) {
      for (const OpAggregate& op : t.ops) compute.push_back(&op);
      compute_us = t.total_us;
    }
    d.set_total_device_us(compute_us);
    for (const OpAggregate* op : compute) {
      add_hotspot(op->name, op->type, op->core, op->total_us, op->count,
                  compute_us, op->max_block_dim);
    }
    // The same time rolled up per op type: one type spread over many
    // graph-mode names (TransData_0..28) is one hotspot there.
    for (const TypeRollup& r : t.by_type) {
      if (d.hotspot_types_size() >= kMaxHotspots) break;
      OpAggregate probe;
      probe.name = r.type;
      probe.type = r.type;
      probe.core = r.core;
      if (IsCommunicationOp(probe) && compute.size() < t.ops.size()) continue;
      v1::Hotspot* h = d.add_hotspot_types();
      h->set_op_name(r.type);
      h->set_op_type(r.type);
      h->set_core_type(r.core);
      h->set_duration_us(r.total_us);
      h->set_share(compute_us > 0 ? r.total_us / compute_us : 0);
      h->set_count(r.count);
      h->set_avg_us(r.count > 0 ? r.total_us / static_cast<double>(r.count)
                                : 0);
      h->set_source_file(t.file);
      h->set_source_column(absl::StrCat(
          t.duration_col, " summed over ", r.names, " op name(s) of type ",
          t.type_col.empty() ? "(from the name)" : t.type_col));
    }
    FromTaskTable(t, *compute.front(), compute_us, bundle, chip, s);
  } else if (p.op_statistic.has_value()) {
    const OpStatistic& o = *p.op_statistic;
    hot_file = o.file;
    hot_col = "Total Time(us) summed over core types";
    std::vector<const OpStatRow*> compute;
    double compute_us = 0;
    for (const OpStatRow& r : o.rows) {
      if (IsCommRow(r)) continue;
      compute.push_back(&r);
      compute_us += r.total_us;
    }
    if (compute.empty()) {
      for (const OpStatRow& r : o.rows) compute.push_back(&r);
      compute_us = o.total_us;
    }
    d.set_total_device_us(compute_us);
    for (const OpStatRow* r : compute) {
      add_hotspot(r->type, r->type, r->core, r->total_us, r->count, compute_us,
                  0);
    }
    const OpStatRow& top = *compute.front();
    s.hotspot = top.type;
    s.hotspot_type = s.hotspot;
    s.hotspot_core = top.core;
    s.hotspot_us = top.total_us;
    s.hotspot_count = top.count;
    s.hotspot_share = compute_us > 0 ? s.hotspot_us / compute_us : 0;
  } else if (p.opprof.has_value()) {
    const OpProf& o = *p.opprof;
    OpProfView v = ViewOpProf(o);
    hot_file = o.basic.file;
    hot_col = "Task Duration(us)";
    d.set_total_device_us(o.basic.duration_us);
    add_hotspot(o.basic.op_name, o.basic.op_type, o.basic.op_type,
                o.basic.duration_us, 1, o.basic.duration_us, o.basic.block_dim);
    FromTaskTable(v.table, v.op, o.basic.duration_us, bundle, chip, s);
    // Per-block balance of the side the time goes to: the slowest block
    // sets the kernel time.
    for (const char* g :
         {"PipeUtilization", "ArithmeticUtilization", "ResourceConflictRatio",
          "Memory", "MemoryUB", "MemoryL0", "L2Cache"}) {
      auto it = o.groups.find(g);
      if (it == o.groups.end()) continue;
      const Stat& bt = s.side == "aiv" ? it->second.vector_block_us
                                       : it->second.cube_block_us;
      if (bt.n < 2 || bt.max <= 0) continue;
      s.block_balance =
          Cite{it->second.file,
               absl::StrCat("mean / max of ", s.side == "aiv" ? "aiv" : "aic",
                            "_time(us) over ", bt.n, " sub-blocks"),
               bt.mean() / bt.max};
      d.mutable_timeline()->set_block_balance(s.block_balance->value);
      break;
    }
    auto l2 = o.groups.find("L2Cache");
    if (l2 != o.groups.end()) {
      for (const char* col : {s.side == "aiv" ? "aiv_total_hit_rate(%)"
                                              : "aic_total_hit_rate(%)"}) {
        auto c = l2->second.columns.find(col);
        if (c != l2->second.columns.end() && c->second.n > 0) {
          s.l2_hit = Cite{l2->second.file, absl::StrCat(col, "/100"),
                          c->second.mean() / 100};
        }
      }
    }
    for (const auto& [name, grp] : o.groups) {
      for (const auto& [col, st] : grp.columns) {
        if (!absl::EndsWith(col, "_ratio")) continue;
        v1::PipelineRatio* r = d.add_pipeline_ratios();
        r->set_column(col);
        r->set_mean(st.weighted_mean());
        r->set_unweighted_mean(st.mean());
        r->set_min(st.min);
        r->set_max(st.max);
        r->set_rows(st.n);
        r->set_file(grp.file);
        r->set_core_type(absl::StartsWith(col, "aic_")   ? "cube sub-blocks"
                         : absl::StartsWith(col, "aiv_") ? "vector sub-blocks"
                                                         : "");
      }
    }
  } else if (p.ncu.has_value()) {
    FromNcu(*p.ncu, s);
    hot_file = p.ncu->file;
    hot_col = "gpu__time_duration.sum";
    std::vector<NcuGroup> groups = GroupNcu(*p.ncu);
    double total = 0;
    for (const NcuGroup& g : groups) total += g.total_us;
    d.set_total_device_us(total);
    for (const NcuGroup& g : groups) {
      add_hotspot(g.name, g.name, g.cc.empty() ? "" : "CC " + g.cc, g.total_us,
                  g.count, total, 0);
    }
  } else if (p.cpu_facts.has_value()) {
    // One operator program, timed as a whole: its median is the hotspot.
    const CpuRunFacts& f = *p.cpu_facts;
    hot_file = f.file;
    hot_col = "median_us";
    const double us = f.numbers.at("median_us");
    d.set_total_device_us(us);
    add_hotspot(f.op, f.workload, "cpu", us, 1, us, 0);
    s.hotspot = f.op;
    s.hotspot_type = f.workload;
    s.hotspot_core = "cpu";
    s.hotspot_us = us;
    s.hotspot_count = 1;
    s.hotspot_share = 1;
  } else if (p.pypto.has_value() || p.trace.has_value()) {
    const std::map<std::string, Stat>& by_name =
        p.pypto.has_value() ? p.pypto->by_name : p.trace->by_name;
    hot_file = p.pypto.has_value() ? p.pypto->file : p.trace->file;
    hot_col = "dur (X events)";
    std::vector<std::pair<std::string, Stat>> v(by_name.begin(), by_name.end());
    std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
      return a.second.sum > b.second.sum;
    });
    double total = 0;
    for (const auto& [n, st] : v) total += st.sum;
    d.set_total_device_us(total);
    for (const auto& [n, st] : v) {
      std::string type = n;
      if (p.pypto.has_value()) {
        auto label = p.pypto->label_of.find(n);
        if (label != p.pypto->label_of.end() && label->second != n) {
          type = absl::StrCat("e.g. task ", label->second);
        }
      }
      std::string core = "";
      if (!p.pypto.has_value()) {
        auto c = p.trace->core_of.find(n);
        core = c != p.trace->core_of.end() && !c->second.empty() ? c->second
                                                                 : "device";
      }
      add_hotspot(n, type, core, st.sum, st.n, total, 0);
    }
    if (!v.empty()) {
      s.hotspot = v.front().first;
      s.hotspot_core = d.hotspots(0).core_type();
      if (s.hotspot_core == "device") s.hotspot_core.clear();
      s.hotspot_us = v.front().second.sum;
      s.hotspot_count = v.front().second.n;
      s.hotspot_share = total > 0 ? s.hotspot_us / total : 0;
    }
  }
  if (p.ncu.has_value() && s.side.empty()) FromNcu(*p.ncu, s);
  if (p.l2_cache.has_value() && p.l2_cache->hit_rate.n > 0) {
    s.l2_hit = Cite{p.l2_cache->file, "Hit Rate", p.l2_cache->hit_rate.mean()};
  }

  // Timeline and wait.
  v1::TimelineSignals* tl = d.mutable_timeline();
  const IntervalSummary* iv = nullptr;
  std::string iv_file, iv_cols;
  if (p.trace.has_value()) {
    iv = &p.trace->device;
    iv_file = p.trace->file;
    iv_cols = "device X events ts/dur";
    tl->set_launches(p.trace->launches);
    tl->set_short_kernels(p.trace->short_kernels);
    tl->set_median_launch_delay_us(p.trace->median_launch_delay_us);
    tl->set_negative_launch_delays(p.trace->negative_launch_delays);
    s.launches = p.trace->launches;
    if (p.trace->launches > 0) {
      s.short_kernels = Cite{p.trace->file, "short kernels / launches",
                             static_cast<double>(p.trace->short_kernels) /
                                 static_cast<double>(p.trace->launches)};
    }
  } else if (p.tasks.has_value() && p.tasks->timeline.intervals > 0) {
    iv = &p.tasks->timeline;
    iv_file = p.tasks->file;
    iv_cols = "start + duration columns";
  } else if (p.task_time.has_value()) {
    iv = &p.task_time->timeline;
    iv_file = p.task_time->file;
    iv_cols = "task_start(us)/task_stop(us)";
  }
  if (iv != nullptr && iv->intervals > 0) {
    tl->set_file(iv_file);
    tl->set_window_us(iv->window_us);
    tl->set_busy_us(iv->busy_us);
    tl->set_idle_ratio(iv->idle_ratio());
    tl->set_gaps(iv->gaps);
    tl->set_max_gap_us(iv->max_gap_us);
    tl->set_device_tasks(iv->intervals);
    tl->set_overlaps(iv->overlaps);
    if (iv->window_us > 0) {
      s.idle_ratio = Cite{iv_file, absl::StrCat("idle ratio (", iv_cols, ")"),
                          iv->idle_ratio()};
    }
  }
  if (p.tasks.has_value()) {
    tl->set_total_wait_us(p.tasks->total_wait_us);
    if (!p.tasks->wait_col.empty() && p.tasks->total_us > 0) {
      s.wait_between = Cite{p.tasks->file,
                            absl::StrCat("sum ", p.tasks->wait_col, " / sum ",
                                         p.tasks->duration_col, " (all tasks)"),
                            p.tasks->total_wait_us / p.tasks->total_us};
    }
  }
  if (p.step_trace.has_value()) {
    tl->set_free_us(p.step_trace->free_us);
    tl->set_computing_us(p.step_trace->computing_us);
    tl->set_bubble_us(p.step_trace->bubble_us);
    tl->set_communication_not_overlapped_us(
        p.step_trace->comm_not_overlapped_us);
  }
  if (p.pypto.has_value()) {
    const PyptoSummary& py = *p.pypto;
    tl->set_core_utilization_pct(py.avg_utilization_pct);
    tl->set_bubble_rate_pct(py.avg_bubble_pct);
    tl->set_load_balance_pct(py.load_balance_pct);
    tl->set_cores(static_cast<int64_t>(py.cores.size()));
    tl->set_max_wait_predecessor_us(py.max_aic_wait_predecessor_us);
    if (tl->file().empty()) tl->set_file(py.file);
    s.pypto_util = Cite{py.file, "core utilisation %", py.avg_utilization_pct};
    s.pypto_bubble = Cite{py.file, "bubble rate %", py.avg_bubble_pct};
    s.pypto_balance =
        Cite{py.file, "load balance % (AIC)", py.load_balance_pct};
    s.pypto_pred = Cite{py.file, "max AIC Wait Predecessor Time",
                        py.max_aic_wait_predecessor_us};
  }

  // Host API. Runtime calls nest inside acl calls, so host time is the
  // acl level's sum alone when the table has one; kernel launches are
  // counted at one level only (runtime first, where they are submitted);
  // Synchronize calls are the host waiting on the device, not launch cost.
  if (p.api_statistic.has_value()) {
    const ApiStatistic& a = *p.api_statistic;
    v1::HostApiSignals* h = d.mutable_host_api();
    h->set_file(a.file);
    auto lower = [](const std::string& x) { return absl::AsciiStrToLower(x); };
    bool has_acl = false;
    for (const ApiRow& r : a.rows) has_acl = has_acl || lower(r.level) == "acl";
    double total = 0;
    for (const ApiRow& r : a.rows) {
      if (!has_acl || lower(r.level) == "acl") total += r.time_us;
    }
    h->set_total_us(total);
    h->set_total_level(has_acl ? "acl" : "all rows");
    std::string launch_level;
    bool found = false;
    for (std::string_view lv : {"runtime", "node", "acl", ""}) {
      for (const ApiRow& r : a.rows) {
        if (IsLaunchRelatedApi(r.name) && lower(r.level) == lv) {
          launch_level = std::string(lv);
          found = true;
          break;
        }
      }
      if (found) break;
    }
    auto is_sync = [&](const ApiRow& r) {
      return absl::StrContains(lower(r.name), "synchroniz");
    };
    bool runtime_sync = false;
    for (const ApiRow& r : a.rows) {
      runtime_sync =
          runtime_sync || (is_sync(r) && lower(r.level) == "runtime");
    }
    double launch = 0, sync = 0;
    for (const ApiRow& r : a.rows) {
      bool lr =
          found && IsLaunchRelatedApi(r.name) && lower(r.level) == launch_level;
      if (lr) launch += r.time_us;
      if (is_sync(r) && (!runtime_sync || lower(r.level) == "runtime")) {
        sync += r.time_us;
      }
      if (h->top_size() < 5) {
        v1::HostApi* api = h->add_top();
        api->set_name(r.name);
        api->set_level(r.level);
        api->set_time_us(r.time_us);
        api->set_count(r.count);
        api->set_avg_us(r.avg_us);
        api->set_launch_related(lr);
      }
    }
    h->set_launch_related_us(launch);
    h->set_synchronize_us(sync);
    s.launch_us = launch;
    if (total > 0) {
      s.host_launch =
          Cite{a.file,
               absl::StrCat("kernel-launch Time(us)",
                            launch_level.empty()
                                ? ""
                                : absl::StrCat(" (", launch_level, " level)"),
                            " / host API time (", h->total_level(), ")"),
               launch / total};
    }
  }
  s.device_kernel_us = d.total_device_us();

  FindUbOverflow(files, s);
  Classify(s, th);
  d.set_operator_type(s.operator_type);
  d.set_bound(s.bound);
  d.set_bound_evidence(s.bound_evidence);
  if (p.tasks.has_value() && !p.tasks->ops.empty()) {
    const OpAggregate* hot = &p.tasks->ops.front();
    for (const OpAggregate& op : p.tasks->ops) {
      if (op.name == s.hotspot) {
        hot = &op;
        break;
      }
    }
    // One set of ratios per core type, the largest slice first, then (for
    // an op on several core types) the merged set; means weighted by each
    // row's duration.
    std::vector<const OpAggregate*> sets;
    for (const OpAggregate& sl : hot->by_core) sets.push_back(&sl);
    if (hot->by_core.size() > 1) sets.push_back(hot);
    for (const OpAggregate* set : sets) {
      const OpAggregate& sl = *set;
      for (const auto& [col, st] : sl.metrics) {
        // A side the counters say never ran has only zero ratios: noise.
        const bool aic_idle = (sl.has_aic_cycles && sl.aic_cycles == 0) ||
                              (sl.has_aic_time && sl.aicore_time_us == 0);
        const bool aiv_idle = (sl.has_aiv_cycles && sl.aiv_cycles == 0) ||
                              (sl.has_aiv_time && sl.aiv_time_us == 0);
        if (st.max == 0 && ((aic_idle && absl::StartsWith(col, "aic_")) ||
                            (aiv_idle && absl::StartsWith(col, "aiv_")))) {
          continue;
        }
        v1::PipelineRatio* r = d.add_pipeline_ratios();
        r->set_column(col == "cube_utilization(%)" ? "cube_utilization(%)/100"
                                                   : col);
        r->set_mean(st.weighted_mean());
        r->set_unweighted_mean(st.mean());
        r->set_min(st.min);
        r->set_max(st.max);
        r->set_rows(st.n);
        r->set_file(p.tasks->file);
        r->set_core_type(set == hot ? absl::StrCat(sl.core, " (merged)")
                                    : sl.core);
      }
    }
  }
  FillRoofline(bundle, chip, p, *d.mutable_roofline());
  if (p.cpu_counters.has_value()) {
    // Per-instruction rates of the timed runs, shown with the pipe ratios.
    const std::map<std::string, double>& v = p.cpu_counters->values;
    auto ratio = [&](const char* num, const char* den, const char* column) {
      auto n = v.find(num), m = v.find(den);
      if (n == v.end() || m == v.end() || m->second <= 0) return;
      v1::PipelineRatio* r = d.add_pipeline_ratios();
      r->set_column(column);
      r->set_mean(n->second / m->second);
      r->set_min(r->mean());
      r->set_max(r->mean());
      r->set_rows(1);
      r->set_file(p.cpu_counters->file);
    };
    ratio("instructions", "cycles", "instructions/cycles");
    ratio("cache_misses", "cache_references", "cache_misses/cache_references");
    ratio("llc_read_misses", "instructions", "llc_read_misses/instructions");
  }

  std::vector<Finding> findings = ApplyRules(s, th);
  for (const Finding& f : findings) {
    v1::Bottleneck* b = d.add_bottlenecks();
    b->set_category(f.category);
    b->set_severity(f.severity);
    b->set_summary(f.summary);
    b->set_rule(f.rule);
    b->set_evidence(f.evidence);
  }
  std::vector<const Finding*> movers;
  for (const Finding& f : findings) {
    if (f.move.has_value()) movers.push_back(&f);
  }
  std::stable_sort(movers.begin(), movers.end(), [](auto* a, auto* b) {
    return SeverityRank(a->severity) < SeverityRank(b->severity);
  });
  for (const Finding* f : movers) {
    if (d.suggestions_size() >= kMaxSuggestions) break;
    // A parameter the round does not have (a bare framework trace, an
    // operator whose manifest has no such knob) is said in words only.
    const bool known = s.params.count(f->move->parameter) > 0;
    bool seen = false;
    for (const v1::Suggestion& have : d.suggestions()) {
      seen = seen || (known ? have.parameter() == f->move->parameter
                            : have.advice() == f->move->advice);
    }
    if (seen) continue;
    v1::Suggestion* sug = d.add_suggestions();
    sug->set_advice(f->move->advice);
    if (known) {
      sug->set_parameter(f->move->parameter);
      sug->set_direction(f->move->direction);
      if (f->move->value.has_value()) {
        *sug->mutable_value() = IntParam(*f->move->value);
      }
    }
    sug->set_rule(absl::StrCat(f->rule, ": ", f->summary));
    sug->set_evidence(f->evidence);
    sug->set_confidence(f->move->confidence);
  }

  // Evidence gaps.
  for (const ProfileGap& g : p.gaps) {
    v1::EvidenceGap* gap = d.add_evidence_gaps();
    gap->set_file(g.file);
    gap->set_reason(g.reason);
    gap->set_format(g.format);
  }
  auto gap = [&](const std::string& file, const std::string& reason) {
    v1::EvidenceGap* g = d.add_evidence_gaps();
    g->set_file(file);
    g->set_reason(reason);
  };
  if (p.files_read == 0) {
    gap("(profile)",
        absl::StrCat("no profiler file recognised among ", files.size(),
                     " file(s): expected op_summary / kernel_details / "
                     "op_statistic CSVs, msprof / trace_view / kineto JSON, "
                     "merged_swimlane.json, bubble_analysis.log or an "
                     "Nsight Compute CSV"));
  } else if (d.hotspots_size() == 0) {
    gap("(profile)", "no readable table gives per-op device time: no hotspot");
  }
  if (d.hotspots_size() > 0 && s.bound == "unknown") {
    gap(hot_file.empty() ? "(profile)" : hot_file,
        absl::StrCat("no pipe ratios or throughput metrics for hotspot `",
                     s.hotspot, "`: compute vs memory bound not determined"));
  }
  if (p.l2_cache.has_value() && p.l2_cache->hit_rate.n == 0 &&
      p.l2_cache->rows > 0) {
    gap(p.l2_cache->file,
        absl::StrCat("Hit Rate is N/A in all ", p.l2_cache->rows,
                     " rows: the L2 hit rate was not measured (only Victim "
                     "Rate); L2 reuse not judged"));
  }
  if (p.tasks.has_value() && p.op_statistic.has_value()) {
    // Both without communication: op_statistic leaves HCCL out.
    double tasks_us = 0, stat_us = 0;
    for (const OpAggregate& op : p.tasks->ops) {
      if (!IsCommunicationOp(op)) tasks_us += op.total_us;
    }
    for (const OpStatRow& r : p.op_statistic->by_core) {
      if (!IsCommRow(r)) stat_us += r.total_us;
    }
    if (stat_us > 0 && std::abs(tasks_us - stat_us) > 0.1 * stat_us) {
      gap(p.tasks->file,
          absl::StrFormat(
              "its compute task durations sum to %.3f us but `%s` totals "
              "%.3f us (%.0f %%): the per-task table is %s; hotspot shares "
              "are over the rows present",
              tasks_us, p.op_statistic->file, stat_us, 100 * tasks_us / stat_us,
              tasks_us < stat_us ? "truncated or partial"
                                 : "larger than the statistic (mixed runs?)"));
    }
  }
  if (p.trace.has_value() && p.trace->launches > 0 &&
      p.trace->median_launch_delay_us < 0) {
    gap(p.trace->file,
        absl::StrFormat(
            "median launch delay is negative (%.3f us; %d of %d launches): "
            "the device started those kernels before the host launch call "
            "returned (the call returns after queueing the task); the delay "
            "is measured from the end of the launch call",
            p.trace->median_launch_delay_us, p.trace->negative_launch_delays,
            p.trace->launches));
  }
  RankStories(p, s, th, d);
  if (p.tasks.has_value() && !p.profiler_info.has_value() &&
      p.tasks->format == "torch_npu") {
    gap("profiler_info_*.json",
        absl::StrCat("absent: metric group inferred from the header of `",
                     p.tasks->file, "` as ", p.tasks->metric_group));
  }

  // Parent comparison.
  std::optional<ParentView> pv;
  if (parent != nullptr) {
    std::vector<InputFile> pf = FilesOf(*parent);
    ProfileData pp = ReadProfile(pf, options);
    ParentView v;
    v.bundle_id = parent->bundle_id();
    v.round_id = parent->round_id();
    double total = 0;
    if (std::optional<double> us =
            OpTotal(pp, s.hotspot, s.hotspot_type, &total)) {
      v.hotspot_us = *us;
    }
    v.total_us = total;
    d.set_parent_bundle_id(v.bundle_id);
    d.set_parent_hotspot_us(v.hotspot_us);
    if (v.total_us == 0) {
      gap(absl::StrCat("parent ", v.bundle_id),
          "the parent profile has no readable per-op table");
    }
    pv = v;
  }

  d.set_perf_analysis_md(
      RenderPerfAnalysis(d, bundle, p, s, th, pv.has_value() ? &*pv : nullptr));
  return d;
}

namespace {

void JsonString(std::string& out, std::string_view v) {
  out.push_back('"');
  for (unsigned char c : v) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          absl::StrAppend(&out, absl::StrFormat("\\u%04x", c));
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  out.push_back('"');
}

void JsonDouble(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out += "null";
    return;
  }
  if (v == std::floor(v) && std::abs(v) < 1e15) {
    absl::StrAppend(&out, absl::StrFormat("%.1f", v));
    return;
  }
  // The shortest text that reads back as the same double.
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, ec == std::errc() ? end : buf);
}

void JsonMessage(std::string& out, const google::protobuf::Message& m,
                 int indent);

void JsonValue(std::string& out, const google::protobuf::Message& m,
               const google::protobuf::FieldDescriptor* f, int index,
               int indent) {
  using FD = google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection* r = m.GetReflection();
  const bool rep = f->is_repeated();
  switch (f->cpp_type()) {
    case FD::CPPTYPE_INT32:
      absl::StrAppend(
          &out, rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f));
      break;
    case FD::CPPTYPE_INT64:
      absl::StrAppend(
          &out, rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f));
      break;
    case FD::CPPTYPE_UINT32:
      absl::StrAppend(
          &out, rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f));
      break;
    case FD::CPPTYPE_UINT64:
      absl::StrAppend(
          &out, rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f));
      break;
    case FD::CPPTYPE_DOUBLE:
      JsonDouble(out,
                 rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f));
      break;
    case FD::CPPTYPE_FLOAT:
      JsonDouble(out,
                 rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f));
      break;
    case FD::CPPTYPE_BOOL:
      out += (rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f))
                 ? "true"
                 : "false";
      break;
    case FD::CPPTYPE_ENUM:
      JsonString(out, rep ? r->GetRepeatedEnum(m, f, index)->name()
                          : r->GetEnum(m, f)->name());
      break;
    case FD::CPPTYPE_STRING:
      JsonString(out,
                 rep ? r->GetRepeatedString(m, f, index) : r->GetString(m, f));
      break;
    case FD::CPPTYPE_MESSAGE:
      JsonMessage(
          out, rep ? r->GetRepeatedMessage(m, f, index) : r->GetMessage(m, f),
          indent);
      break;
  }
}

void JsonMessage(std::string& out, const google::protobuf::Message& m,
                 int indent) {
  const google::protobuf::Descriptor* desc = m.GetDescriptor();
  const google::protobuf::Reflection* r = m.GetReflection();
  const std::string pad(static_cast<size_t>(indent + 2), ' ');
  out += "{";
  bool first = true;
  for (int i = 0; i < desc->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = desc->field(i);
    // Empty lists are printed too: "none" is an answer.
    if (!f->is_repeated() &&
        (f->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE ||
         f->containing_oneof() != nullptr) &&
        !r->HasField(m, f)) {
      continue;
    }
    absl::StrAppend(&out, first ? "\n" : ",\n", pad);
    first = false;
    JsonString(out, f->name());
    out += ": ";
    if (f->is_map()) {
      // Map entries as an object keyed by the entry's key text.
      out += "{";
      const int n = r->FieldSize(m, f);
      for (int k = 0; k < n; ++k) {
        const google::protobuf::Message& e = r->GetRepeatedMessage(m, f, k);
        const google::protobuf::FieldDescriptor* kf =
            e.GetDescriptor()->map_key();
        const google::protobuf::FieldDescriptor* vf =
            e.GetDescriptor()->map_value();
        absl::StrAppend(&out, k > 0 ? ",\n" : "\n", pad, "  ");
        std::string key;
        if (kf->cpp_type() ==
            google::protobuf::FieldDescriptor::CPPTYPE_STRING) {
          key = e.GetReflection()->GetString(e, kf);
        } else {
          JsonValue(key, e, kf, -1, 0);
        }
        JsonString(out, key);
        out += ": ";
        JsonValue(out, e, vf, -1, indent + 4);
      }
      absl::StrAppend(&out, n > 0 ? absl::StrCat("\n", pad) : "", "}");
    } else if (f->is_repeated()) {
      const int n = r->FieldSize(m, f);
      out += "[";
      for (int k = 0; k < n; ++k) {
        absl::StrAppend(&out, k > 0 ? ",\n" : "\n", pad, "  ");
        JsonValue(out, m, f, k, indent + 4);
      }
      absl::StrAppend(&out, n > 0 ? absl::StrCat("\n", pad) : "", "]");
    } else {
      JsonValue(out, m, f, -1, indent + 2);
    }
  }
  if (!first) absl::StrAppend(&out, "\n", std::string(indent, ' '));
  out += "}";
}

}  // namespace

std::string MessageToJsonAlways(const google::protobuf::Message& m) {
  std::string out;
  JsonMessage(out, m, 0);
  out += "\n";
  return out;
}

std::map<std::string, int64_t> ParseErrorsByFormat(const v1::Diagnosis& d) {
  std::map<std::string, int64_t> out;
  for (const v1::EvidenceGap& g : d.evidence_gaps()) {
    if (!g.format().empty()) ++out[g.format()];
  }
  return out;
}

}  // namespace tunefarm
