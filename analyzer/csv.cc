#include "analyzer/csv.h"

#include <charconv>
#include <cmath>
#include <string>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace tunefarm {
namespace {

constexpr std::string_view kBom = "\xEF\xBB\xBF";

// Debian's abseil has its own absl::string_view (not std::string_view).
absl::string_view Av(std::string_view s) { return {s.data(), s.size()}; }

std::string_view Trim(std::string_view s) {
  absl::string_view t = absl::StripAsciiWhitespace(Av(s));
  return {t.data(), t.size()};
}

bool SameIgnoringCase(std::string_view a, std::string_view b) {
  return absl::EqualsIgnoreCase(Av(a), Av(b));
}

bool IsMissing(std::string_view trimmed) {
  return trimmed.empty() || SameIgnoringCase(trimmed, "N/A");
}

// Strips the extra literal quote layer profilers put around shape cells:
// `"""32,32"""` decodes (RFC 4180) to `"32,32"`, whose payload is `32,32`.
std::string_view StripQuoteLayer(std::string_view s) {
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') {
    return s.substr(1, s.size() - 2);
  }
  return s;
}

// Digits with optional thousands separators in groups of three; rejects
// "32,32"-like text so a shape cell never reads as a number.
bool StripThousands(std::string_view s, std::string& out) {
  size_t start = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  size_t int_end = s.find_first_of(".eE", start);
  if (int_end == std::string_view::npos) int_end = s.size();
  std::string_view int_part = s.substr(start, int_end - start);
  if (int_part.find(',') == std::string_view::npos) {
    out.assign(s);
    return true;
  }
  // First group 1-3 digits, then ",ddd" groups.
  size_t first_comma = int_part.find(',');
  if (first_comma == 0 || first_comma > 3) return false;
  for (size_t i = first_comma; i < int_part.size(); i += 4) {
    if (int_part[i] != ',' || i + 4 > int_part.size()) return false;
    for (size_t j = i + 1; j < i + 4; ++j) {
      if (!absl::ascii_isdigit(static_cast<unsigned char>(int_part[j]))) {
        return false;
      }
    }
  }
  if (s.substr(int_end).find(',') != std::string_view::npos) return false;
  out.clear();
  for (char c : s) {
    if (c != ',') out.push_back(c);
  }
  return true;
}

}  // namespace

std::optional<double> ParseNumber(std::string_view cell) {
  std::string_view t = Trim(cell);
  if (IsMissing(t)) return std::nullopt;
  if (!t.empty() && t.front() == '+') t.remove_prefix(1);
  std::string digits;
  if (!StripThousands(t, digits) || digits.empty()) return std::nullopt;
  double value = 0;
  const char* begin = digits.data();
  const char* end = digits.data() + digits.size();
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || ptr != end || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

std::optional<int> CsvTable::Column(
    std::initializer_list<std::string_view> aliases) const {
  for (std::string_view alias : aliases) {
    std::string_view a = Trim(alias);
    for (size_t i = 0; i < header.size(); ++i) {
      if (SameIgnoringCase(Trim(header[i]), a)) {
        return static_cast<int>(i);
      }
    }
  }
  return std::nullopt;
}

std::string_view CsvTable::Cell(size_t row, std::optional<int> column) const {
  if (!column.has_value() || *column < 0 || row >= rows.size()) return {};
  const std::vector<std::string>& r = rows[row];
  if (static_cast<size_t>(*column) >= r.size()) return {};
  return r[*column];
}

std::optional<std::string> CsvTable::Text(size_t row,
                                          std::optional<int> column) const {
  std::string_view t = Trim(Cell(row, column));
  t = Trim(StripQuoteLayer(t));
  if (IsMissing(t)) return std::nullopt;
  return std::string(t);
}

std::optional<double> CsvTable::Number(size_t row,
                                       std::optional<int> column) const {
  return ParseNumber(Cell(row, column));
}

namespace {

absl::StatusOr<CsvTable> Parse(std::string_view text,
                               std::string_view file_name,
                               bool skip_ragged) {
  CsvTable table;
  table.file_name = std::string(file_name);
  if (text.substr(0, kBom.size()) == kBom) text.remove_prefix(kBom.size());

  // A single pass over the text, one record at a time.
  std::vector<std::vector<std::string>> records;
  std::vector<int> record_lines;
  std::vector<std::string> record;
  std::string field;
  int line = 1;
  int record_line = 1;
  bool record_has_content = false;  // distinguishes "" from a blank line
  size_t i = 0;
  const size_t n = text.size();

  auto end_record = [&]() {
    record.push_back(std::move(field));
    field.clear();
    bool blank = !record_has_content && record.size() == 1 &&
                 record[0].empty();
    if (!blank) {
      records.push_back(std::move(record));
      record_lines.push_back(record_line);
    }
    record.clear();
    record_has_content = false;
  };

  while (i < n) {
    // At the start of a field.
    if (text[i] == '"') {
      record_has_content = true;
      int quote_line = line;
      ++i;
      bool closed = false;
      while (i < n) {
        char c = text[i];
        if (c == '"') {
          if (i + 1 < n && text[i + 1] == '"') {
            field.push_back('"');
            i += 2;
            continue;
          }
          ++i;
          closed = true;
          break;
        }
        if (c == '\n') ++line;
        field.push_back(c);
        ++i;
      }
      if (!closed) {
        return absl::InvalidArgumentError(
            absl::StrCat(Av(file_name), ":", quote_line,
                         ": unterminated quoted cell (no closing '\"')"));
      }
      // After the closing quote: a separator, a line end or the end.
      if (i < n && text[i] != ',' && text[i] != '\n' &&
          !(text[i] == '\r' && (i + 1 == n || text[i + 1] == '\n'))) {
        return absl::InvalidArgumentError(absl::StrCat(
            Av(file_name), ":", line, ": unexpected character '",
            std::string(1, text[i]), "' after a closing quote"));
      }
    } else {
      while (i < n && text[i] != ',' && text[i] != '\n' &&
             !(text[i] == '\r' && (i + 1 == n || text[i + 1] == '\n'))) {
        field.push_back(text[i]);
        ++i;
      }
    }
    if (i >= n) break;
    if (text[i] == ',') {
      record_has_content = true;
      record.push_back(std::move(field));
      field.clear();
      ++i;
      if (i == n) break;  // "a,b," at EOF: the trailing empty cell
      continue;
    }
    // Line end: "\r\n", "\n" or a final "\r".
    if (text[i] == '\r') ++i;
    if (i < n && text[i] == '\n') ++i;
    end_record();
    ++line;
    record_line = line;
  }
  if (!field.empty() || !record.empty() || record_has_content) end_record();

  if (records.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Av(file_name), ": empty file (no header line)"));
  }
  table.header = std::move(records[0]);
  const size_t width = table.header.size();
  for (size_t r = 1; r < records.size(); ++r) {
    if (records[r].size() != width) {
      std::string msg = absl::StrCat(Av(file_name), ":", record_lines[r],
                                     ": row has ", records[r].size(),
                                     " cells, the header has ", width);
      if (!skip_ragged) return absl::InvalidArgumentError(msg);
      table.skipped_rows.push_back(std::move(msg));
      continue;
    }
    table.rows.push_back(std::move(records[r]));
    table.row_lines.push_back(record_lines[r]);
  }
  return table;
}

}  // namespace

absl::StatusOr<CsvTable> ParseCsv(std::string_view text,
                                  std::string_view file_name) {
  return Parse(text, file_name, /*skip_ragged=*/false);
}

absl::StatusOr<CsvTable> ParseCsvSkippingRaggedRows(
    std::string_view text, std::string_view file_name) {
  return Parse(text, file_name, /*skip_ragged=*/true);
}

}  // namespace tunefarm
