// The ZeroMQ seam of the profile pipeline: agents send profile bundles to
// analyzer workers, analyzer workers send diagnoses to the coordinator, and
// each hop answers with a PipelineAck (see proto/tunefarm/v1/pipeline.proto
// for the delivery guarantee). A PipelineSender is a DEALER socket connected
// to every peer (round-robin); a PipelineReceiver is a ROUTER socket that
// can reply to the peer a message came from. Every ZeroMQ message is one
// frame holding a serialized v1::PipelineMessage with version 1.
//
// Authentication (CurveZMQ, docs/security.md): with a PipelineSecurity that
// holds a key pair, every socket speaks CURVE. A receiver is a CURVE server
// that lets in only clients whose public key is in its allow-list file,
// through a ZAP handler (ZeroMQ's authentication protocol, RFC 27) that
// reads the file on every handshake, so keys can be rotated without a
// restart; each delivery names the allow-list entry it came from. A sender
// is a CURVE client that knows its receivers' public key. Without keys the
// pipeline is plain ZeroMQ, and a receiver may then bind only to loopback
// (local development and tests).
//
// Size: one message is at most kMaxPipelineMessageBytes (ZMQ_MAXMSGSIZE on
// every socket: a larger one drops the connection that sent it).
//
// ZeroMQ stays behind this header: no zmq type leaks out, and every
// zmq::error_t is turned into an absl::Status here.
//
// All sockets share one process-wide ZeroMQ context. The context lives while
// any PipelineSender or PipelineReceiver does; when the last one is
// destroyed the context is terminated, which waits out the senders' linger
// (a few seconds) so messages already accepted by Send() still reach a live
// peer before the process exits.
#ifndef TUNEFARM_PIPELINE_TRANSPORT_H_
#define TUNEFARM_PIPELINE_TRANSPORT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "tunefarm/v1/pipeline.pb.h"

namespace tunefarm {

// The version this build writes and accepts in PipelineMessage.version.
inline constexpr uint32_t kPipelineVersion = 1;

// The largest pipeline message (a profile bundle with its files) any socket
// takes: ZMQ_MAXMSGSIZE.
inline constexpr int64_t kMaxPipelineMessageBytes = int64_t{256} << 20;

// A CurveZMQ key pair, each key in Z85 (40 characters).
struct CurveKeyPair {
  std::string public_key;
  std::string secret_key;
};

// OK when this libzmq speaks CURVE (zmq_has("curve")); FAILED_PRECONDITION,
// saying so, when it was built without libsodium.
absl::Status CheckCurveAvailable();

// A fresh key pair (zmq_curve_keypair).
absl::StatusOr<CurveKeyPair> NewCurveKeyPair();

// Key files. A key-pair file holds two lines, "public-key: <z85>" and
// "secret-key: <z85>", and is written with mode 0600. A public-key file is
// the 40-character key alone (a key-pair file is taken too: its public key).
// Errors name the file and what is wrong.
absl::Status WriteCurveKeyPair(const std::string& path,
                               const CurveKeyPair& keys);
absl::StatusOr<CurveKeyPair> LoadCurveKeyPair(const std::string& path);
absl::StatusOr<std::string> LoadCurvePublicKey(const std::string& path);

// An allow-list file: one "<z85 public key> <name>" per line; a line
// starting with '#' is a comment ('#' is also a Z85 character, so there are
// no comments after a key). Returns name by key; INVALID_ARGUMENT naming the
// line for a malformed key or a missing name.
absl::StatusOr<std::map<std::string, std::string>> ParseCurveAllowList(
    absl::string_view text, absl::string_view source);

// How a socket authenticates. An empty `own` key pair means plain ZeroMQ.
struct PipelineSecurity {
  CurveKeyPair own;
  // Senders: the public key of the receivers they connect to.
  std::string server_public_key;
  // Receivers: the allow-list file of the clients' public keys.
  std::string allow_list_file;

  bool curve() const { return !own.secret_key.empty(); }
};

// A daemon's PipelineSecurity from its flags: its key-pair file, the
// allow-list file (receivers) and the file of its receivers' public key
// (senders); unused ones are "". No key-pair file: plain ZeroMQ (and an
// error if the others are given). Errors name the flag's file.
absl::StatusOr<PipelineSecurity> PipelineSecurityFromFiles(
    const std::string& key_pair_file, const std::string& allow_list_file,
    const std::string& server_public_key_file);

// One message as a PipelineReceiver got it: who sent it (an opaque ZeroMQ
// identity, valid for Reply() while that peer stays connected), which
// allow-list entry authenticated it ("" with plain ZeroMQ) and what.
struct PipelineDelivery {
  std::string peer;
  std::string identity;
  v1::PipelineMessage message;
};

// A DEALER socket connected to one or more PipelineReceiver endpoints;
// messages are spread round-robin over the connected peers, and their
// replies come back through Receive(). Thread-safe: calls are serialised
// internally.
class PipelineSender {
 public:
  // Connects to every endpoint (e.g. "tcp://10.0.0.5:5557"). Connecting does
  // not wait for the peers to exist; INVALID_ARGUMENT for an endpoint ZeroMQ
  // rejects, or for an empty list. With CURVE `security` needs
  // server_public_key.
  static absl::StatusOr<std::unique_ptr<PipelineSender>> Connect(
      const std::vector<std::string>& endpoints,
      const PipelineSecurity& security = {});

  virtual ~PipelineSender() = default;

  // Queues `msg` (its version is set to kPipelineVersion when 0) for a
  // connected peer. Messages only queue to peers whose connection is up,
  // so UNAVAILABLE means no peer took it within `timeout` (none connected,
  // or all of them full); INVALID_ARGUMENT when `msg` has no payload.
  virtual absl::Status Send(const v1::PipelineMessage& msg,
                            absl::Duration timeout) = 0;

  // Waits up to `timeout` for a reply from any peer. DEADLINE_EXCEEDED when
  // nothing came; INVALID_ARGUMENT for a garbled reply (consumed, dropped).
  virtual absl::StatusOr<v1::PipelineMessage> Receive(
      absl::Duration timeout) = 0;

  virtual const std::vector<std::string>& endpoints() const = 0;
};

// A ROUTER socket bound to one endpoint. Owned and used by one thread.
class PipelineReceiver {
 public:
  // Binds `endpoint`; a TCP port of "*" picks a free port
  // ("tcp://127.0.0.1:*"), see bound_endpoint(). UNAVAILABLE when the
  // address is in use, INVALID_ARGUMENT when ZeroMQ rejects it, or when a
  // receiver without CURVE is asked to bind beyond loopback. With CURVE
  // `security` needs allow_list_file (checked readable now).
  static absl::StatusOr<std::unique_ptr<PipelineReceiver>> Bind(
      const std::string& endpoint, const PipelineSecurity& security = {});

  virtual ~PipelineReceiver() = default;

  // The endpoint as bound, with the real port ("tcp://127.0.0.1:40123").
  virtual const std::string& bound_endpoint() const = 0;

  // Waits up to `timeout` for one message. DEADLINE_EXCEEDED when nothing
  // came; INVALID_ARGUMENT, saying what is wrong (not a PipelineMessage,
  // unknown version, empty payload, several frames), for a garbled message,
  // which is consumed and dropped: the receiver keeps working.
  virtual absl::StatusOr<PipelineDelivery> Receive(absl::Duration timeout) = 0;

  // Sends `msg` back to `peer` (from a PipelineDelivery) without blocking.
  // UNAVAILABLE when that peer is gone or its queue is full: the sender will
  // re-send what it did not see acked.
  virtual absl::Status Reply(const std::string& peer,
                             const v1::PipelineMessage& msg) = 0;
};

}  // namespace tunefarm

#endif  // TUNEFARM_PIPELINE_TRANSPORT_H_
