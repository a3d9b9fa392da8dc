#include "analyzer/worker.h"

#include <utility>

#include "absl/status/status.h"
#include "analyzer/analyzer.h"
#include "common/logging.h"

namespace tunefarm {

absl::StatusOr<std::unique_ptr<AnalyzerWorker>> AnalyzerWorker::Create(
    Options options) {
  if (options.coordinator_endpoints.empty()) {
    return absl::InvalidArgumentError(
        "AnalyzerWorker needs a coordinator endpoint");
  }
  absl::StatusOr<std::unique_ptr<PipelineReceiver>> receiver =
      PipelineReceiver::Bind(options.bind_endpoint);
  if (!receiver.ok()) return receiver.status();
  absl::StatusOr<std::unique_ptr<PipelineSender>> sender =
      PipelineSender::Connect(options.coordinator_endpoints);
  if (!sender.ok()) return sender.status();
  return std::unique_ptr<AnalyzerWorker>(new AnalyzerWorker(
      std::move(options), *std::move(receiver), *std::move(sender)));
}

AnalyzerWorker::AnalyzerWorker(Options options,
                               std::unique_ptr<PipelineReceiver> receiver,
                               std::unique_ptr<PipelineSender> sender)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? *options_.clock : SystemClock()),
      receiver_(std::move(receiver)),
      sender_(std::move(sender)) {}

const std::string& AnalyzerWorker::bound_endpoint() const {
  return receiver_->bound_endpoint();
}

AnalyzerStats AnalyzerWorker::stats() const {
  AnalyzerStats s;
  s.bundles_received = bundles_received_.load();
  s.diagnoses_sent = diagnoses_sent_.load();
  s.garbled = garbled_.load();
  s.send_failures = send_failures_.load();
  return s;
}

void AnalyzerWorker::Run(const std::atomic<bool>& stop) {
  spdlog::info("analyzer {} taking bundles on {}", options_.id,
               bound_endpoint());
  while (!stop.load()) HandleOne(options_.poll_interval);
  spdlog::info("analyzer {} stopping: {} bundles, {} diagnoses sent, {} "
               "garbled, {} send failures",
               options_.id, bundles_received_.load(), diagnoses_sent_.load(),
               garbled_.load(), send_failures_.load());
}

void AnalyzerWorker::HandleOne(absl::Duration wait) {
  absl::StatusOr<v1::PipelineMessage> msg = receiver_->Receive(wait);
  if (absl::IsDeadlineExceeded(msg.status())) return;
  if (!msg.ok()) {
    if (absl::IsInvalidArgument(msg.status())) {
      ++garbled_;
      spdlog::warn("analyzer {}: dropped a message: {}", options_.id,
                   msg.status().ToString());
    } else {
      spdlog::error("analyzer {}: receive failed: {}", options_.id,
                    msg.status().ToString());
    }
    return;
  }
  if (!msg->has_bundle()) {
    ++garbled_;
    spdlog::warn("analyzer {}: dropped a PipelineMessage that holds no "
                 "ProfileBundle (payload case {})",
                 options_.id, static_cast<int>(msg->payload_case()));
    return;
  }
  ++bundles_received_;
  const v1::ProfileBundle& bundle = msg->bundle();
  absl::Time start = absl::Now();  // wall time for the histogram only
  v1::PipelineMessage out;
  out.set_version(kPipelineVersion);
  v1::Diagnosis* d = out.mutable_diagnosis();
  *d = Analyze(bundle);
  d->set_analyzer_id(options_.id);
  d->set_analyzed_unix_ms(clock_.NowUnixMs());
  absl::Duration took = absl::Now() - start;
  if (options_.on_analyzed) {
    AnalysisReport report;
    report.took = took;
    report.bundle_bytes = static_cast<int64_t>(bundle.ByteSizeLong());
    report.parse_errors = ParseErrorsByFormat(*d);
    options_.on_analyzed(report);
  }
  spdlog::info("analyzer {}: bundle {} (sweep {} round {}): hotspot {}, "
               "bound {}, {} gaps, {} suggestions, analysed in {}",
               options_.id, bundle.bundle_id(), bundle.sweep_id(),
               bundle.round_id(),
               d->hotspots_size() > 0 ? d->hotspots(0).op_name() : "none",
               d->bound(), d->evidence_gaps_size(),
               d->suggestions_size(),
               absl::FormatDuration(took));
  absl::Status sent = sender_->Send(out, options_.send_timeout);
  if (sent.ok()) {
    ++diagnoses_sent_;
  } else {
    ++send_failures_;
    spdlog::error("analyzer {}: diagnosis of bundle {} dropped: {}",
                  options_.id, bundle.bundle_id(), sent.ToString());
  }
}

}  // namespace tunefarm
