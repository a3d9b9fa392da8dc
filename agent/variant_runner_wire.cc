// The frame format of agent/variant_runner.h (runner_wire): shared by the
// agent side and tunefarm-variant-runner.
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "agent/variant_runner.h"

namespace tunefarm {
namespace runner_wire {
namespace {

constexpr uint32_t kMaxParts = 4096;
constexpr uint32_t kMaxPartBytes = 1 << 20;

bool WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = send(fd, data, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool ReadAll(int fd, char* data, size_t n) {
  while (n > 0) {
    ssize_t r = read(fd, data, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    data += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

void PutU32(std::string* out, uint32_t v) {
  char b[4];
  std::memcpy(b, &v, 4);
  out->append(b, 4);
}

}  // namespace

bool WriteFrame(int fd, const std::vector<std::string>& parts) {
  std::string buf;
  PutU32(&buf, static_cast<uint32_t>(parts.size()));
  for (const std::string& p : parts) {
    PutU32(&buf, static_cast<uint32_t>(p.size()));
    buf += p;
  }
  return WriteAll(fd, buf.data(), buf.size());
}

bool ReadFrame(int fd, std::vector<std::string>* parts) {
  uint32_t count = 0;
  if (!ReadAll(fd, reinterpret_cast<char*>(&count), 4) || count > kMaxParts) {
    return false;
  }
  parts->assign(count, std::string());
  for (std::string& p : *parts) {
    uint32_t len = 0;
    if (!ReadAll(fd, reinterpret_cast<char*>(&len), 4) ||
        len > kMaxPartBytes) {
      return false;
    }
    p.resize(len);
    if (len > 0 && !ReadAll(fd, p.data(), len)) return false;
  }
  return true;
}

}  // namespace runner_wire
}  // namespace tunefarm
