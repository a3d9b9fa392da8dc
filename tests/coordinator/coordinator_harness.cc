#include "tests/coordinator/coordinator_harness.h"

#include <chrono>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/files.h"
#include "common/grpc_client.h"
#include "gtest/gtest.h"
#include "storage/memory_store.h"

namespace tunefarm {

CoordinatorOnDisk::~CoordinatorOnDisk() {
  Close();
  if (own_dir_ && !dir_.empty()) {
    absl::Status removed = RemoveAll(dir_);
    EXPECT_TRUE(removed.ok()) << removed;
  }
}

absl::Status CoordinatorOnDisk::MakeDir(const std::string& prefix) {
  absl::StatusOr<std::string> dir = MakeTempDir(prefix);
  if (!dir.ok()) return dir.status();
  dir_ = *std::move(dir);
  own_dir_ = true;
  return absl::OkStatus();
}

absl::Status CoordinatorOnDisk::Open(const OperatorCatalog* catalog,
                                     Clock* clock,
                                     const CoordinatorOptions& options,
                                     FarmMetrics* metrics) {
  Close();
  if (dir_.empty()) {
    return absl::FailedPreconditionError("MakeDir or UseDir first");
  }
  absl::StatusOr<std::unique_ptr<Store>> store =
      OpenRocksDbStore(dir_ + "/db", store_options_);
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

CoordinatorOverFaults::CoordinatorOverFaults()
    : base_(NewMemoryStore()), faults_(base_.get()) {}

absl::Status CoordinatorOverFaults::Open(const OperatorCatalog* catalog,
                                         Clock* clock,
                                         const CoordinatorOptions& options,
                                         FarmMetrics* metrics) {
  coordinator_.reset();
  coordinator_ =
      std::make_unique<Coordinator>(&faults_, catalog, clock, options, metrics);
  return coordinator_->Recover();
}

std::string ToyOperatorYaml(int a_values, int b_values) {
  auto values = [](int n) {
    std::vector<int> v;
    for (int i = 1; i <= n; ++i) v.push_back(i);
    return absl::StrJoin(v, ", ");
  };
  return absl::StrCat(
      "name: toy\nparameters:\n  - {name: a, values: [", values(a_values),
      "], default: 1}\n  - {name: b, values: [", values(b_values),
      "], default: 1}\n"
      "workloads:\n  - {name: small, dtype: fp16, dims: {m: 64, n: 64, k: "
      "64}}\n"
      "tolerances: {rtol: 0.01, atol: 0.001}\n"
      "backends:\n  sim: {command: [\"{bin}/toy\"]}\n");
}

absl::Status AddOperator(OperatorCatalog* catalog, const std::string& yaml) {
  absl::StatusOr<v1::OperatorManifest> op =
      ParseOperatorManifest(yaml, "test/operator.yaml");
  if (!op.ok()) return op.status();
  catalog->Add(*op);
  return absl::OkStatus();
}

std::string ToySpecYaml(const std::string& name, const std::string& strategy,
                        int max_rounds) {
  return absl::StrCat("name: ", name,
                      "\nteam: qa\noperator: toy\ngoal: {speedup: 100}\n"
                      "strategy: ",
                      strategy, "\nbudget: {max_rounds: ", max_rounds,
                      ", max_rounds_without_gain: ", max_rounds,
                      "}\nmin_gain: 0.02\nboards: {kind: sim}\n"
                      "measurement: {warmup: 1, samples: 5}\n");
}

v1::RegisterAgentRequest SimAgent(const std::string& agent, int boards) {
  v1::RegisterAgentRequest request;
  request.set_agent_id(agent);
  request.set_node("node");
  for (int i = 0; i < boards; ++i) {
    v1::BoardInfo* b = request.add_boards();
    b->set_board_id(absl::StrCat(agent, "/b", i));
    b->set_kind("sim");
    b->set_simulated(true);
  }
  return request;
}

v1::LeaseWorkRequest LeaseFor(const std::string& board) {
  v1::LeaseWorkRequest request;
  request.set_agent_id(board.substr(0, board.find('/')));
  request.set_board_id(board);
  return request;
}

v1::ReportResultRequest ResultFor(const std::string& board,
                                  const v1::WorkItem& work, double median_us,
                                  v1::Outcome outcome) {
  v1::ReportResultRequest request;
  request.set_agent_id(board.substr(0, board.find('/')));
  request.set_board_id(board);
  request.set_lease_id(work.lease_id());
  request.set_epoch(work.epoch());
  request.set_sweep_id(work.sweep_id());
  request.set_round_id(work.round_id());
  request.mutable_result()->set_outcome(outcome);
  request.mutable_result()->mutable_precision()->set_passed(true);
  v1::Measurement* m = request.mutable_result()->mutable_measurement();
  m->set_median_us(median_us);
  m->set_p20_us(median_us * 0.99);
  m->set_p80_us(median_us * 1.01);
  m->set_samples(5);
  m->set_simulated(true);
  return request;
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
          [coordinator] { return coordinator->CommitBatch(); },
          /*seal=*/nullptr});
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
