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
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "benchmark/benchmark.h"
#include "common/clock.h"
#include "common/files.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "coordinator/control_loop.h"
#include "coordinator/coordinator.h"
#include "coordinator/service.h"
#include "grpcpp/grpcpp.h"
#include "ops/catalog.h"
#include "spdlog/spdlog.h"
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
tolerances: {rtol: 0.01, atol: 0.001}
backends:
  sim: {command: ["{bin}/none"]}
)";

struct BoardRef {
  std::string agent_id;
  std::string board_id;
};

// A sweep that never ends by itself: random strategy, the largest round
// budget a spec may ask for, and a goal the made-up results never reach.
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
  return spec;
}

// Made-up results. The baseline takes kBaselineUs; then 1 in 8 candidates is
// 0.001% faster than the best (kept: min_gain is 0, so 12,500 keeps in a
// 100,000-round sweep stay far below the 100x goal) and the rest are 10%
// slower than their parent, the current best (rolled back).
class ResultMaker {
 public:
  v1::RoundResult Next(const std::string& sweep_id, int64_t round_id) {
    double median = 0;
    if (round_id == 0) {
      median = kBaselineUs;
      best_us_[sweep_id] = median;
    } else if (++candidates_ % 8 == 0) {
      median = best_us_[sweep_id] * (1 - 1e-5);
      best_us_[sweep_id] = median;
      ++kept_;
    } else {
      median = best_us_[sweep_id] * 1.1;
      ++rolled_back_;
    }
    v1::RoundResult r;
    r.set_outcome(v1::OUTCOME_OK);
    r.mutable_precision()->set_passed(true);
    r.mutable_precision()->set_elements(2048 * 2048);
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

absl::StatusOr<std::unique_ptr<Farm>> OpenFarm() {
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
      farm->store.get(), &farm->catalog, &SystemClock(), options,
      /*metrics=*/nullptr);
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

// Registration order is run order: the reference first.
BENCHMARK(BM_SyncedWriteBatch_Reference)
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(kMinTimeS)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_RoundCycle_Core, sim_matmul, "sim_matmul")
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(kMinTimeS)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_RoundCycle_Core, wide6x10, "wide6x10")
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(kMinTimeS)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_RoundCycle_Grpc, sim_matmul, "sim_matmul")
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(kMinTimeS)
    ->UseRealTime();

// The console table, plus the mean wall time per iteration of each
// benchmark, for the ratios printed at the end.
class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  // Colours only on a terminal, so redirected output stays plain text.
  explicit SummaryReporter(bool color)
      : ConsoleReporter(color ? OO_ColorTabular : OO_Tabular) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
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
};

}  // namespace
}  // namespace tunefarm

int main(int argc, char** argv) {
  // Keep per-submission and per-registration info lines out of the table.
  spdlog::set_level(spdlog::level::warn);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  const char* tmpdir = std::getenv("TMPDIR");
  benchmark::AddCustomContext(
      "data_dir_base", tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp");
  benchmark::AddCustomContext(
      "boards", absl::StrCat(tunefarm::kAgents, " agents x ",
                             tunefarm::kBoardsPerAgent, " boards"));
  tunefarm::SummaryReporter reporter(isatty(STDOUT_FILENO) != 0);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.PrintSummary();
  benchmark::Shutdown();
  return 0;
}
