#include "pipeline/bundle_outbox.h"

#include <cstdio>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/files.h"
#include "common/logging.h"

namespace tunefarm {
namespace {

constexpr absl::string_view kSuffix = ".bundle";

}  // namespace

absl::StatusOr<std::unique_ptr<BundleOutbox>> BundleOutbox::Open(
    Options options) {
  if (options.dir.empty()) {
    return absl::InvalidArgumentError("BundleOutbox needs a folder");
  }
  if (options.window < 1 || options.capacity < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "BundleOutbox window (", options.window, ") and capacity (",
        options.capacity, ") must be at least 1"));
  }
  if (options.ack_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("BundleOutbox ack_timeout must be > 0");
  }
  if (absl::Status st = MakeDirs(options.dir); !st.ok()) {
    return absl::Status(st.code(), absl::StrCat("outbox folder ", options.dir,
                                                ": ", st.message()));
  }
  absl::StatusOr<std::unique_ptr<PipelineSender>> sender =
      PipelineSender::Connect(options.endpoints, options.security);
  if (!sender.ok()) return sender.status();
  std::unique_ptr<BundleOutbox> outbox(
      new BundleOutbox(std::move(options), *std::move(sender)));
  if (absl::Status st = outbox->Load(); !st.ok()) return st;
  outbox->pump_ = std::thread([p = outbox.get()] { p->Pump(); });
  return outbox;
}

BundleOutbox::BundleOutbox(Options options,
                           std::unique_ptr<PipelineSender> sender)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? *options_.clock : SystemClock()),
      sender_(std::move(sender)) {}

BundleOutbox::~BundleOutbox() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (pump_.joinable()) pump_.join();
}

absl::Status BundleOutbox::Load() {
  std::error_code ec;
  std::filesystem::directory_iterator it(options_.dir, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat(
        "cannot list outbox folder ", options_.dir, ": ", ec.message()));
  }
  absl::MutexLock lock(&mu_);
  for (const auto& file : it) {
    const std::string name = file.path().filename().string();
    absl::string_view stem = name;
    uint64_t seq = 0;
    if (!absl::ConsumeSuffix(&stem, kSuffix) || !absl::SimpleAtoi(stem, &seq)) {
      continue;
    }
    Entry e;
    e.path = file.path().string();
    entries_[seq] = e;
    next_seq_ = std::max(next_seq_, seq + 1);
  }
  // Read each one once, so a file that cannot be a bundle is set aside now
  // rather than on every send, and the ids are known for acks.
  std::vector<uint64_t> seqs;
  for (const auto& [seq, e] : entries_) seqs.push_back(seq);
  for (uint64_t seq : seqs) {
    Entry& e = entries_[seq];
    absl::StatusOr<std::string> bytes = ReadFile(e.path);
    v1::PipelineMessage msg;
    if (!bytes.ok()) {
      SetAside(seq, bytes.status().ToString());
    } else if (!msg.ParseFromString(*bytes) || !msg.has_bundle() ||
               msg.bundle().bundle_id().empty()) {
      SetAside(seq, "not a PipelineMessage holding a ProfileBundle with an id");
    } else if (by_id_.contains(msg.bundle().bundle_id())) {
      // A crash between writing a second copy and noticing the first.
      std::remove(e.path.c_str());
      entries_.erase(seq);
    } else {
      e.bundle_id = msg.bundle().bundle_id();
      by_id_[e.bundle_id] = seq;
    }
  }
  if (!entries_.empty()) {
    spdlog::info("outbox {}: {} unacked bundles from an earlier run to send",
                 options_.dir, entries_.size());
  }
  return absl::OkStatus();
}

absl::Status BundleOutbox::Add(const v1::ProfileBundle& bundle, bool hold) {
  if (bundle.bundle_id().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("profile bundle of sweep ", bundle.sweep_id(), " round ",
                     bundle.round_id(), " has no bundle_id"));
  }
  uint64_t seq;
  {
    absl::MutexLock lock(&mu_);
    if (by_id_.contains(bundle.bundle_id())) return absl::OkStatus();
    seq = next_seq_++;
  }
  v1::PipelineMessage msg;
  msg.set_version(kPipelineVersion);
  *msg.mutable_bundle() = bundle;
  const std::string path =
      absl::StrCat(options_.dir, "/", absl::StrFormat("%020d", seq), kSuffix);
  if (absl::Status st = WriteFileAtomic(path, msg.SerializeAsString());
      !st.ok()) {
    return absl::Status(st.code(),
                        absl::StrCat("cannot keep bundle ", bundle.bundle_id(),
                                     " in the outbox: ", st.message()));
  }
  absl::MutexLock lock(&mu_);
  Entry& e = entries_[seq];
  e.bundle_id = bundle.bundle_id();
  e.path = path;
  e.held = hold;
  by_id_[e.bundle_id] = seq;
  return absl::OkStatus();
}

void BundleOutbox::Release(const std::string& bundle_id) {
  absl::MutexLock lock(&mu_);
  auto id = by_id_.find(bundle_id);
  if (id == by_id_.end()) return;
  auto it = entries_.find(id->second);
  if (it != entries_.end()) it->second.held = false;
}

bool BundleOutbox::AcceptingWork() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(entries_.size()) < options_.capacity;
}

bool BundleOutbox::WaitDrained(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto drained = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return entries_.empty();
  };
  return mu_.AwaitWithTimeout(absl::Condition(&drained), timeout);
}

BundleOutbox::Stats BundleOutbox::stats() const {
  absl::MutexLock lock(&mu_);
  Stats s = stats_;
  s.held = static_cast<int64_t>(entries_.size());
  for (const auto& [seq, e] : entries_) s.in_flight += e.in_flight ? 1 : 0;
  return s;
}

void BundleOutbox::SetAside(uint64_t seq, const std::string& why) {
  auto it = entries_.find(seq);
  if (it == entries_.end()) return;
  const std::string bad = it->second.path + ".bad";
  std::rename(it->second.path.c_str(), bad.c_str());
  spdlog::error("outbox: {} is unreadable ({}); kept as {}", it->second.path,
                why, bad);
  by_id_.erase(it->second.bundle_id);
  entries_.erase(it);
  ++stats_.unreadable;
}

void BundleOutbox::Pump() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
    }
    SendDue();
    TakeAcks();
  }
}

void BundleOutbox::SendDue() {
  std::vector<uint64_t> due;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_.Now();
    int in_flight = 0;
    for (auto& [seq, e] : entries_) {
      if (e.in_flight && now - e.sent_at >= options_.ack_timeout) {
        spdlog::warn("outbox: no ack for bundle {} after {}; sending it again",
                     e.bundle_id, absl::FormatDuration(now - e.sent_at));
        e.in_flight = false;
      }
      in_flight += e.in_flight ? 1 : 0;
    }
    for (const auto& [seq, e] : entries_) {
      if (in_flight + static_cast<int>(due.size()) >= options_.window) break;
      if (!e.in_flight && !e.held) due.push_back(seq);
    }
  }
  for (uint64_t seq : due) {
    std::string path;
    uint32_t attempt;
    {
      absl::MutexLock lock(&mu_);
      auto it = entries_.find(seq);
      if (it == entries_.end()) continue;
      path = it->second.path;
      attempt = it->second.attempts + 1;
    }
    absl::StatusOr<std::string> bytes = ReadFile(path);
    v1::PipelineMessage msg;
    if (!bytes.ok() || !msg.ParseFromString(*bytes) || !msg.has_bundle()) {
      absl::MutexLock lock(&mu_);
      SetAside(seq, bytes.ok() ? "not a PipelineMessage holding a bundle"
                               : bytes.status().ToString());
      continue;
    }
    bytes->clear();
    msg.set_attempt(attempt);
    absl::Status st = sender_->Send(msg, options_.poll_interval);
    if (!st.ok()) {
      // No analyzer took it (none up, or all full): it stays queued.
      spdlog::debug("outbox: {}", st.ToString());
      return;
    }
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(seq);
    if (it == entries_.end()) continue;
    it->second.attempts = attempt;
    it->second.in_flight = true;
    it->second.sent_at = clock_.Now();
    ++stats_.sends;
    if (attempt > 1) ++stats_.redeliveries;
  }
}

void BundleOutbox::TakeAcks() {
  absl::Duration wait = options_.poll_interval;
  while (true) {
    absl::StatusOr<v1::PipelineMessage> reply = sender_->Receive(wait);
    wait = absl::ZeroDuration();
    if (absl::IsDeadlineExceeded(reply.status())) return;
    if (!reply.ok() || !reply->has_ack()) {
      spdlog::warn("outbox: dropped a reply that is not an ack: {}",
                   reply.ok() ? "no ack payload" : reply.status().ToString());
      if (!reply.ok() && !absl::IsInvalidArgument(reply.status())) return;
      continue;
    }
    const v1::PipelineAck& ack = reply->ack();
    absl::MutexLock lock(&mu_);
    ++stats_.acks_taken;
    auto id = by_id_.find(ack.bundle_id());
    // An ack for a bundle no longer held: a second ack after a re-send.
    if (id == by_id_.end()) continue;
    auto it = entries_.find(id->second);
    std::remove(it->second.path.c_str());
    entries_.erase(it);
    by_id_.erase(id);
    ++stats_.acked;
  }
}

}  // namespace tunefarm
