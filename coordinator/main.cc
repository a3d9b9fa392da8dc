// tunefarm-coordinator: wires the store, the operator catalog, the domain
// core, the control loop, the gRPC services, the diagnosis intake from
// ZeroMQ and the Prometheus endpoint together. The only place that names
// concrete implementations.
#include <signal.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/files.h"
#include "common/grpc_client.h"
#include "common/logging.h"
#include "common/metrics_server.h"
#include "coordinator/auth.h"
#include "coordinator/control_loop.h"
#include "coordinator/coordinator.h"
#include "coordinator/diagnosis_intake.h"
#include "coordinator/health.h"
#include "coordinator/policy.h"
#include "coordinator/prometheus_metrics.h"
#include "coordinator/service.h"
#include "grpcpp/grpcpp.h"
#include "jemalloc/jemalloc.h"
#include "ops/catalog.h"
#include "pipeline/transport.h"
#include "storage/rocksdb_store.h"
#include "storage/store.h"

namespace tunefarm {
namespace {

int Fail(const std::string& what, const absl::Status& status) {
  spdlog::critical("{}: {}", what, status.ToString());
  return status.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

int Main(int argc, char** argv) {
  CLI::App app{"tunefarm coordinator: owns every sweep, leases boards"};
  std::string data_dir = ".farm";
  std::string listen = "127.0.0.1:7070";
  std::string port_file;
  std::string diagnosis_bind = "tcp://127.0.0.1:*";
  std::string diagnosis_endpoint_file;
  std::vector<std::string> ops_dirs;
  std::string metrics_address = "127.0.0.1:0";
  std::string metrics_port_file;
  int64_t lease_ms = 30000, heartbeat_ms = 1000, agent_timeout_ms = 5000,
          tick_ms = 100;
  std::string log_level = "info";
  int64_t min_free_mb = 64;
  int max_batch = 512;
  int64_t max_batch_wait_us = 0;
  std::string tokens_file, policy_file, tls_cert, tls_key, tls_client_ca;
  app.add_option("--tokens_file", tokens_file,
                 "bearer tokens of teams, admins and agents (YAML); without "
                 "it authentication is off (local development only)");
  app.add_option("--policy_file", policy_file,
                 "team weights and quotas (YAML)");
  app.add_option("--tls_cert", tls_cert, "server certificate (PEM)");
  app.add_option("--tls_key", tls_key, "server private key (PEM)");
  app.add_option("--tls_client_ca", tls_client_ca,
                 "CA that client certificates must chain to (mutual TLS)");
  app.add_option("--data_dir", data_dir, "RocksDB and reports live here");
  app.add_option("--listen", listen, "gRPC address; port 0 picks one");
  app.add_option("--port_file", port_file, "write the bound gRPC port here");
  app.add_option("--diagnosis_bind", diagnosis_bind,
                 "ZeroMQ ROUTER endpoint for analyzers' diagnoses");
  app.add_option("--diagnosis_endpoint_file", diagnosis_endpoint_file,
                 "write the bound diagnosis endpoint here");
  std::string curve_key_file, curve_allow_list;
  app.add_option("--curve_key_file", curve_key_file,
                 "this coordinator's CurveZMQ key pair (docs/security.md); "
                 "without it the diagnosis endpoint is unauthenticated and "
                 "loopback only");
  app.add_option("--curve_allow_list", curve_allow_list,
                 "public keys of the analyzers allowed to send diagnoses, one "
                 "'<key> <name>' a line (re-read on every connection)");
  app.add_option("--ops_dir", ops_dirs, "operator package folders")
      ->default_str(TUNEFARM_DEFAULT_OPS_DIR);
  app.add_option("--metrics_address", metrics_address, "host:port");
  bool metrics_team_labels = false;
  app.add_flag("--metrics_team_labels", metrics_team_labels,
               "label per-team series with team names; /metrics has no "
               "authentication, so only where just the cluster's "
               "Prometheus can reach it (docs/security.md)");
  app.add_option("--metrics_port_file", metrics_port_file);
  app.add_option("--lease_ms", lease_ms)->check(CLI::Range(100, 86400000));
  app.add_option("--heartbeat_ms", heartbeat_ms)->check(CLI::Range(10, 60000));
  app.add_option("--agent_timeout_ms", agent_timeout_ms)
      ->check(CLI::Range(50, 600000));
  app.add_option("--tick_ms", tick_ms)->check(CLI::Range(1, 10000));
  app.add_option("--log_level", log_level);
  app.add_option("--min_free_mb", min_free_mb,
                 "refuse new leases and submissions while the data disk has "
                 "less free than this (MiB): RocksDB needs the headroom")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--max_batch", max_batch,
                 "group commit: at most this many agent calls share one "
                 "synced commit")
      ->check(CLI::Range(1, 100000));
  app.add_option("--max_batch_wait_us", max_batch_wait_us,
                 "group commit: wait up to this long for more calls to join "
                 "a batch (0: take what is queued)")
      ->check(CLI::Range(int64_t{0}, int64_t{100000}));
  std::string health_dir;
  int64_t health_interval_s = 3600, health_retry_s = 300;
  app.add_option("--health_dir", health_dir,
                 "board health-check goldens, <kind>.yaml each (the shipped "
                 "ones: ops/health); unset = boards are not health-checked");
  app.add_option("--health_check_interval_s", health_interval_s,
                 "re-check a healthy board this often; 0 = only when it "
                 "joins and after a board fault")
      ->check(CLI::Range(int64_t{0}, int64_t{30} * 86400));
  app.add_option("--health_retry_s", health_retry_s,
                 "re-check a board that failed its health check this often")
      ->check(CLI::Range(int64_t{1}, int64_t{86400}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  InitLogging("coordinator", log_level);
  // Debian's abseil ships with Mutex deadlock detection on: a global lock
  // and a graph update on every acquire, gRPC's included (about 5% of the
  // CPU of a round through gRPC, docs/benchmarks.md). Tests keep it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  if (ops_dirs.empty()) ops_dirs.push_back(TUNEFARM_DEFAULT_OPS_DIR);

  // Signals are taken by sigwait in this thread only.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  const char* allocator_version = nullptr;
  size_t version_size = sizeof(allocator_version);
  if (mallctl("version", &allocator_version, &version_size, nullptr, 0) == 0) {
    spdlog::info("allocator: jemalloc {}", allocator_version);
  }

  if (auto st = MakeDirs(data_dir); !st.ok()) return Fail("data_dir", st);
  RocksDbStoreOptions store_options;
  store_options.min_free_bytes = static_cast<uint64_t>(min_free_mb) << 20;
  auto store = OpenRocksDbStore(data_dir + "/db", store_options);
  // A full disk is no reason to die (a supervisor would restart us into
  // the same disk): wait for space, saying why, until told to stop.
  while (!store.ok() && absl::IsResourceExhausted(store.status())) {
    spdlog::error("cannot open the store: {}; retrying every 5 s",
                  std::string(store.status().message()));
    const timespec wait = {5, 0};
    if (sigtimedwait(&signals, nullptr, &wait) > 0) return 0;
    store = OpenRocksDbStore(data_dir + "/db", store_options);
  }
  if (!store.ok()) return Fail("opening the store", store.status());
  auto catalog = OperatorCatalog::LoadFromDirs(ops_dirs);
  if (!catalog.ok()) return Fail("loading operators", catalog.status());

  std::unique_ptr<TokenTable> tokens;
  if (!tokens_file.empty()) {
    auto table = TokenTable::Load(tokens_file);
    if (!table.ok()) return Fail("tokens", table.status());
    tokens = std::make_unique<TokenTable>(std::move(*table));
    spdlog::info("authentication on: {} tokens from {}", tokens->size(),
                 tokens_file);
  } else {
    spdlog::warn(
        "authentication OFF (no --tokens_file): every caller is an "
        "admin; use this for local development only");
  }
  TeamPolicy policy;
  policy.default_quota.set_weight(1);
  if (!policy_file.empty()) {
    auto loaded = LoadTeamPolicy(policy_file);
    if (!loaded.ok()) return Fail("policy", loaded.status());
    policy = std::move(*loaded);
  }
  std::shared_ptr<grpc::ServerCredentials> credentials =
      grpc::InsecureServerCredentials();
  if (!tls_cert.empty() || !tls_key.empty()) {
    auto cert = ReadFileUpTo(tls_cert, kMaxPemFileBytes, "a PEM file");
    auto key = ReadFileUpTo(tls_key, kMaxPemFileBytes, "a PEM file");
    if (!cert.ok()) return Fail("--tls_cert", cert.status());
    if (!key.ok()) return Fail("--tls_key", key.status());
    grpc::SslServerCredentialsOptions ssl(
        GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    ssl.pem_key_cert_pairs.push_back({*key, *cert});
    if (!tls_client_ca.empty()) {
      auto ca = ReadFileUpTo(tls_client_ca, kMaxPemFileBytes, "a PEM file");
      if (!ca.ok()) return Fail("--tls_client_ca", ca.status());
      ssl.pem_root_certs = *ca;
      ssl.client_certificate_request =
          GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
    }
    credentials = grpc::SslServerCredentials(ssl);
    spdlog::info("TLS on{}", tls_client_ca.empty() ? "" : " (mutual)");
  }

  auto registry = std::make_shared<prometheus::Registry>();
  std::unique_ptr<FarmMetrics> metrics =
      NewPrometheusFarmMetrics(*registry, metrics_team_labels);
  auto metrics_server = MetricsServer::Start(metrics_address, registry);
  if (!metrics_server.ok()) return Fail("metrics", metrics_server.status());
  spdlog::info("metrics on http://{}/metrics (port {})", metrics_address,
               (*metrics_server)->port());
  if (!metrics_port_file.empty()) {
    (void)WriteFileAtomic(metrics_port_file,
                          absl::StrCat((*metrics_server)->port(), "\n"));
  }

  CoordinatorOptions options;
  options.lease_duration = absl::Milliseconds(lease_ms);
  options.heartbeat_interval = absl::Milliseconds(heartbeat_ms);
  options.agent_timeout = absl::Milliseconds(agent_timeout_ms);
  options.report_dir = data_dir + "/reports";
  options.default_quota = policy.default_quota;
  options.team_quotas = policy.teams;
  options.reservations = policy.reservations;
  if (!health_dir.empty()) {
    auto checks = LoadHealthChecks(health_dir, *catalog);
    if (!checks.ok()) return Fail("--health_dir", checks.status());
    options.health_checks = std::move(*checks);
    spdlog::info("health checks on for {} board kind(s) from {}",
                 options.health_checks.size(), health_dir);
  }
  options.health_check_interval = absl::Seconds(health_interval_s);
  options.health_retry_interval = absl::Seconds(health_retry_s);
  Coordinator coordinator(store->get(), &*catalog, &SystemClock(), options,
                          metrics.get());
  if (auto st = coordinator.Recover(); !st.ok()) return Fail("recovery", st);
  EventNotifier notifier;
  coordinator.SetEventListener([&](const std::string&) { notifier.Notify(); });
  // Agents' calls count as heartbeats as they arrive (coordinator/liveness.h).
  AgentLiveness liveness(&SystemClock());
  coordinator.SetLiveness(&liveness);

  absl::Time last_tick_error = absl::InfinitePast();
  // Agents' calls queued together share one synced commit, written while
  // the loop runs the next batch (pipelined: ControlLoop).
  ControlLoop::Options loop_options;
  loop_options.max_batch = max_batch;
  loop_options.max_batch_wait = absl::Microseconds(max_batch_wait_us);
  ControlLoop loop(
      absl::Milliseconds(tick_ms),
      [&] {
        // A failed tick changed nothing and runs again next time; while the
        // disk is full that is every tick, so say it every 10 s.
        if (auto st = coordinator.Tick();
            !st.ok() && absl::Now() - last_tick_error >= absl::Seconds(10)) {
          last_tick_error = absl::Now();
          spdlog::error("tick: {}", st.ToString());
        }
      },
      {[&] { coordinator.BeginBatch(); }, nullptr,
       [&] { return coordinator.SealBatch(); }},
      loop_options);
  loop.Start();

  auto curve = PipelineSecurityFromFiles(curve_key_file, curve_allow_list, "");
  if (!curve.ok()) return Fail("pipeline authentication", curve.status());
  if (curve->curve() && curve_allow_list.empty()) {
    return Fail("pipeline authentication",
                absl::InvalidArgumentError(
                    "--curve_key_file needs --curve_allow_list (the "
                    "analyzers' public keys)"));
  }
  if (!curve->curve()) {
    spdlog::warn(
        "diagnosis endpoint WITHOUT authentication (no --curve_key_file): "
        "loopback only, for local development");
  }
  auto receiver = PipelineReceiver::Bind(diagnosis_bind, *curve);
  if (!receiver.ok()) return Fail("diagnosis endpoint", receiver.status());
  spdlog::info("diagnoses on {}", (*receiver)->bound_endpoint());
  if (!diagnosis_endpoint_file.empty()) {
    (void)WriteFileAtomic(diagnosis_endpoint_file,
                          (*receiver)->bound_endpoint() + "\n");
  }
  std::atomic<bool> stop{false};
  // Diagnosis intake (coordinator/diagnosis_intake.h): each diagnosis is
  // recorded on the control loop and acked only once it is durable, or will
  // never be (then the ack says why), so the analyzer and the agent behind
  // it re-send anything else.
  std::thread intake([&] {
    while (!stop.load()) {
      auto in = (*receiver)->Receive(absl::Milliseconds(200));
      if (!in.ok()) {
        if (!absl::IsDeadlineExceeded(in.status())) {
          spdlog::warn("diagnosis intake: {}", in.status().ToString());
        }
        continue;
      }
      if (!in->message.has_diagnosis()) {
        spdlog::warn("diagnosis intake: message without a diagnosis dropped");
        continue;
      }
      // Who sent it is who CURVE authenticated (its allow-list name).
      std::optional<v1::PipelineMessage> reply = IntakeDiagnosis(
          in->message.diagnosis(), in->identity, [&](const v1::Diagnosis& d) {
            return loop.Call([&] { return coordinator.RecordDiagnosis(d); });
          });
      if (!reply.has_value()) continue;
      if (absl::Status sent = (*receiver)->Reply(in->peer, *reply);
          !sent.ok()) {
        spdlog::warn("diagnosis intake: {}", sent.ToString());
      }
    }
  });

  FarmService farm_service(&coordinator, &loop, store->get(), &notifier,
                           tokens.get());
  AgentGrpcService agent_service(&coordinator, &loop, tokens.get(), &liveness);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, credentials, &port);
  builder.SetMaxReceiveMessageSize(kMaxGrpcMessageBytes);
  builder.SetMaxSendMessageSize(kMaxGrpcMessageBytes);
  builder.RegisterService(&farm_service);
  builder.RegisterService(&agent_service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    stop = true;
    intake.join();
    return Fail("gRPC", absl::UnavailableError(
                            absl::StrCat("cannot listen on ", listen)));
  }
  spdlog::info("coordinator listening on port {} (data in {})", port, data_dir);
  if (!port_file.empty()) {
    (void)WriteFileAtomic(port_file, absl::StrCat(port, "\n"));
  }

  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("signal {}: shutting down", sig);
  notifier.Shutdown();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  stop = true;
  intake.join();
  loop.Stop();
  return 0;
}

}  // namespace
}  // namespace tunefarm

int main(int argc, char** argv) { return tunefarm::Main(argc, argv); }
