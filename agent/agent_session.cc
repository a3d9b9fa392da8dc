#include "agent/agent_session.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "grpcpp/grpcpp.h"

namespace tunefarm {

// One AgentSession call: writes one message at a time, holding every call
// queued while the last was written, always has a read outstanding, and
// hands each reply and, at the end, the stream's status to the session. It
// holds itself alive until gRPC is done with it.
class AgentSession::Stream
    : public grpc::ClientBidiReactor<v1::AgentCalls, v1::AgentReplies> {
 public:
  // Binds the call; nothing moves before StartCall.
  Stream(AgentSession* owner, v1::AgentService::Stub* stub,
         const ClientSecurity& security)
      : owner_(owner) {
    AddCredentials(&context_, security);
    stub->async()->AgentSession(&context_, this);
    StartRead(&in_);
  }

  void Start(std::shared_ptr<Stream> self) {
    self_ = std::move(self);
    StartCall();
  }

  void Send(v1::AgentCall call) {
    {
      absl::MutexLock lock(&mu_);
      if (done_) return;  // the session has failed its waiters already
      *pending_.add_calls() = std::move(call);
      if (writing_) return;
      writing_ = true;
      writing_msg_.Swap(&pending_);
    }
    // Only this thread touches writing_msg_ until the write is done.
    StartWrite(&writing_msg_);
  }

  void Cancel() { context_.TryCancel(); }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // OnDone follows with the stream's status
    for (v1::AgentReply& reply : *in_.mutable_replies()) {
      owner_->Answer(this, std::move(reply));
    }
    in_.Clear();
    StartRead(&in_);
  }

  void OnWriteDone(bool ok) override {
    {
      absl::MutexLock lock(&mu_);
      writing_msg_.Clear();
      if (!ok) pending_.Clear();  // the stream is over; OnDone says why
      if (pending_.calls_size() == 0) {
        writing_ = false;
        return;
      }
      writing_msg_.Swap(&pending_);
    }
    StartWrite(&writing_msg_);
  }

  void OnDone(const grpc::Status& status) override {
    {
      absl::MutexLock lock(&mu_);
      done_ = true;
    }
    owner_->Closed(this, FromGrpcStatus(status));
    // The owner may be gone from here on; this is deleted on return.
    std::shared_ptr<Stream> last = std::move(self_);
  }

 private:
  AgentSession* owner_;
  grpc::ClientContext context_;
  v1::AgentReplies in_;         // the read in progress
  v1::AgentCalls writing_msg_;  // see Send
  std::shared_ptr<Stream> self_;
  absl::Mutex mu_;
  v1::AgentCalls pending_ ABSL_GUARDED_BY(mu_);  // the next message
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
};

AgentSession::AgentSession(v1::AgentService::Stub* stub,
                           ClientSecurity security, absl::Duration timeout)
    : stub_(stub), security_(std::move(security)), timeout_(timeout) {}

AgentSession::~AgentSession() {
  std::shared_ptr<Stream> open;
  {
    absl::MutexLock lock(&mu_);
    open = std::move(stream_);
  }
  if (open != nullptr) open->Cancel();
  open.reset();
  absl::MutexLock lock(&mu_);
  auto none_open = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return streams_open_ == 0;
  };
  mu_.Await(absl::Condition(&none_open));
}

bool AgentSession::unary_only() {
  absl::MutexLock lock(&mu_);
  return unary_only_;
}

absl::StatusOr<v1::AgentReply> AgentSession::Call(v1::AgentCall call) {
  Waiter waiter;
  std::shared_ptr<Stream> stream;
  bool opened = false;
  uint64_t id = 0;
  {
    absl::MutexLock lock(&mu_);
    if (unary_only_) {
      return absl::UnimplementedError(
          "the coordinator serves no agent session");
    }
    if (stream_ == nullptr) {
      stream_ = std::make_shared<Stream>(this, stub_, security_);
      ++streams_open_;
      opened = true;
    }
    stream = stream_;
    id = ++next_id_;
    waiter.stream = stream.get();
    waiting_[id] = &waiter;
  }
  // gRPC may run the stream's callbacks (and so Answer and Closed) on the
  // calling thread: never call into the stream while holding mu_.
  if (opened) stream->Start(stream);
  call.set_call_id(id);
  stream->Send(std::move(call));

  mu_.Lock();
  auto answered = [&waiter] { return waiter.answered; };
  if (!mu_.AwaitWithTimeout(absl::Condition(&answered), timeout_)) {
    waiting_.erase(id);
    // A stream that leaves a call unanswered this long is stuck: the calls
    // after it go on a new one.
    const bool current = stream_ == stream;
    if (current) stream_.reset();
    mu_.Unlock();
    stream->Cancel();
    return absl::DeadlineExceededError(
        absl::StrCat("the coordinator did not answer agent session call ", id,
                     " within ", absl::FormatDuration(timeout_)));
  }
  absl::StatusOr<v1::AgentReply> result = std::move(waiter.result);
  mu_.Unlock();
  return result;
}

void AgentSession::Answer(const Stream* stream, v1::AgentReply reply) {
  absl::MutexLock lock(&mu_);
  auto it = waiting_.find(reply.call_id());
  // A reply nobody waits for answers a call that timed out.
  if (it == waiting_.end() || it->second->stream != stream) return;
  Waiter* waiter = it->second;
  waiting_.erase(it);
  waiter->answered = true;
  if (reply.code() == 0) {
    waiter->result = std::move(reply);
    return;
  }
  const int code = reply.code();
  waiter->result =
      absl::Status(code > 0 && code <= 16 ? static_cast<absl::StatusCode>(code)
                                          : absl::StatusCode::kUnknown,
                   reply.message());
}

void AgentSession::Closed(const Stream* stream, const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  --streams_open_;
  if (stream_.get() == stream) stream_.reset();
  absl::Status failed;
  if (absl::IsUnimplemented(status)) {
    unary_only_ = true;
    failed = absl::UnimplementedError(absl::StrCat(
        "the coordinator serves no agent session: ", status.message()));
  } else if (status.ok() || absl::IsCancelled(status)) {
    // Our own cancel, or the coordinator stopping: worth another try.
    failed = absl::UnavailableError(
        absl::StrCat("the agent session closed before the answer",
                     status.ok() ? "" : ": ", status.message()));
  } else {
    failed = status;
  }
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (it->second->stream != stream) {
      ++it;
      continue;
    }
    it->second->answered = true;
    it->second->result = failed;
    waiting_.erase(it++);
  }
}

}  // namespace tunefarm
