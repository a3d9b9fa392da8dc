#include "analyzer/worker.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "analyzer/analyzer.h"
#include "common/files.h"
#include "common/logging.h"

namespace tunefarm {

absl::StatusOr<std::unique_ptr<AnalyzerWorker>> AnalyzerWorker::Create(
    Options options) {
  if (options.coordinator_endpoints.empty()) {
    return absl::InvalidArgumentError(
        "AnalyzerWorker needs a coordinator endpoint");
  }
  absl::StatusOr<std::unique_ptr<PipelineReceiver>> receiver =
      PipelineReceiver::Bind(options.bind_endpoint, options.security);
  if (!receiver.ok()) return receiver.status();
  absl::StatusOr<std::unique_ptr<PipelineSender>> sender =
      PipelineSender::Connect(options.coordinator_endpoints, options.security);
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
  s.redeliveries = redeliveries_.load();
  s.diagnoses_sent = diagnoses_sent_.load();
  s.duplicates = duplicates_.load();
  s.rejected = rejected_.load();
  s.garbled = garbled_.load();
  s.send_failures = send_failures_.load();
  return s;
}

void AnalyzerWorker::Run(const std::atomic<bool>& stop) {
  spdlog::info("analyzer {} taking bundles on {}", options_.id,
               bound_endpoint());
  while (!stop.load()) HandleOne(options_.poll_interval, stop);
  spdlog::info(
      "analyzer {} stopping: {} bundles ({} re-sent), {} diagnoses "
      "durable, {} garbled, {} send failures",
      options_.id, bundles_received_.load(), redeliveries_.load(),
      diagnoses_sent_.load(), garbled_.load(), send_failures_.load());
}

void AnalyzerWorker::MaybeHold(absl::string_view stage,
                               const std::string& bundle_id,
                               const std::atomic<bool>& stop) {
  if (options_.hold_file.empty() || options_.hold_stage != stage || held_) {
    return;
  }
  held_ = true;
  spdlog::warn("analyzer {}: holding bundle {} at stage {} (test hook)",
               options_.id, bundle_id, std::string(stage));
  (void)WriteFileAtomic(options_.hold_file, bundle_id);
  while (!stop.load()) absl::SleepFor(options_.poll_interval);
}

absl::StatusOr<v1::PipelineAck> AnalyzerWorker::AwaitAck(
    const std::string& bundle_id) {
  const absl::Time deadline = absl::Now() + options_.ack_timeout;
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(
          absl::StrCat("the coordinator did not ack the diagnosis within ",
                       absl::FormatDuration(options_.ack_timeout)));
    }
    absl::StatusOr<v1::PipelineMessage> reply = sender_->Receive(left);
    if (absl::IsDeadlineExceeded(reply.status())) continue;
    if (!reply.ok()) {
      spdlog::warn("analyzer {}: bad reply from the coordinator: {}",
                   options_.id, reply.status().ToString());
      continue;
    }
    // A late ack for an earlier diagnosis that timed out: that bundle's
    // agent re-sends it, and the coordinator will call it a duplicate.
    if (!reply->has_ack() || reply->ack().bundle_id() != bundle_id) continue;
    return reply->ack();
  }
}

void AnalyzerWorker::HandleOne(absl::Duration wait,
                               const std::atomic<bool>& stop) {
  absl::StatusOr<PipelineDelivery> in = receiver_->Receive(wait);
  if (absl::IsDeadlineExceeded(in.status())) return;
  if (!in.ok()) {
    if (absl::IsInvalidArgument(in.status())) {
      ++garbled_;
      spdlog::warn("analyzer {}: dropped a message: {}", options_.id,
                   in.status().ToString());
    } else {
      spdlog::error("analyzer {}: receive failed: {}", options_.id,
                    in.status().ToString());
    }
    return;
  }
  if (!in->message.has_bundle()) {
    ++garbled_;
    spdlog::warn(
        "analyzer {}: dropped a PipelineMessage that holds no "
        "ProfileBundle (payload case {})",
        options_.id, static_cast<int>(in->message.payload_case()));
    return;
  }
  ++bundles_received_;
  if (in->message.attempt() > 1) ++redeliveries_;
  const v1::ProfileBundle& bundle = in->message.bundle();
  MaybeHold("received", bundle.bundle_id(), stop);
  if (stop.load()) return;
  absl::Time start = absl::Now();  // wall time for the histogram only
  v1::PipelineMessage out;
  out.set_version(kPipelineVersion);
  v1::Diagnosis* d = out.mutable_diagnosis();
  *d = Analyze(bundle);
  d->set_analyzer_id(options_.id);
  d->set_analyzed_unix_ms(clock_.NowUnixMs());
  AnalysisReport report;
  report.took = absl::Now() - start;
  report.bundle_bytes = static_cast<int64_t>(bundle.ByteSizeLong());
  report.parse_errors = ParseErrorsByFormat(*d);
  spdlog::info(
      "analyzer {}: bundle {} (sweep {} round {}, attempt {}): "
      "hotspot {}, bound {}, {} gaps, {} suggestions, analysed in {}",
      options_.id, bundle.bundle_id(), bundle.sweep_id(), bundle.round_id(),
      in->message.attempt(),
      d->hotspots_size() > 0 ? d->hotspots(0).op_name() : "none", d->bound(),
      d->evidence_gaps_size(), d->suggestions_size(),
      absl::FormatDuration(report.took));
  absl::Status sent = sender_->Send(out, options_.send_timeout);
  absl::StatusOr<v1::PipelineAck> ack =
      sent.ok() ? AwaitAck(bundle.bundle_id()) : sent;
  if (!ack.ok()) {
    ++send_failures_;
    spdlog::error(
        "analyzer {}: diagnosis of bundle {} not recorded ({}); "
        "its agent will re-send it",
        options_.id, bundle.bundle_id(), ack.status().ToString());
    if (options_.on_analyzed) options_.on_analyzed(report);
    return;
  }
  ++diagnoses_sent_;
  if (ack->duplicate()) ++duplicates_;
  if (!ack->rejected().empty()) {
    ++rejected_;
    spdlog::warn(
        "analyzer {}: the coordinator will not record the diagnosis "
        "of bundle {}: {}",
        options_.id, bundle.bundle_id(), ack->rejected());
  }
  if (bundle.created_unix_ms() > 0) {
    report.lag =
        absl::Milliseconds(clock_.NowUnixMs() - bundle.created_unix_ms());
  }
  if (options_.on_analyzed) options_.on_analyzed(report);
  MaybeHold("recorded", bundle.bundle_id(), stop);
  if (stop.load()) return;
  v1::PipelineMessage reply;
  reply.set_version(kPipelineVersion);
  *reply.mutable_ack() = *ack;
  if (absl::Status st = receiver_->Reply(in->peer, reply); !st.ok()) {
    // The agent re-sends; the coordinator acks that as a duplicate.
    spdlog::warn("analyzer {}: cannot ack bundle {}: {}", options_.id,
                 bundle.bundle_id(), st.ToString());
  }
}

}  // namespace tunefarm
