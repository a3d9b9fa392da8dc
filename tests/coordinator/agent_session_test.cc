// The agent session (AgentService.AgentSession): leases, renewals and
// results as messages on one stream per agent, over real gRPC on loopback
// (port 0) against a real coordinator over RocksDB.
//
// The service side: replies are matched to calls by call_id, several calls
// may share a message, a call with no request is refused alone, the stream
// is authenticated like every agent call, more calls than the window are
// all answered, a message of more calls than the window has each refused,
// and an agent that vanishes with calls in flight leaves the service
// serving. The agent side
// (NewGrpcCoordinatorClient with a session): a whole sweep runs over it,
// it falls back to unary calls on a coordinator without sessions, a stuck
// stream fails its call with DEADLINE_EXCEEDED and the next call opens a
// new stream, and it reconnects when the coordinator comes back.
#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "agent/coordinator_client.h"
#include "agent/grpc_coordinator_client.h"
#include "common/clock.h"
#include "common/grpc_client.h"
#include "coordinator/auth.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/coordinator/coordinator_harness.h"
#include "tunefarm/v1/agent.grpc.pb.h"

namespace tunefarm {
namespace {

using ::testing::HasSubstr;

constexpr char kTokens[] = R"(
tokens:
  - {name: alice, team: qa, role: user, token: "qa-token-0123456789abcd"}
  - {name: rack1, role: agent, token: "agent-token-0123456789a"}
)";
constexpr char kUser[] = "qa-token-0123456789abcd";
constexpr char kAgent[] = "agent-token-0123456789a";

class AgentSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(AddOperator(&catalog_, ToyOperatorYaml(6, 6)).ok());
    auto tokens = TokenTable::Parse(kTokens, "tokens.yaml");
    ASSERT_TRUE(tokens.ok()) << tokens.status();
    tokens_ = std::make_unique<TokenTable>(std::move(*tokens));
    options_.lease_duration = absl::Seconds(60);
    options_.agent_timeout = absl::Hours(1);
    ASSERT_TRUE(disk_.MakeDir("agent_session_test").ok());
    ASSERT_TRUE(disk_.Open(&catalog_, &clock_, options_).ok());
    ASSERT_TRUE(
        services_.Start(disk_.coordinator(), disk_.store(), tokens_.get())
            .ok());
    v1::RegisterAgentResponse registered;
    ASSERT_TRUE(services_.agent()
                    ->RegisterAgent(LoopbackServices::As(kAgent).get(),
                                    SimAgent("rack1", 4), &registered)
                    .ok());
  }

  std::string Submit(int max_rounds) {
    v1::SubmitSweepRequest request;
    request.set_spec_yaml(
        ToySpecYaml("session", "{name: random, seed: 3}", max_rounds));
    v1::SubmitSweepResponse response;
    grpc::Status st = services_.farm()->SubmitSweep(
        LoopbackServices::As(kUser).get(), request, &response);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return response.sweep().sweep_id();
  }

  // A raw session stream as `token`.
  struct RawSession {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReaderWriter<v1::AgentCalls, v1::AgentReplies>>
        stream;

    // Writes `calls` as one message.
    bool Write(std::vector<v1::AgentCall> calls) {
      v1::AgentCalls message;
      for (v1::AgentCall& call : calls) *message.add_calls() = std::move(call);
      return stream->Write(message);
    }
    // Reads messages until `n` replies came (or the stream ended), by id.
    std::map<uint64_t, v1::AgentReply> Read(size_t n) {
      std::map<uint64_t, v1::AgentReply> replies;
      v1::AgentReplies message;
      while (replies.size() < n && stream->Read(&message)) {
        for (const v1::AgentReply& reply : message.replies()) {
          EXPECT_TRUE(replies.emplace(reply.call_id(), reply).second)
              << "call " << reply.call_id() << " answered twice";
        }
      }
      return replies;
    }
  };
  std::unique_ptr<RawSession> Open(const std::string& token) {
    auto session = std::make_unique<RawSession>();
    if (!token.empty()) {
      session->context.AddMetadata("authorization",
                                   absl::StrCat("Bearer ", token));
    }
    session->stream = services_.agent()->AgentSession(&session->context);
    return session;
  }

  absl::StatusOr<std::unique_ptr<CoordinatorClient>> Client(
      int port, absl::Duration timeout = absl::Seconds(10)) {
    ClientSecurity security;
    security.token = kAgent;
    return NewGrpcCoordinatorClient(absl::StrCat("127.0.0.1:", port), security,
                                    timeout, /*session=*/true);
  }

  OperatorCatalog catalog_;
  FakeClock clock_;
  CoordinatorOptions options_;
  std::unique_ptr<TokenTable> tokens_;
  CoordinatorOnDisk disk_;
  LoopbackServices services_;  // after disk_: stops first
};

v1::AgentCall LeaseCall(uint64_t id, const std::string& board) {
  v1::AgentCall call;
  call.set_call_id(id);
  *call.mutable_lease_work() = LeaseFor(board);
  return call;
}

TEST_F(AgentSessionTest, RepliesCarryTheirCallsIdsAndABadCallFailsAlone) {
  Submit(20);
  // Registration was heard; the session's calls are heard again.
  const std::optional<absl::Time> registered =
      services_.liveness().LastHeard("rack1");
  ASSERT_TRUE(registered.has_value());
  absl::SleepFor(absl::Milliseconds(2));
  std::unique_ptr<RawSession> s = Open(kAgent);
  // Two calls in one message, then a call with no request in another.
  ASSERT_TRUE(s->Write({LeaseCall(7, "rack1/b0"), LeaseCall(9, "rack1/b1")}));
  v1::AgentCall empty;
  empty.set_call_id(11);
  ASSERT_TRUE(s->Write({empty}));
  std::map<uint64_t, v1::AgentReply> replies = s->Read(3);
  ASSERT_EQ(replies.size(), 3u);
  for (uint64_t id : {7, 9}) {
    EXPECT_EQ(replies[id].code(), 0) << replies[id].message();
    ASSERT_TRUE(replies[id].has_lease_work()) << id;
  }
  // The baseline goes to the first board; the second waits for it.
  ASSERT_TRUE(replies[7].lease_work().granted());
  EXPECT_EQ(replies[7].lease_work().work().round_id(), 0);
  EXPECT_FALSE(replies[9].lease_work().granted());
  EXPECT_GT(replies[9].lease_work().retry_after_ms(), 0);
  EXPECT_EQ(replies[11].code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(replies[11].message(), HasSubstr("call 11 carries no request"));

  // The stream goes on after the bad call: b0's result is recorded, and a
  // renewal of a lease nobody holds is answered as invalid.
  v1::AgentCall report;
  report.set_call_id(12);
  *report.mutable_report_result() =
      ResultFor("rack1/b0", replies[7].lease_work().work(), 100);
  v1::AgentCall renew;
  renew.set_call_id(13);
  renew.mutable_renew_lease()->set_agent_id("rack1");
  renew.mutable_renew_lease()->set_lease_id("sw-000009/1/1");
  ASSERT_TRUE(s->Write({report, renew}));
  ASSERT_TRUE(s->stream->WritesDone());
  replies = s->Read(3);  // only 2 come: the stream ends after them
  ASSERT_EQ(replies.size(), 2u);
  ASSERT_TRUE(replies[12].has_report_result()) << replies[12].message();
  EXPECT_TRUE(replies[12].report_result().accepted());
  EXPECT_FALSE(replies[12].report_result().duplicate());
  ASSERT_TRUE(replies[13].has_renew_lease()) << replies[13].message();
  EXPECT_FALSE(replies[13].renew_lease().valid());
  EXPECT_TRUE(s->stream->Finish().ok());
  EXPECT_GT(services_.liveness().LastHeard("rack1"), registered);
}

TEST_F(AgentSessionTest, OnlyAgentsOpenASession) {
  for (const char* token : {"", "forged-token-0000000000", kUser}) {
    std::unique_ptr<RawSession> s = Open(token);
    s->Write({LeaseCall(1, "rack1/b0")});
    EXPECT_TRUE(s->Read(1).empty()) << token;
    const grpc::Status st = s->stream->Finish();
    EXPECT_EQ(st.error_code(), *token == 'q'
                                   ? grpc::StatusCode::PERMISSION_DENIED
                                   : grpc::StatusCode::UNAUTHENTICATED)
        << token << ": " << st.error_message();
  }
}

v1::AgentCall RenewCall(uint64_t id) {
  v1::AgentCall call;
  call.set_call_id(id);
  call.mutable_renew_lease()->set_agent_id("rack1");
  call.mutable_renew_lease()->set_lease_id(
      absl::StrCat("sw-000009/", id, "/1"));
  return call;
}

// More calls than the window (256 in flight) are all answered once: the
// service stops reading at the window and reads on as it answers.
TEST_F(AgentSessionTest, CallsBeyondTheWindowAreAllAnswered) {
  constexpr int kCalls = 3 * AgentGrpcService::kSessionWindow;
  std::unique_ptr<RawSession> s = Open(kAgent);
  std::thread writer([&] {
    for (int i = 0; i < kCalls; i += 8) {
      std::vector<v1::AgentCall> calls;
      for (int j = i; j < i + 8; ++j) calls.push_back(RenewCall(j));
      if (!s->Write(std::move(calls))) return;
    }
    s->stream->WritesDone();
  });
  std::map<uint64_t, v1::AgentReply> replies = s->Read(kCalls);
  writer.join();
  EXPECT_EQ(replies.size(), static_cast<size_t>(kCalls));
  for (const auto& [id, reply] : replies) {
    EXPECT_EQ(reply.code(), 0) << reply.message();
    EXPECT_FALSE(reply.renew_lease().valid()) << id;
  }
  EXPECT_TRUE(s->Read(1).empty());
  EXPECT_TRUE(s->stream->Finish().ok());
}

// A message of more calls than the window has each of them refused, and
// the stream goes on.
TEST_F(AgentSessionTest, AMessageOfMoreCallsThanTheWindowIsRefusedCallByCall) {
  constexpr int kCalls = AgentGrpcService::kSessionWindow + 1;
  std::unique_ptr<RawSession> s = Open(kAgent);
  std::vector<v1::AgentCall> calls;
  for (int i = 0; i < kCalls; ++i) calls.push_back(RenewCall(i));
  ASSERT_TRUE(s->Write(std::move(calls)));
  std::map<uint64_t, v1::AgentReply> replies = s->Read(kCalls);
  ASSERT_EQ(replies.size(), static_cast<size_t>(kCalls));
  for (const auto& [id, reply] : replies) {
    EXPECT_EQ(reply.code(), grpc::StatusCode::INVALID_ARGUMENT) << id;
    EXPECT_THAT(reply.message(), HasSubstr("of 257 calls; at most 256"));
  }
  ASSERT_TRUE(s->Write({RenewCall(1000)}));
  replies = s->Read(1);
  ASSERT_EQ(replies.count(1000), 1u);
  EXPECT_EQ(replies[1000].code(), 0) << replies[1000].message();
  s->stream->WritesDone();
  EXPECT_TRUE(s->stream->Finish().ok());
}

// An agent that goes away with calls in flight: their answers have nobody
// to go to, and the service goes on serving the next stream.
TEST_F(AgentSessionTest, AnAgentGoneWithCallsInFlightLeavesTheServiceWhole) {
  Submit(200);
  for (int round = 0; round < 5; ++round) {
    std::unique_ptr<RawSession> s = Open(kAgent);
    for (int i = 0; i < 40; ++i) {
      ASSERT_TRUE(s->Write({LeaseCall(i, absl::StrCat("rack1/b", i % 4))}));
    }
    s->context.TryCancel();
    EXPECT_FALSE(s->stream->Finish().ok());
  }
  std::unique_ptr<RawSession> s = Open(kAgent);
  ASSERT_TRUE(s->Write({LeaseCall(1, "rack1/b0")}));
  std::map<uint64_t, v1::AgentReply> replies = s->Read(1);
  ASSERT_EQ(replies.count(1), 1u);
  EXPECT_EQ(replies[1].code(), 0) << replies[1].message();
  s->stream->WritesDone();
  EXPECT_TRUE(s->stream->Finish().ok());
}

// The agent's client over a session runs a whole sweep to its budget:
// every lease and result of four boards, each result asking for the
// board's next lease.
TEST_F(AgentSessionTest, TheAgentsClientRunsASweepOverItsSession) {
  const std::string sweep = Submit(24);
  auto client = Client(services_.port());
  ASSERT_TRUE(client.ok()) << client.status();
  std::atomic<int> recorded{0};
  std::vector<std::thread> boards;
  for (int b = 0; b < 4; ++b) {
    boards.emplace_back([&, b] {
      const std::string board = absl::StrCat("rack1/b", b);
      auto lease = (*client)->LeaseWork(LeaseFor(board));
      while (lease.ok() && lease->granted()) {
        v1::ReportResultRequest report =
            ResultFor(board, lease->work(), 100 - recorded.load() * 0.5);
        *report.mutable_next_lease() = LeaseFor(board);
        auto ack = (*client)->ReportResult(report);
        ASSERT_TRUE(ack.ok()) << ack.status();
        // Late results of a finished sweep are answered, not recorded.
        if (ack->accepted()) ++recorded;
        lease = ack->next_lease();
      }
      ASSERT_TRUE(lease.ok()) << lease.status();
    });
  }
  for (std::thread& t : boards) t.join();
  v1::GetSweepRequest get;
  get.set_sweep_id(sweep);
  v1::Sweep done;
  ASSERT_TRUE(services_.farm()
                  ->GetSweep(LoopbackServices::As(kUser).get(), get, &done)
                  .ok());
  EXPECT_EQ(done.state(), v1::SWEEP_STATE_SUCCEEDED);
  // The budget counts candidates; the baseline was recorded too.
  EXPECT_EQ(done.rounds_finished(), 24);
  EXPECT_GT(recorded.load(), 24);
}

// A coordinator of before the session: the stream is UNIMPLEMENTED, and the
// client makes the same call unary, now and from then on.
class UnaryOnlyAgentService final : public v1::AgentService::Service {
 public:
  grpc::Status LeaseWork(grpc::ServerContext*, const v1::LeaseWorkRequest*,
                         v1::LeaseWorkResponse* response) override {
    ++leases;
    response->set_granted(false);
    response->set_retry_after_ms(123);
    return grpc::Status::OK;
  }
  std::atomic<int> leases{0};
};

// A coordinator whose session reads calls and never answers them.
class SilentAgentService final : public v1::AgentService::CallbackService {
 public:
  grpc::ServerBidiReactor<v1::AgentCalls, v1::AgentReplies>* AgentSession(
      grpc::CallbackServerContext*) override {
    ++streams;
    return new Silent();
  }
  std::atomic<int> streams{0};

 private:
  class Silent
      : public grpc::ServerBidiReactor<v1::AgentCalls, v1::AgentReplies> {
   public:
    Silent() { StartRead(&in_); }
    void OnReadDone(bool ok) override {
      if (ok) {
        StartRead(&in_);
      } else {
        Finish(grpc::Status::OK);
      }
    }
    void OnDone() override { delete this; }

   private:
    v1::AgentCalls in_;
  };
};

// A coordinator whose session answers every lease call "no work, ask again
// in 77 ms".
class AnsweringAgentService final : public v1::AgentService::CallbackService {
 public:
  grpc::ServerBidiReactor<v1::AgentCalls, v1::AgentReplies>* AgentSession(
      grpc::CallbackServerContext*) override {
    ++streams;
    return new Answering();
  }
  std::atomic<int> streams{0};

 private:
  // One message answered at a time: read, write its replies, read the next.
  class Answering
      : public grpc::ServerBidiReactor<v1::AgentCalls, v1::AgentReplies> {
   public:
    Answering() { StartRead(&in_); }
    void OnReadDone(bool ok) override {
      if (!ok) {
        Finish(grpc::Status::OK);
        return;
      }
      out_.Clear();
      for (const v1::AgentCall& call : in_.calls()) {
        v1::AgentReply* reply = out_.add_replies();
        reply->set_call_id(call.call_id());
        reply->mutable_lease_work()->set_retry_after_ms(77);
      }
      StartWrite(&out_);
    }
    void OnWriteDone(bool ok) override {
      if (ok) {
        StartRead(&in_);
      } else {
        Finish(grpc::Status::OK);
      }
    }
    void OnDone() override { delete this; }

   private:
    v1::AgentCalls in_;
    v1::AgentReplies out_;
  };
};

std::unique_ptr<grpc::Server> Serve(grpc::Service* service, int* port,
                                    int fixed_port = 0) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat("127.0.0.1:", fixed_port),
                           grpc::InsecureServerCredentials(), port);
  builder.RegisterService(service);
  return builder.BuildAndStart();
}

TEST(AgentSessionClientTest, FallsBackToUnaryCallsOnACoordinatorWithout) {
  UnaryOnlyAgentService service;
  int port = 0;
  std::unique_ptr<grpc::Server> server = Serve(&service, &port);
  ASSERT_NE(server, nullptr);
  auto client = NewGrpcCoordinatorClient(absl::StrCat("127.0.0.1:", port),
                                         ClientSecurity(), absl::Seconds(10),
                                         /*session=*/true);
  ASSERT_TRUE(client.ok());
  for (int i = 0; i < 3; ++i) {
    auto lease = (*client)->LeaseWork(LeaseFor("rack1/b0"));
    ASSERT_TRUE(lease.ok()) << lease.status();
    EXPECT_FALSE(lease->granted());
    EXPECT_EQ(lease->retry_after_ms(), 123);
  }
  EXPECT_EQ(service.leases.load(), 3);
  server->Shutdown();
}

TEST(AgentSessionClientTest, AStuckStreamFailsItsCallAndTheNextOpensAnother) {
  SilentAgentService service;
  int port = 0;
  std::unique_ptr<grpc::Server> server = Serve(&service, &port);
  ASSERT_NE(server, nullptr);
  auto client =
      NewGrpcCoordinatorClient(absl::StrCat("127.0.0.1:", port),
                               ClientSecurity(), absl::Milliseconds(200),
                               /*session=*/true);
  ASSERT_TRUE(client.ok());
  const absl::Time start = absl::Now();
  auto lease = (*client)->LeaseWork(LeaseFor("rack1/b0"));
  EXPECT_TRUE(absl::IsDeadlineExceeded(lease.status())) << lease.status();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(200));
  lease = (*client)->LeaseWork(LeaseFor("rack1/b0"));
  EXPECT_TRUE(absl::IsDeadlineExceeded(lease.status())) << lease.status();
  EXPECT_EQ(service.streams.load(), 2);
  client->reset();
  server->Shutdown();
}

// The coordinator stops: the call in progress fails UNAVAILABLE (the agent
// retries it), and once one serves the address again the client's next
// call is answered on a new stream.
TEST(AgentSessionClientTest, TheClientReconnectsWhenTheCoordinatorIsBack) {
  SilentAgentService first;
  int port = 0;
  std::unique_ptr<grpc::Server> server = Serve(&first, &port);
  ASSERT_NE(server, nullptr);
  auto client = NewGrpcCoordinatorClient(absl::StrCat("127.0.0.1:", port),
                                         ClientSecurity(), absl::Seconds(5),
                                         /*session=*/true);
  ASSERT_TRUE(client.ok());
  std::thread stop([&] {
    while (first.streams.load() == 0) absl::SleepFor(absl::Milliseconds(5));
    server->Shutdown(std::chrono::system_clock::now());
  });
  auto lease = (*client)->LeaseWork(LeaseFor("rack1/b0"));
  stop.join();
  EXPECT_TRUE(absl::IsUnavailable(lease.status())) << lease.status();

  AnsweringAgentService second;
  int again = 0;
  std::unique_ptr<grpc::Server> back = Serve(&second, &again, port);
  ASSERT_NE(back, nullptr);
  ASSERT_EQ(again, port);
  for (int i = 0; i < 50; ++i) {
    lease = (*client)->LeaseWork(LeaseFor("rack1/b0"));
    if (lease.ok()) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_EQ(lease->retry_after_ms(), 77);
  EXPECT_EQ(second.streams.load(), 1);
  client->reset();
  back->Shutdown();
}

}  // namespace
}  // namespace tunefarm
