// AnalyzerWorker: the analyzer's main loop. It owns a PipelineReceiver
// bound for profile bundles (agents PUSH to it) and a PipelineSender to the
// coordinator's diagnosis endpoint; each bundle is analysed (Analyze) and
// the diagnosis pushed on. A garbled message, a payload that is not a
// bundle, or a diagnosis nobody takes is logged and counted; none of them
// stops the worker.
//
// Threading: Run() is called by one thread, which then owns the sockets.
// stats() and bound_endpoint() may be read from any thread.
#ifndef TUNEFARM_ANALYZER_WORKER_H_
#define TUNEFARM_ANALYZER_WORKER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "analyzer/pipeline.h"
#include "common/clock.h"

namespace tunefarm {

// Counters since the worker was created (monotonic).
struct AnalyzerStats {
  int64_t bundles_received = 0;
  int64_t diagnoses_sent = 0;
  int64_t garbled = 0;        // frames that were not a usable bundle
  int64_t send_failures = 0;  // diagnoses no coordinator took (dropped)
};

// What one analysis cost and found, for the worker's metrics.
struct AnalysisReport {
  absl::Duration took;       // wall time of Analyze
  int64_t bundle_bytes = 0;  // serialized ProfileBundle size
  // Files that failed to parse, by format (ParseErrorsByFormat).
  std::map<std::string, int64_t> parse_errors;
};

class AnalyzerWorker {
 public:
  struct Options {
    std::string id;  // written into Diagnosis.analyzer_id
    std::string bind_endpoint = "tcp://127.0.0.1:*";
    std::vector<std::string> coordinator_endpoints;
    // How often Run() looks at `stop` while idle.
    absl::Duration poll_interval = absl::Milliseconds(100);
    // How long one diagnosis may wait for the coordinator to take it.
    absl::Duration send_timeout = absl::Seconds(5);
    Clock* clock = nullptr;  // SystemClock() when null; not owned
    // Called after each analysis, from Run()'s thread.
    std::function<void(const AnalysisReport&)> on_analyzed;
  };

  // Binds the bundle endpoint and connects to the coordinator.
  static absl::StatusOr<std::unique_ptr<AnalyzerWorker>> Create(
      Options options);

  // The bundle endpoint as bound (real port).
  const std::string& bound_endpoint() const;

  // Receives and analyses bundles until `stop` becomes true; returns within
  // about poll_interval (plus one analysis and one send) after that.
  void Run(const std::atomic<bool>& stop);

  AnalyzerStats stats() const;

 private:
  AnalyzerWorker(Options options, std::unique_ptr<PipelineReceiver> receiver,
                 std::unique_ptr<PipelineSender> sender);
  void HandleOne(absl::Duration wait);

  const Options options_;
  Clock& clock_;
  std::unique_ptr<PipelineReceiver> receiver_;
  std::unique_ptr<PipelineSender> sender_;
  std::atomic<int64_t> bundles_received_{0};
  std::atomic<int64_t> diagnoses_sent_{0};
  std::atomic<int64_t> garbled_{0};
  std::atomic<int64_t> send_failures_{0};
};

}  // namespace tunefarm

#endif  // TUNEFARM_ANALYZER_WORKER_H_
