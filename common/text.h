// Checks on untrusted text shared by the CLI, the coordinator and the
// agents: UTF-8 validity and the syntax of board labels. Header-only,
// stateless, thread-safe.
#ifndef TUNEFARM_COMMON_TEXT_H_
#define TUNEFARM_COMMON_TEXT_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/string_view.h"

namespace tunefarm {

// True when `text` is well-formed UTF-8 (no overlong forms, surrogates or
// code points above U+10FFFF). Otherwise false, with the offset of the first
// bad byte in `*bad_offset` (when given).
inline bool IsValidUtf8(absl::string_view text, size_t* bad_offset = nullptr) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    size_t len = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    }
    bool ok = len != 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) {
      ok = (s[i + k] & 0xC0) == 0x80;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    ok = ok && cp >= kMin[len] && cp <= 0x10FFFF &&
         !(cp >= 0xD800 && cp <= 0xDFFF);
    if (!ok) {
      if (bad_offset != nullptr) *bad_offset = i;
      return false;
    }
    i += len;
  }
  return true;
}

// Board label keys and values (agent --label KEY=VALUE, a spec's
// boards.labels): 1 to 63 characters of [A-Za-z0-9._/-], starting with a
// letter or digit. A spec label outside this syntax can match no board.
inline constexpr char kBoardLabelSyntax[] = "[A-Za-z0-9][A-Za-z0-9._/-]{0,62}";
inline bool IsBoardLabelText(absl::string_view text) {
  if (text.empty() || text.size() > 63 || !absl::ascii_isalnum(text[0])) {
    return false;
  }
  for (char c : text) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '_' && c != '-' &&
        c != '/') {
      return false;
    }
  }
  return true;
}

}  // namespace tunefarm

#endif  // TUNEFARM_COMMON_TEXT_H_
