// MetricsServer: serves a prometheus-cpp Registry at /metrics over HTTP.
// Every tunefarm process runs one. The constructor-free factory catches the
// exceptions prometheus-cpp / civetweb throw (e.g. address in use) and turns
// them into a Status. Thread-safe once started.
#ifndef TUNEFARM_COMMON_METRICS_SERVER_H_
#define TUNEFARM_COMMON_METRICS_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "prometheus/registry.h"

namespace prometheus {
class Exposer;
}

namespace tunefarm {

class MetricsServer {
 public:
  // `address` is "host:port"; port 0 picks a free one (see port()).
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      const std::string& address,
      std::shared_ptr<prometheus::Registry> registry);
  ~MetricsServer();
  int port() const { return port_; }

 private:
  MetricsServer() = default;
  std::unique_ptr<prometheus::Exposer> exposer_;
  int port_ = 0;
};

}  // namespace tunefarm

#endif  // TUNEFARM_COMMON_METRICS_SERVER_H_
