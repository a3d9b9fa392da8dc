// The cpu board's profile (ops/common/harness.h writes PROF_cpu/): hardware
// counters as "counter,value" rows, or a note saying why the kernel refused
// them, and the run's facts (operator, median time, flops, bytes).
#include <string>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "analyzer/profile.h"

namespace tunefarm {
namespace {

absl::string_view Av(std::string_view s) { return {s.data(), s.size()}; }

// "key,value" rows; the first row may be a header. Values that are not
// numbers are kept as text. INVALID_ARGUMENT names the line otherwise.
absl::Status ReadPairs(std::string_view text, std::string_view file,
                       std::string_view header,
                       std::map<std::string, double>& numbers,
                       std::map<std::string, std::string>* texts) {
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(Av(text), '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    if (line_no == 1 && !header.empty() && line == Av(header)) continue;
    std::vector<absl::string_view> cells = absl::StrSplit(line, ',');
    if (cells.size() != 2 || cells[0].empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(Av(file), ":", line_no, ": expected `name,value`, got `",
                       line.substr(0, 80), "`"));
    }
    std::string key(absl::StripAsciiWhitespace(cells[0]));
    absl::string_view value = absl::StripAsciiWhitespace(cells[1]);
    double v = 0;
    if (absl::SimpleAtod(value, &v)) {
      numbers[key] = v;
    } else if (texts != nullptr) {
      (*texts)[key] = std::string(value);
    } else if (value != "unavailable") {
      return absl::InvalidArgumentError(absl::StrCat(
          Av(file), ":", line_no, ": counter `", key, "` has value `",
          value.substr(0, 40), "`, not a number"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CpuCounters> ParseCpuCounters(std::string_view text,
                                             std::string_view file) {
  CpuCounters c;
  c.file = std::string(file);
  if (absl::Status s =
          ReadPairs(text, file, "counter,value", c.values, nullptr);
      !s.ok()) {
    return s;
  }
  if (!c.values.count("cycles") || !c.values.count("instructions")) {
    return absl::InvalidArgumentError(
        absl::StrCat(Av(file), ": no cycles or instructions row"));
  }
  return c;
}

absl::StatusOr<CpuRunFacts> ParseCpuRunFacts(std::string_view text,
                                             std::string_view file) {
  CpuRunFacts f;
  f.file = std::string(file);
  std::map<std::string, std::string> texts;
  if (absl::Status s = ReadPairs(text, file, "", f.numbers, &texts); !s.ok()) {
    return s;
  }
  f.op = texts.count("operator") ? texts["operator"] : "";
  f.workload = texts.count("workload") ? texts["workload"] : "";
  if (f.op.empty() || !f.numbers.count("median_us") ||
      f.numbers["median_us"] <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        Av(file), ": needs an operator row and a positive median_us"));
  }
  return f;
}

}  // namespace tunefarm
