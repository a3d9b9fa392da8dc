#include "pipeline/transport.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/const_init.h"
#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "zmq.hpp"

namespace tunefarm {
namespace {

constexpr int64_t kMaxMessageBytes = kMaxPipelineMessageBytes;
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

// --- CurveZMQ ------------------------------------------------------------

bool IsZ85Key(absl::string_view key) {
  if (key.size() != 40) return false;
  uint8_t raw[32];
  return zmq_z85_decode(raw, std::string(key).c_str()) != nullptr;
}

// The ZAP handler (RFC 27) of the process: a REP socket on
// inproc://zeromq.zap.01 in the shared context, answering every CURVE
// handshake of a receiver from that receiver's allow-list file (by ZAP
// domain). Shared by the secure receivers alive; the last one to go stops it
// (its socket must close before the context can terminate).
class ZapHandler {
 public:
  static absl::StatusOr<std::shared_ptr<ZapHandler>> Get(
      std::shared_ptr<zmq::context_t> ctx) {
    static auto* weak = new std::weak_ptr<ZapHandler>();
    static absl::Mutex* mu = new absl::Mutex();
    absl::MutexLock lock(mu);
    std::shared_ptr<ZapHandler> h = weak->lock();
    if (h != nullptr) return h;
    try {
      h = std::shared_ptr<ZapHandler>(new ZapHandler(std::move(ctx)));
      h->socket_.bind("inproc://zeromq.zap.01");
    } catch (const zmq::error_t& e) {
      return absl::InternalError(
          absl::StrCat("cannot start the ZeroMQ ZAP handler: ", e.what()));
    }
    h->thread_ = std::thread([p = h.get()] { p->Run(); });
    *weak = h;
    return h;
  }

  ~ZapHandler() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

  // A new ZAP domain whose handshakes are checked against `allow_list_file`.
  std::string AddDomain(const std::string& allow_list_file) {
    absl::MutexLock lock(&mu_);
    std::string domain = absl::StrCat("tunefarm-", ++next_domain_);
    domains_[domain] = allow_list_file;
    return domain;
  }
  void RemoveDomain(const std::string& domain) {
    absl::MutexLock lock(&mu_);
    domains_.erase(domain);
  }

 private:
  explicit ZapHandler(std::shared_ptr<zmq::context_t> ctx)
      : ctx_(std::move(ctx)), socket_(*ctx_, zmq::socket_type::rep) {
    socket_.set(zmq::sockopt::linger, 0);
  }

  void Run() {
    while (!stop_.load()) {
      absl::StatusOr<std::vector<zmq::message_t>> request =
          ReceiveFrames(socket_, absl::Milliseconds(100));
      if (!request.ok()) continue;
      std::vector<std::string> reply = Answer(*request);
      try {
        for (size_t i = 0; i < reply.size(); ++i) {
          zmq::message_t frame(reply[i].data(), reply[i].size());
          socket_.send(frame, i + 1 < reply.size() ? zmq::send_flags::sndmore
                                                   : zmq::send_flags::none);
        }
      } catch (const zmq::error_t& e) {
        spdlog::error("ZAP handler: cannot reply: {}", e.what());
      }
    }
    socket_.close();
  }

  // version, request id, status code, status text, user id, metadata.
  std::vector<std::string> Answer(const std::vector<zmq::message_t>& f) {
    auto refuse = [&](const std::string& request_id, const std::string& why) {
      spdlog::warn("pipeline: refused a ZeroMQ peer: {}", why);
      return std::vector<std::string>{"1.0", request_id, "400", why, "", ""};
    };
    if (f.size() < 6 || f[0].to_string() != "1.0") {
      return refuse(f.size() > 1 ? f[1].to_string() : "", "bad ZAP request");
    }
    const std::string request_id = f[1].to_string();
    const std::string domain = f[2].to_string();
    const std::string address = f[3].to_string();
    const std::string mechanism = f[5].to_string();
    if (mechanism != "CURVE" || f.size() != 7 || f[6].size() != 32) {
      return refuse(request_id, absl::StrCat("mechanism ", mechanism, " from ",
                                             address, " (CURVE required)"));
    }
    char z85[41] = {0};
    zmq_z85_encode(z85, static_cast<const uint8_t*>(f[6].data()), 32);
    std::string file;
    {
      absl::MutexLock lock(&mu_);
      auto it = domains_.find(domain);
      if (it != domains_.end()) file = it->second;
    }
    if (file.empty()) {
      return refuse(request_id, absl::StrCat("unknown ZAP domain '", domain,
                                             "' from ", address));
    }
    // Read on every handshake: keys can be added or revoked in place.
    absl::StatusOr<std::string> text = ReadFile(file);
    absl::StatusOr<std::map<std::string, std::string>> allowed =
        text.ok()
            ? ParseCurveAllowList(*text, file)
            : absl::StatusOr<std::map<std::string, std::string>>(text.status());
    if (!allowed.ok()) {
      spdlog::error("pipeline: allow-list: {}", allowed.status().ToString());
      return {"1.0", request_id, "500", "allow-list unreadable", "", ""};
    }
    auto it = allowed->find(z85);
    if (it == allowed->end()) {
      return refuse(request_id, absl::StrCat("public key ", z85, " from ",
                                             address, " is not in ", file));
    }
    return {"1.0", request_id, "200", "OK", it->second, ""};
  }

  std::shared_ptr<zmq::context_t> ctx_;  // outlives socket_
  zmq::socket_t socket_;                 // the handler thread's only
  std::thread thread_;
  std::atomic<bool> stop_{false};
  absl::Mutex mu_;
  std::map<std::string, std::string> domains_ ABSL_GUARDED_BY(mu_);
  int next_domain_ ABSL_GUARDED_BY(mu_) = 0;
};

// Loopback or in-process: where an unauthenticated receiver may bind.
bool IsLoopbackEndpoint(absl::string_view endpoint) {
  if (absl::StartsWith(endpoint, "inproc://") ||
      absl::StartsWith(endpoint, "ipc://")) {
    return true;
  }
  absl::string_view host = endpoint;
  if (!absl::ConsumePrefix(&host, "tcp://")) return false;
  host = host.substr(0, host.rfind(':'));
  return absl::StartsWith(host, "127.") || host == "localhost" ||
         host == "[::1]";
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

  absl::Status Init(const PipelineSecurity& security) {
    absl::MutexLock lock(&mu_);
    TF_RETURN_IF_ERROR(ConfigureCommon(socket_, "DEALER"));
    try {
      socket_.set(zmq::sockopt::linger, kSenderLingerMs);
      // Queue only to peers whose connection is up, so a Send() with no
      // live peer times out instead of piling up in a dead pipe. With CURVE
      // a connection is up only once the handshake passed.
      socket_.set(zmq::sockopt::immediate, 1);
      if (security.curve()) {
        socket_.set(zmq::sockopt::curve_serverkey, security.server_public_key);
        socket_.set(zmq::sockopt::curve_publickey, security.own.public_key);
        socket_.set(zmq::sockopt::curve_secretkey, security.own.secret_key);
      }
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

  ~ZmqPipelineReceiver() override {
    socket_.close();
    if (zap_ != nullptr) zap_->RemoveDomain(zap_domain_);
  }

  absl::Status Init(const std::string& endpoint,
                    const PipelineSecurity& security) {
    TF_RETURN_IF_ERROR(ConfigureCommon(socket_, "ROUTER"));
    if (security.curve()) {
      TF_ASSIGN_OR_RETURN(zap_, ZapHandler::Get(ctx_));
      zap_domain_ = zap_->AddDomain(security.allow_list_file);
      try {
        socket_.set(zmq::sockopt::curve_server, 1);
        socket_.set(zmq::sockopt::curve_secretkey, security.own.secret_key);
        socket_.set(zmq::sockopt::zap_domain, zap_domain_);
      } catch (const zmq::error_t& e) {
        return absl::InternalError(
            absl::StrCat("cannot set up CURVE on a ROUTER socket: ", e.what()));
      }
    } else if (!IsLoopbackEndpoint(endpoint)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "pipeline endpoint '", endpoint,
          "' is not loopback: an endpoint without CURVE authentication may "
          "bind only to 127.0.0.1, localhost, ipc:// or inproc:// (give the "
          "daemon its --curve_key_file and --curve_allow_list)"));
    }
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
    if (zap_ != nullptr) {
      // Set by the ZAP handler: the allow-list entry of the sender's key.
      const char* user = frames[1].gets("User-Id");
      if (user == nullptr || *user == '\0') {
        return absl::PermissionDeniedError(
            "pipeline message without an authenticated sender");
      }
      d.identity = user;
    }
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
  std::shared_ptr<zmq::context_t> ctx_;  // outlives socket_ and zap_
  std::shared_ptr<ZapHandler> zap_;      // with CURVE; outlives socket_
  std::string zap_domain_;
  zmq::socket_t socket_;
  std::string bound_endpoint_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<PipelineSender>> PipelineSender::Connect(
    const std::vector<std::string>& endpoints,
    const PipelineSecurity& security) {
  if (endpoints.empty()) {
    return absl::InvalidArgumentError("PipelineSender needs an endpoint");
  }
  if (security.curve()) {
    TF_RETURN_IF_ERROR(CheckCurveAvailable());
    if (!IsZ85Key(security.server_public_key)) {
      return absl::InvalidArgumentError(
          "PipelineSender with CURVE needs the receivers' public key (40 "
          "Z85 characters)");
    }
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
  absl::Status st = sender->Init(security);
  if (!st.ok()) return st;
  return std::unique_ptr<PipelineSender>(std::move(sender));
}

absl::StatusOr<std::unique_ptr<PipelineReceiver>> PipelineReceiver::Bind(
    const std::string& endpoint, const PipelineSecurity& security) {
  if (security.curve()) {
    TF_RETURN_IF_ERROR(CheckCurveAvailable());
    if (security.allow_list_file.empty()) {
      return absl::InvalidArgumentError(
          "PipelineReceiver with CURVE needs an allow-list file");
    }
    absl::StatusOr<std::string> text = ReadFile(security.allow_list_file);
    if (!text.ok()) return text.status();
    TF_RETURN_IF_ERROR(
        ParseCurveAllowList(*text, security.allow_list_file).status());
  }
  absl::StatusOr<std::shared_ptr<zmq::context_t>> ctx = SharedContext();
  if (!ctx.ok()) return ctx.status();
  std::unique_ptr<ZmqPipelineReceiver> receiver;
  try {
    receiver = std::make_unique<ZmqPipelineReceiver>(*std::move(ctx));
  } catch (const zmq::error_t& e) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot create a ZeroMQ ROUTER socket: ", e.what()));
  }
  absl::Status st = receiver->Init(endpoint, security);
  if (!st.ok()) return st;
  return std::unique_ptr<PipelineReceiver>(std::move(receiver));
}

absl::Status CheckCurveAvailable() {
  if (zmq_has("curve") == 0) {
    return absl::FailedPreconditionError(
        "this libzmq has no CURVE support (built without libsodium): the "
        "pipeline cannot authenticate; install a libzmq with CURVE "
        "(Debian's libzmq5 has it)");
  }
  return absl::OkStatus();
}

absl::StatusOr<CurveKeyPair> NewCurveKeyPair() {
  TF_RETURN_IF_ERROR(CheckCurveAvailable());
  char pub[41] = {0}, sec[41] = {0};
  if (zmq_curve_keypair(pub, sec) != 0) {
    return absl::InternalError(
        absl::StrCat("zmq_curve_keypair: ", zmq_strerror(zmq_errno())));
  }
  return CurveKeyPair{pub, sec};
}

absl::Status WriteCurveKeyPair(const std::string& path,
                               const CurveKeyPair& keys) {
  TF_RETURN_IF_ERROR(WriteFileAtomic(
      path, absl::StrCat("public-key: ", keys.public_key,
                         "\nsecret-key: ", keys.secret_key, "\n")));
  if (::chmod(path.c_str(), 0600) != 0) {
    return absl::InternalError(absl::StrCat("cannot chmod 0600 ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<CurveKeyPair> LoadCurveKeyPair(const std::string& path) {
  TF_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  CurveKeyPair keys;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (absl::ConsumePrefix(&line, "public-key:")) {
      keys.public_key = std::string(absl::StripAsciiWhitespace(line));
    } else if (absl::ConsumePrefix(&line, "secret-key:")) {
      keys.secret_key = std::string(absl::StripAsciiWhitespace(line));
    }
  }
  if (!IsZ85Key(keys.public_key) || !IsZ85Key(keys.secret_key)) {
    return absl::InvalidArgumentError(absl::StrCat(
        path,
        ": not a CURVE key-pair file (expected 'public-key: <40 Z85 "
        "characters>' and 'secret-key: <40 Z85 characters>')"));
  }
  return keys;
}

absl::StatusOr<std::string> LoadCurvePublicKey(const std::string& path) {
  TF_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  absl::string_view key = absl::StripAsciiWhitespace(text);
  if (IsZ85Key(key)) return std::string(key);
  absl::StatusOr<CurveKeyPair> pair = LoadCurveKeyPair(path);
  if (pair.ok()) return pair->public_key;
  return absl::InvalidArgumentError(absl::StrCat(
      path,
      ": not a CURVE public key (40 Z85 characters) nor a key-pair "
      "file"));
}

absl::StatusOr<std::map<std::string, std::string>> ParseCurveAllowList(
    absl::string_view text, absl::string_view source) {
  std::map<std::string, std::string> out;
  int n = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++n;
    line = absl::StripAsciiWhitespace(line);
    // Whole-line comments only: '#' is a Z85 character.
    if (line.empty() || line[0] == '#') continue;
    std::vector<absl::string_view> parts =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (parts.size() != 2 || !IsZ85Key(parts[0])) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ":", n,
                       ": expected '<public key: 40 Z85 characters> <name>'"));
    }
    out[std::string(parts[0])] = std::string(parts[1]);
  }
  return out;
}

absl::StatusOr<PipelineSecurity> PipelineSecurityFromFiles(
    const std::string& key_pair_file, const std::string& allow_list_file,
    const std::string& server_public_key_file) {
  PipelineSecurity security;
  if (key_pair_file.empty()) {
    if (!allow_list_file.empty() || !server_public_key_file.empty()) {
      return absl::InvalidArgumentError(
          "a CURVE allow-list or peer key was given without the daemon's own "
          "key pair (--curve_key_file)");
    }
    return security;
  }
  TF_RETURN_IF_ERROR(CheckCurveAvailable());
  TF_ASSIGN_OR_RETURN(security.own, LoadCurveKeyPair(key_pair_file));
  security.allow_list_file = allow_list_file;
  if (!server_public_key_file.empty()) {
    TF_ASSIGN_OR_RETURN(security.server_public_key,
                        LoadCurvePublicKey(server_public_key_file));
  }
  return security;
}

}  // namespace tunefarm
