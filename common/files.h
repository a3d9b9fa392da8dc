// Small file-system helpers used by every component. Thread-safe.
#ifndef TUNEFARM_COMMON_FILES_H_
#define TUNEFARM_COMMON_FILES_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tunefarm {

// The whole file; NOT_FOUND when it does not exist.
absl::StatusOr<std::string> ReadFile(const std::string& path);
// The whole file if it holds at most `max_bytes`; reads no more than that
// (plus one byte) whatever it is (/dev/zero, a pipe), and then fails with
// INVALID_ARGUMENT naming the file, `what` it should be and the limit.
absl::StatusOr<std::string> ReadFileUpTo(const std::string& path,
                                         int64_t max_bytes,
                                         absl::string_view what);
// Writes `content` to a temporary sibling, fsyncs it and renames it over
// `path`, so readers see the old file or the new one, never half of it.
absl::Status WriteFileAtomic(const std::string& path,
                             const std::string& content);
// Creates `path` and its parents.
absl::Status MakeDirs(const std::string& path);
// A new empty directory under $TMPDIR (or /tmp) whose name starts with
// `prefix`.
absl::StatusOr<std::string> MakeTempDir(const std::string& prefix);
// Removes `path` and everything below it; OK when it does not exist.
absl::Status RemoveAll(const std::string& path);
// The folder holding the running executable (for sibling binaries).
std::string ExecutableDir();
// The program execvp would run for `name`: `name` itself when it holds a
// '/', else the first executable regular file named `name` in a $PATH
// folder (an empty entry is the current folder; /usr/local/bin:/usr/bin:/bin
// when PATH is unset). "" when there is none.
std::string FindExecutable(const std::string& name);

}  // namespace tunefarm

#endif  // TUNEFARM_COMMON_FILES_H_
