// Nsight Compute CSV exports (cuda-backend.md §1.2-§1.3): the wide raw page
// (one row per kernel, optional units row as line 2) and the long details
// page (one row per metric, trailing comma on metric rows, rule rows with
// empty metric fields). Non-CSV lines (==PROF==, program stdout) before and
// between records are dropped; a UTF-8 BOM and CRLF are accepted; values may
// carry thousands separators. Units are normalised to base units, with
// times in µs.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

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

// Keeps the CSV records: the header line (starting `"ID"`) and every later
// line that starts with a quote, plus continuation lines of a quoted cell
// that spans lines. Counts what it drops.
std::string CsvLinesOnly(std::string_view text, int64_t& skipped) {
  if (absl::StartsWith(Av(text), "\xEF\xBB\xBF")) text.remove_prefix(3);
  std::string out;
  out.reserve(text.size());
  bool header_seen = false;
  bool in_quote = false;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view line = text.substr(
        pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() : nl + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    bool keep = in_quote;
    if (!keep) {
      if (!header_seen) {
        keep = absl::StartsWith(Av(line), "\"ID\",");
        header_seen = keep;
      } else {
        keep = !line.empty() && line.front() == '"' &&
               line.find("\",") != std::string_view::npos;
      }
    }
    if (!keep) {
      ++skipped;
      continue;
    }
    for (char c : line) in_quote ^= (c == '"');
    out.append(line);
    out.push_back('\n');
  }
  return out;
}

// Normalises (value, unit) to base units; times to µs.
void Normalise(NcuMetric& m) {
  std::string u = absl::AsciiStrToLower(m.unit);
  struct Scale {
    std::string_view unit;
    double factor;
    std::string_view base;
  };
  static const Scale kScales[] = {
      {"ns", 1e-3, "us"},
      {"nsecond", 1e-3, "us"},
      {"us", 1, "us"},
      {"usecond", 1, "us"},
      {"ms", 1e3, "us"},
      {"msecond", 1e3, "us"},
      {"s", 1e6, "us"},
      {"second", 1e6, "us"},
      {"kbyte", 1e3, "byte"},
      {"mbyte", 1e6, "byte"},
      {"gbyte", 1e9, "byte"},
      {"tbyte", 1e12, "byte"},
      {"kbyte/s", 1e3, "byte/s"},
      {"mbyte/s", 1e6, "byte/s"},
      {"gbyte/s", 1e9, "byte/s"},
      {"tbyte/s", 1e12, "byte/s"},
      {"byte/second", 1, "byte/s"},
      {"kbyte/second", 1e3, "byte/s"},
      {"mbyte/second", 1e6, "byte/s"},
      {"gbyte/second", 1e9, "byte/s"},
      {"tbyte/second", 1e12, "byte/s"},
      {"khz", 1e3, "hz"},
      {"mhz", 1e6, "hz"},
      {"ghz", 1e9, "hz"},
      {"cycle/nsecond", 1e9, "hz"},
  };
  for (const Scale& s : kScales) {
    if (u == s.unit) {
      m.value *= s.factor;
      m.unit = std::string(s.base);
      return;
    }
  }
}

NcuMetric MakeMetric(std::string_view value, std::string_view unit) {
  NcuMetric m;
  m.text = std::string(absl::StripAsciiWhitespace(Av(value)));
  m.unit = std::string(absl::StripAsciiWhitespace(Av(unit)));
  if (std::optional<double> v = ParseNumber(value)) {
    m.value = *v;
    m.numeric = true;
    Normalise(m);
  }
  return m;
}

std::string_view At(const std::vector<std::string_view>& cells,
                    std::optional<int> col) {
  if (!col.has_value() || static_cast<size_t>(*col) >= cells.size()) return {};
  return cells[static_cast<size_t>(*col)];
}

}  // namespace

const NcuMetric* NcuKernel::Find(
    std::initializer_list<std::string_view> names) const {
  for (std::string_view n : names) {
    auto it = metrics.find(std::string(n));
    if (it != metrics.end() && it->second.numeric) return &it->second;
  }
  return nullptr;
}

absl::StatusOr<NcuReport> ParseNcuCsv(std::string_view text,
                                      std::string_view file) {
  NcuReport out;
  out.file = std::string(file);
  std::string csv = CsvLinesOnly(text, out.skipped_lines);
  if (csv.empty()) {
    return Bad(file,
               "no Nsight Compute CSV header (a line starting "
               "\"ID\",...) found");
  }
  CsvReader reader(csv);
  std::vector<std::string_view> cells;
  absl::StatusOr<bool> more = reader.Next(cells, file);
  if (!more.ok()) return more.status();
  if (!*more) return Bad(file, "empty CSV");
  std::vector<std::string> header(cells.begin(), cells.end());
  std::optional<int> id = FindColumn(header, {"ID"});
  std::optional<int> kname = FindColumn(header, {"Kernel Name"});
  std::optional<int> device = FindColumn(header, {"Device"});
  std::optional<int> cc = FindColumn(header, {"CC"});
  std::optional<int> block = FindColumn(header, {"Block Size"});
  std::optional<int> grid = FindColumn(header, {"Grid Size"});
  std::optional<int> section = FindColumn(header, {"Section Name"});
  std::optional<int> mname = FindColumn(header, {"Metric Name"});
  std::optional<int> munit = FindColumn(header, {"Metric Unit"});
  std::optional<int> mvalue = FindColumn(header, {"Metric Value"});
  std::optional<int> rname = FindColumn(header, {"Rule Name"});
  std::optional<int> rtype = FindColumn(header, {"Rule Type"});
  std::optional<int> rdesc = FindColumn(header, {"Rule Description"});
  std::optional<int> stype = FindColumn(header, {"Estimated Speedup Type"});
  std::optional<int> speed = FindColumn(header, {"Estimated Speedup"});
  if (!kname.has_value()) return Bad(file, "no 'Kernel Name' column");
  const bool details = mname.has_value() && mvalue.has_value();
  out.page = details ? "details" : "raw";
  // Raw page: metric columns are every column after the 11 fixed ones.
  static const std::vector<std::string> kFixed = {
      "ID",          "Process ID", "Process Name", "Host Name",
      "Kernel Name", "Context",    "Stream",       "Block Size",
      "Grid Size",   "Device",     "CC",           "Kernel Time"};
  std::vector<int> metric_cols;
  if (!details) {
    for (size_t i = 0; i < header.size(); ++i) {
      bool fixed = false;
      for (const std::string& f : kFixed) fixed = fixed || header[i] == f;
      if (!fixed) metric_cols.push_back(static_cast<int>(i));
    }
  }
  std::vector<std::string> units(header.size());
  bool first_row = true;
  auto kernel_for = [&](std::string_view kid) -> NcuKernel& {
    for (NcuKernel& k : out.kernels) {
      if (k.id == kid) return k;
    }
    NcuKernel k;
    k.id = std::string(kid);
    k.name = std::string(CleanCell(At(cells, kname)));
    k.device = std::string(CleanCell(At(cells, device)));
    k.cc = std::string(CleanCell(At(cells, cc)));
    k.block_size = std::string(CleanCell(At(cells, block)));
    k.grid_size = std::string(CleanCell(At(cells, grid)));
    out.kernels.push_back(std::move(k));
    return out.kernels.back();
  };
  while (true) {
    more = reader.Next(cells, file);
    if (!more.ok()) return more.status();
    if (!*more) break;
    std::string_view kid = CleanCell(At(cells, id));
    if (!details && first_row && kid.empty()) {  // the units row
      for (size_t i = 0; i < cells.size() && i < units.size(); ++i) {
        units[i] = std::string(CleanCell(cells[i]));
      }
      first_row = false;
      continue;
    }
    first_row = false;
    if (kid.empty() || CleanCell(At(cells, kname)).empty()) continue;
    NcuKernel& k = kernel_for(kid);
    if (details) {
      std::string_view rule = CleanCell(At(cells, rname));
      std::string_view metric = CleanCell(At(cells, mname));
      if (!rule.empty() && metric.empty()) {
        NcuRule r;
        r.section = std::string(CleanCell(At(cells, section)));
        r.name = std::string(rule);
        r.type = std::string(CleanCell(At(cells, rtype)));
        r.description = std::string(CleanCell(At(cells, rdesc)));
        r.speedup_type = std::string(CleanCell(At(cells, stype)));
        r.speedup = ParseNumber(At(cells, speed)).value_or(0);
        k.rules.push_back(std::move(r));
      } else if (!metric.empty()) {
        k.metrics[std::string(metric)] =
            MakeMetric(At(cells, mvalue), At(cells, munit));
      }
    } else {
      for (int c : metric_cols) {
        if (static_cast<size_t>(c) >= cells.size()) continue;
        k.metrics[header[static_cast<size_t>(c)]] = MakeMetric(
            cells[static_cast<size_t>(c)], units[static_cast<size_t>(c)]);
      }
    }
  }
  if (out.kernels.empty()) {
    return Bad(file, "no kernel rows after the CSV header");
  }
  return out;
}

}  // namespace tunefarm
