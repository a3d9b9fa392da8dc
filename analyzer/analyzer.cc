#include "analyzer/analyzer.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "analyzer/csv.h"
#include "common/params.h"

namespace tunefarm {
namespace {

// A pipe whose ratio stays under this is not what bounds the kernel: when
// neither the compute nor the load pipe reaches it, the time goes to
// scalar work, synchronisation and launch (ratios are fractions 0..1, see
// ascend-formats.md §0.1).
constexpr double kBusyRatio = 0.5;

// Pipe-ratio columns of the PipeUtilization metric group, averaged per op.
constexpr std::string_view kRatioColumns[] = {
    "aic_mac_ratio",    "aic_scalar_ratio",  "aic_mte1_ratio",
    "aic_mte2_ratio",   "aic_mte3_ratio",    "aic_fixpipe_ratio",
    "aiv_vec_ratio",    "aiv_scalar_ratio",  "aiv_mte2_ratio",
    "aiv_mte3_ratio",
};

// Debian's abseil has its own absl::string_view (not std::string_view).
absl::string_view Av(std::string_view s) { return {s.data(), s.size()}; }

enum class FileKind { kKernelDetails, kOpSummary, kOpStatistic, kOther };

std::string_view BaseName(std::string_view path) {
  size_t slash = path.find_last_of("/\\");
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

FileKind Classify(std::string_view path) {
  std::string base = absl::AsciiStrToLower(Av(BaseName(path)));
  if (!absl::EndsWith(base, ".csv")) return FileKind::kOther;
  if (absl::StartsWith(base, "kernel_details")) return FileKind::kKernelDetails;
  if (absl::StartsWith(base, "op_summary")) return FileKind::kOpSummary;
  if (absl::StartsWith(base, "op_statistic")) return FileKind::kOpStatistic;
  return FileKind::kOther;
}

struct Mean {
  double sum = 0;
  int64_t n = 0;
  double value() const { return n == 0 ? 0 : sum / n; }
};

struct OpStats {
  std::string name;
  std::string type;
  std::string core;
  double total_us = 0;
  int64_t count = 0;
  std::map<std::string, Mean> ratios;  // column name -> mean over rows
  std::optional<double> max_block_dim;
};

// A per-task table (op_summary or kernel_details), aggregated per op name.
struct TaskTable {
  std::string file;  // path inside the bundle
  std::string name_col;
  std::string duration_col;
  std::string block_col;  // empty when absent
  std::vector<OpStats> ops;  // largest total first
  double total_us = 0;
  int64_t rows_used = 0;
  int64_t rows_skipped = 0;  // no duration (N/A) or negative
  std::vector<std::string> ragged;  // rows the CSV reader dropped
};

// op_statistic rows: totals per op type.
struct StatTable {
  std::string file;
  std::vector<OpStats> ops;  // largest total first; name == type
  double total_us = 0;
  std::vector<std::string> ragged;
};

void SortOps(std::vector<OpStats>& ops) {
  std::sort(ops.begin(), ops.end(), [](const OpStats& a, const OpStats& b) {
    if (a.total_us != b.total_us) return a.total_us > b.total_us;
    return a.name < b.name;
  });
}

std::string HeaderAt(const CsvTable& t, std::optional<int> col) {
  return col.has_value() ? absl::StrCat(absl::StripAsciiWhitespace(
                               t.header[static_cast<size_t>(*col)]))
                         : std::string();
}

absl::StatusOr<TaskTable> ReadTaskTable(const v1::ProfileFile& file) {
  absl::StatusOr<CsvTable> parsed = ParseCsvSkippingRaggedRows(file.content(), file.path());
  if (!parsed.ok()) return parsed.status();
  const CsvTable& t = *parsed;
  // Aliases across msprof / torch_npu versions (ascend-formats.md §2.3).
  std::optional<int> name_col = t.Column({"Op Name", "Name"});
  std::optional<int> type_col = t.Column({"OP Type", "Type"});
  std::optional<int> core_col = t.Column({"Task Type", "Accelerator Core"});
  std::optional<int> dur_col = t.Column({"Task Duration(us)", "Duration(us)"});
  std::optional<int> block_col = t.Column({"Block Dim", "Block Num"});
  if (!dur_col.has_value()) {
    return absl::InvalidArgumentError(
        "no column 'Task Duration(us)' or 'Duration(us)'");
  }
  if (!name_col.has_value() && !type_col.has_value()) {
    return absl::InvalidArgumentError(
        "no column 'Op Name', 'Name', 'OP Type' or 'Type'");
  }
  std::vector<std::pair<std::string, std::optional<int>>> ratio_cols;
  for (std::string_view name : kRatioColumns) {
    std::optional<int> col = t.Column({name});
    if (col.has_value()) ratio_cols.emplace_back(std::string(name), col);
  }

  TaskTable out;
  out.file = file.path();
  out.ragged = t.skipped_rows;
  out.name_col = HeaderAt(t, name_col.has_value() ? name_col : type_col);
  out.duration_col = HeaderAt(t, dur_col);
  out.block_col = HeaderAt(t, block_col);
  std::map<std::string, OpStats> by_name;
  for (size_t r = 0; r < t.rows.size(); ++r) {
    std::optional<double> dur = t.Number(r, dur_col);
    if (!dur.has_value() || *dur < 0) {
      ++out.rows_skipped;
      continue;
    }
    std::optional<std::string> type = t.Text(r, type_col);
    std::optional<std::string> name = t.Text(r, name_col);
    if (!name.has_value()) name = type;
    std::string key = name.value_or("(unnamed)");
    OpStats& op = by_name[key];
    if (op.count == 0) op.name = key;
    if (op.type.empty() && type.has_value()) op.type = *type;
    if (op.core.empty()) op.core = t.Text(r, core_col).value_or("");
    op.total_us += *dur;
    ++op.count;
    for (const auto& [ratio_name, col] : ratio_cols) {
      std::optional<double> v = t.Number(r, col);
      if (!v.has_value()) continue;
      Mean& m = op.ratios[ratio_name];
      m.sum += *v;
      ++m.n;
    }
    std::optional<double> blocks = t.Number(r, block_col);
    if (blocks.has_value()) {
      op.max_block_dim = std::max(op.max_block_dim.value_or(0), *blocks);
    }
    out.total_us += *dur;
    ++out.rows_used;
  }
  if (out.rows_used == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("no row has a numeric '", out.duration_col, "' (",
                     t.rows.size(), " data rows)"));
  }
  for (auto& [key, op] : by_name) out.ops.push_back(std::move(op));
  SortOps(out.ops);
  return out;
}

absl::StatusOr<StatTable> ReadStatTable(const v1::ProfileFile& file) {
  absl::StatusOr<CsvTable> parsed = ParseCsvSkippingRaggedRows(file.content(), file.path());
  if (!parsed.ok()) return parsed.status();
  const CsvTable& t = *parsed;
  std::optional<int> type_col = t.Column({"OP Type", "Type"});
  std::optional<int> core_col = t.Column({"Core Type"});
  std::optional<int> count_col = t.Column({"Count"});
  std::optional<int> total_col = t.Column({"Total Time(us)"});
  if (!type_col.has_value() || !total_col.has_value()) {
    return absl::InvalidArgumentError(
        "needs columns 'OP Type' and 'Total Time(us)'");
  }
  StatTable out;
  out.file = file.path();
  out.ragged = t.skipped_rows;
  for (size_t r = 0; r < t.rows.size(); ++r) {
    std::optional<double> total = t.Number(r, total_col);
    if (!total.has_value() || *total < 0) continue;
    OpStats op;
    op.name = t.Text(r, type_col).value_or("(unnamed)");
    op.type = op.name;
    op.core = t.Text(r, core_col).value_or("");
    op.total_us = *total;
    op.count = static_cast<int64_t>(t.Number(r, count_col).value_or(0));
    out.total_us += *total;
    out.ops.push_back(std::move(op));
  }
  if (out.ops.empty()) {
    return absl::InvalidArgumentError("no row has a numeric 'Total Time(us)'");
  }
  SortOps(out.ops);
  return out;
}

// What the rules look at: the hotspot's signals, with the columns and file
// they came from so every conclusion can cite them.
struct HotspotSignals {
  const OpStats* op = nullptr;
  std::string file;
  std::string side;  // "aic" (cube core) or "aiv" (vector core)
  std::optional<double> compute;  // aic_mac_ratio or aiv_vec_ratio
  std::optional<double> memory;   // aic_mte2_ratio or aiv_mte2_ratio
  std::string compute_col;
  std::string memory_col;
  std::string bound = "unknown";  // compute | memory | latency | unknown
  std::optional<double> block_dim;
  std::string block_col;
  int cores = 0;  // of the hotspot's core kind; 0 = unknown
  const v1::ProfileBundle* bundle = nullptr;
};

std::optional<double> RatioOf(const OpStats& op, const std::string& col) {
  auto it = op.ratios.find(col);
  if (it == op.ratios.end() || it->second.n == 0) return std::nullopt;
  return it->second.value();
}

std::string BoundOf(std::optional<double> compute,
                    std::optional<double> memory) {
  if (!compute.has_value() && !memory.has_value()) return "unknown";
  double c = compute.value_or(0);
  double m = memory.value_or(0);
  if (std::max(c, m) < kBusyRatio) return "latency";
  return m > c ? "memory" : "compute";
}

HotspotSignals SignalsFor(const OpStats& op, const TaskTable& table,
                          const v1::ProfileBundle& bundle) {
  HotspotSignals s;
  s.op = &op;
  s.file = table.file;
  s.bundle = &bundle;
  s.block_dim = op.max_block_dim;
  s.block_col = table.block_col;
  std::string core = absl::AsciiStrToUpper(op.core);
  bool vector_first =
      absl::StrContains(core, "VECTOR") || absl::StrContains(core, "AIV");
  auto fill = [&](std::string_view side) {
    s.side = std::string(side);
    s.compute_col = side == "aiv" ? "aiv_vec_ratio" : "aic_mac_ratio";
    s.memory_col = side == "aiv" ? "aiv_mte2_ratio" : "aic_mte2_ratio";
    s.compute = RatioOf(op, s.compute_col);
    s.memory = RatioOf(op, s.memory_col);
  };
  fill(vector_first ? "aiv" : "aic");
  // A core type the tools did not name (or a mix op) may carry its work on
  // the other side; an all-zero side says nothing.
  if (s.compute.value_or(0) == 0 && s.memory.value_or(0) == 0) {
    HotspotSignals other = s;
    fill(vector_first ? "aic" : "aiv");
    if (s.compute.value_or(0) == 0 && s.memory.value_or(0) == 0) s = other;
  }
  s.bound = BoundOf(s.compute, s.memory);
  const v1::BoardCapabilities& caps = bundle.capabilities();
  s.cores = s.side == "aiv" ? caps.vector_cores() : caps.cube_cores();
  return s;
}

std::optional<int64_t> CurrentInt(const HotspotSignals& s,
                                  std::string_view param) {
  auto it = s.bundle->params().find(std::string(param));
  if (it == s.bundle->params().end() ||
      it->second.kind_case() != v1::ParamValue::kIntValue) {
    return std::nullopt;
  }
  return it->second.int_value();
}

std::string RatioEvidence(const HotspotSignals& s) {
  int64_t n = 0;
  auto it = s.op->ratios.find(s.memory_col);
  if (it != s.op->ratios.end()) n = it->second.n;
  return absl::StrFormat(
      "%s=%.3f vs %s=%.3f (mean over %d rows of `%s` for %s)", s.memory_col,
      s.memory.value_or(0), s.compute_col, s.compute.value_or(0), n, s.file,
      s.op->name);
}

std::string BlockEvidence(const HotspotSignals& s) {
  return absl::StrFormat(
      "%s=%.0f for %s (`%s`, column %s) on a board with %d %s cores "
      "(bundle capabilities)",
      s.block_col, s.block_dim.value_or(0), s.op->name, s.file, s.block_col,
      s.cores, s.side == "aiv" ? "vector" : "cube");
}

// The diagnosis rules: each turns the hotspot's signals into one parameter
// move. Kept as data so new rules are rows, not new branches.
struct Rule {
  std::string_view id;
  std::string_view parameter;
  std::string_view direction;  // raise | lower | set
  double confidence;
  bool (*applies)(const HotspotSignals&);
  std::string (*evidence)(const HotspotSignals&);
  // The proposed value given the current one (nullopt when unknown).
  std::optional<int64_t> (*target)(const HotspotSignals&,
                                   std::optional<int64_t> current);
};

const Rule kRules[] = {
    {"memory-bound (mte2 > mac/vec): deepen buffering so GM loads overlap "
     "compute",
     "buffer_count", "raise", 0.6,
     [](const HotspotSignals& s) { return s.bound == "memory"; },
     RatioEvidence,
     [](const HotspotSignals&, std::optional<int64_t> current)
         -> std::optional<int64_t> {
       return current.has_value() ? *current * 2 : 2;
     }},
    {"compute-bound with fewer blocks than cores: spread the work over "
     "every core",
     "block_dim", "raise", 0.6,
     [](const HotspotSignals& s) {
       return s.bound == "compute" && s.block_dim.has_value() &&
              s.cores > 0 && *s.block_dim < s.cores;
     },
     BlockEvidence,
     [](const HotspotSignals& s, std::optional<int64_t>)
         -> std::optional<int64_t> { return s.cores; }},
    {"core under-fill: at most half of the cores get a block", "block_dim",
     "raise", 0.4,
     [](const HotspotSignals& s) {
       return s.block_dim.has_value() && *s.block_dim > 0 && s.cores > 0 &&
              *s.block_dim * 2 <= s.cores;
     },
     BlockEvidence,
     [](const HotspotSignals& s, std::optional<int64_t>)
         -> std::optional<int64_t> { return s.cores; }},
};

// At most this many suggestions per diagnosis: one or two moves the tuner
// can try next, not a list to wade through.
constexpr int kMaxSuggestions = 2;

void ApplyRules(const HotspotSignals& s, v1::Diagnosis& d) {
  for (const Rule& rule : kRules) {
    if (d.suggestions_size() >= kMaxSuggestions) break;
    if (!rule.applies(s)) continue;
    bool seen = false;
    for (const v1::Suggestion& have : d.suggestions()) {
      seen = seen || have.parameter() == rule.parameter;
    }
    if (seen) continue;
    v1::Suggestion* sug = d.add_suggestions();
    sug->set_parameter(std::string(rule.parameter));
    sug->set_direction(std::string(rule.direction));
    sug->set_rule(std::string(rule.id));
    sug->set_evidence(rule.evidence(s));
    sug->set_confidence(rule.confidence);
    std::optional<int64_t> value =
        rule.target(s, CurrentInt(s, rule.parameter));
    if (value.has_value()) *sug->mutable_value() = IntParam(*value);
  }
}

std::string Md(std::string_view s) {
  return absl::StrReplaceAll(Av(s), {{"|", "\\|"}, {"\n", " "}});
}

std::string Fmt(double v) { return absl::StrFormat("%.3f", v); }

std::string RenderMarkdown(const v1::Diagnosis& d,
                           const v1::ProfileBundle& bundle,
                           const HotspotSignals* signals,
                           const std::string& hotspot_file,
                           const std::string& hotspot_cols,
                           const StatTable* stats) {
  std::string md = "# Round Performance Analysis\n\n";
  absl::StrAppend(&md, "Bundle `", Md(bundle.bundle_id()), "`, sweep `",
                  Md(bundle.sweep_id()), "` round ", bundle.round_id());
  if (!bundle.board_id().empty()) {
    absl::StrAppend(&md, ", board `", Md(bundle.board_id()), "`");
  }
  std::vector<std::string> kind;
  if (!bundle.board_kind().empty()) kind.push_back(Md(bundle.board_kind()));
  if (!bundle.chip().empty()) kind.push_back(Md(bundle.chip()));
  if (!kind.empty()) absl::StrAppend(&md, " (", absl::StrJoin(kind, ", "), ")");
  if (!bundle.profiler().empty()) {
    absl::StrAppend(&md, ", profiler ", Md(bundle.profiler()));
  }
  absl::StrAppend(&md, bundle.simulated() ? " (simulated)" : "", ".\n\n");

  absl::StrAppend(&md, "## Executive Summary\n\n");
  if (d.hotspots_size() == 0) {
    absl::StrAppend(&md,
                    "No hotspot: the bundle holds no readable profile table "
                    "(see Evidence Gaps).\n\n");
  } else {
    const v1::Hotspot& h = d.hotspots(0);
    absl::StrAppend(
        &md, "- Hotspot: `", Md(h.op_name()), "` (type ", Md(h.op_type()),
        ", core ", Md(h.core_type().empty() ? "unknown" : h.core_type()),
        ") takes ", Fmt(h.duration_us()), " us over ", h.count(),
        " launches, ", absl::StrFormat("%.1f", 100 * h.share()), " % of ",
        Fmt(d.total_device_us()), " us device time",
        d.simulated() ? " (simulated)" : "", ". Source: `",
        Md(hotspot_file), "`, ", hotspot_cols, ".\n");
    if (signals != nullptr && d.bound() != "unknown") {
      absl::StrAppend(&md, "- Bound: ", d.bound(), " — ",
                      Md(RatioEvidence(*signals)), ".\n");
    } else {
      absl::StrAppend(&md,
                      "- Bound: unknown — no pipe ratios for the hotspot.\n");
    }
    for (const v1::Suggestion& s : d.suggestions()) {
      absl::StrAppend(&md, "- Suggestion: ", s.direction(), " `",
                      s.parameter(), "`",
                      s.has_value()
                          ? absl::StrCat(" to ", ParamValueToString(s.value()))
                          : "",
                      " (", Md(s.rule()), ").\n");
    }
    absl::StrAppend(&md, "\n");
  }

  absl::StrAppend(&md, "## Profile Signals\n\n### Hotspots\n\n");
  if (d.hotspots_size() == 0) {
    absl::StrAppend(&md, "None.\n\n");
  } else {
    absl::StrAppend(&md,
                    "| # | Op | Type | Core | Count | Total (us) | Share |\n"
                    "|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < d.hotspots_size(); ++i) {
      const v1::Hotspot& h = d.hotspots(i);
      absl::StrAppend(&md, "| ", i + 1, " | `", Md(h.op_name()), "` | ",
                      Md(h.op_type()), " | ", Md(h.core_type()), " | ",
                      h.count(), " | ", Fmt(h.duration_us()), " | ",
                      absl::StrFormat("%.1f %%", 100 * h.share()), " |\n");
    }
    absl::StrAppend(&md, "\nSource: `", Md(hotspot_file), "`, ",
                    hotspot_cols, ".\n\n");
  }
  if (stats != nullptr && d.hotspots_size() > 0) {
    const std::string& type = d.hotspots(0).op_type();
    for (const OpStats& op : stats->ops) {
      if (op.name != type) continue;
      absl::StrAppend(&md, "Cross-check: `", Md(stats->file),
                      "` (columns OP Type, Count, Total Time(us)) gives type ",
                      Md(type), " ", Fmt(op.total_us), " us over ", op.count,
                      " launches.\n\n");
    }
  }
  if (signals != nullptr && !signals->op->ratios.empty()) {
    absl::StrAppend(&md, "### Pipeline Ratios\n\nHotspot `",
                    Md(signals->op->name), "`, mean over its rows of `",
                    Md(signals->file), "` (fractions 0..1):\n\n",
                    "| Column | Mean | Rows |\n|---|---|---|\n");
    for (const auto& [col, mean] : signals->op->ratios) {
      absl::StrAppend(&md, "| ", col, " | ", Fmt(mean.value()), " | ",
                      mean.n, " |\n");
    }
    absl::StrAppend(&md, "\n");
  }

  absl::StrAppend(&md, "## Optimization Suggestions\n\n");
  if (d.suggestions_size() == 0) absl::StrAppend(&md, "None.\n\n");
  for (const v1::Suggestion& s : d.suggestions()) {
    absl::StrAppend(&md, "- ", s.direction(), " `", s.parameter(), "`",
                    s.has_value()
                        ? absl::StrCat(" to ", ParamValueToString(s.value()))
                        : "",
                    ": ", Md(s.rule()), ". Evidence: ", Md(s.evidence()),
                    ". Confidence ", absl::StrFormat("%.1f", s.confidence()),
                    ".\n");
  }
  if (d.suggestions_size() > 0) absl::StrAppend(&md, "\n");

  absl::StrAppend(&md, "## Evidence Gaps\n\n");
  if (d.evidence_gaps_size() == 0) absl::StrAppend(&md, "None.\n");
  for (const v1::EvidenceGap& g : d.evidence_gaps()) {
    absl::StrAppend(&md, "- `", Md(g.file()), "`: ", Md(g.reason()), "\n");
  }
  return md;
}

void AddGap(v1::Diagnosis& d, std::string file, std::string reason) {
  v1::EvidenceGap* gap = d.add_evidence_gaps();
  gap->set_file(std::move(file));
  gap->set_reason(std::move(reason));
}

// One gap per file with dropped rows: the numbers from it are partial.
void AddRaggedGap(v1::Diagnosis& d, const std::string& file,
                  const std::vector<std::string>& ragged) {
  if (ragged.empty()) return;
  constexpr size_t kShown = 3;
  std::vector<std::string> shown(
      ragged.begin(), ragged.begin() + std::min(kShown, ragged.size()));
  AddGap(d, file,
         absl::StrCat(ragged.size(), " malformed row(s) skipped, totals ",
                      "exclude them: ", absl::StrJoin(shown, "; "),
                      ragged.size() > kShown ? "; ..." : ""));
}

void FillHotspots(const std::vector<OpStats>& ops, double total_us,
                  v1::Diagnosis& d) {
  d.set_total_device_us(total_us);
  for (const OpStats& op : ops) {
    if (d.hotspots_size() >= kMaxHotspots) break;
    v1::Hotspot* h = d.add_hotspots();
    h->set_op_name(op.name);
    h->set_op_type(op.type);
    h->set_core_type(op.core);
    h->set_duration_us(op.total_us);
    h->set_share(total_us > 0 ? op.total_us / total_us : 0);
    h->set_count(op.count);
  }
}

// Newest first: profiler file names carry a time stamp
// (op_summary_20260511093035.csv), so the larger name is the later run.
std::vector<const v1::ProfileFile*> FilesOf(const v1::ProfileBundle& bundle,
                                            FileKind kind) {
  std::vector<const v1::ProfileFile*> out;
  for (const v1::ProfileFile& f : bundle.files()) {
    if (Classify(f.path()) == kind) out.push_back(&f);
  }
  std::sort(out.begin(), out.end(),
            [](const v1::ProfileFile* a, const v1::ProfileFile* b) {
              std::string_view na = BaseName(a->path());
              std::string_view nb = BaseName(b->path());
              if (na != nb) return na > nb;
              return a->path() > b->path();
            });
  return out;
}

}  // namespace

v1::Diagnosis Analyze(const v1::ProfileBundle& bundle) {
  v1::Diagnosis d;
  d.set_bundle_id(bundle.bundle_id());
  d.set_sweep_id(bundle.sweep_id());
  d.set_round_id(bundle.round_id());
  d.set_epoch(bundle.epoch());
  d.set_simulated(bundle.simulated());
  d.set_bound("unknown");

  // Per-task tables: torch_npu's kernel_details first (torch_npu writes an
  // op_summary too), the first one that reads wins.
  std::vector<const v1::ProfileFile*> task_files =
      FilesOf(bundle, FileKind::kKernelDetails);
  for (const v1::ProfileFile* f : FilesOf(bundle, FileKind::kOpSummary)) {
    task_files.push_back(f);
  }
  std::optional<TaskTable> tasks;
  for (const v1::ProfileFile* f : task_files) {
    absl::StatusOr<TaskTable> t = ReadTaskTable(*f);
    if (t.ok()) {
      AddRaggedGap(d, t->file, t->ragged);
      tasks = *std::move(t);
      break;
    }
    AddGap(d, f->path(), std::string(t.status().message()));
  }
  if (task_files.empty()) {
    AddGap(d, "op_summary*.csv",
           "no op_summary*.csv or kernel_details.csv in bundle");
  }

  std::optional<StatTable> stats;
  for (const v1::ProfileFile* f : FilesOf(bundle, FileKind::kOpStatistic)) {
    absl::StatusOr<StatTable> t = ReadStatTable(*f);
    if (t.ok()) {
      AddRaggedGap(d, t->file, t->ragged);
      stats = *std::move(t);
      break;
    }
    AddGap(d, f->path(), std::string(t.status().message()));
  }

  std::optional<HotspotSignals> signals;
  std::string hotspot_file;
  std::string hotspot_cols;
  if (tasks.has_value()) {
    FillHotspots(tasks->ops, tasks->total_us, d);
    hotspot_file = tasks->file;
    hotspot_cols = absl::StrCat("column ", tasks->duration_col, " summed by ",
                                tasks->name_col, " over ", tasks->rows_used,
                                " rows");
    if (tasks->rows_skipped > 0) {
      absl::StrAppend(&hotspot_cols, " (", tasks->rows_skipped,
                      " rows without a duration skipped)");
    }
    signals = SignalsFor(tasks->ops.front(), *tasks, bundle);
    d.set_bound(signals->bound);
    if (signals->bound == "unknown") {
      AddGap(d, tasks->file,
             absl::StrCat("no pipe ratios (", signals->compute_col, ", ",
                          signals->memory_col, ") for hotspot ",
                          tasks->ops.front().name,
                          ": bound not determined"));
    }
    ApplyRules(*signals, d);
  } else if (stats.has_value()) {
    FillHotspots(stats->ops, stats->total_us, d);
    hotspot_file = stats->file;
    hotspot_cols = "columns OP Type, Count, Total Time(us) (no per-task table: "
                   "no pipe ratios)";
  }

  d.set_perf_analysis_md(RenderMarkdown(
      d, bundle, signals.has_value() ? &*signals : nullptr, hotspot_file,
      hotspot_cols, stats.has_value() && tasks.has_value() ? &*stats : nullptr));
  return d;
}

}  // namespace tunefarm
