// libFuzzer target for analyzer/csv.cc: ParseCsv, the ragged-row-tolerant
// variant, the streaming CsvReader and the number / cell helpers.
#include <string>
#include <vector>

#include "analyzer/csv.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tunefarm;
  std::string_view text = fuzz::AsText(data, size);
  absl::StatusOr<CsvTable> strict = ParseCsv(text, fuzz::kFile);
  fuzz::CheckContract(strict, fuzz::kFile, "ParseCsv");
  absl::StatusOr<CsvTable> lax = ParseCsvSkippingRaggedRows(text, fuzz::kFile);
  fuzz::CheckContract(lax, fuzz::kFile, "ParseCsvSkippingRaggedRows");
  if (lax.ok()) {
    // Every kept row has the header's width; the accessors stay in range.
    for (size_t r = 0; r < lax->rows.size(); ++r) {
      if (lax->rows[r].size() != lax->header.size()) std::abort();
      for (size_t c = 0; c <= lax->header.size(); ++c) {
        (void)lax->Text(r, static_cast<int>(c));
        (void)lax->Number(r, static_cast<int>(c));
      }
    }
    (void)lax->Column({"Op Name", "Name"});
  }
  CsvReader reader(text);
  std::vector<std::string_view> cells;
  for (;;) {
    absl::StatusOr<bool> more = reader.Next(cells, fuzz::kFile);
    fuzz::CheckContract(more, fuzz::kFile, "CsvReader::Next");
    if (!more.ok() || !*more) break;
    for (std::string_view c : cells) {
      (void)ParseNumber(c);
      (void)CleanCell(c);
    }
  }
  return 0;
}
