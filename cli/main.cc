// tunefarm: the command line. Wires the verbs (cli/farm_client.h) and the
// local farm launcher (cli/local_farm.h) to CLI11.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/analyze_command.h"
#include "cli/export_command.h"
#include "cli/farm_client.h"
#include "cli/local_farm.h"
#include "common/files.h"

namespace tunefarm {
namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void OnSignal(int) { g_interrupted = true; }

// What the local farm's boards are, for the opening line.
std::string BoardsText(const LocalFarmOptions& o) {
  std::string text = o.board_kind == "cuda"
                         ? std::string("one board per GPU")
                         : absl::StrCat(o.boards_per_agent, " ",
                                        o.board_kind == "sim"      ? "simulated"
                                        : o.board_kind == "replay" ? "replay"
                                                                   : "cpu",
                                        " board(s) each");
  if (o.board_kind == "replay") {
    absl::StrAppend(&text, " (replayed numbers, nothing runs here)");
  }
  if (o.cpu_boards > 0) {
    absl::StrAppend(&text, ", plus 1 agent with ", o.cpu_boards,
                    " cpu board(s) (real measurements)");
  }
  return text;
}

// Starts the farm, submits every spec (each selects its boards by kind, so
// sweeps for sim and cpu boards run side by side), then follows each sweep
// to its end and prints its summary: best configuration, speedup (labelled
// simulated for simulated boards) and report path.
int RunLocal(const CliContext& base, const std::vector<std::string>& specs,
             LocalFarmOptions options, bool keep_running) {
  std::error_code ec;
  options.data_dir = std::filesystem::absolute(options.data_dir, ec).string();
  for (const std::string& spec : specs) {
    if (!std::filesystem::exists(spec)) {
      std::cerr << "tunefarm local: no such spec file: " << spec << "\n";
      return kExitBadInput;
    }
  }
  std::cout << "tunefarm local: starting a coordinator, an analyzer and "
            << options.agents << " agent(s) with " << BoardsText(options)
            << " (data in " << options.data_dir << ")\n";
  LocalFarm farm(options);
  if (absl::Status st = farm.Start(); !st.ok()) {
    std::cerr << "tunefarm local: " << st.message() << "\n";
    return kExitFailure;
  }
  std::cout << "coordinator on " << farm.coordinator_address()
            << ", metrics on http://127.0.0.1:"
            << farm.coordinator_metrics_port() << "/metrics, logs in "
            << farm.log_dir() << "\n";
  CliContext ctx = base;
  ctx.coordinator = farm.coordinator_address();
  // This farm's coordinator stops only when we stop it: watch need not wait
  // for it to come back.
  ctx.reconnect_for = absl::ZeroDuration();
  // The local operator acts as the farm's admin.
  ctx.security.token = farm.admin_token();
  if (!farm.tokens_file().empty()) {
    std::cout << "authentication on: tokens in " << farm.tokens_file()
              << " (export TUNEFARM_TOKEN=<token> to use the CLI on it)\n";
  }
  FarmClient client(ctx);
  // Ctrl-C / SIGTERM while watching: stop the coordinator, which ends the
  // watch stream, and then everything else.
  std::atomic<bool> done{false};
  std::thread interrupter([&] {
    while (!done.load()) {
      if (g_interrupted.load()) {
        farm.Interrupt();
        return;
      }
      ::usleep(50 * 1000);
    }
  });
  int rc = kExitOk;
  std::vector<std::string> sweep_ids;
  for (const std::string& spec : specs) {
    std::string id;
    rc = client.Submit(spec, "", /*watch=*/false, &id);
    if (rc != kExitOk) break;
    sweep_ids.push_back(id);
  }
  // The sweeps run together; their events are shown one sweep after the
  // other (a finished sweep's events are replayed with their times).
  for (const std::string& id : sweep_ids) {
    if (g_interrupted.load()) break;
    std::cout << "\n--- sweep " << id << "\n";
    const int watched = client.Watch(id);
    if (watched == kExitOk || watched == kExitSweepFailed) {
      const int summary = client.Summary(id);
      if (rc == kExitOk) rc = watched != kExitOk ? watched : summary;
    } else if (rc == kExitOk) {
      rc = watched;
    }
  }
  done = true;
  interrupter.join();
  if ((rc == kExitOk || rc == kExitSweepFailed) && !sweep_ids.empty()) {
    // The tuning database of these sweeps (docs/tuning-db.md), merged into
    // the one a previous run left there.
    ExportOptions db;
    db.sweeps = sweep_ids;
    db.out_dir = absl::StrCat(options.data_dir, "/tuning-db");
    for (const std::string& d : options.ops_dirs) {
      if (!d.empty()) db.ops_dirs.push_back(d);
    }
    if (db.ops_dirs.empty()) db.ops_dirs.push_back(TUNEFARM_OPS_DIR);
    std::cout << "\n";
    if (RunExport(client, db) != kExitOk) {
      std::cout << "no tuning database written (no sweep passed)\n";
    }
  }
  if (rc == kExitOk || rc == kExitSweepFailed) {
    client.Boards();
    // Each sweep's full report folder (docs/report.md) beside the
    // coordinator's data.
    for (const std::string& id : sweep_ids) {
      ReportOptions report;
      report.out_dir = absl::StrCat(options.data_dir, "/reports/", id);
      if (client.Report(id, report) != kExitOk && rc == kExitOk) {
        rc = kExitFailure;
      }
    }
  }
  if (keep_running) {
    std::cout << "farm still running on " << farm.coordinator_address()
              << "; Ctrl-C stops it\n";
    while (!g_interrupted.load()) ::usleep(100 * 1000);
  }
  farm.Stop();
  return rc;
}

// `tunefarm local --boards replay:FILE [SPEC...]`: the agents' boards answer
// from the measured space; its operator package (and, without specs, a
// guided sweep on it) is written under the data folder first.
int RunLocalReplay(const CliContext& ctx, const std::string& file,
                   std::vector<std::string> specs, LocalFarmOptions options,
                   int cpu_boards, bool keep_running) {
  std::error_code ec;
  options.data_dir = std::filesystem::absolute(options.data_dir, ec).string();
  if (options.ops_dirs.empty()) options.ops_dirs.push_back(TUNEFARM_OPS_DIR);
  absl::StatusOr<ReplayPlan> plan =
      PrepareReplay(file, options.data_dir, options.ops_dirs);
  if (!plan.ok()) {
    std::cerr << "tunefarm local: --boards replay:" << file << ": "
              << plan.status().message() << "\n";
    return kExitBadInput;
  }
  std::cout << "replaying " << plan->space_file << ": " << plan->configs
            << " configurations measured on " << plan->device << " by "
            << plan->tool << " (best recorded "
            << absl::StrFormat("%.2f", plan->best_us) << " µs); operator "
            << plan->operator_name << " in " << plan->ops_dir << "\n";
  options.board_kind = "replay";
  options.boards_flag =
      absl::StrCat("replay:", plan->space_file, ":", options.boards_per_agent);
  options.cpu_boards = std::max(cpu_boards, 0);
  options.ops_dirs.push_back(plan->ops_dir);
  if (specs.empty()) specs.push_back(plan->spec_path);
  return RunLocal(ctx, specs, std::move(options), keep_running);
}

int Main(int argc, char** argv) {
  CLI::App app{"tunefarm: a distributed kernel-tuning farm"};
  app.require_subcommand(1);
  CliContext ctx;
  const char* env = std::getenv("TUNEFARM_COORDINATOR");
  ctx.coordinator = env != nullptr ? env : "127.0.0.1:7070";
  std::string output = "text";
  app.add_option("--coordinator", ctx.coordinator,
                 "host:port (env TUNEFARM_COORDINATOR)");
  app.add_option("--output,-o", output, "text or json")
      ->check(CLI::IsMember({"text", "json"}));
  std::string token_file;
  app.add_option("--token_file", token_file,
                 "file holding your bearer token (or $TUNEFARM_TOKEN)");
  app.add_option("--tls_ca", ctx.security.tls_ca_file,
                 "CA of the coordinator's certificate (turns TLS on)");
  app.add_option("--tls_cert", ctx.security.tls_cert_file,
                 "client certificate for mutual TLS");
  app.add_option("--tls_key", ctx.security.tls_key_file,
                 "client key for mutual TLS");

  std::string spec, sweep_id, key, reason;
  bool watch = false;
  auto* submit = app.add_subcommand("submit", "submit a sweep spec (YAML)");
  submit->add_option("spec", spec, "SPEC.yaml")->required();
  submit->add_flag("--watch", watch, "follow its progress to the end");
  submit->add_option("--idempotency-key", key,
                     "resubmitting with the same key creates nothing new");
  auto* status = app.add_subcommand("status", "one sweep, or all sweeps");
  status->add_option("sweep", sweep_id);
  auto* watch_cmd = app.add_subcommand("watch", "follow a sweep's events");
  watch_cmd->add_option("sweep", sweep_id)->required();
  auto* cancel = app.add_subcommand("cancel", "cancel a sweep");
  cancel->add_option("sweep", sweep_id)->required();
  cancel->add_option("--reason", reason);
  auto* rounds = app.add_subcommand("rounds", "a sweep's rounds and lineage");
  rounds->add_option("sweep", sweep_id)->required();
  ReportOptions report_options;
  auto* report = app.add_subcommand("report", "a sweep's tuning report");
  report->add_option("sweep", sweep_id)->required();
  report
      ->add_option("--format", report_options.format,
                   "md (default) or json (the report model)")
      ->check(CLI::IsMember({"md", "json"}));
  report->add_option("--out", report_options.out_dir,
                     "write report.md, report.json, progress.svg, "
                     "lineage.dot and lineage.svg into this folder");
  auto* boards = app.add_subcommand("boards", "the farm's boards");
  auto* teams = app.add_subcommand("teams", "teams' quotas and use");
  std::string board_id;
  auto* admin = app.add_subcommand("admin", "farm administration (admins)");
  admin->require_subcommand(1);
  auto* drain = admin->add_subcommand(
      "drain", "finish the board's current round, then give it no work");
  drain->add_option("board", board_id)->required();
  drain->add_option("--reason", reason);
  auto* admit = admin->add_subcommand(
      "admit", "put a drained or quarantined board back in service");
  admit->add_option("board", board_id)->required();
  admit->add_option("--reason", reason);
  v1::TeamQuota quota;
  double weight = 1;
  int max_boards = 0, max_active = 0;
  auto* quota_cmd = admin->add_subcommand("quota", "set a team's quota");
  quota_cmd->add_option("team", *quota.mutable_team())->required();
  quota_cmd->add_option("--weight", weight, "fair-share weight")
      ->check(CLI::Range(0.0, 1e6));
  quota_cmd->add_option("--max-boards", max_boards, "0 = unlimited")
      ->check(CLI::Range(0, 1000000));
  quota_cmd->add_option("--max-active-sweeps", max_active, "0 = unlimited")
      ->check(CLI::Range(0, 1000000));
  v1::BoardReservation reservation;
  std::vector<std::string> reserve_labels;
  auto add_target = [&](CLI::App* cmd) {
    cmd->add_option("board", *reservation.mutable_board_id(),
                    "a board id (or give --label)");
    cmd->add_option("--label", reserve_labels,
                    "KEY=VALUE: every board carrying all of them (a pool)");
  };
  auto* reserve = admin->add_subcommand(
      "reserve", "reserve a board or a label pool for one team");
  add_target(reserve);
  reserve->add_option("--team", *reservation.mutable_team())->required();
  reserve->add_option("--reason", *reservation.mutable_reason());
  auto* unreserve = admin->add_subcommand(
      "unreserve", "lift a board's or a pool's reservation");
  add_target(unreserve);
  ExportOptions export_options;
  export_options.ops_dirs = {TUNEFARM_OPS_DIR};
  auto* export_cmd = app.add_subcommand(
      "export",
      "write the tuning database of sweeps (JSON, C++ header, Python module; "
      "docs/tuning-db.md)");
  export_cmd->add_option("sweep", export_options.sweeps, "SWEEP ...");
  export_cmd
      ->add_option("--out", export_options.out_dir,
                   "folder of tuning_db.json, tuning_db.h, tuning_db.py and "
                   "merge.log; an existing database there is merged into")
      ->capture_default_str();
  export_cmd->add_option("--merge", export_options.merge_files,
                         "other exported tuning_db.json files to merge in");
  export_cmd->add_option("--ops-dir", export_options.ops_dirs,
                         "operator packages, for the manifest defaults "
                         "(default: the shipped ops/)");
  AnalyzeOptions analyze_options;
  auto* analyze = app.add_subcommand(
      "analyze", "diagnose a profile folder offline (perf-analysis.md)");
  analyze->add_option("profile", analyze_options.profile_dir, "PROFILE_DIR")
      ->required();
  analyze->add_option("--parent", analyze_options.parent_dir,
                      "the parent round's profile, for a comparison");
  analyze->add_option("--out", analyze_options.out_dir,
                      "where perf-analysis.md and diagnosis.json go");
  analyze->add_option("--chip", analyze_options.chip,
                      "e.g. Ascend910B2: core counts and roofline");
  analyze->add_option("--output,-o", analyze_options.output, "text or json")
      ->check(CLI::IsMember({"text", "json"}));

  std::string keygen_dir;
  auto* keygen = app.add_subcommand(
      "keygen",
      "write CurveZMQ key pairs and allow-lists for a farm's pipeline "
      "(the Helm chart's curve Secret; docs/security.md)");
  keygen->add_option("dir", keygen_dir, "DIR (created)")->required();
  std::vector<std::string> keygen_agents;
  keygen->add_option("--agent", keygen_agents,
                     "one key pair per agent NAME (its node name) in "
                     "DIR/agents/, kept where it exists (repeatable)");

  LocalFarmOptions local_options;
  local_options.bin_dir = ExecutableDir();
  local_options.data_dir = ".farm";
  std::vector<std::string> local_specs;
  int cpu_boards = -1;
  bool keep_running = false;
  auto* local = app.add_subcommand(
      "local", "run a whole farm here and sweeps on it, end to end");
  local->add_option("spec", local_specs,
                    "SPEC.yaml ... (default: the sim and cpu examples for "
                    "--boards sim, else the board kind's example)");
  local->add_option("--agents", local_options.agents)->check(CLI::Range(1, 64));
  local->add_option("--boards-per-agent", local_options.boards_per_agent)
      ->check(CLI::Range(1, 64));
  local->add_option("--data-dir", local_options.data_dir);
  local
      ->add_option("--boards", local_options.board_kind,
                   "board kind of the agents: sim, cpu, cuda (all GPUs), or "
                   "replay:FILE (a Kernel Tuner cache, T4 or KTT file "
                   "answers; every number labelled replayed)")
      ->check([](const std::string& v) -> std::string {
        if (v == "sim" || v == "cpu" || v == "cuda") return "";
        if (v.rfind("replay:", 0) == 0 && v.size() > 7) return "";
        return "expected sim, cpu, cuda or replay:FILE, got " + v;
      });
  local
      ->add_option("--cpu-boards", cpu_boards,
                   "cpu boards of one extra agent beside the others "
                   "(default: 1 with --boards sim, else 0)")
      ->check(CLI::Range(0, 64));
  local->add_option("--ops-dir", local_options.ops_dirs,
                    "operator package folders (default: the shipped ops/)");
  bool no_profile = false;
  local->add_flag("--no-profile", no_profile,
                  "agents skip profiling (e.g. Nsight Compute on cuda boards)");
  local
      ->add_option("--sim-delay-ms", local_options.sim_delay_ms,
                   "extra real time per simulated run")
      ->check(CLI::Range(0, 600000));
  local->add_option("--log-level", local_options.log_level);
  local->add_flag("--keep-running", keep_running,
                  "leave the farm up after the sweep");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitBadInput;
  }
  ctx.json = output == "json";
  if (!token_file.empty()) {
    auto token = ReadTokenFile(token_file);
    if (!token.ok()) {
      std::cerr << "tunefarm: --token_file: " << token.status().message()
                << "\n";
      return kExitBadInput;
    }
    ctx.security.token = *token;
  } else if (const char* t = std::getenv("TUNEFARM_TOKEN"); t != nullptr) {
    ctx.security.token = t;
  }
  ctx.terminal = ::isatty(STDOUT_FILENO) != 0;
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);

  if (*keygen) {
    absl::Status st = WriteFarmCurveKeys(keygen_dir, keygen_agents);
    if (!st.ok()) {
      std::cerr << "tunefarm keygen: " << st.message() << "\n";
      return ExitCodeFor(st);
    }
    std::cout << "CurveZMQ keys in " << keygen_dir
              << (keygen_agents.empty()
                      ? " (coordinator, analyzer, agent: .key and .pub; "
                        "coordinator.allow, analyzer.allow)\n"
                      : " (coordinator, analyzer: .key and .pub; one pair per "
                        "agent in agents/; coordinator.allow, analyzer.allow "
                        "listing every agent in agents/)\n");
    return kExitOk;
  }
  FarmClient client(ctx);
  if (*submit) return client.Submit(spec, key, watch);
  if (*status) return client.Status(sweep_id);
  if (*watch_cmd) return client.Watch(sweep_id);
  if (*cancel) return client.Cancel(sweep_id, reason);
  if (*rounds) return client.Rounds(sweep_id);
  if (*report) return client.Report(sweep_id, report_options);
  if (*boards) return client.Boards();
  if (*export_cmd) return RunExport(client, export_options);
  if (*teams) return client.Teams();
  if (*drain) return client.Drain(board_id, reason);
  if (*admit) return client.Admit(board_id, reason);
  if (*quota_cmd) {
    quota.set_weight(weight);
    quota.set_max_boards(max_boards);
    quota.set_max_active_sweeps(max_active);
    return client.SetQuota(quota);
  }
  if (*reserve || *unreserve) {
    for (const std::string& kv : reserve_labels) {
      const size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) {
        std::cerr << "tunefarm: --label " << kv << ": expected KEY=VALUE\n";
        return kExitBadInput;
      }
      (*reservation.mutable_labels())[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    if (reservation.board_id().empty() == reservation.labels().empty()) {
      std::cerr << "tunefarm: admin " << (*reserve ? "reserve" : "unreserve")
                << ": give either a board or --label KEY=VALUE\n";
      return kExitBadInput;
    }
    return client.Reserve(reservation, reserve->parsed());
  }
  if (*analyze) {
    if (output == "json") analyze_options.output = "json";
    return RunAnalyze(analyze_options);
  }
  if (*local) {
    if (no_profile) local_options.agent_flags.push_back("--profile=false");
    if (local_options.board_kind.rfind("replay:", 0) == 0) {
      return RunLocalReplay(ctx, local_options.board_kind.substr(7),
                            local_specs, local_options, cpu_boards,
                            keep_running);
    }
    const bool sim = local_options.board_kind == "sim";
    local_options.cpu_boards = cpu_boards >= 0 ? cpu_boards : (sim ? 1 : 0);
    if (local_specs.empty()) {
      const std::string examples = TUNEFARM_EXAMPLES_DIR;
      if (sim) local_specs.push_back(examples + "/sim_matmul.yaml");
      if (local_options.board_kind == "cuda") {
        local_specs.push_back(examples + "/cuda_gemm.yaml");
      }
      if (local_options.board_kind == "cpu" || local_options.cpu_boards > 0) {
        local_specs.push_back(examples + "/cpu_gemm.yaml");
      }
    }
    return RunLocal(ctx, local_specs, local_options, keep_running);
  }
  return kExitBadInput;
}

}  // namespace
}  // namespace tunefarm

int main(int argc, char** argv) { return tunefarm::Main(argc, argv); }
