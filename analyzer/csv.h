// A CSV reader for profiler exports (msprof, torch_npu, PyPTO tables).
//
// ParseCsv reads RFC 4180 text as the Ascend tools write it: a UTF-8 BOM is
// dropped, lines end in LF or CRLF, quoted cells may hold commas, quotes
// ("" inside quotes) and newlines. The tools' own quirks are handled by the
// accessors, not by the parser: shape cells are quoted twice over
// (`"""32,32"""` decodes to the text `"32,32"`, which Text() unquotes),
// time-stamp cells end in a TAB, and `N/A` marks a missing value.
//
// Columns are always found by header name (case-insensitive, trimmed, with
// the aliases that differ across CANN / torch_npu versions), never by
// position, because the column layout drifts between versions.
//
// CsvTable is a plain value: it owns its cells, and const access is
// thread-safe. The functions here are pure.
#ifndef TUNEFARM_ANALYZER_CSV_H_
#define TUNEFARM_ANALYZER_CSV_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace tunefarm {

struct CsvTable {
  std::string file_name;
  std::vector<std::string> header;
  // Every row has exactly header.size() cells (ParseCsv rejects ragged rows).
  std::vector<std::vector<std::string>> rows;
  // 1-based line in the file where each row starts (for error messages).
  std::vector<int> row_lines;
  // Only from ParseCsvSkippingRaggedRows: one "file:line: ..." message per
  // row it dropped.
  std::vector<std::string> skipped_rows;

  // The index of the first header that matches one of `aliases`, trying the
  // aliases in order; headers and aliases compare case-insensitively after
  // trimming whitespace. nullopt when none is present.
  std::optional<int> Column(
      std::initializer_list<std::string_view> aliases) const;

  // The cell as decoded by RFC 4180 (no trimming). Empty for a column of
  // nullopt or out-of-range indexes, so callers can chain Column() into it.
  std::string_view Cell(size_t row, std::optional<int> column) const;
  // The cell trimmed of whitespace (incl. TAB) with the profilers' extra
  // quote layer removed; nullopt for empty, `N/A` or a missing column.
  std::optional<std::string> Text(size_t row, std::optional<int> column) const;
  // The cell as a number; nullopt for empty, `N/A`, a missing column or
  // text that is not a number.
  std::optional<double> Number(size_t row, std::optional<int> column) const;
};

// A streaming RFC 4180 record reader over text the caller keeps alive: the
// fast path for large per-task tables (no per-cell allocation for cells
// without "" escapes). Cells are views into the text, or into the reader's
// scratch for cells with escaped quotes; both stay valid until the next
// Next() call. Not thread-safe; one reader per text.
class CsvReader {
 public:
  explicit CsvReader(std::string_view text);
  // Reads the next non-blank record into `cells` (cleared first). Returns
  // false at the end of the text; INVALID_ARGUMENT (naming `file_name` and
  // the line) for an unterminated quote or text after a closing quote.
  absl::StatusOr<bool> Next(std::vector<std::string_view>& cells,
                            std::string_view file_name);
  // 1-based line where the record Next() last returned starts, counted
  // from where this reader began (see At()).
  int line() const { return record_line_; }
  // Offset in text() where the next Next() starts reading.
  size_t position() const { return pos_; }
  // Offset in text() where the record Next() last returned starts.
  size_t record_start() const { return record_start_; }
  // The text this reader walks (without its BOM).
  std::string_view text() const { return text_; }

  // A reader over the same text that begins at offset `pos`, which the
  // caller takes to be a record boundary (right after a line end), and
  // counts lines from 1 there. Lets one large table be read in ranges on
  // several threads; a wrong guess (a `pos` inside a quoted cell) shows as
  // ranges whose record starts do not meet, which the caller must check.
  CsvReader At(size_t pos) const;

 private:
  CsvReader() = default;
  std::string_view text_;
  size_t pos_ = 0;
  int line_ = 1;
  int record_line_ = 1;
  size_t record_start_ = 0;
  std::deque<std::string> scratch_;  // deque: growth keeps views valid
  size_t scratch_used_ = 0;
};

// The index of the first of `header` matching one of `aliases` (trimmed,
// case-insensitive, aliases tried in order).
std::optional<int> FindColumn(const std::vector<std::string>& header,
                              std::initializer_list<std::string_view> aliases);

// A cell trimmed of whitespace (profilers leave a TAB after time stamps)
// with the profilers' extra quote layer removed; empty for `N/A`.
std::string_view CleanCell(std::string_view cell);

// Parses `text`; `file_name` only labels errors. INVALID_ARGUMENT, naming
// the file and line, for an empty file, a ragged row (cell count differing
// from the header's), an unterminated quote or text after a closing quote.
// Blank lines are skipped.
absl::StatusOr<CsvTable> ParseCsv(std::string_view text,
                                  std::string_view file_name);

// As ParseCsv, but a ragged row is dropped and described in skipped_rows
// instead of failing the file: real exports carry the odd truncated row
// (msinsight's MemoryL0 kernel_details has one), and one bad task should
// not hide the rest. Quoting errors still fail the file.
absl::StatusOr<CsvTable> ParseCsvSkippingRaggedRows(std::string_view text,
                                                    std::string_view file_name);

// A numeric cell: trims whitespace (profilers leave a TAB after time
// stamps), accepts thousands separators ("1,234.5"), and gives nullopt for
// empty, `N/A`, non-finite or non-numeric text.
std::optional<double> ParseNumber(std::string_view cell);

// A time stamp in microseconds with up to three (or more) decimals, as the
// Ascend tools write absolute starts ("1736413971558972.912<TAB>"), read as
// integer nanoseconds without going through a double: a double holds such
// a value only to 0.25 us, which invents overlaps and hides gaps. Digits
// past the third decimal are truncated. nullopt for anything else.
std::optional<int64_t> ParseMicrosAsNanos(std::string_view cell);

}  // namespace tunefarm

#endif  // TUNEFARM_ANALYZER_CSV_H_
