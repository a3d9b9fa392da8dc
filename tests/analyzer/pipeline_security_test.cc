// CurveZMQ on the profile pipeline (issue 16), over real ZeroMQ on
// loopback: key files, allow-lists, and a CURVE receiver that lets in only
// the clients its allow-list names, whatever else reaches its port
// (plain ZeroMQ, an unknown key, raw garbage).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/transport.h"

namespace tunefarm {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kWait = absl::Seconds(10);
// How long a message that must not arrive is waited for.
constexpr absl::Duration kRefusedWait = absl::Milliseconds(700);

v1::PipelineMessage Bundle(const std::string& id) {
  v1::PipelineMessage m;
  m.mutable_bundle()->set_bundle_id(id);
  m.mutable_bundle()->set_sweep_id("sw-1");
  return m;
}

class PipelineSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CheckCurveAvailable().ok()) {
      GTEST_SKIP() << "libzmq without CURVE: " << CheckCurveAvailable();
    }
    auto dir = MakeTempDir("pipeline_security_test");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = *dir;
    auto server = NewCurveKeyPair();
    auto agent = NewCurveKeyPair();
    auto stranger = NewCurveKeyPair();
    ASSERT_TRUE(server.ok() && agent.ok() && stranger.ok());
    server_ = *server;
    agent_ = *agent;
    stranger_ = *stranger;
    allow_ = dir_ + "/allow";
    ASSERT_TRUE(
        WriteFileAtomic(allow_, absl::StrCat("# agents\n", agent_.public_key,
                                             " rack-1\n  # the only one\n"))
            .ok());
    PipelineSecurity security;
    security.own = server_;
    security.allow_list_file = allow_;
    auto receiver = PipelineReceiver::Bind("tcp://127.0.0.1:*", security);
    ASSERT_TRUE(receiver.ok()) << receiver.status();
    receiver_ = *std::move(receiver);
  }
  void TearDown() override {
    receiver_.reset();
    if (!dir_.empty()) (void)RemoveAll(dir_);
  }

  std::unique_ptr<PipelineSender> Client(const CurveKeyPair& keys) {
    PipelineSecurity security;
    security.own = keys;
    security.server_public_key = server_.public_key;
    auto sender =
        PipelineSender::Connect({receiver_->bound_endpoint()}, security);
    EXPECT_TRUE(sender.ok()) << sender.status();
    return sender.ok() ? *std::move(sender) : nullptr;
  }

  // Writes `bytes` to the receiver's TCP port as a raw client would.
  void SendRawTcp(const std::string& bytes) {
    const std::string ep = receiver_->bound_endpoint();
    int port = 0;
    ASSERT_TRUE(absl::SimpleAtoi(ep.substr(ep.rfind(':') + 1), &port)) << ep;
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_GE(fd, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)),
              0);
    (void)::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    absl::SleepFor(absl::Milliseconds(100));
    ::close(fd);
  }

  // The allow-listed agent still gets through (the receiver kept working).
  void ExpectGenuineDelivered(const std::string& id) {
    std::unique_ptr<PipelineSender> agent = Client(agent_);
    ASSERT_NE(agent, nullptr);
    ASSERT_TRUE(agent->Send(Bundle(id), kWait).ok());
    absl::StatusOr<PipelineDelivery> got = receiver_->Receive(kWait);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->message.bundle().bundle_id(), id);
    EXPECT_EQ(got->identity, "rack-1");
  }

  std::string dir_, allow_;
  CurveKeyPair server_, agent_, stranger_;
  std::unique_ptr<PipelineReceiver> receiver_;
};

TEST_F(PipelineSecurityTest, AllowListedClientIsDeliveredWithItsName) {
  ExpectGenuineDelivered("b-genuine");
  // Replies reach it too.
  std::unique_ptr<PipelineSender> agent = Client(agent_);
  ASSERT_TRUE(agent->Send(Bundle("b2"), kWait).ok());
  absl::StatusOr<PipelineDelivery> got = receiver_->Receive(kWait);
  ASSERT_TRUE(got.ok()) << got.status();
  v1::PipelineMessage ack;
  ack.mutable_ack()->set_bundle_id("b2");
  ASSERT_TRUE(receiver_->Reply(got->peer, ack).ok());
  absl::StatusOr<v1::PipelineMessage> reply = agent->Receive(kWait);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->ack().bundle_id(), "b2");
}

TEST_F(PipelineSecurityTest, UnknownKeyIsRefused) {
  std::unique_ptr<PipelineSender> stranger = Client(stranger_);
  ASSERT_NE(stranger, nullptr);
  // The handshake fails, so no connection ever comes up to queue to.
  EXPECT_EQ(stranger->Send(Bundle("forged"), kRefusedWait).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_TRUE(
      absl::IsDeadlineExceeded(receiver_->Receive(kRefusedWait).status()));
  ExpectGenuineDelivered("b-after-stranger");
}

TEST_F(PipelineSecurityTest, ClientWithTheWrongServerKeyIsRefused) {
  // A client that trusts another server key cannot complete a handshake.
  PipelineSecurity security;
  security.own = agent_;
  security.server_public_key = stranger_.public_key;
  auto sender =
      PipelineSender::Connect({receiver_->bound_endpoint()}, security);
  ASSERT_TRUE(sender.ok()) << sender.status();
  EXPECT_EQ((*sender)->Send(Bundle("x"), kRefusedWait).code(),
            absl::StatusCode::kUnavailable);
  EXPECT_TRUE(
      absl::IsDeadlineExceeded(receiver_->Receive(kRefusedWait).status()));
}

TEST_F(PipelineSecurityTest, PlainZeroMqAndGarbageAreRefused) {
  // A plain (NULL mechanism) client, as the forged-diagnosis attack used.
  auto plain = PipelineSender::Connect({receiver_->bound_endpoint()});
  ASSERT_TRUE(plain.ok()) << plain.status();
  (void)(*plain)->Send(Bundle("forged-plain"), kRefusedWait);
  // Raw bytes: garbage, a ZMTP greeting with the NULL mechanism, and a
  // large blob.
  SendRawTcp("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string greeting(64, '\0');
  greeting[0] = '\xff';
  greeting[9] = '\x7f';
  greeting[10] = 3;
  greeting.replace(12, 4, "NULL");
  SendRawTcp(greeting);
  SendRawTcp(std::string(1 << 20, '\x5a'));
  EXPECT_TRUE(
      absl::IsDeadlineExceeded(receiver_->Receive(kRefusedWait).status()));
  ExpectGenuineDelivered("b-after-garbage");
}

TEST_F(PipelineSecurityTest, AllowListIsReadOnEveryHandshake) {
  std::unique_ptr<PipelineSender> stranger = Client(stranger_);
  EXPECT_EQ(stranger->Send(Bundle("early"), kRefusedWait).code(),
            absl::StatusCode::kUnavailable);
  stranger.reset();
  ASSERT_TRUE(
      WriteFileAtomic(allow_, absl::StrCat(agent_.public_key, " rack-1\n",
                                           stranger_.public_key, " rack-2\n"))
          .ok());
  std::unique_ptr<PipelineSender> admitted = Client(stranger_);
  ASSERT_TRUE(admitted->Send(Bundle("late"), kWait).ok());
  absl::StatusOr<PipelineDelivery> got = receiver_->Receive(kWait);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->identity, "rack-2");
}

TEST_F(PipelineSecurityTest, KeyFilesRoundTripAndBadOnesAreNamed) {
  const std::string key = dir_ + "/a.key";
  ASSERT_TRUE(WriteCurveKeyPair(key, agent_).ok());
  struct stat st;
  ASSERT_EQ(::stat(key.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  absl::StatusOr<CurveKeyPair> loaded = LoadCurveKeyPair(key);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->public_key, agent_.public_key);
  EXPECT_EQ(loaded->secret_key, agent_.secret_key);
  EXPECT_EQ(*LoadCurvePublicKey(key), agent_.public_key);
  ASSERT_TRUE(WriteFileAtomic(dir_ + "/a.pub", agent_.public_key + "\n").ok());
  EXPECT_EQ(*LoadCurvePublicKey(dir_ + "/a.pub"), agent_.public_key);

  ASSERT_TRUE(WriteFileAtomic(dir_ + "/bad.key", "public-key: nope\n").ok());
  absl::StatusOr<CurveKeyPair> bad = LoadCurveKeyPair(dir_ + "/bad.key");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("bad.key"));

  EXPECT_TRUE(ParseCurveAllowList("# nothing\n\n", "x").ok());
  absl::StatusOr<std::map<std::string, std::string>> list = ParseCurveAllowList(
      absl::StrCat(agent_.public_key, " rack-1\nshort rack-2\n"), "al");
  ASSERT_FALSE(list.ok());
  EXPECT_THAT(list.status().message(), HasSubstr("al:2"));
  EXPECT_FALSE(
      ParseCurveAllowList(absl::StrCat(agent_.public_key, "\n"), "al").ok());

  // Flags: a peer key or allow-list without the daemon's own key pair.
  EXPECT_EQ(PipelineSecurityFromFiles("", allow_, "").status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<PipelineSecurity> from_files =
      PipelineSecurityFromFiles(key, allow_, dir_ + "/a.pub");
  ASSERT_TRUE(from_files.ok()) << from_files.status();
  EXPECT_TRUE(from_files->curve());
  EXPECT_EQ(from_files->server_public_key, agent_.public_key);
}

TEST(PipelineBindTest, WithoutCurveOnlyLoopbackBinds) {
  absl::StatusOr<std::unique_ptr<PipelineReceiver>> open =
      PipelineReceiver::Bind("tcp://0.0.0.0:*");
  ASSERT_FALSE(open.ok());
  EXPECT_EQ(open.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(open.status().message(), HasSubstr("not loopback"));
  EXPECT_TRUE(PipelineReceiver::Bind("tcp://127.0.0.1:*").ok());
}

TEST(PipelineBindTest, CurveReceiverNeedsAReadableAllowList) {
  if (!CheckCurveAvailable().ok()) GTEST_SKIP() << "libzmq without CURVE";
  PipelineSecurity security;
  security.own = *NewCurveKeyPair();
  EXPECT_EQ(
      PipelineReceiver::Bind("tcp://127.0.0.1:*", security).status().code(),
      absl::StatusCode::kInvalidArgument);
  security.allow_list_file = "/nonexistent/allow";
  EXPECT_FALSE(PipelineReceiver::Bind("tcp://127.0.0.1:*", security).ok());
}

}  // namespace
}  // namespace tunefarm
