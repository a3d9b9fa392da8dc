#include "analyzer/csv.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
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

// Inline rather than absl::StripAsciiWhitespace: it runs on every numeric
// cell of tables with millions of cells.
inline bool IsAsciiSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
         c == '\f';
}

std::string_view Trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && IsAsciiSpace(s[b])) ++b;
  while (e > b && IsAsciiSpace(s[e - 1])) --e;
  return s.substr(b, e - b);
}

bool SameIgnoringCase(std::string_view a, std::string_view b) {
  return absl::EqualsIgnoreCase(Av(a), Av(b));
}

bool IsMissing(std::string_view trimmed) {
  return trimmed.empty() ||
         (trimmed.size() == 3 && (trimmed[0] | 0x20) == 'n' &&
          trimmed[1] == '/' && (trimmed[2] | 0x20) == 'a');
}

// Bytes that end an unquoted cell: ',', '\n' and '\r' (a lone '\r' inside
// a cell is checked by the caller).
struct CellStops {
  bool stop[256] = {};
  constexpr CellStops() {
    stop[static_cast<unsigned char>(',')] = true;
    stop[static_cast<unsigned char>('\n')] = true;
    stop[static_cast<unsigned char>('\r')] = true;
  }
};
constexpr CellStops kCellStops;

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
  if (t.front() == '+') t.remove_prefix(1);
  // Fast path, no allocation and no pre-scan: a plain number parses whole.
  double value = 0;
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
  if (ec == std::errc() && ptr == t.data() + t.size()) {
    return std::isfinite(value) ? std::optional<double>(value) : std::nullopt;
  }
  if (t.find(',') == std::string_view::npos) return std::nullopt;
  std::string digits;
  if (!StripThousands(t, digits) || digits.empty()) return std::nullopt;
  const char* begin = digits.data();
  const char* end = digits.data() + digits.size();
  auto [ptr2, ec2] = std::from_chars(begin, end, value);
  if (ec2 != std::errc() || ptr2 != end || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

std::optional<int64_t> ParseMicrosAsNanos(std::string_view cell) {
  std::string_view t = Trim(cell);
  if (IsMissing(t)) return std::nullopt;
  if (t.size() >= 2 && t.front() == '"' && t.back() == '"') {
    t = Trim(t.substr(1, t.size() - 2));
  }
  bool negative = false;
  if (!t.empty() && (t.front() == '-' || t.front() == '+')) {
    negative = t.front() == '-';
    t.remove_prefix(1);
  }
  size_t dot = t.find('.');
  std::string_view whole = t.substr(0, dot);
  std::string_view frac =
      dot == std::string_view::npos ? std::string_view() : t.substr(dot + 1);
  if (whole.empty() && frac.empty()) return std::nullopt;
  if (whole.size() > 16) return std::nullopt;  // beyond int64 ns
  int64_t us = 0;
  for (char c : whole) {
    if (c < '0' || c > '9') return std::nullopt;
    us = us * 10 + (c - '0');
  }
  if (us > INT64_MAX / 1000 - 1) return std::nullopt;
  int64_t ns = 0;
  int digits = 0;
  for (char c : frac) {
    if (c < '0' || c > '9') return std::nullopt;
    if (digits < 3) ns = ns * 10 + (c - '0');
    ++digits;
  }
  for (; digits < 3; ++digits) ns *= 10;
  int64_t v = us * 1000 + ns;
  return negative ? -v : v;
}

std::optional<int> CsvTable::Column(
    std::initializer_list<std::string_view> aliases) const {
  return FindColumn(header, aliases);
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

CsvReader::CsvReader(std::string_view text) : text_(text) {
  if (text_.substr(0, kBom.size()) == kBom) text_.remove_prefix(kBom.size());
}

CsvReader CsvReader::At(size_t pos) const {
  CsvReader r;
  r.text_ = text_;
  r.pos_ = std::min(pos, text_.size());
  return r;
}

absl::StatusOr<bool> CsvReader::Next(std::vector<std::string_view>& cells,
                                     std::string_view file_name) {
  const std::string_view text = text_;
  const size_t n = text.size();
  scratch_used_ = 0;
  while (true) {
    cells.clear();
    if (pos_ >= n) return false;
    record_line_ = line_;
    record_start_ = pos_;
    bool has_content = false;
    size_t i = pos_;
    while (true) {
      // At the start of a field.
      if (i < n && text[i] == '"') {
        has_content = true;
        int quote_line = line_;
        size_t begin = ++i;
        bool escaped = false;
        bool closed = false;
        while (i < n) {
          const void* q = memchr(text.data() + i, '"', n - i);
          size_t qi =
              q == nullptr ? n : static_cast<const char*>(q) - text.data();
          for (size_t k = i; k < qi; ++k) line_ += text[k] == '\n';
          i = qi;
          if (i >= n) break;
          if (i + 1 < n && text[i + 1] == '"') {
            escaped = true;
            i += 2;
            continue;
          }
          closed = true;
          break;
        }
        if (!closed) {
          pos_ = n;
          return absl::InvalidArgumentError(
              absl::StrCat(Av(file_name), ":", quote_line,
                           ": unterminated quoted cell (no closing '\"')"));
        }
        std::string_view raw = text.substr(begin, i - begin);
        ++i;  // the closing quote
        if (escaped) {
          if (scratch_used_ == scratch_.size()) scratch_.emplace_back();
          std::string& out = scratch_[scratch_used_++];
          out.clear();
          for (size_t k = 0; k < raw.size(); ++k) {
            out.push_back(raw[k]);
            if (raw[k] == '"') ++k;  // "" -> "
          }
          cells.emplace_back(out);
        } else {
          cells.push_back(raw);
        }
        if (i < n && text[i] != ',' && text[i] != '\n' &&
            !(text[i] == '\r' && (i + 1 == n || text[i + 1] == '\n'))) {
          pos_ = n;
          return absl::InvalidArgumentError(absl::StrCat(
              Av(file_name), ":", line_, ": unexpected character '",
              std::string(1, text[i]), "' after a closing quote"));
        }
      } else {
        size_t begin = i;
        while (i < n) {
          // One table lookup per byte on the common path; '\r' is a line
          // end only before '\n' or at the end of the text.
          while (i < n &&
                 !kCellStops.stop[static_cast<unsigned char>(text[i])]) {
            ++i;
          }
          if (i < n && text[i] == '\r' && i + 1 < n && text[i + 1] != '\n') {
            ++i;
            continue;
          }
          break;
        }
        cells.push_back(text.substr(begin, i - begin));
      }
      if (i >= n) break;
      if (text[i] == ',') {
        has_content = true;
        ++i;
        if (i == n) {  // "a,b," at EOF: the trailing empty cell
          cells.push_back({});
          break;
        }
        continue;
      }
      // Line end: "\r\n", "\n" or a final "\r".
      if (text[i] == '\r') ++i;
      if (i < n && text[i] == '\n') ++i;
      ++line_;
      break;
    }
    pos_ = i;
    bool blank = !has_content && cells.size() == 1 && cells[0].empty();
    if (!blank) return true;
  }
}

std::optional<int> FindColumn(const std::vector<std::string>& header,
                              std::initializer_list<std::string_view> aliases) {
  for (std::string_view alias : aliases) {
    std::string_view a = Trim(alias);
    for (size_t i = 0; i < header.size(); ++i) {
      if (SameIgnoringCase(Trim(header[i]), a)) return static_cast<int>(i);
    }
  }
  return std::nullopt;
}

std::string_view CleanCell(std::string_view cell) {
  std::string_view t = Trim(StripQuoteLayer(Trim(cell)));
  return IsMissing(t) ? std::string_view() : t;
}

namespace {

absl::StatusOr<CsvTable> Parse(std::string_view text,
                               std::string_view file_name, bool skip_ragged) {
  CsvTable table;
  table.file_name = std::string(file_name);
  CsvReader reader(text);
  std::vector<std::string_view> cells;
  absl::StatusOr<bool> more = reader.Next(cells, file_name);
  if (!more.ok()) return more.status();
  if (!*more) {
    return absl::InvalidArgumentError(
        absl::StrCat(Av(file_name), ": empty file (no header line)"));
  }
  table.header.assign(cells.begin(), cells.end());
  const size_t width = table.header.size();
  while (true) {
    more = reader.Next(cells, file_name);
    if (!more.ok()) return more.status();
    if (!*more) break;
    if (cells.size() != width) {
      std::string msg =
          absl::StrCat(Av(file_name), ":", reader.line(), ": row has ",
                       cells.size(), " cells, the header has ", width);
      if (!skip_ragged) return absl::InvalidArgumentError(msg);
      table.skipped_rows.push_back(std::move(msg));
      continue;
    }
    table.rows.emplace_back(cells.begin(), cells.end());
    table.row_lines.push_back(reader.line());
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
