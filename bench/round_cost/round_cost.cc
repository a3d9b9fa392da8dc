// round_cost: what one tuning round costs a cpu board, per isolation mode.
//
// One local farm (cli/local_farm.h: coordinator, analyzer, one agent with
// one cpu board, real processes on loopback) runs two sweeps of ops/gemm
// cpu_256 with the same strategy seed, one after the other (A/B in a fixed
// 6 pairs of blocks, warm caches: the cache flush between samples would
// cost more than the launches whose cost this measures): first with
// `measurement.isolation: process` (one process per stage), then with the
// persistent runner (agent/variant_runner.h). For each mode it prints, per
// round and on average, the board's wall time per evaluation (eval_s, the
// agent's clock around Evaluate: the compile happens before it, in the
// build-ahead step), the timed kernels' own time (timed_s: every timed
// launch, warm-ups included, candidate and parent), the overhead (the
// difference), the utilisation (timed / eval) and the runner starts, then
// the sweep-level utilisation (timed over the sweep's wall time, builds and
// gaps included). The process mode is the reference measured in the same
// run. Ends with one line:
//   round_cost: process_round_s=… runner_round_s=… runner_overhead_s=…
//     runner_utilisation=… process_utilisation=… speedup=… …
//
// --smoke: 3 rounds per mode (CI, via ctest); exits non-zero when a mode
// has no successful round, the process mode started a runner, or the runner
// mode started more than one.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "cli/local_farm.h"
#include "common/files.h"
#include "grpcpp/grpcpp.h"
#include "tunefarm/v1/farm.grpc.pb.h"

namespace tunefarm {
namespace {

struct ModeFigures {
  std::string mode;
  int rounds = 0, ok = 0;
  double eval_s = 0, timed_s = 0, build_s = 0;  // sums over OK rounds
  double sweep_wall_s = 0, sweep_timed_s = 0;
  int runner_starts = 0;
  double round_s() const { return ok > 0 ? eval_s / ok : 0; }
  double timed_round_s() const { return ok > 0 ? timed_s / ok : 0; }
  double overhead_s() const { return round_s() - timed_round_s(); }
  double utilisation() const { return eval_s > 0 ? timed_s / eval_s : 0; }
  double sweep_utilisation() const {
    return sweep_wall_s > 0 ? sweep_timed_s / sweep_wall_s : 0;
  }
};

class Bench {
 public:
  explicit Bench(LocalFarm* farm)
      : farm_(farm),
        stub_(v1::TuneFarm::NewStub(
            grpc::CreateChannel(farm->coordinator_address(),
                                grpc::InsecureChannelCredentials()))) {}

  absl::StatusOr<ModeFigures> RunMode(const std::string& mode, int rounds) {
    const std::string yaml = absl::StrCat(
        "name: round-cost-", mode,
        "\nteam: demo\noperator: gemm\nworkload: cpu_256\n"
        "goal: {speedup: 1000.0}\nstrategy: {name: random, seed: 11}\n"
        "budget: {max_rounds: ",
        rounds,
        ", time_limit: 20m, max_rounds_without_gain: 1000}\n"
        "min_gain: 0.02\nboards: {kind: cpu}\n"
        "measurement: {warmup: 3, samples: 15, max_samples: 15, "
        "flush_cache: false, isolation: ",
        mode, "}\n");
    v1::SubmitSweepRequest req;
    req.set_spec_yaml(yaml);
    v1::SubmitSweepResponse resp;
    {
      grpc::ClientContext ctx;
      Auth(&ctx);
      grpc::Status st = stub_->SubmitSweep(&ctx, req, &resp);
      if (!st.ok()) {
        return absl::InternalError("submit: " + st.error_message());
      }
    }
    const std::string id = resp.sweep().sweep_id();
    const absl::Time deadline = absl::Now() + absl::Minutes(30);
    while (true) {
      v1::GetSweepRequest g;
      g.set_sweep_id(id);
      v1::Sweep sweep;
      grpc::ClientContext ctx;
      Auth(&ctx);
      if (stub_->GetSweep(&ctx, g, &sweep).ok() &&
          (sweep.state() == v1::SWEEP_STATE_SUCCEEDED ||
           sweep.state() == v1::SWEEP_STATE_FAILED ||
           sweep.state() == v1::SWEEP_STATE_CANCELLED)) {
        break;
      }
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError("sweep " + id + " did not finish");
      }
      absl::SleepFor(absl::Milliseconds(100));
    }
    v1::ListRoundsRequest lr;
    lr.set_sweep_id(id);
    v1::ListRoundsResponse rounds_resp;
    {
      grpc::ClientContext ctx;
      Auth(&ctx);
      grpc::Status st = stub_->ListRounds(&ctx, lr, &rounds_resp);
      if (!st.ok()) {
        return absl::InternalError("list rounds: " + st.error_message());
      }
    }
    ModeFigures f;
    f.mode = mode;
    int64_t first_ms = 0, last_ms = 0;
    std::cout << "\n" << mode << " isolation (sweep " << id << ")\n";
    std::cout << absl::StrFormat("%6s %-22s %8s %8s %8s %8s %6s %7s\n",
                                 "round", "outcome", "build_s", "eval_s",
                                 "timed_s", "over_s", "util", "starts");
    for (const v1::Round& r : rounds_resp.rounds()) {
      const v1::RoundResult& res = r.result();
      if (r.created_unix_ms() > 0 &&
          (first_ms == 0 || r.created_unix_ms() < first_ms)) {
        first_ms = r.created_unix_ms();
      }
      last_ms = std::max(last_ms, r.finished_unix_ms());
      ++f.rounds;
      f.runner_starts += res.runner_starts();
      f.sweep_timed_s += res.timed_s();
      std::cout << absl::StrFormat(
          "%6d %-22s %8.3f %8.3f %8.3f %8.3f %5.1f%% %7d\n", r.round_id(),
          v1::Outcome_Name(res.outcome()), res.build_s(), res.eval_s(),
          res.timed_s(), res.eval_s() - res.timed_s(),
          res.eval_s() > 0 ? 100 * res.timed_s() / res.eval_s() : 0.0,
          res.runner_starts());
      if (res.outcome() != v1::OUTCOME_OK) continue;
      ++f.ok;
      f.eval_s += res.eval_s();
      f.timed_s += res.timed_s();
      f.build_s += res.build_s();
    }
    f.sweep_wall_s = last_ms > first_ms ? (last_ms - first_ms) / 1000.0 : 0;
    std::cout << absl::StrFormat(
        "%s: %d rounds (%d ok), round %.3f s, timed kernels %.3f s, "
        "overhead %.3f s, utilisation %.1f%% per round, %.1f%% over the "
        "sweep's %.1f s; runner starts %d\n",
        mode, f.rounds, f.ok, f.round_s(), f.timed_round_s(), f.overhead_s(),
        100 * f.utilisation(), 100 * f.sweep_utilisation(), f.sweep_wall_s,
        f.runner_starts);
    return f;
  }

 private:
  void Auth(grpc::ClientContext* ctx) const {
    if (!farm_->admin_token().empty()) {
      ctx->AddMetadata("authorization", "Bearer " + farm_->admin_token());
    }
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::seconds(30));
  }

  LocalFarm* farm_;
  std::unique_ptr<v1::TuneFarm::Stub> stub_;
};

int Main(int argc, char** argv) {
  int rounds = 12;
  std::string bin_dir = TUNEFARM_BINARY_DIR "/bin";
  std::string ops_dir = TUNEFARM_SOURCE_DIR "/ops";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--smoke") {
      rounds = 3;
    } else if (a == "--rounds" && i + 1 < argc &&
               absl::SimpleAtoi(argv[i + 1], &rounds) && rounds >= 2) {
      ++i;
    } else if (a == "--bin_dir" && i + 1 < argc) {
      bin_dir = argv[++i];
    } else if (a == "--ops_dir" && i + 1 < argc) {
      ops_dir = argv[++i];
    } else {
      std::cerr << "usage: round_cost [--smoke] [--rounds N>=2] "
                   "[--bin_dir DIR] [--ops_dir DIR]\n";
      return 2;
    }
  }
  absl::StatusOr<std::string> dir = MakeTempDir("round_cost");
  if (!dir.ok()) {
    std::cerr << dir.status() << "\n";
    return 1;
  }
  LocalFarmOptions o;
  o.bin_dir = bin_dir;
  o.data_dir = *dir;
  o.ops_dirs = {ops_dir};
  o.agents = 1;
  o.board_kind = "cpu";
  o.boards_per_agent = 1;
  o.log_level = "info";
  LocalFarm farm(o);
  if (absl::Status st = farm.Start(); !st.ok()) {
    std::cerr << "round_cost: " << st << "\n";
    return 1;
  }
  std::cout << "round_cost: " << rounds
            << " rounds of gemm cpu_256 per isolation mode on one cpu board "
               "(A/B in 6 pairs of blocks of 3 warm-up + 3 timed launches, "
               "warm caches)\n";
  Bench bench(&farm);
  absl::StatusOr<ModeFigures> process = bench.RunMode("process", rounds);
  absl::StatusOr<ModeFigures> runner =
      process.ok() ? bench.RunMode("runner", rounds) : process.status();
  farm.Stop();
  if (!process.ok() || !runner.ok()) {
    std::cerr << "round_cost: "
              << (process.ok() ? runner.status() : process.status()) << "\n";
    std::cerr << "logs in " << *dir << "/logs\n";
    return 1;
  }
  std::cout << absl::StrFormat(
      "round_cost: process_round_s=%.4f runner_round_s=%.4f "
      "process_overhead_s=%.4f runner_overhead_s=%.4f timed_s=%.4f "
      "process_utilisation=%.3f runner_utilisation=%.3f "
      "process_sweep_utilisation=%.3f runner_sweep_utilisation=%.3f "
      "speedup=%.2f process_runner_starts=%d runner_runner_starts=%d "
      "rounds=%d\n",
      process->round_s(), runner->round_s(), process->overhead_s(),
      runner->overhead_s(), runner->timed_round_s(), process->utilisation(),
      runner->utilisation(), process->sweep_utilisation(),
      runner->sweep_utilisation(),
      runner->round_s() > 0 ? process->round_s() / runner->round_s() : 0.0,
      process->runner_starts, runner->runner_starts, rounds);
  bool ok = process->ok > 0 && runner->ok > 0 &&
            process->runner_starts == 0 && runner->runner_starts >= 1;
  // A fresh runner after a variant that failed in it is expected; without
  // failures, one start serves the whole sweep.
  if (runner->ok == runner->rounds && runner->runner_starts != 1) ok = false;
  if (!ok) std::cerr << "round_cost: unexpected figures (see above)\n";
  if (ok) (void)RemoveAll(*dir);
  else std::cerr << "logs in " << *dir << "/logs\n";
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace tunefarm

int main(int argc, char** argv) { return tunefarm::Main(argc, argv); }
