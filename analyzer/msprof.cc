// Parsers for the Ascend CSV tables msprof writes under
// mindstudio_profiler_output/ (op_summary, op_statistic, task_time,
// api_statistic). torch_npu writes the same op_statistic / api_statistic
// layouts and a kernel_details that is op_summary under other names, so the
// task-table reader here serves both (aliases from ascend-formats.md §2.3).
#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
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

IntervalSummary SummarizeIntervals(
    std::vector<std::pair<double, double>> iv) {
  IntervalSummary s;
  s.intervals = static_cast<int64_t>(iv.size());
  if (iv.empty()) return s;
  std::sort(iv.begin(), iv.end());
  double cur_start = iv[0].first;
  double cur_end = iv[0].second;
  double first = cur_start;
  double last = cur_end;
  for (size_t i = 1; i < iv.size(); ++i) {
    const auto& [a, b] = iv[i];
    last = std::max(last, b);
    if (a < cur_end) ++s.overlaps;
    if (a <= cur_end) {
      cur_end = std::max(cur_end, b);
      continue;
    }
    s.busy_us += cur_end - cur_start;
    ++s.gaps;
    s.max_gap_us = std::max(s.max_gap_us, a - cur_end);
    cur_start = a;
    cur_end = b;
  }
  s.busy_us += cur_end - cur_start;
  s.window_us = last - first;
  return s;
}

bool IsCommunicationOp(const OpAggregate& op) {
  std::string core = absl::AsciiStrToUpper(op.core);
  if (core == "HCCL" || core == "COMMUNICATION") return true;
  for (const std::string* s : {&op.name, &op.type}) {
    std::string l = absl::AsciiStrToLower(*s);
    if (absl::StartsWith(l, "hcom") || absl::StrContains(l, "hccl")) {
      return true;
    }
  }
  return false;
}

absl::StatusOr<TaskTable> ParseTaskTable(std::string_view text,
                                         std::string_view file) {
  CsvReader reader(text);
  absl::StatusOr<std::vector<std::string>> header = ReadHeader(reader, file);
  if (!header.ok()) return header.status();
  const std::vector<std::string>& h = *header;
  std::optional<int> name_col = FindColumn(h, {"Op Name", "Name"});
  std::optional<int> type_col = FindColumn(h, {"OP Type", "Type"});
  std::optional<int> core_col =
      FindColumn(h, {"Task Type", "Accelerator Core"});
  std::optional<int> dur_col =
      FindColumn(h, {"Task Duration(us)", "Duration(us)"});
  std::optional<int> start_col = FindColumn(
      h, {"Task Start Time(us)", "Start Time(us)"});
  std::optional<int> wait_col =
      FindColumn(h, {"Task Wait Time(us)", "Wait Time(us)"});
  std::optional<int> block_col = FindColumn(h, {"Block Dim", "Block Num"});
  if (!dur_col.has_value()) {
    return Bad(file, "no column 'Task Duration(us)' or 'Duration(us)'");
  }
  if (!name_col.has_value() && !type_col.has_value()) {
    return Bad(file, "no column 'Op Name', 'Name', 'OP Type' or 'Type'");
  }
  std::vector<std::pair<int, std::string>> metric_cols;
  for (size_t i = 0; i < h.size(); ++i) {
    std::string name(absl::StripAsciiWhitespace(h[i]));
    if (IsMetricColumn(name)) metric_cols.emplace_back(static_cast<int>(i), name);
  }

  TaskTable out;
  out.file = std::string(file);
  std::string base = absl::AsciiStrToLower(Av(file));
  bool kernel_details = absl::StrContains(base, "kernel_details") ||
                        (!FindColumn(h, {"Op Name"}).has_value() &&
                         FindColumn(h, {"Accelerator Core"}).has_value());
  out.kind = kernel_details ? "kernel_details" : "op_summary";
  out.format = kernel_details ? "torch_npu" : "msprof";
  out.metric_group = MetricGroupOf(h);
  out.name_col = ColName(h, name_col.has_value() ? name_col : type_col);
  out.type_col = ColName(h, type_col);
  out.duration_col = ColName(h, dur_col);
  out.wait_col = ColName(h, wait_col);
  out.block_col = ColName(h, block_col);

  absl::flat_hash_map<std::string, size_t> index;
  // Per op, one Stat per metric column, by position: a map lookup per cell
  // was most of the parse time on large tables.
  std::vector<std::vector<Stat>> op_stats;
  std::vector<std::pair<double, double>> intervals;
  std::vector<std::string_view> cells;
  while (true) {
    absl::StatusOr<bool> more = reader.Next(cells, file);
    if (!more.ok()) return more.status();
    if (!*more) break;
    if (cells.size() != h.size()) {
      out.ragged.push_back(absl::StrCat(Av(file), ":", reader.line(),
                                        ": row has ", cells.size(),
                                        " cells, the header has ", h.size()));
      continue;
    }
    std::optional<double> dur = Num(cells, dur_col);
    if (!dur.has_value() || *dur < 0) {
      ++out.rows_skipped;
      continue;
    }
    std::string_view name = Txt(cells, name_col);
    std::string_view type = Txt(cells, type_col);
    if (name.empty()) name = type;
    if (name.empty()) name = "(unnamed)";
    auto it = index.find(Av(name));
    size_t slot;
    if (it == index.end()) {
      slot = out.ops.size();
      index.emplace(std::string(name), slot);
      OpAggregate op;
      op.name = std::string(name);
      op.type = std::string(type);
      op.core = std::string(Txt(cells, core_col));
      out.ops.push_back(std::move(op));
      op_stats.emplace_back(metric_cols.size());
    } else {
      slot = it->second;
    }
    OpAggregate& op = out.ops[slot];
    op.total_us += *dur;
    ++op.count;
    if (std::optional<double> b = Num(cells, block_col)) {
      op.max_block_dim = std::max(op.max_block_dim, *b);
    }
    if (std::optional<double> w = Num(cells, wait_col); w && *w >= 0) {
      op.wait_us += *w;
      out.total_wait_us += *w;
    }
    std::vector<Stat>& stats = op_stats[slot];
    for (size_t m = 0; m < metric_cols.size(); ++m) {
      std::optional<double> v =
          ParseNumber(cells[static_cast<size_t>(metric_cols[m].first)]);
      if (v.has_value()) stats[m].Add(*v);
    }
    if (std::optional<double> s = Num(cells, start_col)) {
      intervals.emplace_back(*s, *s + *dur);
    }
    out.total_us += *dur;
    ++out.rows_used;
  }
  for (size_t i = 0; i < out.ops.size(); ++i) {
    for (size_t m = 0; m < metric_cols.size(); ++m) {
      if (op_stats[i][m].n > 0) {
        out.ops[i].metrics.emplace(metric_cols[m].second, op_stats[i][m]);
      }
    }
  }
  if (out.rows_used == 0) {
    return Bad(file, absl::StrCat("no data row has a numeric '",
                                  out.duration_col, "' (",
                                  out.rows_skipped + out.ragged.size(),
                                  " rows skipped)"));
  }
  // Ratio columns are fractions in every real export; a table whose ratios
  // exceed 1 was written on a percent scale (synthetic data, old tools):
  // normalise it rather than let 0..1 thresholds misfire.
  for (const auto& [col, col_name] : metric_cols) {
    if (!absl::EndsWith(col_name, "_ratio")) continue;
    double max = 0;
    for (const OpAggregate& op : out.ops) {
      auto m = op.metrics.find(col_name);
      if (m != op.metrics.end()) max = std::max(max, m->second.max);
    }
    if (max <= 1.5) continue;
    for (OpAggregate& op : out.ops) {
      auto m = op.metrics.find(col_name);
      if (m == op.metrics.end()) continue;
      m->second.sum /= 100;
      m->second.min /= 100;
      m->second.max /= 100;
    }
  }
  // cube_utilization(%) is occupancy in percent: keep it as a fraction.
  for (OpAggregate& op : out.ops) {
    auto m = op.metrics.find("cube_utilization(%)");
    if (m == op.metrics.end()) continue;
    m->second.sum /= 100;
    m->second.min /= 100;
    m->second.max /= 100;
  }
  SortByTotal(out.ops);
  out.timeline = SummarizeIntervals(std::move(intervals));
  return out;
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
  std::sort(out.rows.begin(), out.rows.end(),
            [](const OpStatRow& a, const OpStatRow& b) {
              if (a.total_us != b.total_us) return a.total_us > b.total_us;
              return a.type < b.type;
            });
  return out;
}

bool IsLaunchRelatedApi(std::string_view name) {
  std::string l = absl::AsciiStrToLower(Av(name));
  for (std::string_view k :
       {"launch", "memcpy", "synchronize", "binary", "stream"}) {
    if (absl::StrContains(l, Av(k))) return true;
  }
  return false;
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
    row.avg_us = t->Number(r, avg_col).value_or(
        row.count > 0 ? row.time_us / static_cast<double>(row.count) : 0);
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
  std::vector<std::pair<double, double>> iv;
  for (size_t r = 0; r < t->rows.size(); ++r) {
    std::optional<std::string> name = t->Text(r, name_col);
    if (!name.has_value()) continue;  // N/A: not a kernel task
    std::optional<double> dur = t->Number(r, time_col);
    if (!dur.has_value()) continue;
    ++out.kernel_rows;
    out.by_kernel[*name].Add(*dur);
    std::optional<double> a = t->Number(r, start_col);
    std::optional<double> b = t->Number(r, stop_col);
    if (a.has_value()) iv.emplace_back(*a, b.value_or(*a + *dur));
  }
  if (out.rows == 0) return Bad(file, "no data rows");
  out.timeline = SummarizeIntervals(std::move(iv));
  return out;
}

}  // namespace tunefarm
