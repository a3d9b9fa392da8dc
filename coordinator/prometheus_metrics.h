// FarmMetrics exported through prometheus-cpp, following Prometheus naming
// (base units, _total counters, bounded labels). Thread-safe.
#ifndef TUNEFARM_COORDINATOR_PROMETHEUS_METRICS_H_
#define TUNEFARM_COORDINATOR_PROMETHEUS_METRICS_H_

#include <memory>

#include "coordinator/farm_metrics.h"
#include "prometheus/registry.h"

namespace tunefarm {

std::unique_ptr<FarmMetrics> NewPrometheusFarmMetrics(
    prometheus::Registry& registry);

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_PROMETHEUS_METRICS_H_
