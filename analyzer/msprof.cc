// Parsers for the Ascend CSV tables msprof writes under
// mindstudio_profiler_output/ (op_summary, op_statistic, task_time,
// api_statistic). torch_npu writes the same op_statistic / api_statistic
// layouts and a kernel_details that is op_summary under other names, so the
// task-table reader here serves both (aliases from ascend-formats.md §2.3).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "analyzer/csv.h"
#include "analyzer/profile.h"

namespace tunefarm {
namespace {

absl::string_view Av(std::string_view s) { return {s.data(), s.size()}; }

absl::Status Bad(std::string_view file, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(Av(file), ": ", Av(what)));
}

std::string ColName(const std::vector<std::string>& header,
                    std::optional<int> col) {
  if (!col.has_value()) return "";
  return std::string(
      absl::StripAsciiWhitespace(header[static_cast<size_t>(*col)]));
}

std::optional<double> Num(const std::vector<std::string_view>& cells,
                          std::optional<int> col) {
  if (!col.has_value() || static_cast<size_t>(*col) >= cells.size()) {
    return std::nullopt;
  }
  return ParseNumber(cells[static_cast<size_t>(*col)]);
}

std::string_view Txt(const std::vector<std::string_view>& cells,
                     std::optional<int> col) {
  if (!col.has_value() || static_cast<size_t>(*col) >= cells.size()) {
    return {};
  }
  return CleanCell(cells[static_cast<size_t>(*col)]);
}

// Columns that carry a PMU metric worth aggregating per op.
bool IsMetricColumn(std::string_view h) {
  std::string l = absl::AsciiStrToLower(Av(h));
  if (absl::EndsWith(l, "_time(us)") || absl::EndsWith(l, "_cycles")) {
    return false;
  }
  return absl::EndsWith(l, "_ratio") || absl::StrContains(l, "(gb/s)") ||
         absl::EndsWith(l, "_fops") || absl::EndsWith(l, "_rate") ||
         absl::StrContains(l, "cache_hit") ||
         absl::StrContains(l, "miss_allocate") ||
         absl::StrContains(l, "(kb)") || l == "memory_bound" ||
         l == "cube_utilization(%)";
}

std::string MetricGroupOf(const std::vector<std::string>& header) {
  auto has = [&](std::string_view needle) {
    for (const std::string& h : header) {
      if (absl::StrContains(absl::AsciiStrToLower(h), Av(needle))) return true;
    }
    return false;
  };
  if (has("mac_ratio") || has("vec_ratio") || has("mte2_ratio")) {
    return "PipeUtilization";
  }
  if (has("_fp16_ratio") || has("_fops")) return "ArithmeticUtilization";
  if (has("l0a_read_bw")) return "MemoryL0";
  if (has("ub_read_bw_vector")) return "MemoryUB";
  if (has("main_mem_read_bw")) return "Memory";
  if (has("cflt_ratio")) return "ResourceConflictRatio";
  if (has("cache_hit")) return "L2Cache";
  if (has("_datas(kb)")) return "MemoryAccess";
  return "None";
}

template <typename T>
void SortByTotal(std::vector<T>& v) {
  std::sort(v.begin(), v.end(), [](const T& a, const T& b) {
    if (a.total_us != b.total_us) return a.total_us > b.total_us;
    return a.name < b.name;
  });
}

// Reads the header line of `reader`, or a clear error.
absl::StatusOr<std::vector<std::string>> ReadHeader(CsvReader& reader,
                                                    std::string_view file) {
  std::vector<std::string_view> cells;
  absl::StatusOr<bool> more = reader.Next(cells, file);
  if (!more.ok()) return more.status();
  if (!*more) return Bad(file, "empty file (no header line)");
  return std::vector<std::string>(cells.begin(), cells.end());
}

}  // namespace

namespace {

// `scale` turns the interval unit into µs.
template <typename T>
IntervalSummary Summarize(std::vector<std::pair<T, T>> iv, double scale) {
  IntervalSummary s;
  s.intervals = static_cast<int64_t>(iv.size());
  if (iv.empty()) return s;
  std::sort(iv.begin(), iv.end());
  T cur_start = iv[0].first;
  T cur_end = iv[0].second;
  T first = cur_start;
  T last = cur_end;
  T busy = 0;
  T max_gap = 0;
  for (size_t i = 1; i < iv.size(); ++i) {
    const auto& [a, b] = iv[i];
    last = std::max(last, b);
    if (a < cur_end) ++s.overlaps;
    if (a <= cur_end) {
      cur_end = std::max(cur_end, b);
      continue;
    }
    busy += cur_end - cur_start;
    ++s.gaps;
    max_gap = std::max(max_gap, a - cur_end);
    cur_start = a;
    cur_end = b;
  }
  busy += cur_end - cur_start;
  s.busy_us = static_cast<double>(busy) * scale;
  s.max_gap_us = static_cast<double>(max_gap) * scale;
  s.window_us = static_cast<double>(last - first) * scale;
  return s;
}

}  // namespace

IntervalSummary SummarizeIntervals(std::vector<std::pair<double, double>> iv) {
  return Summarize(std::move(iv), 1.0);
}

IntervalSummary SummarizeIntervalsNs(
    std::vector<std::pair<int64_t, int64_t>> iv) {
  return Summarize(std::move(iv), 1e-3);
}

bool IsCommunicationOp(const OpAggregate& op) {
  std::string core = absl::AsciiStrToUpper(op.core);
  if (absl::StrContains(core, "HCCL") ||
      absl::StrContains(core, "COMMUNICATION")) {
    return true;
  }
  for (const std::string* s : {&op.name, &op.type}) {
    std::string l = absl::AsciiStrToLower(*s);
    if (absl::StartsWith(l, "hcom") || absl::StrContains(l, "hccl")) {
      return true;
    }
  }
  return false;
}

namespace {

// Column positions of a task table, found once from its header.
struct TaskColumns {
  std::optional<int> name, type, core, dur, start, wait, block, mix_block;
  std::optional<int> aic_time, aiv_time, aic_cycles, aiv_cycles;
  std::vector<std::pair<int, std::string>> metrics;  // position, header
  std::vector<bool> main_memory;  // per metric: a *main_memory_datas column
  size_t width = 0;
};

// What one range of a task table's rows adds up to. Ops are in order of
// first appearance, so ranges merge in file order into the same result a
// single pass gives.
struct TaskRange {
  // One entry per (name, core type), metrics not yet filled.
  std::vector<OpAggregate> ops;
  // name -> (core, slot) per core type it ran on; a name has one or two,
  // so the per-row lookup hashes the name alone (no key built per row).
  absl::flat_hash_map<std::string, std::vector<std::pair<std::string, size_t>>>
      index;
  // Per op, one Stat per metric column, by position: a map lookup per cell
  // was most of the parse time on large tables.
  std::vector<std::vector<Stat>> op_stats;
  std::vector<std::pair<int64_t, int64_t>> intervals;  // ns
  std::vector<std::pair<int, size_t>> ragged;          // range line, cell count
  int64_t rows_used = 0;
  int64_t rows_skipped = 0;
  double total_us = 0;
  double total_wait_us = 0;
  double main_memory_kb = 0;
  // Where the range's first record starts, and where the first record it
  // left to the next range starts (npos: none / the end of the text).
  size_t first_record = std::string_view::npos;
  size_t next_record = std::string_view::npos;
  absl::Status status;
};

// Reads the records that start in [reader's position, limit) into `out`.
void ReadTaskRange(CsvReader reader, size_t limit, const TaskColumns& c,
                   std::string_view file, TaskRange& out) {
  std::vector<std::string_view> cells;
  while (true) {
    absl::StatusOr<bool> more = reader.Next(cells, file);
    if (!more.ok()) {
      out.status = more.status();
      return;
    }
    if (!*more) return;
    if (reader.record_start() >= limit) {
      out.next_record = reader.record_start();
      return;
    }
    if (out.first_record == std::string_view::npos) {
      out.first_record = reader.record_start();
    }
    if (cells.size() != c.width) {
      out.ragged.emplace_back(reader.line(), cells.size());
      continue;
    }
    std::optional<double> dur = Num(cells, c.dur);
    if (!dur.has_value() || *dur < 0) {
      ++out.rows_skipped;
      continue;
    }
    std::string_view name = Txt(cells, c.name);
    std::string_view type = Txt(cells, c.type);
    std::string_view core = Txt(cells, c.core);
    if (name.empty()) name = type;
    if (name.empty()) name = "(unnamed)";
    size_t slot = std::string_view::npos;
    auto it = out.index.find(Av(name));
    if (it != out.index.end()) {
      for (const auto& [have, at] : it->second) {
        if (have == core) slot = at;
      }
    }
    if (slot == std::string_view::npos) {
      slot = out.ops.size();
      if (it == out.index.end()) {
        it = out.index.try_emplace(std::string(name)).first;
      }
      it->second.emplace_back(std::string(core), slot);
      OpAggregate op;
      op.name = std::string(name);
      op.type = std::string(type);
      op.core = std::string(core);
      op.has_aic_time = c.aic_time.has_value();
      op.has_aiv_time = c.aiv_time.has_value();
      op.has_aic_cycles = c.aic_cycles.has_value();
      op.has_aiv_cycles = c.aiv_cycles.has_value();
      out.ops.push_back(std::move(op));
      out.op_stats.emplace_back(c.metrics.size());
    }
    OpAggregate& op = out.ops[slot];
    op.total_us += *dur;
    ++op.count;
    if (std::optional<double> b = Num(cells, c.block)) {
      op.max_block_dim = std::max(op.max_block_dim, *b);
    }
    if (std::optional<double> b = Num(cells, c.mix_block)) {
      op.max_mix_block_dim = std::max(op.max_mix_block_dim, *b);
    }
    if (std::optional<double> w = Num(cells, c.wait); w && *w >= 0) {
      op.wait_us += *w;
      out.total_wait_us += *w;
    }
    if (std::optional<double> v = Num(cells, c.aic_time)) {
      op.aicore_time_us += *v;
    }
    if (std::optional<double> v = Num(cells, c.aiv_time)) op.aiv_time_us += *v;
    if (std::optional<double> v = Num(cells, c.aic_cycles)) op.aic_cycles += *v;
    if (std::optional<double> v = Num(cells, c.aiv_cycles)) op.aiv_cycles += *v;
    std::vector<Stat>& stats = out.op_stats[slot];
    for (size_t m = 0; m < c.metrics.size(); ++m) {
      std::optional<double> v =
          ParseNumber(cells[static_cast<size_t>(c.metrics[m].first)]);
      if (v.has_value()) {
        stats[m].Add(*v, *dur);
        if (c.main_memory[m]) out.main_memory_kb += *v;
      }
    }
    if (c.start.has_value()) {
      if (std::optional<int64_t> st =
              ParseMicrosAsNanos(cells[static_cast<size_t>(*c.start)])) {
        out.intervals.emplace_back(
            *st, *st + static_cast<int64_t>(std::llround(*dur * 1000)));
      }
    }
    out.total_us += *dur;
    ++out.rows_used;
  }
}

void MergeStat(Stat& into, const Stat& from) {
  if (from.n == 0) return;
  if (into.n == 0 || from.min < into.min) into.min = from.min;
  if (into.n == 0 || from.max > into.max) into.max = from.max;
  into.sum += from.sum;
  into.n += from.n;
  into.wsum += from.wsum;
  into.wt += from.wt;
}

// Adds `src`'s sums into `dst` (same op, or a slice into its op).
void AddSums(OpAggregate& dst, const OpAggregate& src) {
  dst.total_us += src.total_us;
  dst.count += src.count;
  dst.max_block_dim = std::max(dst.max_block_dim, src.max_block_dim);
  dst.max_mix_block_dim =
      std::max(dst.max_mix_block_dim, src.max_mix_block_dim);
  dst.wait_us += src.wait_us;
  dst.aicore_time_us += src.aicore_time_us;
  dst.aiv_time_us += src.aiv_time_us;
  dst.aic_cycles += src.aic_cycles;
  dst.aiv_cycles += src.aiv_cycles;
  dst.has_aic_time = dst.has_aic_time || src.has_aic_time;
  dst.has_aiv_time = dst.has_aiv_time || src.has_aiv_time;
  dst.has_aic_cycles = dst.has_aic_cycles || src.has_aic_cycles;
  dst.has_aiv_cycles = dst.has_aiv_cycles || src.has_aiv_cycles;
}

// Appends `from` (the next range in file order) to `into`.
void MergeRange(TaskRange& into, TaskRange&& from, int line_offset) {
  for (size_t i = 0; i < from.ops.size(); ++i) {
    OpAggregate& src = from.ops[i];
    std::vector<std::pair<std::string, size_t>>& cores = into.index[src.name];
    size_t at = std::string_view::npos;
    for (const auto& [have, slot] : cores) {
      if (have == src.core) at = slot;
    }
    if (at == std::string_view::npos) {
      cores.emplace_back(src.core, into.ops.size());
      into.ops.push_back(std::move(src));
      into.op_stats.push_back(std::move(from.op_stats[i]));
      continue;
    }
    OpAggregate& dst = into.ops[at];
    AddSums(dst, src);
    std::vector<Stat>& stats = into.op_stats[at];
    for (size_t m = 0; m < stats.size(); ++m) {
      MergeStat(stats[m], from.op_stats[i][m]);
    }
  }
  into.intervals.insert(into.intervals.end(), from.intervals.begin(),
                        from.intervals.end());
  for (const auto& [line, cells] : from.ragged) {
    into.ragged.emplace_back(line + line_offset, cells);
  }
  into.rows_used += from.rows_used;
  into.rows_skipped += from.rows_skipped;
  into.total_us += from.total_us;
  into.total_wait_us += from.total_wait_us;
  into.main_memory_kb += from.main_memory_kb;
}

// Reads every data record after the header, in blocks of about
// options.block_bytes cut at line ends, on up to options.threads threads,
// and adds the blocks up in file order. The cuts depend only on the text,
// so the sums (and so the ranking of ops with equal times) are the same
// bit for bit on any number of threads. A cut can land inside a quoted cell
// that spans lines: that shows as neighbouring blocks whose record starts
// do not meet (or a block that fails to parse), and then the table is read
// again as one block, so the result never depends on the guess.
TaskRange ReadTaskRows(const CsvReader& after_header, const TaskColumns& c,
                       std::string_view file, const ParseOptions& options) {
  const std::string_view text = after_header.text();
  const size_t data_begin = after_header.position();
  const size_t n = text.size();
  const size_t block = std::max<size_t>(1, options.block_bytes);
  std::vector<size_t> cuts = {data_begin};
  while (n - cuts.back() > block) {
    size_t nl = text.find('\n', cuts.back() + block);
    if (nl == std::string_view::npos || nl + 1 >= n) break;
    cuts.push_back(nl + 1);
  }
  cuts.push_back(n + 1);  // the last block reads to the end
  auto whole = [&] {
    TaskRange r;
    ReadTaskRange(after_header, n + 1, c, file, r);
    return r;
  };
  const size_t blocks = cuts.size() - 1;
  if (blocks == 1) return whole();

  std::vector<TaskRange> ranges(blocks);
  auto read_block = [&](size_t k) {
    ReadTaskRange(k == 0 ? after_header : after_header.At(cuts[k]), cuts[k + 1],
                  c, file, ranges[k]);
  };
  int threads = options.threads > 0
                    ? options.threads
                    : static_cast<int>(std::thread::hardware_concurrency());
  threads = static_cast<int>(
      std::clamp<size_t>(static_cast<size_t>(std::max(threads, 1)), 1,
                         std::min<size_t>(blocks, 16)));
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t k = next++; k < blocks; k = next++) read_block(k);
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();

  for (size_t k = 0; k < blocks; ++k) {
    if (!ranges[k].status.ok() ||
        (k > 0 && ranges[k - 1].next_record != ranges[k].first_record)) {
      return whole();
    }
  }
  TaskRange all = std::move(ranges[0]);
  for (size_t k = 1; k < blocks; ++k) {
    // Block k counts lines from 1 at its cut; the line ends before the cut
    // are counted only when a ragged-row message needs the file's line.
    int offset = 0;
    if (!ranges[k].ragged.empty()) {
      offset = static_cast<int>(
          std::count(text.begin(), text.begin() + cuts[k], '\n'));
    }
    MergeRange(all, std::move(ranges[k]), offset);
  }
  return all;
}

}  // namespace

absl::StatusOr<TaskTable> ParseTaskTable(std::string_view text,
                                         std::string_view file,
                                         const ParseOptions& options) {
  CsvReader reader(text);
  absl::StatusOr<std::vector<std::string>> header = ReadHeader(reader, file);
  if (!header.ok()) return header.status();
  const std::vector<std::string>& h = *header;
  TaskColumns c;
  c.width = h.size();
  c.name = FindColumn(h, {"Op Name", "Name"});
  c.type = FindColumn(h, {"OP Type", "Type"});
  c.core = FindColumn(h, {"Task Type", "Accelerator Core"});
  c.dur = FindColumn(h, {"Task Duration(us)", "Duration(us)"});
  c.start = FindColumn(h, {"Task Start Time(us)", "Start Time(us)"});
  c.wait = FindColumn(h, {"Task Wait Time(us)", "Wait Time(us)"});
  // torch_npu 2.10 / CANN 9 write Block Num / Mix Block Num.
  c.block = FindColumn(h, {"Block Dim", "Block Num"});
  c.mix_block = FindColumn(h, {"Mix Block Dim", "Mix Block Num"});
  c.aic_time = FindColumn(h, {"aicore_time(us)", "aic_time(us)"});
  c.aiv_time = FindColumn(h, {"aiv_time(us)"});
  c.aic_cycles = FindColumn(h, {"aic_total_cycles"});
  c.aiv_cycles = FindColumn(h, {"aiv_total_cycles"});
  if (!c.dur.has_value()) {
    return Bad(file, "no column 'Task Duration(us)' or 'Duration(us)'");
  }
  if (!c.name.has_value() && !c.type.has_value()) {
    return Bad(file, "no column 'Op Name', 'Name', 'OP Type' or 'Type'");
  }
  for (size_t i = 0; i < h.size(); ++i) {
    std::string name(absl::StripAsciiWhitespace(h[i]));
    if (IsMetricColumn(name)) {
      c.main_memory.push_back(absl::StrContains(name, "main_memory_datas"));
      c.metrics.emplace_back(static_cast<int>(i), name);
    }
  }
  const std::vector<std::pair<int, std::string>>& metric_cols = c.metrics;

  TaskTable out;
  out.file = std::string(file);
  std::string base = absl::AsciiStrToLower(Av(file));
  bool kernel_details = absl::StrContains(base, "kernel_details") ||
                        (!FindColumn(h, {"Op Name"}).has_value() &&
                         FindColumn(h, {"Accelerator Core"}).has_value());
  out.kind = kernel_details ? "kernel_details" : "op_summary";
  out.format = kernel_details ? "torch_npu" : "msprof";
  out.metric_group = MetricGroupOf(h);
  out.name_col = ColName(h, c.name.has_value() ? c.name : c.type);
  out.type_col = ColName(h, c.type);
  out.duration_col = ColName(h, c.dur);
  out.wait_col = ColName(h, c.wait);
  out.block_col = ColName(h, c.block);

  TaskRange rows = ReadTaskRows(reader, c, file, options);
  if (!rows.status.ok()) return rows.status;
  for (const auto& [line, cells] : rows.ragged) {
    out.ragged.push_back(absl::StrCat(Av(file), ":", line, ": row has ", cells,
                                      " cells, the header has ", c.width));
  }
  out.rows_used = rows.rows_used;
  out.rows_skipped = rows.rows_skipped;
  out.total_us = rows.total_us;
  out.total_wait_us = rows.total_wait_us;
  out.main_memory_kb = rows.main_memory_kb;
  if (out.rows_used == 0) {
    return Bad(
        file,
        absl::StrCat("no data row has a numeric '", out.duration_col, "' (",
                     out.rows_skipped + out.ragged.size(), " rows skipped)"));
  }
  // Ratio columns are fractions in every real export; a table whose ratios
  // exceed 1 was written on a percent scale (synthetic data, old tools):
  // normalise it rather than let 0..1 thresholds misfire.
  std::vector<double> scale(metric_cols.size(), 1.0);
  for (size_t m = 0; m < metric_cols.size(); ++m) {
    const std::string& col_name = metric_cols[m].second;
    if (col_name == "cube_utilization(%)") {
      scale[m] = 0.01;  // occupancy in percent: kept as a fraction
      continue;
    }
    if (!absl::EndsWith(col_name, "_ratio")) continue;
    double max = 0;
    for (const std::vector<Stat>& st : rows.op_stats) {
      if (st[m].n > 0) max = std::max(max, st[m].max);
    }
    if (max > 1.5) scale[m] = 0.01;
  }
  // Slices (name, core) -> ops by name, in order of first appearance.
  absl::flat_hash_map<std::string, size_t> by_name;
  for (size_t i = 0; i < rows.ops.size(); ++i) {
    OpAggregate& slice = rows.ops[i];
    for (size_t m = 0; m < metric_cols.size(); ++m) {
      Stat st = rows.op_stats[i][m];
      if (st.n == 0) continue;
      st.sum *= scale[m];
      st.min *= scale[m];
      st.max *= scale[m];
      st.wsum *= scale[m];
      slice.metrics.emplace(metric_cols[m].second, st);
    }
    auto [it, fresh] = by_name.try_emplace(slice.name, out.ops.size());
    if (fresh) {
      OpAggregate op;
      op.name = slice.name;
      op.type = slice.type;
      out.ops.push_back(std::move(op));
    }
    OpAggregate& op = out.ops[it->second];
    AddSums(op, slice);
    for (const auto& [col, st] : slice.metrics) MergeStat(op.metrics[col], st);
    op.by_core.push_back(std::move(slice));
  }
  for (OpAggregate& op : out.ops) {
    SortByTotal(op.by_core);
    std::string label;
    for (const OpAggregate& sl : op.by_core) {
      absl::StrAppend(&label, label.empty() ? "" : "+", sl.core);
    }
    op.core = label;
  }
  SortByTotal(out.ops);
  // Per-type roll-up.
  absl::flat_hash_map<std::string, size_t> type_index;
  for (const OpAggregate& op : out.ops) {
    std::string type = RollupType(op);
    auto [it, fresh] = type_index.try_emplace(type, out.by_type.size());
    if (fresh) {
      TypeRollup r;
      r.type = type;
      out.by_type.push_back(std::move(r));
    }
    TypeRollup& r = out.by_type[it->second];
    r.total_us += op.total_us;
    r.count += op.count;
    ++r.names;
    for (const OpAggregate& sl : op.by_core) {
      if (!absl::StrContains(absl::StrCat("+", r.core, "+"),
                             absl::StrCat("+", sl.core, "+"))) {
        absl::StrAppend(&r.core, r.core.empty() ? "" : "+", sl.core);
      }
    }
  }
  std::sort(out.by_type.begin(), out.by_type.end(),
            [](const TypeRollup& a, const TypeRollup& b) {
              if (a.total_us != b.total_us) return a.total_us > b.total_us;
              return a.type < b.type;
            });
  out.timeline = SummarizeIntervalsNs(std::move(rows.intervals));
  return out;
}

std::string RollupType(const OpAggregate& op) {
  std::string t = op.type;
  if (!t.empty() && t != "N/A") return t;
  // No type column (Level0): the name's last word that is not a number
  // ("trans_TransData_12", "aclnnMaxPool2dWithMask_TransDataSpecial_
  // TransData" -> TransData), then a trailing instance number dropped
  // ("Conv2D3" -> Conv2D).
  std::string n;
  for (absl::string_view part : absl::StrSplit(op.name, '_')) {
    if (part.empty()) continue;
    bool digits = std::all_of(part.begin(), part.end(),
                              [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) n = std::string(part);
  }
  size_t end = n.size();
  while (end > 0 && n[end - 1] >= '0' && n[end - 1] <= '9') --end;
  if (end > 0 && end < n.size()) n.resize(end);
  return n.empty() ? op.name : n;
}

absl::StatusOr<OpStatistic> ParseOpStatistic(std::string_view text,
                                             std::string_view file) {
  absl::StatusOr<CsvTable> t = ParseCsvSkippingRaggedRows(text, file);
  if (!t.ok()) return t.status();
  std::optional<int> type_col = t->Column({"OP Type", "Type"});
  std::optional<int> total_col = t->Column({"Total Time(us)"});
  if (!type_col.has_value() || !total_col.has_value()) {
    return Bad(file, "needs columns 'OP Type' and 'Total Time(us)'");
  }
  std::optional<int> core_col = t->Column({"Core Type"});
  std::optional<int> count_col = t->Column({"Count"});
  std::optional<int> avg_col = t->Column({"Avg Time(us)"});
  std::optional<int> max_col = t->Column({"Max Time(us)"});
  std::optional<int> ratio_col = t->Column({"Ratio(%)"});
  OpStatistic out;
  out.file = std::string(file);
  for (size_t r = 0; r < t->rows.size(); ++r) {
    std::optional<double> total = t->Number(r, total_col);
    if (!total.has_value() || *total < 0) continue;
    OpStatRow row;
    row.type = t->Text(r, type_col).value_or("(unnamed)");
    row.core = t->Text(r, core_col).value_or("");
    row.count = static_cast<int64_t>(t->Number(r, count_col).value_or(0));
    row.total_us = *total;
    row.avg_us = t->Number(r, avg_col).value_or(0);
    row.max_us = t->Number(r, max_col).value_or(0);
    row.ratio_pct = t->Number(r, ratio_col).value_or(0);
    out.total_us += *total;
    out.rows.push_back(std::move(row));
  }
  if (out.rows.empty()) {
    return Bad(file, "no row has a numeric 'Total Time(us)'");
  }
  // One row per op type, summed over its core types (MatMulV3 on AI_CORE
  // and on MIX_AIC is one op); the rows as written stay in by_core.
  out.by_core = out.rows;
  std::vector<OpStatRow> merged;
  absl::flat_hash_map<std::string, size_t> index;
  for (const OpStatRow& r : out.by_core) {
    auto [it, fresh] = index.try_emplace(r.type, merged.size());
    if (fresh) {
      merged.push_back(r);
      continue;
    }
    OpStatRow& m = merged[it->second];
    m.total_us += r.total_us;
    m.count += r.count;
    m.max_us = std::max(m.max_us, r.max_us);
    m.ratio_pct += r.ratio_pct;
    if (!r.core.empty()) absl::StrAppend(&m.core, "+", r.core);
  }
  for (OpStatRow& m : merged) {
    if (m.count > 0) m.avg_us = m.total_us / static_cast<double>(m.count);
  }
  out.rows = std::move(merged);
  auto by_total = [](const OpStatRow& a, const OpStatRow& b) {
    if (a.total_us != b.total_us) return a.total_us > b.total_us;
    if (a.type != b.type) return a.type < b.type;
    return a.core < b.core;
  };
  std::sort(out.rows.begin(), out.rows.end(), by_total);
  std::sort(out.by_core.begin(), out.by_core.end(), by_total);
  return out;
}

bool IsLaunchRelatedApi(std::string_view name) {
  // "Launch" as a word of the name, CamelCase or separators splitting
  // words: KernelLaunchWithHandle, FftsPlusTaskLaunch, Launch_Ffts,
  // aclrtLaunchKernel, launch. Synchronize / Stream / Memcpy calls are not
  // launches.
  std::string word;
  auto is_launch = [&] { return absl::AsciiStrToLower(word) == "launch"; };
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    bool alnum = absl::ascii_isalnum(static_cast<unsigned char>(c));
    bool upper = absl::ascii_isupper(static_cast<unsigned char>(c));
    bool prev_lower =
        i > 0 &&
        (absl::ascii_islower(static_cast<unsigned char>(name[i - 1])) ||
         absl::ascii_isdigit(static_cast<unsigned char>(name[i - 1])));
    if (!alnum || (upper && prev_lower)) {
      if (is_launch()) return true;
      word.clear();
    }
    if (alnum) word.push_back(c);
  }
  return is_launch();
}

absl::StatusOr<ApiStatistic> ParseApiStatistic(std::string_view text,
                                               std::string_view file) {
  absl::StatusOr<CsvTable> t = ParseCsvSkippingRaggedRows(text, file);
  if (!t.ok()) return t.status();
  std::optional<int> name_col = t->Column({"API Name", "Name"});
  std::optional<int> time_col = t->Column({"Time(us)", "Duration(us)"});
  if (!name_col.has_value() || !time_col.has_value()) {
    return Bad(file, "needs columns 'API Name' and 'Time(us)'");
  }
  std::optional<int> level_col = t->Column({"Level"});
  std::optional<int> count_col = t->Column({"Count"});
  std::optional<int> avg_col = t->Column({"Avg(us)"});
  ApiStatistic out;
  out.file = std::string(file);
  for (size_t r = 0; r < t->rows.size(); ++r) {
    std::optional<double> time = t->Number(r, time_col);
    if (!time.has_value() || *time < 0) continue;
    ApiRow row;
    row.name = t->Text(r, name_col).value_or("(unnamed)");
    row.level = t->Text(r, level_col).value_or("");
    row.time_us = *time;
    row.count = static_cast<int64_t>(t->Number(r, count_col).value_or(0));
    row.avg_us =
        t->Number(r, avg_col)
            .value_or(row.count > 0
                          ? row.time_us / static_cast<double>(row.count)
                          : 0);
    out.total_us += *time;
    out.rows.push_back(std::move(row));
  }
  if (out.rows.empty()) return Bad(file, "no row has a numeric 'Time(us)'");
  std::sort(out.rows.begin(), out.rows.end(),
            [](const ApiRow& a, const ApiRow& b) {
              if (a.time_us != b.time_us) return a.time_us > b.time_us;
              return a.name < b.name;
            });
  return out;
}

absl::StatusOr<TaskTime> ParseTaskTime(std::string_view text,
                                       std::string_view file) {
  absl::StatusOr<CsvTable> t = ParseCsvSkippingRaggedRows(text, file);
  if (!t.ok()) return t.status();
  std::optional<int> name_col = t->Column({"kernel_name"});
  std::optional<int> time_col = t->Column({"task_time(us)"});
  std::optional<int> start_col = t->Column({"task_start(us)"});
  std::optional<int> stop_col = t->Column({"task_stop(us)"});
  if (!name_col.has_value() || !time_col.has_value()) {
    return Bad(file, "needs columns 'kernel_name' and 'task_time(us)'");
  }
  TaskTime out;
  out.file = std::string(file);
  out.rows = static_cast<int64_t>(t->rows.size());
  std::vector<std::pair<int64_t, int64_t>> iv;  // ns
  for (size_t r = 0; r < t->rows.size(); ++r) {
    std::optional<std::string> name = t->Text(r, name_col);
    if (!name.has_value()) continue;  // N/A: not a kernel task
    std::optional<double> dur = t->Number(r, time_col);
    if (!dur.has_value()) continue;
    ++out.kernel_rows;
    out.by_kernel[*name].Add(*dur);
    std::optional<int64_t> a = ParseMicrosAsNanos(t->Cell(r, start_col));
    std::optional<int64_t> b = ParseMicrosAsNanos(t->Cell(r, stop_col));
    if (a.has_value()) {
      iv.emplace_back(
          *a, b.value_or(*a + static_cast<int64_t>(std::llround(*dur * 1000))));
    }
  }
  if (out.rows == 0) return Bad(file, "no data rows");
  out.timeline = SummarizeIntervalsNs(std::move(iv));
  return out;
}

}  // namespace tunefarm
