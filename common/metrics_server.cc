#include "common/metrics_server.h"

#include <exception>

#include "absl/strings/str_cat.h"
#include "prometheus/exposer.h"

namespace tunefarm {

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& address,
    std::shared_ptr<prometheus::Registry> registry) {
  std::unique_ptr<MetricsServer> server(new MetricsServer());
  try {
    server->exposer_ = std::make_unique<prometheus::Exposer>(address);
    server->exposer_->RegisterCollectable(registry);
    auto ports = server->exposer_->GetListeningPorts();
    if (!ports.empty()) server->port_ = ports.front();
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", address, ": ", e.what()));
  }
  return server;
}

MetricsServer::~MetricsServer() = default;

}  // namespace tunefarm
