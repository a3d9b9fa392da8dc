// Parsers for `msprof op` output (CANN msOpProf, single-operator
// profiling): OpBasicInfo.csv and the per-block metric-group CSVs of an
// OPPROF_* folder. Layout as the CANN "msprof op" pages document it:
// OpBasicInfo has Op Name, Op Type, Task Duration(us), Block Dim (Block
// Num on newer CANN), Mix Block Dim, Device Id, Pid, Current Freq, Rated
// Freq; each metric CSV has block_id and sub_block_id (cube0, vector0,
// vector1) then aic_* / aiv_* columns, NA where a column does not apply.
#include <optional>
#include <string>
#include <string_view>

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

std::string Stem(std::string_view path) {
  size_t slash = path.find_last_of("/\\");
  std::string_view base =
      slash == std::string_view::npos ? path : path.substr(slash + 1);
  size_t dot = base.rfind('.');
  return std::string(base.substr(0, dot));
}

}  // namespace

absl::StatusOr<OpProfBasic> ParseOpBasicInfo(std::string_view text,
                                             std::string_view file) {
  absl::StatusOr<CsvTable> t = ParseCsvSkippingRaggedRows(text, file);
  if (!t.ok()) return t.status();
  std::optional<int> name = t->Column({"Op Name"});
  std::optional<int> dur = t->Column({"Task Duration(us)"});
  if (!name.has_value() || !dur.has_value()) {
    return Bad(file, "needs columns 'Op Name' and 'Task Duration(us)'");
  }
  OpProfBasic out;
  out.file = std::string(file);
  out.kernels = static_cast<int64_t>(t->rows.size());
  for (size_t r = 0; r < t->rows.size(); ++r) {
    std::optional<double> d = t->Number(r, dur);
    if (!d.has_value()) continue;
    out.op_name = t->Text(r, name).value_or("(unnamed)");
    out.op_type = t->Text(r, t->Column({"Op Type"})).value_or("");
    out.duration_us = *d;
    out.block_dim =
        t->Number(r, t->Column({"Block Dim", "Block Num"})).value_or(0);
    out.mix_block_dim =
        t->Number(r, t->Column({"Mix Block Dim", "Mix Block Num"})).value_or(0);
    out.current_freq_mhz =
        t->Number(r, t->Column({"Current Freq"})).value_or(0);
    out.rated_freq_mhz = t->Number(r, t->Column({"Rated Freq"})).value_or(0);
    return out;
  }
  return Bad(file, "no row has a numeric 'Task Duration(us)'");
}

absl::StatusOr<OpProfGroup> ParseOpProfGroup(std::string_view text,
                                             std::string_view file) {
  absl::StatusOr<CsvTable> t = ParseCsvSkippingRaggedRows(text, file);
  if (!t.ok()) return t.status();
  std::optional<int> block = t->Column({"block_id"});
  if (!block.has_value()) return Bad(file, "no column 'block_id'");
  std::optional<int> sub = t->Column({"sub_block_id"});
  std::optional<int> aic_time = t->Column({"aic_time(us)"});
  std::optional<int> aiv_time = t->Column({"aiv_time(us)"});
  OpProfGroup out;
  out.file = std::string(file);
  out.group = Stem(file);
  for (size_t r = 0; r < t->rows.size(); ++r) {
    if (!t->Text(r, block).has_value()) continue;
    ++out.rows;
    std::optional<double> ct = t->Number(r, aic_time);
    std::optional<double> vt = t->Number(r, aiv_time);
    std::string kind = absl::AsciiStrToLower(t->Text(r, sub).value_or(""));
    // The sub-block says which side the row is; failing a name, the side
    // whose time column has a value.
    bool cube_row =
        absl::StartsWith(kind, "cube") || (!absl::StartsWith(kind, "vector") &&
                                           ct.has_value() && !vt.has_value());
    bool vector_row =
        absl::StartsWith(kind, "vector") ||
        (!absl::StartsWith(kind, "cube") && vt.has_value() && !ct.has_value());
    if (cube_row && ct.has_value()) out.cube_block_us.Add(*ct);
    if (vector_row && vt.has_value()) out.vector_block_us.Add(*vt);
    for (size_t c = 0; c < t->header.size(); ++c) {
      const int col = static_cast<int>(c);
      if (col == *block || (sub.has_value() && col == *sub)) continue;
      std::optional<double> v = t->Number(r, col);
      if (!v.has_value()) continue;
      std::string name(absl::StripAsciiWhitespace(t->header[c]));
      if (name.empty()) continue;
      double w = 1;
      if (absl::StartsWith(name, "aic_")) w = ct.value_or(1);
      if (absl::StartsWith(name, "aiv_")) w = vt.value_or(1);
      out.columns[name].Add(*v, w);
    }
  }
  if (out.rows == 0) return Bad(file, "no row has a 'block_id'");
  return out;
}

}  // namespace tunefarm
