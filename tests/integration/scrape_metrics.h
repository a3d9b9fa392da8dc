// ScrapeMetrics: GET http://127.0.0.1:PORT/metrics with a plain socket, for
// the integration tests that read a real process's Prometheus endpoint.
// Header-only; thread-safe (no shared state).
#ifndef TUNEFARM_TESTS_INTEGRATION_SCRAPE_METRICS_H_
#define TUNEFARM_TESTS_INTEGRATION_SCRAPE_METRICS_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace tunefarm {

// The whole HTTP response ("" when nothing listens on `port`).
inline std::string ScrapeMetrics(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string req = "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n";
    (void)!::write(fd, req.data(), req.size());
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof(buf))) > 0) out.append(buf, n);
  }
  ::close(fd);
  return out;
}

}  // namespace tunefarm

#endif  // TUNEFARM_TESTS_INTEGRATION_SCRAPE_METRICS_H_
