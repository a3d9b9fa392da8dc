// FarmMetrics exported through prometheus-cpp, following Prometheus naming
// (base units, _total counters, bounded labels). Thread-safe.
#ifndef TUNEFARM_COORDINATOR_PROMETHEUS_METRICS_H_
#define TUNEFARM_COORDINATOR_PROMETHEUS_METRICS_H_

#include <memory>

#include "coordinator/farm_metrics.h"
#include "prometheus/registry.h"

namespace tunefarm {

// `team_labels`: label the per-team series with team names. Off by default
// in the coordinator (--metrics_team_labels): /metrics is unauthenticated,
// so team names and per-team counts are for a cluster Prometheus that the
// operator lets in (helm: NetworkPolicy), see docs/security.md. Off, every
// team's counts add up under team="".
std::unique_ptr<FarmMetrics> NewPrometheusFarmMetrics(
    prometheus::Registry& registry, bool team_labels = false);

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_PROMETHEUS_METRICS_H_
