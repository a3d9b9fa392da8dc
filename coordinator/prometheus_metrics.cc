#include "coordinator/prometheus_metrics.h"

#include "absl/strings/ascii.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"

namespace tunefarm {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

class PrometheusFarmMetrics : public FarmMetrics {
 public:
  explicit PrometheusFarmMetrics(prometheus::Registry& registry)
      : rounds_(BuildCounter()
                    .Name("tunefarm_rounds_total")
                    .Help("Round results recorded, by outcome")
                    .Register(registry)),
        boards_(BuildGauge()
                    .Name("tunefarm_boards")
                    .Help("Registered boards, by state")
                    .Register(registry)),
        queue_(BuildGauge()
                   .Name("tunefarm_queued_rounds")
                   .Help("Rounds waiting for a board")
                   .Register(registry)
                   .Add({})),
        lease_expired_(BuildCounter()
                           .Name("tunefarm_lease_expirations_total")
                           .Help("Leases that expired without a result")
                           .Register(registry)
                           .Add({})),
        diagnoses_(BuildCounter()
                       .Name("tunefarm_diagnoses_total")
                       .Help("Diagnoses received from analyzers")
                       .Register(registry)
                       .Add({})),
        lease_latency_(
            BuildHistogram()
                .Name("tunefarm_lease_latency_seconds")
                .Help("Time from a lease grant to its recorded result")
                .Register(registry)
                .Add({}, prometheus::Histogram::BucketBoundaries{
                             0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10,
                             30, 60, 300, 900})),
        queue_wait_(BuildHistogram()
                        .Name("tunefarm_round_queue_wait_seconds")
                        .Help("Time from a round's creation to its lease")
                        .Register(registry)
                        .Add({}, prometheus::Histogram::BucketBoundaries{
                                     0.001, 0.01, 0.1, 1, 10, 60, 600})) {}

  void RoundRecorded(const std::string& outcome,
                     double lease_to_result_s) override {
    std::string label = absl::AsciiStrToLower(
        absl::StripPrefix(outcome, "OUTCOME_"));
    rounds_.Add({{"outcome", label}}).Increment();
    lease_latency_.Observe(lease_to_result_s);
  }
  void LeaseGranted(double queue_wait_s) override {
    queue_wait_.Observe(queue_wait_s);
  }
  void LeaseExpired() override { lease_expired_.Increment(); }
  void SetBoardsByState(const std::map<std::string, int>& counts) override {
    for (const auto& [state, n] : counts) {
      boards_.Add({{"state", state}}).Set(n);
    }
  }
  void SetQueueDepth(int queued) override { queue_.Set(queued); }
  void DiagnosisRecorded() override { diagnoses_.Increment(); }

 private:
  prometheus::Family<prometheus::Counter>& rounds_;
  prometheus::Family<prometheus::Gauge>& boards_;
  prometheus::Gauge& queue_;
  prometheus::Counter& lease_expired_;
  prometheus::Counter& diagnoses_;
  prometheus::Histogram& lease_latency_;
  prometheus::Histogram& queue_wait_;
};

}  // namespace

std::unique_ptr<FarmMetrics> NewPrometheusFarmMetrics(
    prometheus::Registry& registry) {
  return std::make_unique<PrometheusFarmMetrics>(registry);
}

}  // namespace tunefarm
