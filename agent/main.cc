// tunefarm-agent: serves one host's boards to the coordinator. Wires the
// boards (sim, cpu, cuda, ascend, replay), the gRPC coordinator client, the
// ZeroMQ bundle sink and the Prometheus endpoint together.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "agent/agent.h"
#include "agent/ascend_board.h"
#include "agent/cpu_board.h"
#include "agent/cuda_board.h"
#include "agent/grpc_coordinator_client.h"
#include "agent/pipeline_bundle_sink.h"
#include "agent/replay_board.h"
#include "agent/sim_board.h"
#include "common/files.h"
#include "common/logging.h"
#include "common/metrics_server.h"
#include "common/text.h"
#include "prometheus/counter.h"
#include "prometheus/histogram.h"

namespace tunefarm {
namespace {

std::atomic<bool> g_stop{false};

extern "C" void OnSignal(int) { g_stop = true; }

std::string HostName() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}

int Main(int argc, char** argv) {
  CLI::App app{"tunefarm agent: serves this host's boards to the coordinator"};
  std::string coordinator;
  std::string agent_id;
  std::string node = HostName();
  std::vector<std::string> board_specs = {"sim:2"};
  std::vector<std::string> analyzers;
  std::vector<std::string> labels;
  std::string work_dir = "/tmp/tunefarm-agent";
  std::string bin_dir = ExecutableDir();
  std::string metrics_address = "127.0.0.1:0";
  std::string metrics_port_file;
  int64_t sim_delay_ms = 0;
  int64_t stage_timeout_s = 120;
  uint64_t seed = 1;
  std::string log_level = "info";
  std::string token_file;
  ClientSecurity security;
  app.add_option("--token_file", token_file,
                 "file holding this agent's bearer token");
  app.add_option("--tls_ca", security.tls_ca_file,
                 "CA of the coordinator's certificate (turns TLS on)");
  app.add_option("--tls_cert", security.tls_cert_file,
                 "client certificate for mutual TLS");
  app.add_option("--tls_key", security.tls_key_file,
                 "client private key for mutual TLS");
  app.add_option("--coordinator", coordinator, "host:port")->required();
  app.add_option("--agent_id", agent_id, "default: <host>-<pid>");
  app.add_option("--node", node);
  app.add_option("--boards", board_specs,
                 "KIND:COUNT, e.g. sim:2; cuda:all; ascend:all; "
                 "replay:FILE[:COUNT] (a Kernel Tuner cache, T4 or KTT file "
                 "answers; numbers labelled replayed)");
  double replay_noise = 0;
  app.add_option("--replay_noise", replay_noise,
                 "relative standard deviation of noise added to replayed "
                 "times (0 = the recorded numbers)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--analyzer", analyzers,
                 "ZeroMQ endpoint of an analyzer worker (repeatable)");
  std::string outbox_dir;
  int64_t bundle_ack_timeout_ms = 30000;
  int outbox_capacity = 64;
  app.add_option("--outbox_dir", outbox_dir,
                 "where profile bundles wait for the analyzers' ack "
                 "(default <work_dir>/<agent_id>/outbox; a restarted agent "
                 "re-sends what is left there)");
  app.add_option("--bundle_ack_timeout_ms", bundle_ack_timeout_ms,
                 "re-send a bundle not acked within this time")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--outbox_capacity", outbox_capacity,
                 "bundles held before the agent stops leasing new work")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  std::string curve_key_file, analyzer_public_key_file;
  app.add_option("--curve_key_file", curve_key_file,
                 "this agent's CurveZMQ key pair (docs/security.md); without "
                 "it bundles go unauthenticated (local development)");
  app.add_option("--analyzer_public_key_file", analyzer_public_key_file,
                 "the analyzers' CurveZMQ public key");
  app.add_option("--label", labels, "KEY=VALUE board label (repeatable)");
  app.add_option("--work_dir", work_dir);
  std::string harness_dir = TUNEFARM_DEFAULT_OPS_DIR "/common";
  bool profile = true;
  AscendBoardOptions ascend;
  app.add_option("--ascend_npu_smi", ascend.npu_smi, "npu-smi to use");
  app.add_option("--ascend_msprof", ascend.msprof, "msprof to use");
  app.add_option("--ascend_python", ascend.python,
                 "python of the CANN environment (\"{python}\" in manifests)");
  app.add_option("--profile", profile,
                 "profile each variant (Nsight Compute on cuda boards)");
  bool prefetch = true;
  app.add_option("--prefetch", prefetch,
                 "lease and build each board's next variant while the current "
                 "one runs (build/run overlap)");
  int max_ahead = 16;
  app.add_option("--max_ahead", max_ahead,
                 "most leases a board holds ahead (as many as its build time "
                 "over its run time calls for)")
      ->check(CLI::Range(1, tunefarm::Agent::kMostAhead));
  app.add_option("--harness_dir", harness_dir,
                 "ops/common of the operator packages (cpu boards)");
  app.add_option("--bin_dir", bin_dir, "where operator programs live");
  app.add_option("--metrics_address", metrics_address);
  app.add_option("--metrics_port_file", metrics_port_file,
                 "write the bound metrics port here (launchers, tests)");
  app.add_option("--sim_delay_ms", sim_delay_ms,
                 "extra real time each simulated run takes")
      ->check(CLI::Range(0, 3600000));
  app.add_option("--stage_timeout_s", stage_timeout_s)
      ->check(CLI::Range(1, 86400));
  app.add_option("--seed", seed);
  app.add_option("--log_level", log_level);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (agent_id.empty()) agent_id = absl::StrCat(node, "-", ::getpid());
  InitLogging("agent", log_level);
  // Debian's abseil ships with Mutex deadlock detection on: a global lock
  // and a graph update on every acquire, gRPC's included (about 5% of the
  // CPU of a round through gRPC, docs/benchmarks.md). Tests keep it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  std::map<std::string, std::string> label_map;
  for (const std::string& l : labels) {
    std::pair<std::string, std::string> kv = absl::StrSplit(l, '=');
    if (!IsBoardLabelText(kv.first) || !IsBoardLabelText(kv.second)) {
      spdlog::critical("--label {}: expected KEY=VALUE, each {}", l,
                       kBoardLabelSyntax);
      return 2;
    }
    label_map[kv.first] = kv.second;
  }
  std::vector<std::unique_ptr<Board>> boards;
  const std::string cache_dir = absl::StrCat(work_dir, "/build_cache");
  for (const std::string& spec : board_specs) {
    std::pair<std::string, std::string> kc = absl::StrSplit(spec, ':');
    if (kc.first == "cuda") {
      // cuda:all, or cuda:0,2 (nvidia-smi indices): one board per GPU.
      CudaBoardOptions o;
      o.agent_id = agent_id;
      o.node = node;
      o.work_root = absl::StrCat(work_dir, "/", agent_id);
      o.cache_dir = cache_dir;
      o.labels = label_map;
      o.profile = profile;
      if (kc.second != "all") {
        for (absl::string_view idx : absl::StrSplit(kc.second, ',')) {
          int gpu = 0;
          if (!absl::SimpleAtoi(idx, &gpu) || gpu < 0) {
            spdlog::critical("--boards {}: expected cuda:all or cuda:I,J,...",
                             spec);
            return 2;
          }
          o.gpu_indices.push_back(gpu);
        }
      }
      auto gpus = DiscoverCudaBoards(o);
      if (!gpus.ok()) {
        spdlog::critical("--boards {}: {}", spec, gpus.status().ToString());
        return 1;
      }
      for (auto& b : *gpus) boards.push_back(std::move(b));
      continue;
    }
    if (kc.first == "ascend") {
      // ascend:all, or ascend:0,3 (npu-smi device ids): one board per card.
      ascend.agent_id = agent_id;
      ascend.node = node;
      ascend.work_root = absl::StrCat(work_dir, "/", agent_id);
      ascend.cache_dir = cache_dir;
      ascend.profile = profile;
      ascend.labels = label_map;
      if (kc.second != "all") {
        for (absl::string_view idx : absl::StrSplit(kc.second, ',')) {
          int dev = 0;
          if (!absl::SimpleAtoi(idx, &dev) || dev < 0) {
            spdlog::critical(
                "--boards {}: expected ascend:all or ascend:I,J,...", spec);
            return 2;
          }
          ascend.devices.push_back(dev);
        }
      }
      auto cards = DiscoverAscendBoards(ascend);
      if (!cards.ok()) {
        spdlog::critical("--boards {}: {}", spec, cards.status().ToString());
        return 1;
      }
      for (auto& b : *cards) boards.push_back(std::move(b));
      continue;
    }
    if (kc.first == "replay") {
      // replay:FILE or replay:FILE:COUNT: COUNT boards (default 1) answering
      // from one measured space, loaded once and shared.
      std::string file = spec.size() > kc.first.size()
                             ? spec.substr(kc.first.size() + 1)
                             : std::string();
      int count = 1;
      const size_t colon = file.rfind(':');
      if (colon != std::string::npos &&
          absl::SimpleAtoi(file.substr(colon + 1), &count)) {
        file.resize(colon);
      }
      if (file.empty() || count < 1 || count > 256) {
        spdlog::critical(
            "--boards {}: expected replay:FILE or replay:FILE:COUNT with "
            "1..256 boards",
            spec);
        return 2;
      }
      auto space = LoadSpaceFile(file);
      if (!space.ok()) {
        spdlog::critical("--boards {}: {}", spec, space.status().ToString());
        return 2;
      }
      auto shared = std::make_shared<const Space>(*std::move(space));
      for (int i = 0; i < count; ++i) {
        ReplayBoardOptions o;
        o.board_id = absl::StrCat(agent_id, "/replay", boards.size());
        o.agent_id = agent_id;
        o.node = node;
        o.space = shared;
        o.seed = seed + boards.size();
        o.noise = replay_noise;
        o.labels = label_map;
        auto board = NewReplayBoard(std::move(o));
        if (!board.ok()) {
          spdlog::critical("--boards {}: {}", spec, board.status().ToString());
          return 2;
        }
        boards.push_back(*std::move(board));
      }
      continue;
    }
    int count = 0;
    if (!absl::SimpleAtoi(kc.second, &count) || count < 1 || count > 256) {
      spdlog::critical("--boards {}: expected KIND:COUNT with 1..256 boards",
                       spec);
      return 2;
    }
    if (kc.first == "cpu") {
      // Each cpu board gets its own disjoint set of cores.
      std::vector<std::vector<int>> cpus = SplitAllowedCpus(count);
      for (size_t i = 0; i < cpus.size(); ++i) {
        CpuBoardOptions o;
        o.board_id = absl::StrCat(agent_id, "/cpu", i);
        o.agent_id = agent_id;
        o.node = node;
        o.work_root = absl::StrCat(work_dir, "/", agent_id, "/cpu", i);
        o.cache_dir = cache_dir;
        o.harness_dir = harness_dir;
        o.cpus = cpus[i];
        o.seed = seed + i;
        o.stage_timeout = absl::Seconds(stage_timeout_s);
        o.labels = label_map;
        boards.push_back(NewCpuBoard(std::move(o)));
      }
      continue;
    }
    if (kc.first != "sim") {
      spdlog::critical(
          "--boards {}: unknown board kind '{}' (known: sim, cpu, cuda, "
          "ascend, replay)",
          spec, kc.first);
      return 2;
    }
    for (int i = 0; i < count; ++i) {
      SimBoardOptions o;
      o.board_id = absl::StrCat(agent_id, "/sim", boards.size());
      o.agent_id = agent_id;
      o.node = node;
      o.bin_dir = bin_dir;
      o.work_root =
          absl::StrCat(work_dir, "/", agent_id, "/sim", boards.size());
      o.seed = seed + boards.size();
      o.run_delay = absl::Milliseconds(sim_delay_ms);
      o.stage_timeout = absl::Seconds(stage_timeout_s);
      o.cache_dir = cache_dir;
      o.labels = label_map;
      boards.push_back(NewSimBoard(std::move(o)));
    }
  }

  auto registry = std::make_shared<prometheus::Registry>();
  auto& rounds = prometheus::BuildCounter()
                     .Name("tunefarm_agent_rounds_total")
                     .Help("Variants evaluated by this agent, by outcome")
                     .Register(*registry);
  auto& runner_starts =
      prometheus::BuildCounter()
          .Name("tunefarm_agent_runner_starts_total")
          .Help("Persistent variant runners started (docs/measurement.md)")
          .Register(*registry)
          .Add({});
  auto& eval_seconds =
      prometheus::BuildHistogram()
          .Name("tunefarm_agent_evaluation_seconds")
          .Help("Wall time of build + precision + timing + profile")
          .Register(*registry)
          .Add({}, prometheus::Histogram::BucketBoundaries{0.01, 0.05, 0.1, 0.5,
                                                           1, 5, 10, 60, 300});
  auto metrics_server = MetricsServer::Start(metrics_address, registry);
  if (!metrics_server.ok()) {
    spdlog::critical("{}", metrics_server.status().ToString());
    return 1;
  }
  spdlog::info("metrics on port {}", (*metrics_server)->port());
  if (!metrics_port_file.empty()) {
    (void)WriteFileAtomic(metrics_port_file,
                          absl::StrCat((*metrics_server)->port(), "\n"));
  }

  std::unique_ptr<BundleSink> sink;
  if (!analyzers.empty()) {
    absl::StatusOr<PipelineSecurity> curve =
        PipelineSecurityFromFiles(curve_key_file, "", analyzer_public_key_file);
    if (!curve.ok() || (curve->curve() && curve->server_public_key.empty())) {
      spdlog::critical("pipeline authentication: {}",
                       curve.ok()
                           ? "--curve_key_file needs --analyzer_public_key_file"
                           : curve.status().ToString());
      return 2;
    }
    BundleOutbox::Options o;
    o.security = *curve;
    o.endpoints = analyzers;
    o.dir = outbox_dir.empty()
                ? absl::StrCat(work_dir, "/", agent_id, "/outbox")
                : outbox_dir;
    o.ack_timeout = absl::Milliseconds(bundle_ack_timeout_ms);
    o.capacity = outbox_capacity;
    auto outbox = BundleOutbox::Open(std::move(o));
    if (!outbox.ok()) {
      spdlog::critical("profile outbox: {}", outbox.status().ToString());
      return 2;
    }
    sink = NewPipelineBundleSink(std::move(*outbox));
  }
  if (!token_file.empty()) {
    auto token = ReadTokenFile(token_file);
    if (!token.ok()) {
      spdlog::critical("--token_file: {}", token.status().ToString());
      return 2;
    }
    security.token = *token;
  }
  auto client =
      NewGrpcCoordinatorClient(coordinator, security, absl::Seconds(10));
  if (!client.ok()) {
    spdlog::critical("coordinator client: {}", client.status().ToString());
    return 2;
  }

  AgentOptions options;
  options.agent_id = agent_id;
  options.node = node;
  options.prefetch = prefetch;
  options.max_ahead = max_ahead;
  options.on_round = [&](const v1::RoundResult& r, absl::Duration d) {
    std::string outcome = absl::AsciiStrToLower(
        absl::StripPrefix(v1::Outcome_Name(r.outcome()), "OUTCOME_"));
    rounds.Add({{"outcome", outcome}}).Increment();
    eval_seconds.Observe(absl::ToDoubleSeconds(d));
    runner_starts.Increment(r.runner_starts());
  };
  Agent agent(std::move(options), client->get(), sink.get(), std::move(boards));
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  agent.Run(g_stop);
  spdlog::info("agent {} stopped", agent_id);
  return 0;
}

}  // namespace
}  // namespace tunefarm

int main(int argc, char** argv) { return tunefarm::Main(argc, argv); }
