// AnalyzerWorker: the analyzer's main loop. It owns a PipelineReceiver
// bound for profile bundles (agents' outboxes send to it) and a
// PipelineSender to the coordinator's diagnosis endpoint. Each bundle is
// analysed (Analyze), the diagnosis sent to the coordinator, and the bundle
// acked to its agent only after the coordinator acked the diagnosis (which
// it does once it is durable). A bundle that is not acked is re-sent by its
// agent, so a worker that dies mid-bundle loses nothing. A garbled message,
// a payload that is not a bundle, or a diagnosis the coordinator does not
// ack in time is logged and counted; none of them stops the worker.
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
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "pipeline/transport.h"

namespace tunefarm {

// Counters since the worker was created (monotonic).
struct AnalyzerStats {
  int64_t bundles_received = 0;
  int64_t redeliveries = 0;    // bundles received on a re-send (attempt > 1)
  int64_t diagnoses_sent = 0;  // diagnoses the coordinator acked as durable
  int64_t duplicates = 0;      // ... of which it already held (re-sends)
  int64_t rejected = 0;        // ... of which it can never record
  int64_t garbled = 0;         // frames that were not a usable bundle
  // Diagnoses no coordinator took or acked in time; their bundles are not
  // acked, so the agents re-send them.
  int64_t send_failures = 0;
};

// What one analysis cost and found, for the worker's metrics.
struct AnalysisReport {
  absl::Duration took;       // wall time of Analyze
  int64_t bundle_bytes = 0;  // serialized ProfileBundle size
  // Files that failed to parse, by format (ParseErrorsByFormat).
  std::map<std::string, int64_t> parse_errors;
  // From the bundle's creation to its diagnosis being durable; unset when
  // the coordinator did not ack it or the bundle has no creation time.
  std::optional<absl::Duration> lag;
};

class AnalyzerWorker {
 public:
  struct Options {
    std::string id;  // written into Diagnosis.analyzer_id
    std::string bind_endpoint = "tcp://127.0.0.1:*";
    std::vector<std::string> coordinator_endpoints;
    // CURVE: the bundle endpoint lets in the agents of allow_list_file; the
    // coordinator is reached with server_public_key. Empty: plain ZeroMQ.
    PipelineSecurity security;
    // How often Run() looks at `stop` while idle.
    absl::Duration poll_interval = absl::Milliseconds(100);
    // How long one diagnosis may wait for the coordinator to take it, and
    // then for its ack.
    absl::Duration send_timeout = absl::Seconds(5);
    absl::Duration ack_timeout = absl::Seconds(10);
    Clock* clock = nullptr;  // SystemClock() when null; not owned
    // Called after each bundle, from Run()'s thread.
    std::function<void(const AnalysisReport&)> on_analyzed;
    // Test hook (failure injection): the first time the worker reaches
    // `hold_stage` ("received": a bundle came; "recorded": the coordinator
    // acked its diagnosis, the agent not yet), it writes the bundle id to
    // `hold_file` and stalls until stopped, holding the bundle unacked.
    std::string hold_file;
    std::string hold_stage;
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
  void HandleOne(absl::Duration wait, const std::atomic<bool>& stop);
  // Waits for the coordinator's ack of `bundle_id`'s diagnosis.
  absl::StatusOr<v1::PipelineAck> AwaitAck(const std::string& bundle_id);
  void MaybeHold(absl::string_view stage, const std::string& bundle_id,
                 const std::atomic<bool>& stop);

  const Options options_;
  Clock& clock_;
  std::unique_ptr<PipelineReceiver> receiver_;
  std::unique_ptr<PipelineSender> sender_;
  std::atomic<int64_t> bundles_received_{0};
  std::atomic<int64_t> redeliveries_{0};
  std::atomic<int64_t> diagnoses_sent_{0};
  std::atomic<int64_t> duplicates_{0};
  std::atomic<int64_t> rejected_{0};
  std::atomic<int64_t> garbled_{0};
  std::atomic<int64_t> send_failures_{0};
  bool held_ = false;  // the hold hook fired (Run()'s thread only)
};

}  // namespace tunefarm

#endif  // TUNEFARM_ANALYZER_WORKER_H_
