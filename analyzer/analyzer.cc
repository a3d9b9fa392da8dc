#include "analyzer/analyzer.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
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

std::optional<Cite> MetricCite(const TaskTable& t, const OpAggregate& op,
                               std::initializer_list<std::string_view> cols) {
  for (std::string_view c : cols) {
    auto it = op.metrics.find(std::string(c));
    if (it != op.metrics.end() && it->second.n > 0) {
      return Cite{t.file, std::string(c), it->second.mean()};
    }
  }
  return std::nullopt;
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
  std::string core = absl::AsciiStrToUpper(op.core);
  bool vector_first =
      absl::StrContains(core, "VECTOR") || absl::StrContains(core, "AIV");
  auto fill = [&](bool aiv) {
    s.side = aiv ? "aiv" : "aic";
    s.compute = aiv ? MetricCite(t, op,
                                 {"aiv_vec_ratio", "aiv_vec_fp16_ratio",
                                  "aiv_vec_fp32_ratio"})
                    : MetricCite(t, op,
                                 {"aic_mac_ratio", "aic_mac_fp16_ratio",
                                  "aic_mac_int8_ratio"});
    s.memory = aiv ? MetricCite(t, op, {"aiv_mte2_ratio"})
                   : MetricCite(t, op, {"aic_mte2_ratio"});
    s.scalar = aiv ? MetricCite(t, op, {"aiv_scalar_ratio"})
                   : MetricCite(t, op, {"aic_scalar_ratio"});
    s.mte3 = aiv ? MetricCite(t, op, {"aiv_mte3_ratio"})
                 : MetricCite(t, op, {"aic_mte3_ratio"});
    s.mte1 = aiv ? std::nullopt : MetricCite(t, op, {"aic_mte1_ratio"});
    s.fixpipe = aiv ? std::nullopt : MetricCite(t, op, {"aic_fixpipe_ratio"});
  };
  auto zero = [](const std::optional<Cite>& c) { return !c || c->value == 0; };
  fill(vector_first);
  // A core type the tools did not name (or a mix op) may carry its work on
  // the other side; an all-zero side says nothing.
  if (zero(s.compute) && zero(s.memory)) {
    Signals keep = s;
    fill(!vector_first);
    if (zero(s.compute) && zero(s.memory)) s = keep;
  }
  s.occupancy = MetricCite(t, op, {"cube_utilization(%)"});
  if (s.occupancy) s.occupancy->column = "cube_utilization(%)/100";
  if (!t.block_col.empty() && op.max_block_dim > 0) {
    s.block_dim = Cite{t.file, t.block_col, op.max_block_dim};
  }
  if (!t.wait_col.empty() && op.total_us > 0) {
    s.wait = Cite{t.file, absl::StrCat(t.wait_col, "/", t.duration_col),
                  op.wait_us / op.total_us};
  }
  const v1::BoardCapabilities& caps = bundle.capabilities();
  if (s.side == "aiv") {
    s.cores = caps.vector_cores() > 0 ? caps.vector_cores()
                                      : (chip ? chip->vector_cores : 0);
  } else {
    s.cores = caps.cube_cores() > 0 ? caps.cube_cores()
                                    : (chip ? chip->cube_cores : 0);
  }
}

void FromNcu(const NcuReport& r, Signals& s) {
  const NcuKernel* best = nullptr;
  double best_us = -1;
  for (const NcuKernel& k : r.kernels) {
    const NcuMetric* d = k.Find({"gpu__time_duration.sum", "Duration"});
    double us = d ? d->value : 0;
    if (us > best_us) {
      best = &k;
      best_us = us;
    }
  }
  if (best == nullptr) return;
  const NcuKernel& k = *best;
  s.side = "gpu";
  s.hotspot = k.name;
  s.hotspot_type = k.name;
  s.hotspot_core = k.cc.empty() ? "" : absl::StrCat("CC ", k.cc);
  s.hotspot_us = std::max(0.0, best_us);
  s.hotspot_count = 1;
  double total = 0;
  for (const NcuKernel& other : r.kernels) {
    const NcuMetric* d = other.Find({"gpu__time_duration.sum", "Duration"});
    total += d ? d->value : 0;
  }
  s.hotspot_share = total > 0 ? s.hotspot_us / total : 1;
  auto cite = [&](std::initializer_list<std::string_view> names)
      -> std::optional<Cite> {
    for (std::string_view n : names) {
      const NcuMetric* m = k.Find({n});
      if (m != nullptr) return Cite{r.file, std::string(n), m->value};
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
    const NcuKernel& k = p.ncu->kernels.front();
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

// Top op total from a profile, for the parent comparison.
std::optional<double> OpTotal(const ProfileData& p, const std::string& name,
                              double* total) {
  if (p.tasks.has_value()) {
    *total = p.tasks->total_us;
    for (const OpAggregate& op : p.tasks->ops) {
      if (op.name == name) return op.total_us;
    }
  } else if (p.op_statistic.has_value()) {
    *total = p.op_statistic->total_us;
    for (const OpStatRow& r : p.op_statistic->rows) {
      if (r.type == name) return r.total_us;
    }
  }
  return std::nullopt;
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
    FromTaskTable(t, *compute.front(), compute_us, bundle, chip, s);
  } else if (p.op_statistic.has_value()) {
    const OpStatistic& o = *p.op_statistic;
    hot_file = o.file;
    hot_col = "Total Time(us)";
    d.set_total_device_us(o.total_us);
    for (const OpStatRow& r : o.rows) {
      add_hotspot(r.type, r.type, r.core, r.total_us, r.count, o.total_us, 0);
    }
    s.hotspot = o.rows.front().type;
    s.hotspot_type = s.hotspot;
    s.hotspot_core = o.rows.front().core;
    s.hotspot_us = o.rows.front().total_us;
    s.hotspot_count = o.rows.front().count;
    s.hotspot_share = o.total_us > 0 ? s.hotspot_us / o.total_us : 0;
  } else if (p.ncu.has_value()) {
    FromNcu(*p.ncu, s);
    hot_file = p.ncu->file;
    hot_col = "gpu__time_duration.sum";
    double total = 0;
    std::vector<const NcuKernel*> ks;
    for (const NcuKernel& k : p.ncu->kernels) ks.push_back(&k);
    auto dur = [](const NcuKernel* k) {
      const NcuMetric* m = k->Find({"gpu__time_duration.sum", "Duration"});
      return m ? m->value : 0.0;
    };
    std::stable_sort(ks.begin(), ks.end(),
                     [&](auto* a, auto* b) { return dur(a) > dur(b); });
    for (const NcuKernel* k : ks) total += dur(k);
    d.set_total_device_us(total);
    for (const NcuKernel* k : ks) {
      add_hotspot(k->name, k->name, k->cc.empty() ? "" : "CC " + k->cc, dur(k),
                  1, total, 0);
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
      add_hotspot(n, type, p.pypto.has_value() ? "" : "device", st.sum, st.n,
                  total, 0);
    }
    if (!v.empty()) {
      s.hotspot = v.front().first;
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
  if (p.tasks.has_value()) tl->set_total_wait_us(p.tasks->total_wait_us);
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

  // Host API.
  if (p.api_statistic.has_value()) {
    const ApiStatistic& a = *p.api_statistic;
    v1::HostApiSignals* h = d.mutable_host_api();
    h->set_file(a.file);
    h->set_total_us(a.total_us);
    double launch = 0;
    for (const ApiRow& r : a.rows) {
      bool lr = IsLaunchRelatedApi(r.name);
      if (lr) launch += r.time_us;
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
    if (a.total_us > 0) {
      s.host_launch =
          Cite{a.file, "Time(us) launch-related / total", launch / a.total_us};
    }
  }

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
    const OpAggregate& op = *hot;
    for (const auto& [col, st] : op.metrics) {
      v1::PipelineRatio* r = d.add_pipeline_ratios();
      r->set_column(col == "cube_utilization(%)" ? "cube_utilization(%)/100"
                                                 : col);
      r->set_mean(st.mean());
      r->set_min(st.min);
      r->set_max(st.max);
      r->set_rows(st.n);
      r->set_file(p.tasks->file);
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
    bool seen = false;
    for (const v1::Suggestion& have : d.suggestions()) {
      seen = seen || have.parameter() == f->move->parameter;
    }
    if (seen) continue;
    v1::Suggestion* sug = d.add_suggestions();
    sug->set_parameter(f->move->parameter);
    sug->set_direction(f->move->direction);
    if (f->move->value.has_value()) {
      *sug->mutable_value() = IntParam(*f->move->value);
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
    if (std::optional<double> us = OpTotal(pp, s.hotspot, &total)) {
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

std::map<std::string, int64_t> ParseErrorsByFormat(const v1::Diagnosis& d) {
  std::map<std::string, int64_t> out;
  for (const v1::EvidenceGap& g : d.evidence_gaps()) {
    if (!g.format().empty()) ++out[g.format()];
  }
  return out;
}

}  // namespace tunefarm
