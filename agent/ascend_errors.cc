#include "agent/ascend_errors.h"

#include <regex>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tunefarm {
namespace {

// The line of `text` holding position `pos`, trimmed (and capped: a minified
// log line must not flood the detail).
std::string LineAt(absl::string_view text, size_t pos) {
  size_t b = text.rfind('\n', pos);
  b = b == absl::string_view::npos ? 0 : b + 1;
  size_t e = text.find('\n', pos);
  if (e == absl::string_view::npos) e = text.size();
  std::string line(absl::StripAsciiWhitespace(text.substr(b, e - b)));
  if (line.size() > 400) line = line.substr(0, 400) + "...";
  return line;
}

struct DeviceCode {
  int64_t code;
  const char* name;
};
constexpr DeviceCode kDeviceCodes[] = {
    {507053, "ACL_ERROR_RT_DEVICE_MEM_ERROR"},
    {507054, "ACL_ERROR_RT_HBM_MULTI_BIT_ECC_ERROR"},
    {507899, "ACL_ERROR_RT_DRV_INTERNAL_ERROR"},
    {107022, "ACL_ERROR_RT_DEVICE_TASK_ABORT"},
};

constexpr const char* kDevicePhrases[] = {
    "device hang",       "heartbeat lost",        "set device failed",
    "device not found",  "device is unavailable", "hbm multi bit ecc",
    "hbm multi-bit ecc",
};

constexpr const char* kCompileMarkers[] = {
    "MLIRCompilationError",
    "triton.compiler.errors",
    "CompilationError",
    "Failed to run BishengHIR pipeline",
    "failed to legalize operation",
};

}  // namespace

const char* AscendFaultName(AscendFault f) {
  switch (f) {
    case AscendFault::kCompile:
      return "compile failure";
    case AscendFault::kUbOverflow:
      return "UB overflow";
    case AscendFault::kGridLimit:
      return "grid limit";
    case AscendFault::kDevice:
      return "device error";
    case AscendFault::kUnknown:
      break;
  }
  return "unknown failure";
}

AscendFailure ClassifyAscendFailure(absl::string_view message) {
  AscendFailure f;
  const std::string text(message);
  std::smatch m;

  static const std::regex kUb(
      R"(ub overflow, requires (\d+) bits while (\d+) bits available)",
      std::regex::icase);
  if (std::regex_search(text, m, kUb)) {
    int64_t req_bits = 0, avail_bits = 0;
    (void)absl::SimpleAtoi(m[1].str(), &req_bits);
    (void)absl::SimpleAtoi(m[2].str(), &avail_bits);
    f.fault = AscendFault::kUbOverflow;
    f.requested_bytes = req_bits / 8;
    f.available_bytes = avail_bits / 8;
    f.evidence = LineAt(message, static_cast<size_t>(m.position(0)));
    f.summary =
        absl::StrCat("UB overflow: the kernel requires ", f.requested_bytes,
                     " bytes of UB, ", f.available_bytes, " bytes available (",
                     req_bits, " > ", avail_bits, " bits)");
    return f;
  }

  static const std::regex kGrid(
      R"(coreDim=(\d+) can't be greater than UINT16_MAX)");
  if (std::regex_search(text, m, kGrid)) {
    f.fault = AscendFault::kGridLimit;
    (void)absl::SimpleAtoi(m[1].str(), &f.core_dim);
    f.evidence = LineAt(message, static_cast<size_t>(m.position(0)));
    f.summary =
        absl::StrCat("grid limit: coreDim ", f.core_dim,
                     " is over 65535 (UINT16_MAX); the launch was refused");
    return f;
  }

  const std::string lower = absl::AsciiStrToLower(text);
  for (const DeviceCode& dc : kDeviceCodes) {
    const std::string code = absl::StrCat(dc.code);
    size_t pos = 0;
    while ((pos = text.find(code, pos)) != std::string::npos) {
      const bool left_ok = pos == 0 || !absl::ascii_isdigit(text[pos - 1]);
      const size_t end = pos + code.size();
      const bool right_ok =
          end >= text.size() || !absl::ascii_isdigit(text[end]);
      if (left_ok && right_ok) {
        f.fault = AscendFault::kDevice;
        f.acl_code = dc.code;
        f.evidence = LineAt(message, pos);
        f.summary = absl::StrCat("device error: ACL runtime code ", dc.code,
                                 " (", dc.name, ")");
        return f;
      }
      pos = end;
    }
    if (absl::StrContains(text, dc.name)) {
      f.fault = AscendFault::kDevice;
      f.acl_code = dc.code;
      f.evidence = LineAt(message, text.find(dc.name));
      f.summary = absl::StrCat("device error: ", dc.name);
      return f;
    }
  }
  for (const char* phrase : kDevicePhrases) {
    const size_t pos = lower.find(phrase);
    if (pos != std::string::npos) {
      f.fault = AscendFault::kDevice;
      f.evidence = LineAt(message, pos);
      f.summary = absl::StrCat("device error: ", phrase);
      return f;
    }
  }

  for (const char* marker : kCompileMarkers) {
    const size_t pos = text.find(marker);
    if (pos != std::string::npos) {
      f.fault = AscendFault::kCompile;
      // The most telling line: the first "error:" line, else the marker's.
      size_t err =
          text.find("): error:", pos);  // an MLIR "loc(...): error:" line
      if (err == std::string::npos) err = text.find("error:", pos);
      f.evidence = LineAt(message, err != std::string::npos ? err : pos);
      f.summary = absl::StrCat("compile failure: ", f.evidence);
      return f;
    }
  }
  return f;
}

}  // namespace tunefarm
