// SmallDisk: a tmpfs of a given size mounted on a fresh temporary folder,
// which tests fill to leave a chosen number of bytes free, as a data disk
// that runs full. Mounting needs root (CAP_SYS_ADMIN); Mount() says why it
// could not, and tests GTEST_SKIP with that reason.
//
// Owned by one test; not thread-safe. Unmounts and removes the folder when
// destroyed.
#ifndef TUNEFARM_TESTS_STORAGE_SMALL_DISK_H_
#define TUNEFARM_TESTS_STORAGE_SMALL_DISK_H_

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/files.h"

namespace tunefarm {

class SmallDisk {
 public:
  SmallDisk() = default;
  SmallDisk(const SmallDisk&) = delete;
  SmallDisk& operator=(const SmallDisk&) = delete;
  ~SmallDisk() {
    if (mounted_) umount2(dir_.c_str(), MNT_DETACH);
    if (!dir_.empty()) (void)RemoveAll(dir_);
  }

  absl::Status Mount(uint64_t bytes) {
    absl::StatusOr<std::string> dir = MakeTempDir("small_disk");
    if (!dir.ok()) return dir.status();
    dir_ = *dir;
    const std::string opts = absl::StrCat("size=", bytes);
    if (mount("tmpfs", dir_.c_str(), "tmpfs", 0, opts.c_str()) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot mount a ", bytes, "-byte tmpfs on ", dir_, ": ",
                       std::strerror(errno), " (needs root)"));
    }
    mounted_ = true;
    return absl::OkStatus();
  }

  const std::string& dir() const { return dir_; }

  uint64_t FreeBytes() const {
    struct statvfs st;
    if (statvfs(dir_.c_str(), &st) != 0) return 0;
    return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
  }

  // Writes filler files until at most `leave` bytes are free (0: full).
  absl::Status FillLeaving(uint64_t leave) {
    const std::string path = absl::StrCat(dir_, "/filler-", fillers_.size());
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return absl::InternalError(std::strerror(errno));
    fillers_.push_back(path);
    std::vector<char> block(64 << 10, 'x');
    while (FreeBytes() > leave) {
      const uint64_t room = FreeBytes() - leave;
      const size_t n = room < block.size() ? room : block.size();
      if (write(fd, block.data(), n) <= 0) break;  // ENOSPC: full
    }
    close(fd);
    return absl::OkStatus();
  }

  // Removes every filler: the space returns.
  void Unfill() {
    for (const std::string& f : fillers_) unlink(f.c_str());
    fillers_.clear();
  }

 private:
  std::string dir_;
  bool mounted_ = false;
  std::vector<std::string> fillers_;
};

}  // namespace tunefarm

#endif  // TUNEFARM_TESTS_STORAGE_SMALL_DISK_H_
