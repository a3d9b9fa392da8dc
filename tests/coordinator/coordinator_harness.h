// What the coordinator tests stand on, in one place: a real Coordinator over
// a real RocksDB store in a temporary folder, and (for the service tests) its
// user and agent gRPC services on loopback.
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
  std::unique_ptr<Store> store_;
  std::unique_ptr<Coordinator> coordinator_;
};

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
