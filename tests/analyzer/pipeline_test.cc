#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/transport.h"
#include "zmq.hpp"

namespace tunefarm {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kWait = absl::Seconds(10);

v1::PipelineMessage BundleMessage(const std::string& id) {
  v1::PipelineMessage m;
  m.mutable_bundle()->set_bundle_id(id);
  v1::ProfileFile* f = m.mutable_bundle()->add_files();
  f->set_path("op_summary_1.csv");
  f->set_content("Op Name,Task Duration(us)\nk,1\n");
  return m;
}

std::unique_ptr<PipelineReceiver> BindLoopback() {
  absl::StatusOr<std::unique_ptr<PipelineReceiver>> r =
      PipelineReceiver::Bind("tcp://127.0.0.1:*");
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : nullptr;
}

TEST(PipelineTest, SendAndReceiveOverTcpLoopback) {
  std::unique_ptr<PipelineReceiver> receiver = BindLoopback();
  ASSERT_NE(receiver, nullptr);
  EXPECT_THAT(receiver->bound_endpoint(), HasSubstr("tcp://127.0.0.1:"));
  EXPECT_THAT(receiver->bound_endpoint(), ::testing::Not(HasSubstr("*")));
  absl::StatusOr<std::unique_ptr<PipelineSender>> sender =
      PipelineSender::Connect({receiver->bound_endpoint()});
  ASSERT_TRUE(sender.ok()) << sender.status();

  ASSERT_TRUE((*sender)->Send(BundleMessage("b1"), kWait).ok());
  absl::StatusOr<PipelineDelivery> got = receiver->Receive(kWait);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->message.version(), kPipelineVersion);  // filled in by Send
  ASSERT_TRUE(got->message.has_bundle());
  EXPECT_EQ(got->message.bundle().bundle_id(), "b1");
  EXPECT_EQ(got->message.bundle().files(0).content(),
            "Op Name,Task Duration(us)\nk,1\n");
  EXPECT_FALSE(got->peer.empty());

  // The reply goes back to that sender.
  v1::PipelineMessage ack;
  ack.mutable_ack()->set_bundle_id("b1");
  ASSERT_TRUE(receiver->Reply(got->peer, ack).ok());
  absl::StatusOr<v1::PipelineMessage> reply = (*sender)->Receive(kWait);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->version(), kPipelineVersion);
  EXPECT_EQ(reply->ack().bundle_id(), "b1");
  EXPECT_EQ((*sender)->Receive(absl::Milliseconds(20)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(PipelineTest, ReplyToAPeerThatIsGoneIsUnavailable) {
  std::unique_ptr<PipelineReceiver> receiver = BindLoopback();
  ASSERT_NE(receiver, nullptr);
  v1::PipelineMessage ack;
  ack.mutable_ack()->set_bundle_id("b1");
  absl::Status st = receiver->Reply("no such peer", ack);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_EQ(receiver->Reply("x", v1::PipelineMessage()).code(),
            absl::StatusCode::kInvalidArgument);
}

// Profiles of big kernels run to tens of MB; one message carries them whole.
TEST(PipelineTest, ThirtyMegabytePayloadArrivesIntact) {
  std::unique_ptr<PipelineReceiver> receiver = BindLoopback();
  ASSERT_NE(receiver, nullptr);
  absl::StatusOr<std::unique_ptr<PipelineSender>> sender =
      PipelineSender::Connect({receiver->bound_endpoint()});
  ASSERT_TRUE(sender.ok());
  v1::PipelineMessage big = BundleMessage("big");
  std::string content(30 << 20, 'x');
  for (size_t i = 0; i < content.size(); i += 4096) content[i] = 'a' + i % 26;
  big.mutable_bundle()->mutable_files(0)->set_content(content);
  ASSERT_TRUE((*sender)->Send(big, kWait).ok());
  absl::StatusOr<PipelineDelivery> got = receiver->Receive(kWait);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(got->message.bundle().files(0).content() == content);
}

TEST(PipelineTest, ReceiveTimesOutWhenNothingCame) {
  std::unique_ptr<PipelineReceiver> receiver = BindLoopback();
  ASSERT_NE(receiver, nullptr);
  absl::StatusOr<PipelineDelivery> got =
      receiver->Receive(absl::Milliseconds(20));
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(PipelineTest, GarbledFramesAreRejectedAndTheReceiverKeepsWorking) {
  std::unique_ptr<PipelineReceiver> receiver = BindLoopback();
  ASSERT_NE(receiver, nullptr);

  // A raw DEALER socket, so the test can put any bytes on the wire. All
  // frames go over this one connection, so they arrive in order.
  zmq::context_t ctx(1);
  zmq::socket_t raw(ctx, zmq::socket_type::dealer);
  raw.set(zmq::sockopt::linger, 0);
  raw.connect(receiver->bound_endpoint());

  v1::PipelineMessage wrong_version = BundleMessage("v2");
  wrong_version.set_version(2);
  v1::PipelineMessage no_payload;
  no_payload.set_version(kPipelineVersion);
  v1::PipelineMessage good = BundleMessage("good");
  good.set_version(kPipelineVersion);

  raw.send(zmq::buffer(std::string("\xff\xff\xff\xff not a proto", 17)),
           zmq::send_flags::none);
  raw.send(zmq::buffer(wrong_version.SerializeAsString()),
           zmq::send_flags::none);
  raw.send(zmq::buffer(no_payload.SerializeAsString()), zmq::send_flags::none);
  raw.send(zmq::message_t(), zmq::send_flags::none);  // empty frame
  raw.send(zmq::buffer(good.SerializeAsString()), zmq::send_flags::sndmore);
  raw.send(zmq::buffer(std::string("tail")), zmq::send_flags::none);
  raw.send(zmq::buffer(good.SerializeAsString()), zmq::send_flags::none);

  struct Want {
    const char* text;
  } wants[] = {{"not a PipelineMessage"},
               {"unknown PipelineMessage version 2"},
               {"empty payload"},
               {"empty frame"},
               {"2 frames"}};
  for (const Want& want : wants) {
    absl::StatusOr<PipelineDelivery> got = receiver->Receive(kWait);
    ASSERT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument)
        << "want " << want.text << ", got " << got.status();
    EXPECT_THAT(got.status().message(), HasSubstr(want.text));
  }
  absl::StatusOr<PipelineDelivery> got = receiver->Receive(kWait);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->message.bundle().bundle_id(), "good");
}

TEST(PipelineTest, SendWithoutAPeerIsUnavailable) {
  std::string endpoint;
  {
    std::unique_ptr<PipelineReceiver> gone = BindLoopback();
    ASSERT_NE(gone, nullptr);
    endpoint = gone->bound_endpoint();
  }
  absl::StatusOr<std::unique_ptr<PipelineSender>> sender =
      PipelineSender::Connect({endpoint});
  ASSERT_TRUE(sender.ok()) << sender.status();
  absl::Status st =
      (*sender)->Send(BundleMessage("lost"), absl::Milliseconds(50));
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_THAT(st.message(), HasSubstr(endpoint));
}

TEST(PipelineTest, BadArgumentsAreClearErrors) {
  EXPECT_EQ(PipelineSender::Connect({}).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::unique_ptr<PipelineSender>> bad =
      PipelineSender::Connect({"nonsense://x"});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("nonsense://x"));
  EXPECT_EQ(PipelineReceiver::Bind("nonsense://x").status().code(),
            absl::StatusCode::kInvalidArgument);

  std::unique_ptr<PipelineReceiver> first = BindLoopback();
  ASSERT_NE(first, nullptr);
  absl::StatusOr<std::unique_ptr<PipelineReceiver>> second =
      PipelineReceiver::Bind(first->bound_endpoint());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);

  absl::StatusOr<std::unique_ptr<PipelineSender>> sender =
      PipelineSender::Connect({first->bound_endpoint()});
  ASSERT_TRUE(sender.ok());
  EXPECT_EQ((*sender)->Send(v1::PipelineMessage(), kWait).code(),
            absl::StatusCode::kInvalidArgument);
  v1::PipelineMessage future = BundleMessage("x");
  future.set_version(9);
  EXPECT_EQ((*sender)->Send(future, kWait).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PipelineTest, OneSenderSharedByThreads) {
  std::unique_ptr<PipelineReceiver> receiver = BindLoopback();
  ASSERT_NE(receiver, nullptr);
  absl::StatusOr<std::unique_ptr<PipelineSender>> sender =
      PipelineSender::Connect({receiver->bound_endpoint()});
  ASSERT_TRUE(sender.ok());
  constexpr int kThreads = 4;
  constexpr int kEach = 25;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        EXPECT_TRUE(
            (*sender)
                ->Send(BundleMessage(std::to_string(t * kEach + i)), kWait)
                .ok());
      }
    });
  }
  std::vector<bool> seen(kThreads * kEach, false);
  for (int n = 0; n < kThreads * kEach; ++n) {
    absl::StatusOr<PipelineDelivery> got = receiver->Receive(kWait);
    ASSERT_TRUE(got.ok()) << got.status();
    seen.at(std::stoi(got->message.bundle().bundle_id())) = true;
  }
  for (std::thread& t : threads) t.join();
  for (bool s : seen) EXPECT_TRUE(s);
}

}  // namespace
}  // namespace tunefarm
