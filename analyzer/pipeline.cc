#include "analyzer/pipeline.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/const_init.h"
#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "zmq.hpp"

namespace tunefarm {
namespace {

// Bundles carry whole profiler exports; anything far above this is not a
// bundle we want to hold in memory.
constexpr int64_t kMaxMessageBytes = int64_t{256} << 20;
constexpr int kHighWaterMark = 1000;
// On close, a sender keeps trying this long to hand over what Send()
// already accepted.
constexpr int kSenderLingerMs = 3000;

ABSL_CONST_INIT absl::Mutex g_context_mu(absl::kConstInit);

// The process-wide context, shared by every socket of this file and
// terminated (honouring linger) when the last socket owner goes away.
absl::StatusOr<std::shared_ptr<zmq::context_t>> SharedContext() {
  static auto* weak = new std::weak_ptr<zmq::context_t>();
  absl::MutexLock lock(&g_context_mu);
  std::shared_ptr<zmq::context_t> ctx = weak->lock();
  if (ctx != nullptr) return ctx;
  try {
    ctx = std::make_shared<zmq::context_t>(1);
  } catch (const zmq::error_t& e) {
    return absl::InternalError(
        absl::StrCat("cannot create a ZeroMQ context: ", e.what()));
  }
  *weak = ctx;
  return ctx;
}

int TimeoutMs(absl::Duration timeout) {
  if (timeout == absl::InfiniteDuration()) return -1;
  if (timeout <= absl::ZeroDuration()) return 0;
  int64_t ms =
      absl::ToInt64Milliseconds(absl::Ceil(timeout, absl::Milliseconds(1)));
  return static_cast<int>(std::min<int64_t>(ms, INT32_MAX));
}

// The bytes of `msg` with version kPipelineVersion, or why it cannot go.
absl::StatusOr<std::string> Serialize(const v1::PipelineMessage& msg) {
  if (msg.payload_case() == v1::PipelineMessage::PAYLOAD_NOT_SET) {
    return absl::InvalidArgumentError(
        "PipelineMessage has no payload (neither bundle, diagnosis nor ack)");
  }
  if (msg.version() != 0 && msg.version() != kPipelineVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("PipelineMessage version ", msg.version(),
                     " is not the supported version ", kPipelineVersion));
  }
  std::string bytes;
  if (msg.version() == 0) {
    // Field 1 (version) as varint 1, put in front rather than copying a
    // possibly large bundle: protobuf accepts fields in any order and an
    // unset proto3 scalar is not serialized, so it appears once.
    bytes.assign("\x08\x01", 2);
  }
  if (!msg.AppendToString(&bytes)) {
    return absl::InternalError("cannot serialize PipelineMessage");
  }
  return bytes;
}

// Parses and checks one payload frame.
absl::StatusOr<v1::PipelineMessage> ParseFrame(const zmq::message_t& frame) {
  if (frame.size() == 0) {
    return absl::InvalidArgumentError("garbled pipeline message: empty frame");
  }
  v1::PipelineMessage msg;
  if (!msg.ParseFromArray(frame.data(), static_cast<int>(frame.size()))) {
    return absl::InvalidArgumentError(
        absl::StrCat("garbled pipeline message: ", frame.size(),
                     " bytes that are not a PipelineMessage"));
  }
  if (msg.version() != kPipelineVersion) {
    return absl::InvalidArgumentError(absl::StrCat(
        "garbled pipeline message: unknown PipelineMessage version ",
        msg.version(), " (supported: ", kPipelineVersion, ")"));
  }
  if (msg.payload_case() == v1::PipelineMessage::PAYLOAD_NOT_SET) {
    return absl::InvalidArgumentError(
        "garbled pipeline message: empty payload (neither bundle, diagnosis "
        "nor ack)");
  }
  return msg;
}

// Waits up to `timeout` for one ZeroMQ message on `socket` and returns its
// frames (all of them: a garbled multi-frame message is consumed whole).
absl::StatusOr<std::vector<zmq::message_t>> ReceiveFrames(
    zmq::socket_t& socket, absl::Duration timeout) {
  std::vector<zmq::message_t> frames;
  try {
    zmq::pollitem_t items[] = {{static_cast<void*>(socket), 0, ZMQ_POLLIN, 0}};
    int ready =
        zmq::poll(items, 1, std::chrono::milliseconds(TimeoutMs(timeout)));
    zmq::message_t frame;
    if (ready == 0 || !socket.recv(frame, zmq::recv_flags::dontwait)) {
      return absl::DeadlineExceededError(absl::StrCat(
          "no pipeline message within ", absl::FormatDuration(timeout)));
    }
    bool more = frame.more();
    frames.push_back(std::move(frame));
    // The rest of a multi-part message is already here (ZeroMQ delivers
    // messages atomically).
    while (more) {
      zmq::message_t rest;
      if (!socket.recv(rest, zmq::recv_flags::dontwait)) break;
      more = rest.more();
      frames.push_back(std::move(rest));
    }
  } catch (const zmq::error_t& e) {
    // EINTR (a signal) reads as "nothing came"; the caller loops.
    if (e.num() == EINTR) {
      return absl::DeadlineExceededError("interrupted while waiting");
    }
    return absl::InternalError(
        absl::StrCat("ZeroMQ receive failed: ", e.what()));
  }
  return frames;
}

absl::Status ConfigureCommon(zmq::socket_t& socket, const char* kind) {
  try {
    socket.set(zmq::sockopt::sndhwm, kHighWaterMark);
    socket.set(zmq::sockopt::rcvhwm, kHighWaterMark);
    socket.set(zmq::sockopt::maxmsgsize, kMaxMessageBytes);
  } catch (const zmq::error_t& e) {
    return absl::InternalError(absl::StrCat("cannot configure a ZeroMQ ", kind,
                                            " socket: ", e.what()));
  }
  return absl::OkStatus();
}

class ZmqPipelineSender : public PipelineSender {
 public:
  ZmqPipelineSender(std::shared_ptr<zmq::context_t> ctx,
                    std::vector<std::string> endpoints)
      : ctx_(std::move(ctx)),
        socket_(*ctx_, zmq::socket_type::dealer),
        endpoints_(std::move(endpoints)) {}

  absl::Status Init() {
    absl::MutexLock lock(&mu_);
    TF_RETURN_IF_ERROR(ConfigureCommon(socket_, "DEALER"));
    try {
      socket_.set(zmq::sockopt::linger, kSenderLingerMs);
      // Queue only to peers whose connection is up, so a Send() with no
      // live peer times out instead of piling up in a dead pipe.
      socket_.set(zmq::sockopt::immediate, 1);
    } catch (const zmq::error_t& e) {
      return absl::InternalError(
          absl::StrCat("cannot configure a ZeroMQ DEALER socket: ", e.what()));
    }
    for (const std::string& endpoint : endpoints_) {
      try {
        socket_.connect(endpoint);
      } catch (const zmq::error_t& e) {
        return absl::InvalidArgumentError(
            absl::StrCat("cannot connect to pipeline endpoint '", endpoint,
                         "': ", e.what()));
      }
    }
    return absl::OkStatus();
  }

  absl::Status Send(const v1::PipelineMessage& msg,
                    absl::Duration timeout) override {
    TF_ASSIGN_OR_RETURN(std::string bytes, Serialize(msg));
    absl::MutexLock lock(&mu_);
    try {
      socket_.set(zmq::sockopt::sndtimeo, TimeoutMs(timeout));
      zmq::message_t frame(bytes.data(), bytes.size());
      if (!socket_.send(frame, zmq::send_flags::none).has_value()) {
        return absl::UnavailableError(absl::StrCat(
            "no pipeline peer took the message within ",
            absl::FormatDuration(timeout),
            " (endpoints: ", absl::StrJoin(endpoints_, ", "), ")"));
      }
    } catch (const zmq::error_t& e) {
      return absl::UnavailableError(
          absl::StrCat("ZeroMQ send failed: ", e.what()));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<v1::PipelineMessage> Receive(absl::Duration timeout) override {
    absl::MutexLock lock(&mu_);
    TF_ASSIGN_OR_RETURN(std::vector<zmq::message_t> frames,
                        ReceiveFrames(socket_, timeout));
    if (frames.size() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("garbled pipeline reply: ", frames.size(),
                       " frames, expected one PipelineMessage frame"));
    }
    return ParseFrame(frames[0]);
  }

  const std::vector<std::string>& endpoints() const override {
    return endpoints_;
  }

 private:
  std::shared_ptr<zmq::context_t> ctx_;  // outlives socket_
  absl::Mutex mu_;
  zmq::socket_t socket_ ABSL_GUARDED_BY(mu_);
  const std::vector<std::string> endpoints_;
};

class ZmqPipelineReceiver : public PipelineReceiver {
 public:
  explicit ZmqPipelineReceiver(std::shared_ptr<zmq::context_t> ctx)
      : ctx_(std::move(ctx)), socket_(*ctx_, zmq::socket_type::router) {}

  absl::Status Init(const std::string& endpoint) {
    TF_RETURN_IF_ERROR(ConfigureCommon(socket_, "ROUTER"));
    try {
      // Unread messages and unsent acks die with the receiver; the senders
      // re-send what was not acked, and closing must not hang.
      socket_.set(zmq::sockopt::linger, 0);
      // A reply to a peer that is gone fails (EHOSTUNREACH) instead of
      // vanishing silently, so Reply() can say so.
      socket_.set(zmq::sockopt::router_mandatory, 1);
    } catch (const zmq::error_t& e) {
      return absl::InternalError(
          absl::StrCat("cannot configure a ZeroMQ ROUTER socket: ", e.what()));
    }
    try {
      socket_.bind(endpoint);
      bound_endpoint_ = socket_.get(zmq::sockopt::last_endpoint);
    } catch (const zmq::error_t& e) {
      std::string msg = absl::StrCat("cannot bind pipeline endpoint '",
                                     endpoint, "': ", e.what());
      if (e.num() == EADDRINUSE) return absl::UnavailableError(msg);
      return absl::InvalidArgumentError(msg);
    }
    return absl::OkStatus();
  }

  const std::string& bound_endpoint() const override { return bound_endpoint_; }

  absl::StatusOr<PipelineDelivery> Receive(absl::Duration timeout) override {
    TF_ASSIGN_OR_RETURN(std::vector<zmq::message_t> frames,
                        ReceiveFrames(socket_, timeout));
    // ROUTER puts the sender's identity first; the payload is one frame.
    if (frames.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("garbled pipeline message: ", frames.size() - 1,
                       " frames, expected one PipelineMessage frame"));
    }
    PipelineDelivery d;
    d.peer = frames[0].to_string();
    TF_ASSIGN_OR_RETURN(d.message, ParseFrame(frames[1]));
    return d;
  }

  absl::Status Reply(const std::string& peer,
                     const v1::PipelineMessage& msg) override {
    TF_ASSIGN_OR_RETURN(std::string bytes, Serialize(msg));
    try {
      zmq::message_t id(peer.data(), peer.size());
      zmq::message_t body(bytes.data(), bytes.size());
      if (!socket_
               .send(id, zmq::send_flags::sndmore | zmq::send_flags::dontwait)
               .has_value() ||
          !socket_.send(body, zmq::send_flags::dontwait).has_value()) {
        return absl::UnavailableError(
            "the pipeline peer's queue is full; it will re-send");
      }
    } catch (const zmq::error_t& e) {
      return absl::UnavailableError(absl::StrCat(
          "cannot reply to the pipeline peer (gone?): ", e.what()));
    }
    return absl::OkStatus();
  }

 private:
  std::shared_ptr<zmq::context_t> ctx_;  // outlives socket_
  zmq::socket_t socket_;
  std::string bound_endpoint_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<PipelineSender>> PipelineSender::Connect(
    const std::vector<std::string>& endpoints) {
  if (endpoints.empty()) {
    return absl::InvalidArgumentError("PipelineSender needs an endpoint");
  }
  absl::StatusOr<std::shared_ptr<zmq::context_t>> ctx = SharedContext();
  if (!ctx.ok()) return ctx.status();
  std::unique_ptr<ZmqPipelineSender> sender;
  try {
    sender = std::make_unique<ZmqPipelineSender>(*std::move(ctx), endpoints);
  } catch (const zmq::error_t& e) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot create a ZeroMQ DEALER socket: ", e.what()));
  }
  absl::Status st = sender->Init();
  if (!st.ok()) return st;
  return std::unique_ptr<PipelineSender>(std::move(sender));
}

absl::StatusOr<std::unique_ptr<PipelineReceiver>> PipelineReceiver::Bind(
    const std::string& endpoint) {
  absl::StatusOr<std::shared_ptr<zmq::context_t>> ctx = SharedContext();
  if (!ctx.ok()) return ctx.status();
  std::unique_ptr<ZmqPipelineReceiver> receiver;
  try {
    receiver = std::make_unique<ZmqPipelineReceiver>(*std::move(ctx));
  } catch (const zmq::error_t& e) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot create a ZeroMQ ROUTER socket: ", e.what()));
  }
  absl::Status st = receiver->Init(endpoint);
  if (!st.ok()) return st;
  return std::unique_ptr<PipelineReceiver>(std::move(receiver));
}

}  // namespace tunefarm
