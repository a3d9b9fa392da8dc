// What the coordinator tests stand on, in one place: a real Coordinator over
// a real RocksDB store in a temporary folder or over a store that fails its
// commits on cue, (for the service tests) its user and agent gRPC services on
// loopback, and the toy operator, spec, agent, lease and result that the
// domain-core tests drive it with.
#ifndef TUNEFARM_TESTS_COORDINATOR_COORDINATOR_HARNESS_H_
#define TUNEFARM_TESTS_COORDINATOR_COORDINATOR_HARNESS_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "common/clock.h"
#include "coordinator/auth.h"
#include "coordinator/control_loop.h"
#include "coordinator/coordinator.h"
#include "coordinator/farm_metrics.h"
#include "coordinator/service.h"
#include "grpcpp/grpcpp.h"
#include "ops/catalog.h"
#include "storage/fault_injecting_store.h"
#include "storage/rocksdb_store.h"
#include "storage/store.h"
#include "tunefarm/v1/agent.grpc.pb.h"
#include "tunefarm/v1/farm.grpc.pb.h"

namespace tunefarm {

// CoordinatorOnDisk is a Coordinator recovered from a RocksDB store in its
// own temporary folder. Opening it again drops the core and the store and
// recovers a new core from the same folder, as a process restart does.
// Owned by one test fixture; not thread-safe.
class CoordinatorOnDisk {
 public:
  CoordinatorOnDisk() = default;
  CoordinatorOnDisk(const CoordinatorOnDisk&) = delete;
  CoordinatorOnDisk& operator=(const CoordinatorOnDisk&) = delete;
  // Closes and removes the folder (a failure to remove it fails the test).
  ~CoordinatorOnDisk();

  // Makes the folder, named after `prefix`; once, before Open.
  absl::Status MakeDir(const std::string& prefix);
  // Instead of MakeDir: `dir`, a folder the caller owns and removes (a
  // SmallDisk, say).
  void UseDir(const std::string& dir) { dir_ = dir; }
  // The options of the stores that the next Opens open.
  void set_store_options(const RocksDbStoreOptions& options) {
    store_options_ = options;
  }
  // (Re)opens the store in dir()/db and recovers a core from it. The
  // catalog, clock and metrics (may be null) must outlive the core.
  absl::Status Open(const OperatorCatalog* catalog, Clock* clock,
                    const CoordinatorOptions& options,
                    FarmMetrics* metrics = nullptr);
  // Drops the core, then the store.
  void Close();

  const std::string& dir() const { return dir_; }
  Store* store() const { return store_.get(); }
  Coordinator* coordinator() const { return coordinator_.get(); }

 private:
  std::string dir_;
  bool own_dir_ = false;
  RocksDbStoreOptions store_options_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Coordinator> coordinator_;
};

// CoordinatorOverFaults is a Coordinator over a MemoryStore behind a
// FaultInjectingStore, so a test can fail its next commit on cue. Opening it
// again recovers a new core from the same memory, as a restart does. Owned
// by one test fixture; not thread-safe.
class CoordinatorOverFaults {
 public:
  CoordinatorOverFaults();
  CoordinatorOverFaults(const CoordinatorOverFaults&) = delete;
  CoordinatorOverFaults& operator=(const CoordinatorOverFaults&) = delete;

  // (Re)creates the core and recovers it from the store. The catalog, clock
  // and metrics (may be null) must outlive the core.
  absl::Status Open(const OperatorCatalog* catalog, Clock* clock,
                    const CoordinatorOptions& options,
                    FarmMetrics* metrics = nullptr);

  // What was committed, read without faults.
  Store* base() const { return base_.get(); }
  FaultInjectingStore* faults() { return &faults_; }
  Coordinator* coordinator() const { return coordinator_.get(); }

 private:
  std::unique_ptr<Store> base_;
  FaultInjectingStore faults_;
  std::unique_ptr<Coordinator> coordinator_;
};

// The toy operator of the domain-core tests: parameters a (values
// 1..a_values) and b (1..b_values), one fp16 workload, a sim backend.
std::string ToyOperatorYaml(int a_values, int b_values);

// Parses `yaml`, an operator manifest, into `catalog`.
absl::Status AddOperator(OperatorCatalog* catalog, const std::string& yaml);

// A spec of team qa for the toy operator on sim boards whose goal is out of
// reach, so it ends by its budget of `max_rounds` (with or without gain).
std::string ToySpecYaml(const std::string& name, const std::string& strategy,
                        int max_rounds);

// Registration of `agent` on node "node" with `boards` simulated sim boards
// named agent/b0, agent/b1, ...
v1::RegisterAgentRequest SimAgent(const std::string& agent, int boards);

// A lease request from `board` ("agent/bN").
v1::LeaseWorkRequest LeaseFor(const std::string& board);

// `board`'s passing result for `work`: 5 simulated samples with median
// `median_us` and p20/p80 1% either side.
v1::ReportResultRequest ResultFor(const std::string& board,
                                  const v1::WorkItem& work, double median_us,
                                  v1::Outcome outcome = v1::OUTCOME_OK);

// LoopbackServices serves one coordinator's FarmService and AgentGrpcService
// on 127.0.0.1 (port 0) with their control loop and event notifier, and
// holds a stub for each. Owned by one test fixture and declared after the
// CoordinatorOnDisk it serves, so it stops first. The stubs are thread-safe.
class LoopbackServices {
 public:
  LoopbackServices() = default;
  LoopbackServices(const LoopbackServices&) = delete;
  LoopbackServices& operator=(const LoopbackServices&) = delete;
  // Wakes watchers, shuts the server down, then stops the loop.
  ~LoopbackServices();

  // `tokens` null: authentication off. All three must outlive this object.
  // The agent service's liveness uses `clock` (SystemClock when null); a
  // test that wants the coordinator to read it calls SetLiveness.
  absl::Status Start(Coordinator* coordinator, Store* store,
                     const TokenTable* tokens, Clock* clock = nullptr);

  // A call context as `token` ("" = no credentials) with a 10 s deadline.
  static std::unique_ptr<grpc::ClientContext> As(const std::string& token);

  int port() const { return port_; }
  v1::TuneFarm::Stub* farm() const { return farm_stub_.get(); }
  // Every agent call the service heard of (coordinator/liveness.h).
  const AgentLiveness& liveness() const { return *liveness_; }
  v1::AgentService::Stub* agent() const { return agent_stub_.get(); }

 private:
  int port_ = 0;
  std::unique_ptr<AgentLiveness> liveness_;
  std::unique_ptr<ControlLoop> loop_;
  EventNotifier notifier_;
  std::unique_ptr<FarmService> farm_;
  std::unique_ptr<AgentGrpcService> agent_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::TuneFarm::Stub> farm_stub_;
  std::unique_ptr<v1::AgentService::Stub> agent_stub_;
};

}  // namespace tunefarm

#endif  // TUNEFARM_TESTS_COORDINATOR_COORDINATOR_HARNESS_H_
