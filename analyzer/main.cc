// tunefarm-analyzer: one analyzer worker process. It binds a ZeroMQ ROUTER
// endpoint for profile bundles, sends each bundle's diagnosis to the
// coordinator, acks the bundle once the coordinator acked the diagnosis,
// and serves Prometheus metrics. SIGTERM or SIGINT stops it
// cleanly (exit status 0).
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <ctime>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "analyzer/worker.h"
#include "common/files.h"
#include "common/logging.h"
#include "pipeline/transport.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace tunefarm {
namespace {

// Set by the signal handler; only a lock-free atomic store happens there.
std::atomic<int> g_stop_signal{0};

void OnStopSignal(int sig) { g_stop_signal.store(sig); }

struct Flags {
  std::string bind = "tcp://127.0.0.1:*";
  std::string endpoint_file;
  std::string coordinator;
  std::string metrics_address = "127.0.0.1:0";
  std::string metrics_port_file;
  std::string id;
  std::string log_level = "info";
  int64_t ack_timeout_ms = 10000;
  std::string hold_file;
  std::string hold_stage;
  std::string curve_key_file;
  std::string curve_allow_list;
  std::string coordinator_public_key_file;
};

// The Prometheus side of the worker's counters. The worker keeps plain
// atomics; the main thread copies their growth here, so the worker does not
// depend on prometheus-cpp.
class Metrics {
 public:
  explicit Metrics(prometheus::Registry& registry)
      : bundles_(prometheus::BuildCounter()
                     .Name("tunefarm_analyzer_bundles_total")
                     .Help("Profile bundles received")
                     .Register(registry)
                     .Add({})),
        diagnoses_(prometheus::BuildCounter()
                       .Name("tunefarm_analyzer_diagnoses_total")
                       .Help("Diagnoses the coordinator acked as durable")
                       .Register(registry)
                       .Add({})),
        redeliveries_(prometheus::BuildCounter()
                          .Name("tunefarm_analyzer_redeliveries_total")
                          .Help("Bundles received again after their agent "
                                "saw no ack in time")
                          .Register(registry)
                          .Add({})),
        duplicates_(prometheus::BuildCounter()
                        .Name("tunefarm_analyzer_duplicate_diagnoses_total")
                        .Help("Diagnoses the coordinator already held for "
                              "their round (acked, not stored again)")
                        .Register(registry)
                        .Add({})),
        rejected_(prometheus::BuildCounter()
                      .Name("tunefarm_analyzer_rejected_diagnoses_total")
                      .Help("Diagnoses the coordinator can never record "
                            "(unknown round, stale epoch)")
                      .Register(registry)
                      .Add({})),
        garbled_(prometheus::BuildCounter()
                     .Name("tunefarm_analyzer_garbled_messages_total")
                     .Help("Pipeline messages dropped as garbled")
                     .Register(registry)
                     .Add({})),
        send_failures_(prometheus::BuildCounter()
                           .Name("tunefarm_analyzer_send_failures_total")
                           .Help("Diagnoses the coordinator did not ack in "
                                 "time (their bundles are re-sent)")
                           .Register(registry)
                           .Add({})),
        analysis_seconds_(
            prometheus::BuildHistogram()
                .Name("tunefarm_analyzer_analysis_seconds")
                .Help("Wall time of one bundle's analysis")
                .Register(registry)
                .Add({},
                     prometheus::Histogram::BucketBoundaries{
                         0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5})),
        bundle_bytes_(
            prometheus::BuildHistogram()
                .Name("tunefarm_analyzer_bundle_bytes")
                .Help("Serialized size of each analysed profile bundle")
                .Register(registry)
                .Add({},
                     prometheus::Histogram::BucketBoundaries{
                         1 << 10, 1 << 14, 1 << 17, 1 << 20, 1 << 22, 1 << 24,
                         1 << 26, 1 << 28})),
        lag_seconds_(prometheus::BuildHistogram()
                         .Name("tunefarm_analyzer_bundle_lag_seconds")
                         .Help("From a bundle's creation on its board to its "
                               "diagnosis being durable in the coordinator")
                         .Register(registry)
                         .Add({},
                              prometheus::Histogram::BucketBoundaries{
                                  0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
                                  300, 900})),
        parse_errors_(prometheus::BuildCounter()
                          .Name("tunefarm_analyzer_parse_errors_total")
                          .Help("Profile files that failed to parse (or "
                                "had malformed rows), by profiler format")
                          .Register(registry)) {}

  // Thread-safe (prometheus-cpp metrics are).
  void ObserveAnalysis(const AnalysisReport& r) {
    analysis_seconds_.Observe(absl::ToDoubleSeconds(r.took));
    bundle_bytes_.Observe(static_cast<double>(r.bundle_bytes));
    if (r.lag.has_value()) {
      // Clocks of different hosts may disagree a little; never negative.
      lag_seconds_.Observe(std::max(0.0, absl::ToDoubleSeconds(*r.lag)));
    }
    for (const auto& [format, n] : r.parse_errors) {
      parse_errors_.Add({{"format", format}}).Increment(static_cast<double>(n));
    }
  }

  // Called from one thread only.
  void Sync(const AnalyzerStats& now) {
    bundles_.Increment(now.bundles_received - last_.bundles_received);
    redeliveries_.Increment(now.redeliveries - last_.redeliveries);
    duplicates_.Increment(now.duplicates - last_.duplicates);
    rejected_.Increment(now.rejected - last_.rejected);
    diagnoses_.Increment(now.diagnoses_sent - last_.diagnoses_sent);
    garbled_.Increment(now.garbled - last_.garbled);
    send_failures_.Increment(now.send_failures - last_.send_failures);
    last_ = now;
  }

 private:
  prometheus::Counter& bundles_;
  prometheus::Counter& diagnoses_;
  prometheus::Counter& redeliveries_;
  prometheus::Counter& duplicates_;
  prometheus::Counter& rejected_;
  prometheus::Counter& garbled_;
  prometheus::Counter& send_failures_;
  prometheus::Histogram& analysis_seconds_;
  prometheus::Histogram& bundle_bytes_;
  prometheus::Histogram& lag_seconds_;
  prometheus::Family<prometheus::Counter>& parse_errors_;
  AnalyzerStats last_;
};

int RunAnalyzer(const Flags& flags) {
  InitLogging("analyzer", flags.log_level);
  // Debian's abseil ships with Mutex deadlock detection on: a global lock
  // and a graph update on every acquire, gRPC's included (about 5% of the
  // CPU of a round through gRPC, docs/benchmarks.md). Tests keep it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::string id =
      flags.id.empty() ? absl::StrCat("analyzer-", getpid()) : flags.id;

  // SIGTERM/SIGINT are blocked in every thread (threads started later, such
  // as ZeroMQ's and civetweb's, inherit the mask) and taken synchronously
  // by the main loop below, so no handler runs inside library code.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  // A handler as well as the mask, so that a stop signal reaching a thread
  // that does not block it (a library may reset its mask) still means
  // "stop", never the default "die".
  struct sigaction action = {};
  action.sa_handler = OnStopSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);

  auto registry = std::make_shared<prometheus::Registry>();
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    exposer = std::make_unique<prometheus::Exposer>(flags.metrics_address);
  } catch (const std::exception& e) {
    spdlog::error("cannot serve metrics on --metrics_address={}: {}",
                  flags.metrics_address, e.what());
    return 1;
  }
  exposer->RegisterCollectable(registry);
  // Port 0 asks civetweb for a free port; GetListeningPorts() has the real
  // one.
  std::vector<int> ports = exposer->GetListeningPorts();
  std::string host =
      flags.metrics_address.substr(0, flags.metrics_address.rfind(':'));
  spdlog::info("metrics on http://{}:{}/metrics", host,
               ports.empty() ? 0 : ports.front());
  Metrics metrics(*registry);
  if (!flags.metrics_port_file.empty() && !ports.empty()) {
    (void)WriteFileAtomic(flags.metrics_port_file,
                          absl::StrCat(ports.front(), "\n"));
  }

  absl::StatusOr<PipelineSecurity> security =
      PipelineSecurityFromFiles(flags.curve_key_file, flags.curve_allow_list,
                                flags.coordinator_public_key_file);
  if (!security.ok()) {
    spdlog::error("pipeline authentication: {}", security.status().ToString());
    return 2;
  }
  if (security->curve() &&
      (flags.curve_allow_list.empty() || security->server_public_key.empty())) {
    spdlog::error(
        "with --curve_key_file the analyzer needs --curve_allow_list (the "
        "agents' public keys) and --coordinator_public_key_file");
    return 2;
  }
  if (!security->curve()) {
    spdlog::warn(
        "ZeroMQ pipeline WITHOUT authentication (no --curve_key_file): "
        "loopback only, for local development");
  }

  AnalyzerWorker::Options options;
  options.security = *security;
  options.id = id;
  options.bind_endpoint = flags.bind;
  options.coordinator_endpoints =
      absl::StrSplit(flags.coordinator, ',', absl::SkipWhitespace());
  options.ack_timeout = absl::Milliseconds(flags.ack_timeout_ms);
  options.hold_file = flags.hold_file;
  options.hold_stage = flags.hold_stage;
  options.on_analyzed = [&metrics](const AnalysisReport& r) {
    metrics.ObserveAnalysis(r);
  };
  absl::StatusOr<std::unique_ptr<AnalyzerWorker>> worker =
      AnalyzerWorker::Create(std::move(options));
  if (!worker.ok()) {
    spdlog::error("cannot start the analyzer: {}", worker.status().ToString());
    return 1;
  }
  if (!flags.endpoint_file.empty()) {
    absl::Status st =
        WriteFileAtomic(flags.endpoint_file, (*worker)->bound_endpoint());
    if (!st.ok()) {
      spdlog::error("cannot write --endpoint_file: {}", st.ToString());
      return 1;
    }
  }
  spdlog::info("analyzer {} bound {}, diagnoses to {}", id,
               (*worker)->bound_endpoint(), flags.coordinator);

  std::atomic<bool> stop{false};
  std::thread runner([&] { (*worker)->Run(stop); });
  while (true) {
    timespec tick{0, 200 * 1000 * 1000};
    int sig = sigtimedwait(&stop_signals, nullptr, &tick);
    metrics.Sync((*worker)->stats());
    if (sig != SIGTERM && sig != SIGINT) sig = g_stop_signal.load();
    if (sig == SIGTERM || sig == SIGINT) {
      spdlog::info("signal {}: stopping", sig);
      break;
    }
  }
  stop = true;
  runner.join();
  metrics.Sync((*worker)->stats());
  // The worker goes first: closing its sender waits out the linger so a
  // diagnosis in flight still reaches the coordinator.
  worker->reset();
  // civetweb's shutdown polls its listener for about a second and there is
  // nothing to flush on /metrics, so the exposer is left to process exit
  // (kept reachable, not leaked).
  static prometheus::Exposer* const kExiting = exposer.release();
  (void)kExiting;
  return 0;
}

}  // namespace
}  // namespace tunefarm

int main(int argc, char** argv) {
  tunefarm::Flags flags;
  CLI::App app{
      "tunefarm analyzer worker: profile bundles in (ZeroMQ ROUTER, "
      "acked once durable), diagnoses out (to the coordinator)"};
  app.add_option("--bind", flags.bind,
                 "ZeroMQ endpoint to bind for bundles; port * picks one")
      ->capture_default_str();
  app.add_option("--endpoint_file", flags.endpoint_file,
                 "once bound, write the real endpoint here (atomically, no "
                 "trailing newline)");
  app.add_option("--coordinator", flags.coordinator,
                 "the coordinator's diagnosis endpoint(s), comma "
                 "separated")
      ->required();
  app.add_option("--metrics_address", flags.metrics_address,
                 "host:port for Prometheus /metrics; port 0 picks one")
      ->capture_default_str();
  app.add_option("--metrics_port_file", flags.metrics_port_file,
                 "write the bound metrics port here (launchers, tests)");
  app.add_option("--ack_timeout_ms", flags.ack_timeout_ms,
                 "how long a diagnosis waits for the coordinator's ack; "
                 "without it the bundle is not acked and its agent re-sends")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--test_hold_file", flags.hold_file,
                 "tests only: at --test_hold_stage, write the bundle id here "
                 "and stall holding it (to be killed)");
  app.add_option("--test_hold_stage", flags.hold_stage,
                 "tests only: received (before analysis) or recorded (after "
                 "the coordinator's ack, before acking the agent)")
      ->check(CLI::IsMember({"received", "recorded"}));
  app.add_option("--curve_key_file", flags.curve_key_file,
                 "this analyzer's CurveZMQ key pair (docs/security.md); "
                 "without it the pipeline is unauthenticated, loopback only");
  app.add_option("--curve_allow_list", flags.curve_allow_list,
                 "public keys of the agents allowed to send bundles, one "
                 "'<key> <name>' a line (re-read on every connection)");
  app.add_option("--coordinator_public_key_file",
                 flags.coordinator_public_key_file,
                 "the coordinator's CurveZMQ public key");
  app.add_option("--id", flags.id, "analyzer id (default analyzer-<pid>)");
  app.add_option("--log_level", flags.log_level,
                 "trace, debug, info, warn or error")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return tunefarm::RunAnalyzer(flags);
}
