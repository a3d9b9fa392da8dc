// The ZeroMQ seam of the profile pipeline: agents send profile bundles to
// analyzer workers, analyzer workers send diagnoses to the coordinator, and
// each hop answers with a PipelineAck (see proto/tunefarm/v1/pipeline.proto
// for the delivery guarantee). A PipelineSender is a DEALER socket connected
// to every peer (round-robin); a PipelineReceiver is a ROUTER socket that
// can reply to the peer a message came from. Every ZeroMQ message is one
// frame holding a serialized v1::PipelineMessage with version 1.
//
// ZeroMQ stays behind this header: no zmq type leaks out, and every
// zmq::error_t is turned into an absl::Status here.
//
// All sockets share one process-wide ZeroMQ context. The context lives while
// any PipelineSender or PipelineReceiver does; when the last one is
// destroyed the context is terminated, which waits out the senders' linger
// (a few seconds) so messages already accepted by Send() still reach a live
// peer before the process exits.
#ifndef TUNEFARM_ANALYZER_PIPELINE_H_
#define TUNEFARM_ANALYZER_PIPELINE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tunefarm/v1/pipeline.pb.h"

namespace tunefarm {

// The version this build writes and accepts in PipelineMessage.version.
inline constexpr uint32_t kPipelineVersion = 1;

// One message as a PipelineReceiver got it: who sent it (an opaque ZeroMQ
// identity, valid for Reply() while that peer stays connected) and what.
struct PipelineDelivery {
  std::string peer;
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
  // rejects, or for an empty list.
  static absl::StatusOr<std::unique_ptr<PipelineSender>> Connect(
      const std::vector<std::string>& endpoints);

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
  // address is in use, INVALID_ARGUMENT when ZeroMQ rejects it.
  static absl::StatusOr<std::unique_ptr<PipelineReceiver>> Bind(
      const std::string& endpoint);

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

#endif  // TUNEFARM_ANALYZER_PIPELINE_H_
