// MappedFile: a whole file mapped read-only into memory, for parsing large
// profiler exports without copying them (a 64 MB read into a fresh string
// costs more than parsing it: page faults on the new memory plus the copy).
//
// Owns the mapping; movable, not copyable. text() stays valid while the
// MappedFile lives and the file is not truncated underneath it (profiles are
// written once, then read). Const access is thread-safe.
#ifndef TUNEFARM_ANALYZER_MAPPED_FILE_H_
#define TUNEFARM_ANALYZER_MAPPED_FILE_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace tunefarm {

class MappedFile {
 public:
  // NOT_FOUND when `path` does not exist, INVALID_ARGUMENT when it is not a
  // regular file, UNAVAILABLE for other I/O errors; the message names it.
  static absl::StatusOr<MappedFile> Open(const std::string& path);

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  std::string_view text() const {
    return {static_cast<const char*>(data_), size_};
  }

 private:
  MappedFile(void* data, size_t size) : data_(data), size_(size) {}
  void* data_ = nullptr;  // nullptr for an empty file
  size_t size_ = 0;
};

}  // namespace tunefarm

#endif  // TUNEFARM_ANALYZER_MAPPED_FILE_H_
