// Helpers shared by the libFuzzer targets: each target feeds the bytes to
// one parser and checks the contract every parser promises (profile.h):
// it returns a value or an INVALID_ARGUMENT whose message names the file.
// A crash, a sanitizer report, an uncaught exception or a broken contract
// aborts the run. Header-only; single-threaded like libFuzzer itself.
#ifndef TUNEFARM_FUZZ_FUZZ_UTIL_H_
#define TUNEFARM_FUZZ_FUZZ_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tunefarm::fuzz {

inline std::string_view AsText(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// The file label every parser is given; errors must mention it.
inline constexpr std::string_view kFile = "fuzz_input.csv";

template <typename T>
void CheckContract(const absl::StatusOr<T>& result, std::string_view file,
                   const char* parser) {
  if (result.ok()) return;
  const absl::Status& s = result.status();
  if (s.code() != absl::StatusCode::kInvalidArgument ||
      std::string(s.message()).find(file) == std::string::npos) {
    std::fprintf(stderr, "%s broke its error contract: %s\n", parser,
                 s.ToString().c_str());
    std::abort();
  }
}

}  // namespace tunefarm::fuzz

#endif  // TUNEFARM_FUZZ_FUZZ_UTIL_H_
