// AgentSession: the agent's end of the coordinator's AgentSession stream
// (proto/tunefarm/v1/agent.proto). The agent's board threads call it at
// once; each call goes on the one stream as an AgentCall (those queued
// while the last message was written go together in the next) and waits
// for the AgentReply with its call_id. Built on gRPC's callback API: no
// thread of its own.
//
// A stream that breaks (coordinator restart, network) fails the calls
// waiting on it with UNAVAILABLE, and the next call opens a new stream. A
// call unanswered for `timeout` fails with DEADLINE_EXCEEDED and cancels
// its stream, as a stuck stream would otherwise hold every later call. A
// coordinator that has no AgentSession (UNIMPLEMENTED) makes unary_only()
// true for good; the caller then uses the unary calls.
//
// Owned by the agent's gRPC CoordinatorClient; the stub must outlive it.
// Thread-safe.
#ifndef TUNEFARM_AGENT_AGENT_SESSION_H_
#define TUNEFARM_AGENT_AGENT_SESSION_H_

#include <cstdint>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/grpc_client.h"
#include "tunefarm/v1/agent.grpc.pb.h"

namespace tunefarm {

class AgentSession {
 public:
  AgentSession(v1::AgentService::Stub* stub, ClientSecurity security,
               absl::Duration timeout);
  AgentSession(const AgentSession&) = delete;
  AgentSession& operator=(const AgentSession&) = delete;
  // Cancels the open stream and waits until gRPC is done with it. No call
  // may be in progress.
  ~AgentSession();

  // Sends `call` (its call_id is set here) and returns the reply's
  // response, or the reply's error status, or the stream's. UNIMPLEMENTED
  // with unary_only() set: nothing was sent that the coordinator could
  // have acted on; use the unary call.
  absl::StatusOr<v1::AgentReply> Call(v1::AgentCall call);

  bool unary_only();

 private:
  class Stream;
  struct Waiter {
    const Stream* stream = nullptr;
    bool answered = false;
    absl::StatusOr<v1::AgentReply> result;
  };

  // From a stream's gRPC callbacks.
  void Answer(const Stream* stream, v1::AgentReply reply);
  void Closed(const Stream* stream, const absl::Status& status);

  v1::AgentService::Stub* stub_;
  const ClientSecurity security_;
  const absl::Duration timeout_;
  absl::Mutex mu_;
  // The open stream (null: none yet, or the last one closed). It deletes
  // itself once gRPC is done with it, after telling Closed.
  std::shared_ptr<Stream> stream_ ABSL_GUARDED_BY(mu_);
  int streams_open_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<uint64_t, Waiter*> waiting_ ABSL_GUARDED_BY(mu_);
  bool unary_only_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace tunefarm

#endif  // TUNEFARM_AGENT_AGENT_SESSION_H_
