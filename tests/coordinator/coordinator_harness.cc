#include "tests/coordinator/coordinator_harness.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/grpc_client.h"
#include "gtest/gtest.h"

namespace tunefarm {

CoordinatorOnDisk::~CoordinatorOnDisk() {
  Close();
  if (!dir_.empty()) {
    absl::Status removed = RemoveAll(dir_);
    EXPECT_TRUE(removed.ok()) << removed;
  }
}

absl::Status CoordinatorOnDisk::MakeDir(const std::string& prefix) {
  absl::StatusOr<std::string> dir = MakeTempDir(prefix);
  if (!dir.ok()) return dir.status();
  dir_ = *std::move(dir);
  return absl::OkStatus();
}

absl::Status CoordinatorOnDisk::Open(const OperatorCatalog* catalog,
                                     Clock* clock,
                                     const CoordinatorOptions& options,
                                     FarmMetrics* metrics) {
  Close();
  if (dir_.empty()) return absl::FailedPreconditionError("MakeDir first");
  absl::StatusOr<std::unique_ptr<Store>> store = OpenRocksDbStore(dir_ + "/db");
  if (!store.ok()) return store.status();
  store_ = *std::move(store);
  coordinator_ = std::make_unique<Coordinator>(store_.get(), catalog, clock,
                                               options, metrics);
  return coordinator_->Recover();
}

void CoordinatorOnDisk::Close() {
  coordinator_.reset();
  store_.reset();
}

LoopbackServices::~LoopbackServices() {
  notifier_.Shutdown();
  if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now());
  if (loop_ != nullptr) loop_->Stop();
}

absl::Status LoopbackServices::Start(Coordinator* coordinator, Store* store,
                                     const TokenTable* tokens, Clock* clock) {
  liveness_ = std::make_unique<AgentLiveness>(
      clock != nullptr ? clock : &SystemClock());
  loop_ = std::make_unique<ControlLoop>(
      absl::Milliseconds(50), [] {},
      ControlLoop::BatchHooks{
          [coordinator] { coordinator->BeginBatch(); },
          [coordinator] { return coordinator->CommitBatch(); }});
  loop_->Start();
  farm_ = std::make_unique<FarmService>(coordinator, loop_.get(), store,
                                        &notifier_, tokens);
  agent_ = std::make_unique<AgentGrpcService>(coordinator, loop_.get(), tokens,
                                              liveness_.get());
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port_);
  builder.SetMaxReceiveMessageSize(kMaxGrpcMessageBytes);
  builder.SetMaxSendMessageSize(kMaxGrpcMessageBytes);
  builder.RegisterService(farm_.get());
  builder.RegisterService(agent_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    return absl::InternalError("could not serve on 127.0.0.1:0");
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxGrpcMessageBytes);
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port_),
                                grpc::InsecureChannelCredentials(), args);
  farm_stub_ = v1::TuneFarm::NewStub(channel);
  agent_stub_ = v1::AgentService::NewStub(channel);
  return absl::OkStatus();
}

std::unique_ptr<grpc::ClientContext> LoopbackServices::As(
    const std::string& token) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::seconds(10));
  if (!token.empty()) {
    context->AddMetadata("authorization", "Bearer " + token);
  }
  return context;
}

}  // namespace tunefarm
