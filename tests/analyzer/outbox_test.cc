// BundleOutbox over real ZeroMQ sockets and a real outbox folder: the test
// plays the analyzer with a PipelineReceiver and acks (or not) by hand.
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pipeline/bundle_outbox.h"
#include "pipeline/transport.h"

namespace tunefarm {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kWait = absl::Seconds(10);

v1::ProfileBundle Bundle(const std::string& id) {
  v1::ProfileBundle b;
  b.set_bundle_id(id);
  b.set_sweep_id("sw-1");
  b.set_round_id(4);
  v1::ProfileFile* f = b.add_files();
  f->set_path("op_summary_1.csv");
  f->set_content("Op Name,Task Duration(us)\nk,1\n");
  return b;
}

void Ack(PipelineReceiver& analyzer, const PipelineDelivery& d) {
  v1::PipelineMessage ack;
  ack.mutable_ack()->set_bundle_id(d.message.bundle().bundle_id());
  ASSERT_TRUE(analyzer.Reply(d.peer, ack).ok());
}

// The *.bundle files (and *.bad) in `dir`, by name.
std::set<std::string> Files(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    out.insert(f.path().filename().string());
  }
  return out;
}

class OutboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto dir = MakeTempDir("outbox_test");
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = *dir + "/outbox";
    auto analyzer = PipelineReceiver::Bind("tcp://127.0.0.1:*");
    ASSERT_TRUE(analyzer.ok()) << analyzer.status();
    analyzer_ = *std::move(analyzer);
  }
  void TearDown() override { (void)RemoveAll(dir_); }

  BundleOutbox::Options Options() {
    BundleOutbox::Options o;
    o.endpoints = {analyzer_->bound_endpoint()};
    o.dir = dir_;
    o.poll_interval = absl::Milliseconds(5);
    o.clock = &clock_;
    return o;
  }

  std::unique_ptr<BundleOutbox> Open(BundleOutbox::Options o) {
    auto outbox = BundleOutbox::Open(std::move(o));
    EXPECT_TRUE(outbox.ok()) << outbox.status();
    return outbox.ok() ? *std::move(outbox) : nullptr;
  }

  PipelineDelivery Next() {
    absl::StatusOr<PipelineDelivery> d = analyzer_->Receive(kWait);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *d : PipelineDelivery{};
  }

  std::string dir_;
  FakeClock clock_;
  std::unique_ptr<PipelineReceiver> analyzer_;
};

TEST_F(OutboxTest, AckedBundlesLeaveTheOutbox) {
  std::unique_ptr<BundleOutbox> outbox = Open(Options());
  ASSERT_NE(outbox, nullptr);
  for (const char* id : {"b1", "b2", "b3"}) {
    ASSERT_TRUE(outbox->Add(Bundle(id)).ok());
  }
  EXPECT_EQ(Files(dir_).size(), 3u);  // on disk before anything is acked
  std::set<std::string> got;
  for (int i = 0; i < 3; ++i) {
    PipelineDelivery d = Next();
    EXPECT_EQ(d.message.attempt(), 1u);
    EXPECT_EQ(d.message.bundle().round_id(), 4);
    got.insert(d.message.bundle().bundle_id());
    Ack(*analyzer_, d);
  }
  EXPECT_EQ(got, (std::set<std::string>{"b1", "b2", "b3"}));
  ASSERT_TRUE(outbox->WaitDrained(kWait));
  EXPECT_TRUE(Files(dir_).empty());
  BundleOutbox::Stats s = outbox->stats();
  EXPECT_EQ(s.acked, 3);
  EXPECT_EQ(s.sends, 3);
  EXPECT_EQ(s.redeliveries, 0);
  EXPECT_EQ(s.held, 0);
}

TEST_F(OutboxTest, UnackedBundleIsSentAgainAfterTheTimeoutAndAckedOnce) {
  BundleOutbox::Options o = Options();
  o.ack_timeout = absl::Seconds(30);
  std::unique_ptr<BundleOutbox> outbox = Open(o);
  ASSERT_NE(outbox, nullptr);
  ASSERT_TRUE(outbox->Add(Bundle("b1")).ok());
  // The same id again (an agent retrying Publish) is not a second bundle.
  ASSERT_TRUE(outbox->Add(Bundle("b1")).ok());
  EXPECT_EQ(outbox->stats().held, 1);

  PipelineDelivery first = Next();
  EXPECT_EQ(first.message.attempt(), 1u);
  // No ack: nothing more comes until the timeout has passed.
  EXPECT_EQ(analyzer_->Receive(absl::Milliseconds(100)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  clock_.Advance(absl::Seconds(31));
  PipelineDelivery second = Next();
  EXPECT_EQ(second.message.bundle().bundle_id(), "b1");
  EXPECT_EQ(second.message.attempt(), 2u);

  // Both deliveries get acked (two analyzers each finished it): the second
  // ack, and an ack for a bundle never held, change nothing.
  Ack(*analyzer_, first);
  Ack(*analyzer_, second);
  v1::PipelineMessage stray;
  stray.mutable_ack()->set_bundle_id("never-sent");
  ASSERT_TRUE(analyzer_->Reply(first.peer, stray).ok());
  ASSERT_TRUE(outbox->WaitDrained(kWait));
  // Wait until all three acks were taken (not a guess at how long that is),
  // then check that the late and the stray one changed nothing.
  const absl::Time end = absl::Now() + kWait;
  while (outbox->stats().acks_taken < 3 && absl::Now() < end) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  BundleOutbox::Stats s = outbox->stats();
  EXPECT_EQ(s.acks_taken, 3);
  EXPECT_EQ(s.acked, 1);
  EXPECT_EQ(s.redeliveries, 1);
  EXPECT_EQ(s.sends, 2);
  EXPECT_TRUE(Files(dir_).empty());
}

TEST_F(OutboxTest, AtMostWindowBundlesInFlight) {
  BundleOutbox::Options o = Options();
  o.window = 2;
  std::unique_ptr<BundleOutbox> outbox = Open(o);
  ASSERT_NE(outbox, nullptr);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(outbox->Add(Bundle("b" + std::to_string(i))).ok());
  }
  PipelineDelivery a = Next();
  PipelineDelivery b = Next();
  EXPECT_EQ(a.message.bundle().bundle_id(), "b0");  // in order
  EXPECT_EQ(b.message.bundle().bundle_id(), "b1");
  EXPECT_EQ(analyzer_->Receive(absl::Milliseconds(100)).status().code(),
            absl::StatusCode::kDeadlineExceeded)
      << "a third bundle went out with two unacked";
  EXPECT_EQ(outbox->stats().in_flight, 2);
  Ack(*analyzer_, a);
  EXPECT_EQ(Next().message.bundle().bundle_id(), "b2");
}

TEST_F(OutboxTest, FullOutboxRefusesWorkButKeepsEveryBundle) {
  std::string gone;
  {
    auto dead = PipelineReceiver::Bind("tcp://127.0.0.1:*");
    ASSERT_TRUE(dead.ok());
    gone = (*dead)->bound_endpoint();
  }
  BundleOutbox::Options o = Options();
  o.endpoints = {gone};  // no analyzer up
  o.capacity = 2;
  std::unique_ptr<BundleOutbox> outbox = Open(o);
  ASSERT_NE(outbox, nullptr);
  EXPECT_TRUE(outbox->AcceptingWork());
  ASSERT_TRUE(outbox->Add(Bundle("b1")).ok());
  EXPECT_TRUE(outbox->AcceptingWork());
  ASSERT_TRUE(outbox->Add(Bundle("b2")).ok());
  EXPECT_FALSE(outbox->AcceptingWork());
  // A round that was already running still lands: nothing is dropped.
  ASSERT_TRUE(outbox->Add(Bundle("b3")).ok());
  EXPECT_EQ(outbox->stats().held, 3);
  EXPECT_EQ(Files(dir_).size(), 3u);
  EXPECT_FALSE(outbox->WaitDrained(absl::Milliseconds(50)));
}

TEST_F(OutboxTest, RestartedOutboxResendsWhatWasNotAcked) {
  std::string gone;
  {
    auto dead = PipelineReceiver::Bind("tcp://127.0.0.1:*");
    ASSERT_TRUE(dead.ok());
    gone = (*dead)->bound_endpoint();
  }
  {
    BundleOutbox::Options o = Options();
    o.endpoints = {gone};
    std::unique_ptr<BundleOutbox> outbox = Open(o);
    ASSERT_NE(outbox, nullptr);
    ASSERT_TRUE(outbox->Add(Bundle("early")).ok());
    ASSERT_TRUE(outbox->Add(Bundle("late")).ok());
  }  // the agent stops (or dies) with both unacked
  // A torn or foreign file is set aside, named, not sent and not deleted.
  ASSERT_TRUE(
      WriteFileAtomic(dir_ + "/00000000000000000099.bundle", "garbage").ok());

  std::unique_ptr<BundleOutbox> outbox = Open(Options());
  ASSERT_NE(outbox, nullptr);
  PipelineDelivery a = Next();
  PipelineDelivery b = Next();
  EXPECT_EQ(a.message.bundle().bundle_id(), "early");
  EXPECT_EQ(b.message.bundle().bundle_id(), "late");
  Ack(*analyzer_, a);
  Ack(*analyzer_, b);
  ASSERT_TRUE(outbox->WaitDrained(kWait));
  EXPECT_EQ(Files(dir_),
            (std::set<std::string>{"00000000000000000099.bundle.bad"}));
  EXPECT_EQ(outbox->stats().unreadable, 1);
  // New bundles get sequence numbers after the old ones.
  ASSERT_TRUE(outbox->Add(Bundle("next")).ok());
  EXPECT_TRUE(Files(dir_).count("00000000000000000100.bundle"));
}

TEST_F(OutboxTest, ThirtyMegabyteBundleIsDeliveredAndAcked) {
  std::unique_ptr<BundleOutbox> outbox = Open(Options());
  ASSERT_NE(outbox, nullptr);
  v1::ProfileBundle big = Bundle("big");
  std::string content(30 << 20, 'x');
  for (size_t i = 0; i < content.size(); i += 1000) content[i] = 'a' + i % 26;
  big.mutable_files(0)->set_content(content);
  ASSERT_TRUE(outbox->Add(big).ok());
  PipelineDelivery d = Next();
  EXPECT_TRUE(d.message.bundle().files(0).content() == content);
  Ack(*analyzer_, d);
  ASSERT_TRUE(outbox->WaitDrained(kWait));
}

TEST_F(OutboxTest, BadInputIsAClearError) {
  std::unique_ptr<BundleOutbox> outbox = Open(Options());
  ASSERT_NE(outbox, nullptr);
  v1::ProfileBundle no_id = Bundle("");
  absl::Status st = outbox->Add(no_id);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("bundle_id"));

  BundleOutbox::Options o = Options();
  o.window = 0;
  EXPECT_EQ(BundleOutbox::Open(o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o = Options();
  o.dir = "";
  EXPECT_EQ(BundleOutbox::Open(o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o = Options();
  o.endpoints = {};
  EXPECT_EQ(BundleOutbox::Open(o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tunefarm
