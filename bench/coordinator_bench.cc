// coordinator_bench: how many rounds per second the coordinator can run, and
// what the farm costs per round on top of the two synced commits a round
// needs (one when the lease is granted, one when the result is recorded).
//
// Every figure is measured in the same run, on the same disk, against a
// reference taken in that run:
//
//   BM_SyncedWriteBatch_Reference  the floor: a raw Store::Commit of one
//       round record + one event + the sweep record (copies of records a
//       real sweep wrote, so the sizes match), synced.
//   BM_RoundCycle_Core/<operator>  the Coordinator core over a real RocksDB
//       store: 16 agents x 16 boards = 256 boards; each iteration leases a
//       round for the next board (round-robin) and reports an OK result at
//       once (the variants take no time). 1 in 8 results beats the best by a
//       hair (kept), the others are 10% slower than their parent (rolled
//       back), so both decision paths run. The real ops/sim_matmul manifest
//       (1600 configurations; when a sweep exhausts it the next sweep is
//       submitted inside the loop, as a busy farm would) and a synthetic
//       6 x 10 manifest (10^6 configurations, never exhausted).
//   BM_RoundCycle_Grpc/sim_matmul  the same cycle through the real gRPC
//       services (FarmService + AgentGrpcService over a ControlLoop) on
//       127.0.0.1, one synchronous client.
//
// After the table a summary prints the ratios: round cycle / (2 x synced
// commit) — the farm's overhead per round, 1.0 meaning nothing but the two
// fsyncs — and gRPC / core. Every benchmark checks afterwards, from the
// store, that the decisions recorded are the ones the made-up measurements
// called for; a mismatch aborts that benchmark with an error instead of a
// figure.
//
// The databases live in $TMPDIR (default /tmp): point TMPDIR at the disk the
// farm's data_dir would use. Single-threaded except for gRPC's own threads
// and the control loop in BM_RoundCycle_Grpc.
#include <pthread.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/manifest_cache.h"
#include "benchmark/benchmark.h"
#include "common/clock.h"
#include "common/files.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "coordinator/control_loop.h"
#include "coordinator/coordinator.h"
#include "coordinator/farm_metrics.h"
#include "coordinator/prometheus_metrics.h"
#include "coordinator/service.h"
#include "coordinator/strategy.h"
#include "grpcpp/alarm.h"
#include "grpcpp/grpcpp.h"
#include "ops/catalog.h"
#include "spdlog/spdlog.h"
#include "storage/rocksdb_store.h"
#include "storage/store.h"
#include "tunefarm/v1/agent.grpc.pb.h"
#include "tunefarm/v1/farm.grpc.pb.h"

namespace tunefarm {
namespace {

constexpr int kAgents = 16;
constexpr int kBoardsPerAgent = 16;
constexpr double kMinTimeS = 2.0;
constexpr double kBaselineUs = 1000.0;

// 6 parameters x 10 values = 10^6 configurations: a long sweep never
// exhausts it, so the random strategy samples instead of enumerating.
constexpr char kWideOperator[] = R"(
name: wide6x10
description: synthetic 10^6-configuration space for coordinator_bench
parameters:
  - {name: p0, values: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], default: 0}
  - {name: p1, values: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], default: 0}
  - {name: p2, values: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], default: 0, stage: pipeline}
  - {name: p3, values: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], default: 0, stage: pipeline}
  - {name: p4, values: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], default: 0, stage: in_core}
  - {name: p5, values: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], default: 0, stage: in_core}
workloads:
  - {name: square_2k, dtype: fp16, dims: {m: 2048, n: 2048, k: 2048}}
  - {name: square_4k, dtype: fp16, dims: {m: 4096, n: 4096, k: 4096}}
  - {name: tall, dtype: fp16, dims: {m: 8192, n: 1024, k: 1024}}
  - {name: wide, dtype: fp16, dims: {m: 1024, n: 8192, k: 1024}}
tolerances: {rtol: 0.01, atol: 0.001}
backends:
  sim: {command: ["{bin}/none"]}
)";
constexpr const char* kWideWorkloads[] = {"square_2k", "square_4k", "tall",
                                          "wide"};

struct BoardRef {
  std::string agent_id;
  std::string board_id;
};

// A sweep that never ends by itself: random strategy (the farm at scale's
// --strategy picks another), the largest round budget a spec may ask for,
// and a goal the made-up results never reach.
v1::SweepSpec BenchSpec(const std::string& op_name, int number) {
  v1::SweepSpec spec;
  spec.set_name(absl::StrCat("bench-", number));
  spec.set_team("bench");
  spec.set_operator_name(op_name);
  spec.mutable_goal()->set_speedup(100.0);
  spec.mutable_strategy()->set_name("random");
  spec.mutable_strategy()->set_seed(7);
  spec.mutable_budget()->set_max_rounds(100000);
  spec.mutable_budget()->set_max_rounds_without_gain(100000);
  spec.set_min_gain(0.0);  // so a keep can be a hair faster, see ResultMaker
  spec.mutable_boards()->set_kind("sim");
  spec.mutable_measurement()->set_warmup(5);
  spec.mutable_measurement()->set_samples(30);
  spec.mutable_measurement()->set_flush_cache(true);
  // The results are made up, so a closing check would check nothing; every
  // round stays a candidate, as Verify counts them.
  spec.mutable_measurement()->set_skip_closing_check(true);
  return spec;
}

// Made-up results, as an A/B board reports them (the default measurement
// mode: the parent timed in the same lease, a paired gain with its lower
// bound). The baseline takes kBaselineUs; then 1 in 8 candidates is 0.001%
// faster than its parent, the best (kept: the lower bound clears min_gain
// 0, and 12,500 keeps in a 100,000-round sweep stay far below the 100x
// goal); the rest are 10% slower (rolled back).
class ResultMaker {
 public:
  v1::RoundResult Next(const std::string& sweep_id, int64_t round_id) {
    double median = 0;
    double gain = 0;
    if (round_id == 0) {
      median = kBaselineUs;
      best_us_[sweep_id] = median;
    } else if (++candidates_ % 8 == 0) {
      gain = 1e-5;
      median = best_us_[sweep_id] * (1 - gain);
      best_us_[sweep_id] = median;
      ++kept_;
    } else {
      gain = -0.1;
      median = best_us_[sweep_id] * 1.1;
      ++rolled_back_;
    }
    v1::RoundResult r;
    r.set_outcome(v1::OUTCOME_OK);
    r.mutable_precision()->set_passed(true);
    r.mutable_precision()->set_elements(int64_t{2048} * 2048);
    v1::Measurement* m = r.mutable_measurement();
    m->set_median_us(median);
    m->set_p20_us(median * 0.99);
    m->set_p80_us(median * 1.01);
    m->set_min_us(median * 0.98);
    m->set_max_us(median * 1.05);
    m->set_samples(30);
    m->set_warmup(5);
    m->set_simulated(true);
    m->set_policy("warmup 5, samples 30, flush_cache");
    if (round_id != 0) {
      m->set_paired(true);
      m->set_gain(gain);
      m->set_gain_lower(gain > 0 ? gain / 2 : gain * 1.2);
      m->set_gain_upper(gain > 0 ? gain * 2 : gain * 0.8);
      m->set_pairs(30);
      m->set_confidence(0.95);
    }
    r.set_build_s(0.0);
    r.set_run_s(0.0);
    return r;
  }

  int64_t kept() const { return kept_; }
  int64_t rolled_back() const { return rolled_back_; }

 private:
  std::map<std::string, double> best_us_;
  int64_t candidates_ = 0;
  int64_t kept_ = 0;
  int64_t rolled_back_ = 0;
};

// A coordinator on a fresh RocksDB store in a temp dir. Removes the dir when
// destroyed.
struct Farm {
  std::string dir;
  std::unique_ptr<Store> store;
  OperatorCatalog catalog;
  std::unique_ptr<Coordinator> coordinator;

  ~Farm() {
    coordinator.reset();
    store.reset();
    if (!dir.empty()) (void)RemoveAll(dir);
  }
};

absl::StatusOr<std::unique_ptr<Farm>> OpenFarm(FarmMetrics* metrics = nullptr) {
  auto farm = std::make_unique<Farm>();
  TF_ASSIGN_OR_RETURN(farm->dir, MakeTempDir("coordinator_bench"));
  TF_ASSIGN_OR_RETURN(farm->store, OpenRocksDbStore(farm->dir + "/db"));
  TF_ASSIGN_OR_RETURN(farm->catalog, OperatorCatalog::LoadFromDirs(
                                         {TUNEFARM_SOURCE_DIR "/ops"}));
  TF_ASSIGN_OR_RETURN(v1::OperatorManifest wide,
                      ParseOperatorManifest(kWideOperator, "kWideOperator"));
  farm->catalog.Add(std::move(wide));
  CoordinatorOptions options;
  // Nothing heartbeats here; agents stay alive through their lease calls,
  // and a long timeout keeps setup pauses from losing them.
  options.agent_timeout = absl::Hours(1);
  farm->coordinator = std::make_unique<Coordinator>(
      farm->store.get(), &farm->catalog, &SystemClock(), options, metrics);
  TF_RETURN_IF_ERROR(farm->coordinator->Recover());
  return farm;
}

// The agent-facing calls, straight on the core.
class CoreApi {
 public:
  explicit CoreApi(Coordinator* c) : c_(c) {}
  absl::StatusOr<v1::RegisterAgentResponse> RegisterAgent(
      const v1::RegisterAgentRequest& r) {
    return c_->RegisterAgent(r);
  }
  absl::StatusOr<v1::SubmitSweepResponse> SubmitSweep(
      const v1::SubmitSweepRequest& r) {
    return c_->SubmitSweep(r, AnonymousAdmin());
  }
  absl::StatusOr<v1::LeaseWorkResponse> LeaseWork(
      const v1::LeaseWorkRequest& r) {
    return c_->LeaseWork(r);
  }
  absl::StatusOr<v1::ReportResultResponse> ReportResult(
      const v1::ReportResultRequest& r) {
    return c_->ReportResult(r);
  }

 private:
  Coordinator* c_;
};

// The same calls through gRPC stubs.
class GrpcApi {
 public:
  explicit GrpcApi(const std::shared_ptr<grpc::Channel>& channel)
      : farm_(v1::TuneFarm::NewStub(channel)),
        agent_(v1::AgentService::NewStub(channel)) {}
  absl::StatusOr<v1::RegisterAgentResponse> RegisterAgent(
      const v1::RegisterAgentRequest& r) {
    return Unary<v1::RegisterAgentResponse>(
        [&](grpc::ClientContext* ctx, v1::RegisterAgentResponse* out) {
          return agent_->RegisterAgent(ctx, r, out);
        });
  }
  absl::StatusOr<v1::SubmitSweepResponse> SubmitSweep(
      const v1::SubmitSweepRequest& r) {
    return Unary<v1::SubmitSweepResponse>(
        [&](grpc::ClientContext* ctx, v1::SubmitSweepResponse* out) {
          return farm_->SubmitSweep(ctx, r, out);
        });
  }
  absl::StatusOr<v1::LeaseWorkResponse> LeaseWork(
      const v1::LeaseWorkRequest& r) {
    return Unary<v1::LeaseWorkResponse>(
        [&](grpc::ClientContext* ctx, v1::LeaseWorkResponse* out) {
          return agent_->LeaseWork(ctx, r, out);
        });
  }
  absl::StatusOr<v1::ReportResultResponse> ReportResult(
      const v1::ReportResultRequest& r) {
    return Unary<v1::ReportResultResponse>(
        [&](grpc::ClientContext* ctx, v1::ReportResultResponse* out) {
          return agent_->ReportResult(ctx, r, out);
        });
  }

 private:
  template <typename Resp, typename F>
  static absl::StatusOr<Resp> Unary(F&& call) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(30));
    Resp out;
    absl::Status st = FromGrpcStatus(call(&ctx, &out));
    if (!st.ok()) return st;
    return out;
  }

  std::unique_ptr<v1::TuneFarm::Stub> farm_;
  std::unique_ptr<v1::AgentService::Stub> agent_;
};

// Drives rounds through an Api (CoreApi or GrpcApi): registration, sweeps,
// and one lease + result per Step.
template <typename Api>
class Cycler {
 public:
  Cycler(Api* api, std::string op_name)
      : api_(api), op_name_(std::move(op_name)) {}

  // Registers kAgents agents of kBoardsPerAgent boards and submits a sweep.
  absl::Status Setup() {
    for (int a = 0; a < kAgents; ++a) {
      v1::RegisterAgentRequest req;
      req.set_agent_id(absl::StrFormat("agent-%02d", a));
      req.set_node(absl::StrFormat("node-%02d", a));
      req.set_version("bench");
      for (int b = 0; b < kBoardsPerAgent; ++b) {
        v1::BoardInfo* board = req.add_boards();
        board->set_board_id(absl::StrFormat("agent-%02d/npu-%02d", a, b));
        board->set_kind("sim");
        board->set_chip("Ascend910B-sim");
        board->set_simulated(true);
        boards_.push_back({req.agent_id(), board->board_id()});
      }
      TF_RETURN_IF_ERROR(api_->RegisterAgent(req).status());
    }
    return Submit();
  }

  // One round: lease work for the next board, report its result at once.
  // When the sweep has run out of configurations, the next one is submitted
  // and the board leases its baseline.
  absl::Status Step() {
    const BoardRef& board = boards_[next_board_++ % boards_.size()];
    v1::LeaseWorkRequest lease_req;
    lease_req.set_agent_id(board.agent_id);
    lease_req.set_board_id(board.board_id);
    TF_ASSIGN_OR_RETURN(v1::LeaseWorkResponse lease,
                        api_->LeaseWork(lease_req));
    if (!lease.granted()) {
      TF_RETURN_IF_ERROR(Submit());
      TF_ASSIGN_OR_RETURN(lease, api_->LeaseWork(lease_req));
      if (!lease.granted()) {
        return absl::InternalError(absl::StrCat("no work for ", board.board_id,
                                                " after a fresh submission"));
      }
    }
    const v1::WorkItem& work = lease.work();
    v1::ReportResultRequest report;
    report.set_agent_id(board.agent_id);
    report.set_board_id(board.board_id);
    report.set_lease_id(work.lease_id());
    report.set_epoch(work.epoch());
    report.set_sweep_id(work.sweep_id());
    report.set_round_id(work.round_id());
    *report.mutable_result() = maker_.Next(work.sweep_id(), work.round_id());
    TF_ASSIGN_OR_RETURN(v1::ReportResultResponse ack,
                        api_->ReportResult(report));
    if (!ack.accepted() || ack.duplicate()) {
      return absl::InternalError(absl::StrCat("result of ", work.lease_id(),
                                              " not recorded: ", ack.reason()));
    }
    return absl::OkStatus();
  }

  // Checks the store holds exactly the decisions the made-up results call
  // for, so a figure never comes from a farm that silently did less.
  absl::Status Verify(Store& store) const {
    TF_ASSIGN_OR_RETURN(std::vector<v1::Sweep> sweeps, store.ListSweeps());
    int64_t kept = 0, rolled_back = 0;
    for (const v1::Sweep& s : sweeps) {
      TF_ASSIGN_OR_RETURN(std::vector<v1::Round> rounds,
                          store.ListRounds(s.sweep_id()));
      for (const v1::Round& r : rounds) {
        kept += r.decision() == v1::DECISION_KEPT ? 1 : 0;
        rolled_back += r.decision() == v1::DECISION_ROLLED_BACK ? 1 : 0;
      }
    }
    if (kept != maker_.kept() || rolled_back != maker_.rolled_back()) {
      return absl::InternalError(
          absl::StrCat("store records ", kept, " kept / ", rolled_back,
                       " rolled back; the results called for ", maker_.kept(),
                       " / ", maker_.rolled_back()));
    }
    return absl::OkStatus();
  }

  int sweeps_submitted() const { return sweeps_; }
  const ResultMaker& maker() const { return maker_; }

 private:
  absl::Status Submit() {
    v1::SubmitSweepRequest req;
    *req.mutable_spec() = BenchSpec(op_name_, ++sweeps_);
    return api_->SubmitSweep(req).status();
  }

  Api* api_;
  std::string op_name_;
  std::vector<BoardRef> boards_;
  size_t next_board_ = 0;
  int sweeps_ = 0;
  ResultMaker maker_;
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * v.size()));
  std::nth_element(v.begin(), v.begin() + i, v.end());
  return v[i];
}

// The timed loop shared by the core and gRPC benchmarks. The baseline round
// runs before timing, so timed rounds are candidates (plus, for a small
// space, the occasional next sweep's submission and baseline).
template <typename Api>
void RunRounds(benchmark::State& state, Cycler<Api>& cycler, Store& store) {
  if (absl::Status st = cycler.Step(); !st.ok()) {
    state.SkipWithError(st.ToString().c_str());
    return;
  }
  std::vector<double> latency_us;
  latency_us.reserve(1 << 16);
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    absl::Status st = cycler.Step();
    latency_us.push_back(std::chrono::duration<double, std::micro>(
                             std::chrono::steady_clock::now() - start)
                             .count());
    if (!st.ok()) {
      state.SkipWithError(st.ToString().c_str());
      break;
    }
  }
  if (absl::Status st = cycler.Verify(store); !st.ok()) {
    state.SkipWithError(st.ToString().c_str());
    return;
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["p50_us"] = Percentile(latency_us, 0.50);
  state.counters["p99_us"] = Percentile(latency_us, 0.99);
  state.counters["kept"] = static_cast<double>(cycler.maker().kept());
  state.counters["rolled_back"] =
      static_cast<double>(cycler.maker().rolled_back());
  state.counters["sweeps"] = cycler.sweeps_submitted();
}

void BM_SyncedWriteBatch_Reference(benchmark::State& state) {
  absl::StatusOr<std::unique_ptr<Farm>> farm = OpenFarm();
  if (!farm.ok()) {
    state.SkipWithError(farm.status().ToString().c_str());
    return;
  }
  Store& store = *(*farm)->store;
  // Records a real sweep wrote: run 33 rounds, then copy the newest round,
  // its ROUND_FINISHED event and the sweep.
  CoreApi api((*farm)->coordinator.get());
  Cycler<CoreApi> cycler(&api, "sim_matmul");
  absl::Status st = cycler.Setup();
  for (int i = 0; st.ok() && i < 33; ++i) st = cycler.Step();
  absl::StatusOr<v1::Sweep> sweep = store.GetSweep("sw-000001");
  if (st.ok()) st = sweep.status();
  absl::StatusOr<v1::Round> round =
      sweep.ok() ? store.GetRound("sw-000001", sweep->next_round_id() - 1)
                 : absl::StatusOr<v1::Round>(sweep.status());
  if (st.ok()) st = round.status();
  absl::StatusOr<std::vector<v1::SweepEvent>> events =
      sweep.ok() ? store.ReadEvents("sw-000001", sweep->last_event_seq() - 3, 0)
                 : absl::StatusOr<std::vector<v1::SweepEvent>>(sweep.status());
  if (st.ok()) st = events.status();
  v1::SweepEvent event;
  if (st.ok()) {
    for (const v1::SweepEvent& e : *events) {
      if (e.kind() == v1::EVENT_KIND_ROUND_FINISHED) event = e;
    }
    if (event.seq() == 0) st = absl::InternalError("no ROUND_FINISHED event");
  }
  if (!st.ok()) {
    state.SkipWithError(st.ToString().c_str());
    return;
  }
  int64_t round_id = sweep->next_round_id();
  int64_t seq = sweep->last_event_seq();
  size_t bytes = 0;
  for (auto _ : state) {
    // New keys each time, as the real rounds and events get.
    round->set_round_id(round_id);
    *event.mutable_round() = *round;
    event.set_seq(++seq);
    sweep->set_next_round_id(++round_id);
    sweep->set_last_event_seq(seq);
    WriteSet writes;
    writes.PutRound(*round);
    writes.AppendEvent(event);
    writes.PutSweep(*sweep);
    if (absl::Status c = store.Commit(writes); !c.ok()) {
      state.SkipWithError(c.ToString().c_str());
      break;
    }
    if (bytes == 0) {
      for (const auto& m : writes.mutations()) bytes += m.value.size();
    }
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["bytes_per_commit"] = static_cast<double>(bytes);
}

void BM_RoundCycle_Core(benchmark::State& state, const char* op_name) {
  absl::StatusOr<std::unique_ptr<Farm>> farm = OpenFarm();
  if (!farm.ok()) {
    state.SkipWithError(farm.status().ToString().c_str());
    return;
  }
  CoreApi api((*farm)->coordinator.get());
  Cycler<CoreApi> cycler(&api, op_name);
  if (absl::Status st = cycler.Setup(); !st.ok()) {
    state.SkipWithError(st.ToString().c_str());
    return;
  }
  RunRounds(state, cycler, *(*farm)->store);
}

void BM_RoundCycle_Grpc(benchmark::State& state, const char* op_name) {
  absl::StatusOr<std::unique_ptr<Farm>> farm = OpenFarm();
  if (!farm.ok()) {
    state.SkipWithError(farm.status().ToString().c_str());
    return;
  }
  Coordinator& coordinator = *(*farm)->coordinator;
  EventNotifier notifier;
  coordinator.SetEventListener([&](const std::string&) { notifier.Notify(); });
  // The production tick (coordinator/main.cc --tick_ms default).
  ControlLoop loop(absl::Milliseconds(100), [&] {
    if (absl::Status st = coordinator.Tick(); !st.ok()) {
      spdlog::error("tick: {}", st.ToString());
    }
  });
  loop.Start();
  FarmService farm_service(&coordinator, &loop, (*farm)->store.get(), &notifier,
                           /*tokens=*/nullptr);
  AgentGrpcService agent_service(&coordinator, &loop, /*tokens=*/nullptr);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  builder.RegisterService(&farm_service);
  builder.RegisterService(&agent_service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    state.SkipWithError("gRPC server could not listen on 127.0.0.1:0");
    loop.Stop();
    return;
  }
  {
    GrpcApi api(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                    grpc::InsecureChannelCredentials()));
    Cycler<GrpcApi> cycler(&api, op_name);
    if (absl::Status st = cycler.Setup(); !st.ok()) {
      state.SkipWithError(st.ToString().c_str());
    } else {
      RunRounds(state, cycler, *(*farm)->store);
    }
  }
  notifier.Shutdown();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  loop.Stop();
}

// Registration order is run order: the reference first. Smoke runs each
// for a few iterations only.
void RegisterTable(bool smoke) {
  auto shape = [smoke](benchmark::internal::Benchmark* b) {
    b->Unit(benchmark::kMicrosecond)->UseRealTime();
    if (smoke) {
      b->Iterations(20);
    } else {
      b->MinTime(kMinTimeS);
    }
  };
  shape(benchmark::RegisterBenchmark("BM_SyncedWriteBatch_Reference",
                                     BM_SyncedWriteBatch_Reference));
  shape(benchmark::RegisterBenchmark("BM_RoundCycle_Core/sim_matmul",
                                     BM_RoundCycle_Core, "sim_matmul"));
  shape(benchmark::RegisterBenchmark("BM_RoundCycle_Core/wide6x10",
                                     BM_RoundCycle_Core, "wide6x10"));
  shape(benchmark::RegisterBenchmark("BM_RoundCycle_Grpc/sim_matmul",
                                     BM_RoundCycle_Grpc, "sim_matmul"));
}

// ---------------------------------------------------------------------------
// The farm at scale: `boards` simulated boards, each always waiting on its
// own request (a lease, then its result asking for the next lease),
// served by the control loop with group commit, through the core (closures
// posted to the loop) or through real gRPC on loopback (`clients` threads
// with async stubs). A round is a lease plus a durable result.

struct LoadOptions {
  int boards = 1024;
  int clients = 16;
  double seconds = 5;
  int64_t sweep_rounds = 10000;  // each sweep's round budget
  bool grpc = false;
  // How long a board "runs" a variant between its lease and its result: 0
  // saturates the coordinator (every board always waiting); more offers a
  // fixed load (boards / run time) and measures latency under it.
  absl::Duration run = absl::ZeroDuration();
  // Each run takes `run` times a factor drawn uniformly from [1 - spread,
  // 1 + spread], as variants' run times differ (the mean, so the load
  // offered, stays `run`). 0: every run exactly `run`, boards in lockstep.
  double run_spread = 0.5;
  // Boards name the manifests they hold, as agents do; false: every work
  // item carries its manifest (what that costs).
  bool name_held_manifests = true;
  // Above 1: per_workload sweeps over this many of the operator's
  // workloads, each with its share of sweep_rounds; one_config: one
  // configuration measured on all of them.
  int workloads = 1;
  bool one_config = false;
  // Boards ask for their next lease with each report, one call a round, as
  // agents without build-ahead do; false: a lease call of its own (the
  // what-if).
  bool lease_with_report = true;
  // The sweeps' strategy: random measures the coordinator itself; a model
  // strategy (hybrid, the specs' default) adds what its proposals cost.
  std::string strategy = "random";
};

// How long each of a client's boards "runs" its variant. One per client,
// used by one thread at a time.
class RunTimes {
 public:
  RunTimes(absl::Duration mean, double spread, uint64_t seed)
      : mean_(mean), factor_(1 - spread, 1 + spread), gen_(seed) {}
  bool any() const { return mean_ > absl::ZeroDuration(); }
  absl::Duration Next() { return mean_ * factor_(gen_); }

 private:
  const absl::Duration mean_;
  std::uniform_real_distribution<double> factor_;
  std::mt19937_64 gen_;
};

// Runs closures at a time, on its own thread (boards "running" variants).
class Timer {
 public:
  Timer() : thread_([this] { Run(); }) {}
  ~Timer() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    thread_.join();
  }
  void At(absl::Time when, std::function<void()> fn) {
    absl::MutexLock lock(&mu_);
    due_.emplace(when, std::move(fn));
  }

 private:
  void Run() {
    absl::MutexLock lock(&mu_);
    while (!stop_) {
      const absl::Time next = due_.empty() ? absl::Now() + absl::Milliseconds(5)
                                           : due_.begin()->first;
      auto wake = [this] { return stop_; };
      mu_.AwaitWithDeadline(absl::Condition(&wake), next);
      const absl::Time now = absl::Now();
      while (!due_.empty() && due_.begin()->first <= now) {
        std::function<void()> fn = std::move(due_.begin()->second);
        due_.erase(due_.begin());
        mu_.Unlock();
        fn();
        mu_.Lock();
      }
    }
  }

  absl::Mutex mu_;
  std::multimap<absl::Time, std::function<void()>> due_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

struct LoadResult {
  absl::Status status;
  int64_t rounds = 0;
  double seconds = 0;
  double cpu_s = 0;  // the whole process (clients included)
  // The gRPC run's client threads alone (the simulated agents): cpu_s less
  // this is what the coordinator and gRPC's own threads used.
  double client_cpu_s = 0;
  double p50_ms = 0;
  double p99_ms = 0;
  // The durable commits while measuring: what each call waited for its
  // batch to be on disk, the floor under the lease latency.
  double commit_p50_ms = 0;
  double commit_p99_ms = 0;
  int sweeps = 0;
  double rounds_per_s() const { return seconds > 0 ? rounds / seconds : 0; }
  double cpu_us_per_round() const {
    return rounds > 0 ? cpu_s * 1e6 / rounds : 0;
  }
  double client_cpu_us_per_round() const {
    return rounds > 0 ? client_cpu_s * 1e6 / rounds : 0;
  }
};

double ProcessCpuSeconds() {
  struct rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec +
         (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// What every client shares: the phase of the run and the tallies.
struct LoadShared {
  bool name_held_manifests = true;  // LoadOptions'
  bool lease_with_report = true;    // LoadOptions'
  std::atomic<bool> measuring{false};
  std::atomic<bool> stopping{false};
  std::atomic<int64_t> rounds{0};
  // Results acknowledged as recorded (not duplicates), over the whole run.
  std::atomic<int64_t> baselines{0};
  std::atomic<int64_t> candidates{0};
  absl::Mutex mu;
  std::vector<double> lease_ms ABSL_GUARDED_BY(mu);
  absl::Status error ABSL_GUARDED_BY(mu);
  // Whether a report now asks for the board's next lease.
  bool NextWithReport() const { return lease_with_report && !stopping; }
  void Fail(const absl::Status& st) {
    absl::MutexLock lock(&mu);
    if (error.ok()) error = st;
    stopping = true;
  }
};

// The coordinator's metrics as tunefarm-coordinator has them (Prometheus),
// with the durable commits timed while `measuring`. Thread-safe: the loop's
// writer commits.
class MeasuredMetrics : public FarmMetrics {
 public:
  MeasuredMetrics() : prometheus_(NewPrometheusFarmMetrics(registry_, false)) {}
  std::atomic<bool> measuring{false};

  void StoreCommitted(double seconds, size_t writes, bool ok) override {
    prometheus_->StoreCommitted(seconds, writes, ok);
    if (!measuring) return;
    absl::MutexLock lock(&mu_);
    commit_ms_.push_back(seconds * 1e3);
  }
  std::vector<double> commit_ms() const {
    absl::MutexLock lock(&mu_);
    return commit_ms_;
  }
  void RoundRecorded(const std::string& outcome, double s) override {
    prometheus_->RoundRecorded(outcome, s);
  }
  void LeaseGranted(double s) override { prometheus_->LeaseGranted(s); }
  void LeaseExpired() override { prometheus_->LeaseExpired(); }
  void SetBoardsByState(const std::map<std::string, int>& counts) override {
    prometheus_->SetBoardsByState(counts);
  }
  void SetBoardStates(const std::vector<v1::BoardInfo>& boards) override {
    prometheus_->SetBoardStates(boards);
  }
  void BoardQuarantined(const v1::BoardInfo& b) override {
    prometheus_->BoardQuarantined(b);
  }
  void HealthCheckRecorded(const v1::BoardInfo& b, bool passed) override {
    prometheus_->HealthCheckRecorded(b, passed);
  }
  void BoardBusy(const v1::BoardInfo& b, double s) override {
    prometheus_->BoardBusy(b, s);
  }
  void TeamRound(const std::string& team, const std::string& outcome,
                 double s) override {
    prometheus_->TeamRound(team, outcome, s);
  }
  void SetQueueDepth(int queued) override {
    prometheus_->SetQueueDepth(queued);
  }
  void DiagnosisRecorded() override { prometheus_->DiagnosisRecorded(); }

 private:
  prometheus::Registry registry_;
  std::unique_ptr<FarmMetrics> prometheus_;
  mutable absl::Mutex mu_;
  std::vector<double> commit_ms_ ABSL_GUARDED_BY(mu_);
};

// A made-up A/B result: 1 in 8 kept (paired gain lower bound above 0).
v1::RoundResult LoadResultFor(bool baseline, uint64_t n, bool* kept) {
  v1::RoundResult r;
  r.set_outcome(v1::OUTCOME_OK);
  r.mutable_precision()->set_passed(true);
  v1::Measurement* m = r.mutable_measurement();
  const bool keep = !baseline && n % 8 == 0;
  const double gain = keep ? 1e-5 : -0.1;
  m->set_median_us(kBaselineUs * (1 - gain));
  m->set_p20_us(m->median_us() * 0.99);
  m->set_p80_us(m->median_us() * 1.01);
  m->set_samples(30);
  m->set_simulated(true);
  if (!baseline) {
    m->set_paired(true);
    m->set_gain(gain);
    m->set_gain_lower(keep ? gain / 2 : gain * 1.2);
    m->set_pairs(30);
    m->set_confidence(0.95);
  }
  *kept = keep;
  return r;
}

// One board's cycle, whatever carries the calls.
struct BoardLoop {
  BoardRef ref;
  uint64_t results = 0;
  absl::Time lease_sent;
  v1::WorkItem work;
  bool kept = false;
  // The operator manifests this board has received, as an agent's gRPC
  // client keeps them. `name_held`: its lease requests name them.
  OperatorManifestCache manifests;

  v1::LeaseWorkRequest LeaseRequest(bool name_held) const {
    v1::LeaseWorkRequest req;
    req.set_agent_id(ref.agent_id);
    req.set_board_id(ref.board_id);
    if (name_held) manifests.AddHeld(&req);
    return req;
  }
  // Takes a granted work item as an agent does, keeping the manifest it
  // brought or checking the one left out is held; it is not copied in, as
  // an agent does on its own host, since nothing here reads it.
  absl::Status Take(v1::WorkItem* item) {
    TF_RETURN_IF_ERROR(manifests.Admit(item));
    work.Swap(item);
    return absl::OkStatus();
  }
  // With `next_lease`, the report asks for the next lease too (the time
  // the board waits for it counts from now).
  v1::ReportResultRequest Report(bool next_lease, bool name_held) {
    v1::ReportResultRequest req;
    if (next_lease) {
      lease_sent = absl::Now();
      v1::LeaseWorkRequest* next = req.mutable_next_lease();
      if (name_held) manifests.AddHeld(next);
    }
    req.set_agent_id(ref.agent_id);
    req.set_board_id(ref.board_id);
    req.set_lease_id(work.lease_id());
    req.set_epoch(work.epoch());
    req.set_sweep_id(work.sweep_id());
    req.set_round_id(work.round_id());
    *req.mutable_result() =
        LoadResultFor(!work.has_reference(), ++results, &kept);
    return req;
  }
};

// Keeps enough sweeps running for every board: a board that gets no work
// asks for more (Ensure), or parks a retry that the keeper's thread runs
// after topping the sweeps up.
class SweepKeeper {
 public:
  SweepKeeper(ControlLoop* loop, Coordinator* c, int64_t rounds, int boards,
              int workloads, bool one_config, std::string strategy)
      : loop_(loop),
        c_(c),
        strategy_(std::move(strategy)),
        rounds_(rounds),
        workloads_(workloads),
        one_config_(one_config),
        target_(static_cast<int>(std::max<int64_t>(
            4, int64_t{2} * boards / std::max<int64_t>(1, rounds) + 2))) {}
  ~SweepKeeper() {
    {
      absl::MutexLock lock(&park_mu_);
      stop_ = true;
    }
    if (thread_.joinable()) thread_.join();
  }
  void Park(std::function<void()> retry) {
    absl::MutexLock lock(&park_mu_);
    parked_.push_back(std::move(retry));
    if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
  }
  absl::Status Ensure() {
    absl::MutexLock lock(&mu_);
    const int active = loop_->Call([&] { return c_->active_sweeps(); });
    for (int i = active; i < target_; ++i) {
      v1::SubmitSweepRequest req;
      v1::SweepSpec& spec = *req.mutable_spec();
      spec = BenchSpec("wide6x10", ++submitted_);
      spec.mutable_strategy()->set_name(strategy_);
      // A per_workload budget is each workload's, a one_config one counts
      // configurations: either way the sweep's rounds stay rounds_.
      const int64_t budget = std::max<int64_t>(1, rounds_ / workloads_);
      spec.mutable_budget()->set_max_rounds(budget);
      spec.mutable_budget()->set_max_rounds_without_gain(budget);
      if (workloads_ > 1) {
        spec.set_objective(one_config_ ? v1::WORKLOAD_OBJECTIVE_ONE_CONFIG
                                       : v1::WORKLOAD_OBJECTIVE_PER_WORKLOAD);
        for (int i = 0; i < workloads_; ++i) {
          spec.add_workloads()->set_name(kWideWorkloads[i]);
          if (one_config_) {
            (*spec.mutable_workload_weights())[kWideWorkloads[i]] = 1;
          }
        }
      }
      auto r =
          loop_->Call([&] { return c_->SubmitSweep(req, AnonymousAdmin()); });
      if (!r.ok()) return r.status();
    }
    return absl::OkStatus();
  }
  int submitted() {
    absl::MutexLock lock(&mu_);
    return submitted_;
  }
  // Set by the owner: where a failed top-up is reported.
  std::function<void(const absl::Status&)> on_error;

 private:
  void Run() {
    while (true) {
      std::vector<std::function<void()>> retries;
      {
        absl::MutexLock lock(&park_mu_);
        auto ready = [this] { return !parked_.empty() || stop_; };
        park_mu_.Await(absl::Condition(&ready));
        if (stop_ && parked_.empty()) return;
        retries.swap(parked_);
      }
      if (absl::Status st = Ensure(); !st.ok() && on_error) on_error(st);
      for (auto& retry : retries) retry();
    }
  }

  ControlLoop* loop_;
  Coordinator* c_;
  const std::string strategy_;
  const int64_t rounds_;
  const int workloads_;
  const bool one_config_;
  const int target_;
  absl::Mutex mu_;
  int submitted_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Mutex park_mu_;
  std::vector<std::function<void()>> parked_ ABSL_GUARDED_BY(park_mu_);
  bool stop_ ABSL_GUARDED_BY(park_mu_) = false;
  std::thread thread_;
};

void RecordLease(LoadShared& shared, absl::Time sent) {
  if (!shared.measuring) return;
  const double ms = absl::ToDoubleMilliseconds(absl::Now() - sent);
  absl::MutexLock lock(&shared.mu);
  shared.lease_ms.push_back(ms);
}

void RecordResult(LoadShared& shared, const v1::ReportResultResponse& ack,
                  const BoardLoop& b) {
  if (!ack.accepted() || ack.duplicate()) {
    shared.Fail(absl::InternalError(absl::StrCat(
        "result of ", b.work.lease_id(), " not recorded: ", ack.reason())));
    return;
  }
  (b.work.has_reference() ? shared.candidates : shared.baselines).fetch_add(1);
  if (shared.measuring) shared.rounds.fetch_add(1);
}

// The core through the loop: each board posts its next call when the last
// one completes (on the loop thread, after its batch committed).
class CoreLoadClient {
 public:
  CoreLoadClient(ControlLoop* loop, Coordinator* c, SweepKeeper* keeper,
                 LoadShared* shared, std::vector<BoardRef> boards, RunTimes run)
      : loop_(loop), c_(c), keeper_(keeper), shared_(shared), run_(run) {
    for (BoardRef& ref : boards) boards_.emplace_back().ref = std::move(ref);
  }
  void Start() {
    for (BoardLoop& b : boards_) Lease(b);
  }
  // Waits until every board stopped (after `stopping`).
  void Drain() {
    absl::MutexLock lock(&mu_);
    auto idle = [this] { return in_flight_ == 0; };
    mu_.Await(absl::Condition(&idle));
  }

 private:
  void Lease(BoardLoop& b) {
    if (shared_->stopping) return;
    Begin();
    b.lease_sent = absl::Now();
    loop_->Post(
        [this, req = b.LeaseRequest(shared_->name_held_manifests)] {
          return c_->LeaseWork(req);
        },
        [this, &b](absl::StatusOr<v1::LeaseWorkResponse> r) {
          OnLease(b, std::move(r));
        });
  }
  void OnLease(BoardLoop& b, absl::StatusOr<v1::LeaseWorkResponse> r) {
    RecordLease(*shared_, b.lease_sent);
    if (!r.ok()) {
      shared_->Fail(r.status());
      return Done();
    }
    if (!r->granted()) {
      // This runs on the loop thread: the keeper's thread tops the sweeps
      // up, then the board asks again.
      keeper_->Park([this, &b] {
        Lease(b);
        Done();
      });
      return;
    }
    if (absl::Status st = b.Take(r->mutable_work()); !st.ok()) {
      shared_->Fail(st);
      return Done();
    }
    if (run_.any()) {  // on the loop thread, as every OnLease
      timer_.At(absl::Now() + run_.Next(), [this, &b] { PostReport(b); });
    } else {
      PostReport(b);
    }
  }
  void PostReport(BoardLoop& b) {
    const bool next = shared_->NextWithReport();
    loop_->Post(
        [this, req = b.Report(next, shared_->name_held_manifests)] {
          return c_->ReportResult(req);
        },
        [this, &b, next](absl::StatusOr<v1::ReportResultResponse> ack) {
          if (!ack.ok()) {
            shared_->Fail(ack.status());
            return Done();
          }
          RecordResult(*shared_, *ack, b);
          if (next) return OnLease(b, std::move(*ack->mutable_next_lease()));
          Lease(b);
          Done();
        });
  }
  void Begin() {
    absl::MutexLock lock(&mu_);
    ++in_flight_;
  }
  void Done() {
    absl::MutexLock lock(&mu_);
    --in_flight_;
  }

  ControlLoop* loop_;
  Coordinator* c_;
  SweepKeeper* keeper_;
  LoadShared* shared_;
  RunTimes run_;
  Timer timer_;
  std::deque<BoardLoop> boards_;  // stable addresses
  absl::Mutex mu_;
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
};

// gRPC: one thread and completion queue per client, async unary calls.
class GrpcLoadClient {
 public:
  GrpcLoadClient(v1::AgentService::Stub* stub, SweepKeeper* keeper,
                 LoadShared* shared, std::vector<BoardRef> boards, RunTimes run)
      : stub_(stub), keeper_(keeper), shared_(shared), run_(run) {
    for (BoardRef& ref : boards) {
      auto call = std::make_unique<Call>();
      call->board.ref = std::move(ref);
      calls_.push_back(std::move(call));
    }
  }
  void Start() {
    thread_ = std::thread([this] { Run(); });
  }
  void Join() { thread_.join(); }
  // The CPU time its thread used so far (while it runs).
  double CpuSeconds() {
    clockid_t clock;
    struct timespec t;
    if (pthread_getcpuclockid(thread_.native_handle(), &clock) != 0 ||
        clock_gettime(clock, &t) != 0) {
      return 0;
    }
    return t.tv_sec + t.tv_nsec / 1e9;
  }

 private:
  struct Call {
    BoardLoop board;
    std::unique_ptr<grpc::ClientContext> ctx;
    bool leasing = true;
    bool running = false;   // the alarm stands for the variant's run
    bool retrying = false;  // the alarm stands for retry_after_ms
    grpc::Alarm alarm;
    v1::LeaseWorkResponse lease;
    v1::ReportResultResponse ack;
    grpc::Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<v1::LeaseWorkResponse>>
        lease_rpc;
    std::unique_ptr<grpc::ClientAsyncResponseReader<v1::ReportResultResponse>>
        report_rpc;
  };

  void Lease(Call& c) {
    c.leasing = true;
    c.ctx = std::make_unique<grpc::ClientContext>();
    c.board.lease_sent = absl::Now();
    c.lease_rpc = stub_->AsyncLeaseWork(
        c.ctx.get(), c.board.LeaseRequest(shared_->name_held_manifests), &cq_);
    c.lease_rpc->Finish(&c.lease, &c.status, &c);
    ++in_flight_;
  }
  void Report(Call& c) {
    c.leasing = false;
    c.ctx = std::make_unique<grpc::ClientContext>();
    c.report_rpc = stub_->AsyncReportResult(
        c.ctx.get(),
        c.board.Report(shared_->NextWithReport(), shared_->name_held_manifests),
        &cq_);
    c.report_rpc->Finish(&c.ack, &c.status, &c);
    ++in_flight_;
  }

  // A lease answered, alone or with a report: run it, or ask again later.
  void OnLease(Call& c, v1::LeaseWorkResponse& lease) {
    RecordLease(*shared_, c.board.lease_sent);
    if (!lease.granted()) {
      // As an agent does: ask again after retry_after_ms. The keeper
      // tops the sweeps up on its own thread: this one serves many
      // boards, and a top-up waits for the loop to flush.
      keeper_->Park([] {});
      c.retrying = true;
      c.alarm.Set(&cq_,
                  absl::ToChronoTime(
                      absl::Now() + absl::Milliseconds(lease.retry_after_ms())),
                  &c);
      ++in_flight_;
      return;
    }
    if (absl::Status st = c.board.Take(lease.mutable_work()); !st.ok()) {
      shared_->Fail(st);
      return;
    }
    if (run_.any()) {
      c.running = true;
      c.alarm.Set(&cq_, absl::ToChronoTime(absl::Now() + run_.Next()), &c);
      ++in_flight_;
    } else {
      Report(c);
    }
  }

  void Run() {
    for (auto& c : calls_) Lease(*c);
    void* tag = nullptr;
    bool ok = false;
    while (in_flight_ > 0 && cq_.Next(&tag, &ok)) {
      --in_flight_;
      Call& c = *static_cast<Call*>(tag);
      if (c.running) {
        c.running = false;
        Report(c);
        continue;
      }
      if (c.retrying) {
        c.retrying = false;
        if (!shared_->stopping) Lease(c);
        continue;
      }
      if (!c.status.ok()) {
        shared_->Fail(FromGrpcStatus(c.status));
        continue;
      }
      if (c.leasing) {
        OnLease(c, c.lease);
        continue;
      }
      RecordResult(*shared_, c.ack, c.board);
      if (c.ack.has_next_lease()) {
        OnLease(c, *c.ack.mutable_next_lease());
      } else if (!shared_->stopping) {
        Lease(c);
      }
    }
    cq_.Shutdown();
    while (cq_.Next(&tag, &ok)) {
    }
  }

  v1::AgentService::Stub* stub_;
  SweepKeeper* keeper_;
  LoadShared* shared_;
  RunTimes run_;
  std::vector<std::unique_ptr<Call>> calls_;
  grpc::CompletionQueue cq_;
  int in_flight_ = 0;
  std::thread thread_;
};

LoadResult RunLoad(const LoadOptions& o) {
  LoadResult result;
  MeasuredMetrics metrics;  // outlives the farm's coordinator
  absl::StatusOr<std::unique_ptr<Farm>> farm = OpenFarm(&metrics);
  if (!farm.ok()) {
    result.status = farm.status();
    return result;
  }
  Coordinator& coordinator = *(*farm)->coordinator;
  EventNotifier notifier;
  coordinator.SetEventListener([&](const std::string&) { notifier.Notify(); });
  ControlLoop loop(absl::Milliseconds(100),
                   [&] {
                     if (absl::Status st = coordinator.Tick(); !st.ok()) {
                       spdlog::error("tick: {}", st.ToString());
                     }
                   },
                   // As tunefarm-coordinator runs it: pipelined.
                   {[&] { coordinator.BeginBatch(); }, nullptr,
                    [&] { return coordinator.SealBatch(); }});
  loop.Start();
  // Boards in agents of 16, spread over the clients.
  std::vector<std::vector<BoardRef>> per_client(o.clients);
  for (int a = 0; a * 16 < o.boards; ++a) {
    v1::RegisterAgentRequest req;
    req.set_agent_id(absl::StrFormat("agent-%04d", a));
    req.set_node("bench");
    for (int b = 0; b < 16 && a * 16 + b < o.boards; ++b) {
      v1::BoardInfo* board = req.add_boards();
      board->set_board_id(absl::StrFormat("agent-%04d/npu-%02d", a, b));
      board->set_kind("sim");
      board->set_simulated(true);
      per_client[(a * 16 + b) % o.clients].push_back(
          {req.agent_id(), board->board_id()});
    }
    auto r = loop.Call([&] { return coordinator.RegisterAgent(req); });
    if (!r.ok()) {
      result.status = r.status();
      return result;
    }
  }
  LoadShared shared;
  shared.name_held_manifests = o.name_held_manifests;
  shared.lease_with_report = o.lease_with_report;
  SweepKeeper keeper(&loop, &coordinator, o.sweep_rounds, o.boards, o.workloads,
                     o.one_config, o.strategy);
  keeper.on_error = [&](const absl::Status& st) { shared.Fail(st); };
  if (absl::Status st = keeper.Ensure(); !st.ok()) {
    result.status = st;
    return result;
  }
  std::unique_ptr<FarmService> farm_service;
  std::unique_ptr<AgentGrpcService> agent_service;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<v1::AgentService::Stub> stub;
  std::vector<std::unique_ptr<CoreLoadClient>> core_clients;
  std::vector<std::unique_ptr<GrpcLoadClient>> grpc_clients;
  if (o.grpc) {
    farm_service = std::make_unique<FarmService>(
        &coordinator, &loop, (*farm)->store.get(), &notifier, nullptr);
    agent_service =
        std::make_unique<AgentGrpcService>(&coordinator, &loop, nullptr);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(farm_service.get());
    builder.RegisterService(agent_service.get());
    server = builder.BuildAndStart();
    if (server == nullptr || port == 0) {
      result.status = absl::InternalError("gRPC server could not listen");
      return result;
    }
    stub = v1::AgentService::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
    for (auto& boards : per_client) {
      grpc_clients.push_back(std::make_unique<GrpcLoadClient>(
          stub.get(), &keeper, &shared, std::move(boards),
          RunTimes(o.run, o.run_spread, grpc_clients.size() + 1)));
    }
    for (auto& c : grpc_clients) c->Start();
  } else {
    for (auto& boards : per_client) {
      core_clients.push_back(std::make_unique<CoreLoadClient>(
          &loop, &coordinator, &keeper, &shared, std::move(boards),
          RunTimes(o.run, o.run_spread, core_clients.size() + 1)));
    }
    for (auto& c : core_clients) c->Start();
  }
  absl::SleepFor(absl::Milliseconds(500));  // warm-up, not measured
  auto client_cpu = [&] {
    double s = 0;
    for (auto& c : grpc_clients) s += c->CpuSeconds();
    return s;
  };
  const double client_cpu0 = client_cpu();
  const double cpu0 = ProcessCpuSeconds();
  const absl::Time t0 = absl::Now();
  shared.measuring = true;
  metrics.measuring = true;
  absl::SleepFor(absl::Seconds(o.seconds));
  shared.measuring = false;
  metrics.measuring = false;
  result.seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  result.cpu_s = ProcessCpuSeconds() - cpu0;
  result.client_cpu_s = client_cpu() - client_cpu0;
  result.rounds = shared.rounds.load();
  shared.stopping = true;
  for (auto& c : core_clients) c->Drain();
  for (auto& c : grpc_clients) c->Join();
  if (server != nullptr) {
    notifier.Shutdown();
    server->Shutdown(std::chrono::system_clock::now() +
                     std::chrono::seconds(2));
  }
  loop.Stop();
  {
    absl::MutexLock lock(&shared.mu);
    result.status = shared.error;
    result.p50_ms = Percentile(shared.lease_ms, 0.50);
    result.p99_ms = Percentile(shared.lease_ms, 0.99);
  }
  {
    std::vector<double> commit_ms = metrics.commit_ms();
    result.commit_p50_ms = Percentile(commit_ms, 0.50);
    result.commit_p99_ms = Percentile(commit_ms, 0.99);
  }
  result.sweeps = keeper.submitted();
  if (!result.status.ok()) return result;
  // Every result acknowledged is in the store, done, exactly once. (Which
  // way a decision goes depends on what else was in flight: a candidate
  // whose parent stopped being the best may be rolled back.)
  absl::StatusOr<std::vector<v1::Sweep>> sweeps = (*farm)->store->ListSweeps();
  if (!sweeps.ok()) {
    result.status = sweeps.status();
    return result;
  }
  int64_t baselines = 0, candidates = 0;
  for (const v1::Sweep& s : *sweeps) {
    auto rounds = (*farm)->store->ListRounds(s.sweep_id());
    if (!rounds.ok()) {
      result.status = rounds.status();
      return result;
    }
    for (const v1::Round& r : *rounds) {
      if (r.state() != v1::ROUND_STATE_DONE) continue;
      (r.decision() == v1::DECISION_BASELINE ? baselines : candidates) += 1;
    }
  }
  if (baselines != shared.baselines || candidates != shared.candidates) {
    result.status = absl::InternalError(
        absl::StrCat("store records ", baselines, " baselines and ", candidates,
                     " candidates done; ", shared.baselines.load(), " and ",
                     shared.candidates.load(), " were acknowledged"));
  }
  return result;
}

// The console table, plus the mean wall time per iteration of each
// benchmark, for the ratios printed at the end.
class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  // Colours only on a terminal, so redirected output stays plain text.
  explicit SummaryReporter(bool color)
      : ConsoleReporter(color ? OO_ColorTabular : OO_Tabular) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.error_occurred) ++errors_;
      if (r.run_type != Run::RT_Iteration || r.error_occurred ||
          r.iterations <= 0) {
        continue;
      }
      Totals& t = totals_[r.benchmark_name()];
      t.seconds += r.real_accumulated_time;
      t.cpu_seconds += r.cpu_accumulated_time;
      t.iterations += static_cast<double>(r.iterations);
    }
    ConsoleReporter::ReportRuns(runs);
  }

  // Mean wall (or main-thread CPU) µs per iteration of the benchmark whose
  // name starts with `prefix`; 0 when it did not run (filtered out, failed).
  double MeanUs(const std::string& prefix, bool cpu = false) const {
    for (const auto& [name, t] : totals_) {
      if (absl::StartsWith(name, prefix) && t.iterations > 0) {
        return (cpu ? t.cpu_seconds : t.seconds) / t.iterations * 1e6;
      }
    }
    return 0;
  }

  void PrintSummary() const {
    const double commit = MeanUs("BM_SyncedWriteBatch_Reference");
    const double commit_cpu = MeanUs("BM_SyncedWriteBatch_Reference", true);
    const double grpc = MeanUs("BM_RoundCycle_Grpc/sim_matmul");
    std::printf(
        "\nSummary (one run, one disk; a round = lease + result, "
        "2 synced commits):\n");
    if (commit > 0) {
      std::printf("  synced commit (reference)      %10.1f us  (CPU %.1f us)\n",
                  commit, commit_cpu);
    }
    for (const char* op : {"sim_matmul", "wide6x10"}) {
      const double core = MeanUs(absl::StrCat("BM_RoundCycle_Core/", op));
      if (core <= 0) continue;
      std::printf("  round cycle, core, %-10s  %10.1f us  %8.1f rounds/s", op,
                  core, 1e6 / core);
      if (commit > 0) {
        std::printf("  overhead %.2fx of 2 synced commits",
                    core / (2 * commit));
      }
      // CPU beyond the two commits' own: what the core costs when the
      // disk is not the bottleneck (the core runs on this thread).
      const double cpu = MeanUs(absl::StrCat("BM_RoundCycle_Core/", op), true);
      if (commit_cpu > 0) {
        std::printf("  CPU %.1f us (%.1f us beyond 2 commits)", cpu,
                    cpu - 2 * commit_cpu);
      }
      std::printf("\n");
    }
    if (grpc > 0) {
      std::printf("  round cycle, gRPC, sim_matmul  %10.1f us  %8.1f rounds/s",
                  grpc, 1e6 / grpc);
      if (commit > 0) {
        std::printf("  overhead %.2fx of 2 synced commits",
                    grpc / (2 * commit));
      }
      const double core = MeanUs("BM_RoundCycle_Core/sim_matmul");
      if (core > 0) std::printf("  %.2fx the core", grpc / core);
      std::printf("\n");
    }
    std::fflush(stdout);
  }

 private:
  struct Totals {
    double seconds = 0;
    double cpu_seconds = 0;
    double iterations = 0;
  };
  std::map<std::string, Totals> totals_;

 public:
  int errors() const { return errors_; }

 private:
  int errors_ = 0;
};

}  // namespace
}  // namespace tunefarm

int main(int argc, char** argv) {
  // Keep per-submission and per-registration info lines out of the table.
  spdlog::set_level(spdlog::level::warn);
  // As tunefarm-coordinator: no Mutex deadlock detection (coordinator/main.cc).
  // --mutex_deadlock_detection measures what it costs.
  bool deadlock_detection = false;
  // Our flags first; the rest are Google Benchmark's.
  bool smoke = false;
  tunefarm::LoadOptions load;
  int64_t run_ms = 150;
  // Which farm-at-scale runs: "all", or only the offered "grpc" one (for
  // profiling it alone).
  std::string runs = "all";
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--smoke") {
      smoke = true;
    } else if (absl::StartsWith(arg, "--boards=")) {
      (void)absl::SimpleAtoi(arg.substr(9), &load.boards);
    } else if (absl::StartsWith(arg, "--clients=")) {
      (void)absl::SimpleAtoi(arg.substr(10), &load.clients);
    } else if (absl::StartsWith(arg, "--seconds=")) {
      (void)absl::SimpleAtod(arg.substr(10), &load.seconds);
    } else if (absl::StartsWith(arg, "--run_ms=")) {
      (void)absl::SimpleAtoi(arg.substr(9), &run_ms);
    } else if (absl::StartsWith(arg, "--run_spread_pct=")) {
      int pct = 0;
      if (!absl::SimpleAtoi(arg.substr(17), &pct) || pct < 0 || pct > 100) {
        std::fprintf(stderr, "--run_spread_pct: 0 to 100, not '%s'\n",
                     arg.substr(17).c_str());
        return 2;
      }
      load.run_spread = pct / 100.0;
    } else if (absl::StartsWith(arg, "--workloads=")) {
      if (!absl::SimpleAtoi(arg.substr(12), &load.workloads) ||
          load.workloads < 1 ||
          load.workloads >
              static_cast<int>(std::size(tunefarm::kWideWorkloads))) {
        std::fprintf(stderr, "--workloads: 1 to %zu, not '%s'\n",
                     std::size(tunefarm::kWideWorkloads),
                     arg.substr(12).c_str());
        return 2;
      }
    } else if (arg == "--mutex_deadlock_detection") {
      deadlock_detection = true;
    } else if (arg == "--one_config") {
      load.one_config = true;
    } else if (arg == "--lease_apart") {
      // The what-if of a lease call of its own after each report.
      load.lease_with_report = false;
    } else if (arg == "--whole_work_items") {
      // The what-if of every work item carrying its operator manifest.
      load.name_held_manifests = false;
    } else if (absl::StartsWith(arg, "--strategy=")) {
      load.strategy = arg.substr(11);
      // The coordinator's own check of the name (it lists the known ones).
      tunefarm::v1::SweepSpec spec;
      spec.mutable_strategy()->set_name(load.strategy);
      if (auto s =
              tunefarm::NewStrategy(spec, tunefarm::v1::OperatorManifest());
          !s.ok()) {
        std::fprintf(stderr, "--strategy: %s\n", s.status().ToString().c_str());
        return 2;
      }
    } else if (absl::StartsWith(arg, "--runs=")) {
      runs = arg.substr(7);
      if (runs != "all" && runs != "grpc") {
        std::fprintf(stderr, "--runs: 'all' or 'grpc', not '%s'\n",
                     runs.c_str());
        return 2;
      }
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (!deadlock_detection) {
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  }
  if (smoke) {
    load.boards = std::min(load.boards, 64);
    load.clients = std::min(load.clients, 4);
    load.seconds = 1;
  }
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  if (benchmark::ReportUnrecognizedArguments(rest_argc, rest.data())) return 1;
  const char* tmpdir = std::getenv("TMPDIR");
  benchmark::AddCustomContext(
      "data_dir_base", tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp");
  benchmark::AddCustomContext(
      "boards", absl::StrCat(tunefarm::kAgents, " agents x ",
                             tunefarm::kBoardsPerAgent, " boards"));
  tunefarm::RegisterTable(smoke);
  tunefarm::SummaryReporter reporter(isatty(STDOUT_FILENO) != 0);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.PrintSummary();
  benchmark::Shutdown();
  int errors = reporter.errors();

  // The farm at scale: group commit, every board always asking.
  auto run = [&](const char* what, tunefarm::LoadOptions o) {
    tunefarm::LoadResult r = tunefarm::RunLoad(o);
    if (!r.status.ok()) {
      ++errors;
      std::printf("  %-34s FAILED: %s\n", what, r.status.ToString().c_str());
    } else {
      const std::string clients =
          r.client_cpu_s > 0
              ? absl::StrFormat(" (clients %.1f)", r.client_cpu_us_per_round())
              : "";
      std::printf(
          "  %-34s %8.0f rounds/s  lease p50 %6.2f ms  p99 %6.2f ms  "
          "CPU %6.1f us/round%s  commit p50 %5.2f ms  p99 %5.2f ms  (%lld "
          "rounds, %d sweeps)\n",
          what, r.rounds_per_s(), r.p50_ms, r.p99_ms, r.cpu_us_per_round(),
          clients.c_str(), r.commit_p50_ms, r.commit_p99_ms,
          static_cast<long long>(r.rounds), r.sweeps);
    }
    std::fflush(stdout);
    return r;
  };
  std::printf(
      "\nFarm at scale: %d boards, %d workload(s) a sweep, strategy %s, %.0f "
      "s a run. "
      "Saturated: every board "
      "always waiting on a lease or a result. Offered: each board runs its "
      "variant %lld ms +/- %.0f%% (uniform) between lease and result (at most "
      "%.0f rounds/s offered). %s Lease latency: from the call that asks for "
      "the lease to its answer. CPU: the whole process, clients included "
      "(through gRPC, the client threads' own share in brackets).\n",
      load.boards, load.workloads, load.strategy.c_str(), load.seconds,
      static_cast<long long>(run_ms), load.run_spread * 100,
      run_ms > 0 ? load.boards * 1000.0 / run_ms : 0.0,
      load.lease_with_report
          ? "Each result asks for the board's next lease (one call a round)."
          : "Each lease is a call of its own (--lease_apart: two calls a "
            "round).");
  tunefarm::LoadOptions o = load;
  tunefarm::LoadResult saturated, short_sweeps, offered;
  if (runs == "all") {
    o.sweep_rounds = 10000;
    saturated = run("core, saturated, 10,000-round sweeps", o);
    o.sweep_rounds = 100;
    short_sweeps = run("core, saturated, 100-round sweeps", o);
    o.sweep_rounds = 10000;
    o.run = absl::Milliseconds(run_ms);
    offered = run("core, offered", o);
  }
  o.sweep_rounds = 10000;
  o.run = absl::Milliseconds(run_ms);
  o.grpc = true;
  const tunefarm::LoadResult grpc = run(
      absl::StrFormat("gRPC, offered, %d client threads", o.clients).c_str(),
      o);
  const double ratio =
      short_sweeps.cpu_us_per_round() > 0
          ? saturated.cpu_us_per_round() / short_sweeps.cpu_us_per_round()
          : 0;
  std::printf(
      "coordinator_bench: boards=%d workloads=%d%s strategy=%s run_ms=%lld "
      "run_spread_pct=%.0f lease=%s rounds_per_s=%.0f "
      "p50_ms=%.2f p99_ms=%.2f cpu_us_per_round=%.1f "
      "max_rounds_per_s=%.0f cpu_ratio_10000_vs_100=%.2f "
      "grpc_rounds_per_s=%.0f grpc_p50_ms=%.2f grpc_p99_ms=%.2f "
      "grpc_cpu_us_per_round=%.1f grpc_client_cpu_us_per_round=%.1f "
      "commit_p99_ms=%.2f grpc_commit_p99_ms=%.2f errors=%d\n",
      load.boards, load.workloads,
      load.workloads > 1 ? (load.one_config ? " objective=one_config"
                                            : " objective=per_workload")
                         : "",
      load.strategy.c_str(), static_cast<long long>(run_ms),
      load.run_spread * 100, load.lease_with_report ? "with_report" : "apart",
      offered.rounds_per_s(), offered.p50_ms, offered.p99_ms,
      saturated.cpu_us_per_round(), saturated.rounds_per_s(), ratio,
      grpc.rounds_per_s(), grpc.p50_ms, grpc.p99_ms, grpc.cpu_us_per_round(),
      grpc.client_cpu_us_per_round(), offered.commit_p99_ms, grpc.commit_p99_ms,
      errors);
  return errors == 0 ? 0 : 1;
}
