// LocalFarm: a whole farm on this machine as separate processes (one
// coordinator, one analyzer worker, N agents of one board kind, and
// optionally one more agent with cpu boards beside them) talking
// over loopback gRPC and ZeroMQ, with RocksDB in a data folder. Used by
// `tunefarm local` and by the integration tests, which also kill and
// restart its processes.
//
// Owned by one thread. The destructor stops every process it started.
#ifndef TUNEFARM_CLI_LOCAL_FARM_H_
#define TUNEFARM_CLI_LOCAL_FARM_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/subprocess.h"

namespace tunefarm {

struct LocalFarmOptions {
  std::string bin_dir;                // where tunefarm-coordinator & co. live
  std::string data_dir;               // RocksDB, reports, logs, run files
  std::vector<std::string> ops_dirs;  // "" = the coordinator's default
  int agents = 2;
  // Board kind of every agent: "sim" or "cpu" (boards_per_agent each),
  // "cuda" (every GPU of the host; use one agent), or "replay" (with
  // boards_flag replay:FILE:COUNT).
  std::string board_kind = "sim";
  int boards_per_agent = 2;
  // The agents' --boards as written (e.g. "ascend:0,1"); "" = from
  // board_kind and boards_per_agent.
  std::string boards_flag;
  // One more agent (the last, agent-<agents+1>) serving this many cpu boards
  // beside the others, so one farm tunes simulated and real boards; 0 = none.
  int cpu_boards = 0;
  // Extra flags for every agent (e.g. {"--profile=false"}).
  std::vector<std::string> agent_flags;
  int64_t sim_delay_ms = 0;
  int64_t lease_ms = 30000;
  int64_t heartbeat_ms = 500;
  int64_t agent_timeout_ms = 5000;
  std::string log_level = "info";
  // Bearer-token authentication: a tokens file with an admin, an agent and
  // one user token per team in `teams` is written under <data>/run/.
  bool auth = true;
  std::vector<std::string> teams = {"demo"};
  // Team weights and quotas (YAML, coordinator/policy.h); "" = none.
  std::string policy_file;
  // The coordinator's --metrics_team_labels (team names on /metrics).
  bool metrics_team_labels = false;
  // CurveZMQ on the pipeline: a key pair for each process and allow-lists
  // (the coordinator's lists the analyzer, the analyzer's the agents), all
  // under <data>/run/keys/.
  bool curve = true;
};

// What `tunefarm local --boards replay:FILE` prepares before the farm
// starts: the measured space's operator package (ops/spaces
// SpaceManifestYaml) in <data_dir>/replay/ops/<operator>/, which the
// coordinator loads beside the shipped operators, and a guided sweep spec
// on it (<data_dir>/replay/<operator>.yaml) whose goal is the file's best
// recorded time.
struct ReplayPlan {
  std::string space_file;  // absolute
  std::string ops_dir;     // the folder of packages to add to --ops_dir
  std::string operator_name;
  std::string spec_path;
  std::string device;  // who measured what, for the opening line
  std::string tool;
  size_t configs = 0;
  double best_us = 0;
};

// INVALID_ARGUMENT / NOT_FOUND when the file cannot be read as a Kernel
// Tuner cache, T4 or KTT file, or records no passing configuration.
// The operator is named after the file's kernel, prefixed "replay_" when
// a package of that name is in one of `ops_dirs` (folders of packages).
absl::StatusOr<ReplayPlan> PrepareReplay(
    const std::string& space_file, const std::string& data_dir,
    const std::vector<std::string>& ops_dirs);

// Writes a farm's CurveZMQ keys into `dir` (created): key pairs (<name>.key,
// mode 0600) and public keys (<name>.pub), and the allow-lists
// coordinator.allow (the analyzers' key) and analyzer.allow (the agents').
// With no `agents` and no agents/ folder in `dir`: one pair each for the
// coordinator, the analyzers and all agents (agent.key), all new. With
// `agents` (node names, the Helm chart's agent identities) or an agents/
// folder: one pair per agent in agents/NAME.key, made only where missing, as
// are the coordinator's and analyzers' (so running it again adds agents
// without changing keys already handed out), and analyzer.allow lists every
// agents/*.key there, named agent-NAME: delete an agent's files and run it
// again to revoke that agent alone.
// INVALID_ARGUMENT naming an agent name that cannot be a file/Secret key.
absl::Status WriteFarmCurveKeys(const std::string& dir,
                                const std::vector<std::string>& agents = {});

// OK when `name` can name an agent's key (a node name: letters, digits,
// '-', '.', '_', at most 253, not starting with a punctuation mark).
absl::Status ValidCurveAgentName(const std::string& name);

class LocalFarm {
 public:
  explicit LocalFarm(LocalFarmOptions options);
  ~LocalFarm();

  // Starts the coordinator, the analyzer and every agent, and waits until
  // each has written its endpoint.
  absl::Status Start();
  // "127.0.0.1:PORT" of the coordinator's gRPC service.
  const std::string& coordinator_address() const { return address_; }
  int coordinator_metrics_port() const { return metrics_port_; }
  // Metrics ports of every process by name ("coordinator", "analyzer",
  // "agent-1", …), read from the port files they write.
  std::map<std::string, int> MetricsPorts() const;
  // "" when authentication is off.
  const std::string& tokens_file() const { return tokens_file_; }
  // <data>/run/keys ("" without CURVE): <name>.key (key pair), <name>.pub,
  // coordinator.allow and analyzer.allow.
  const std::string& keys_dir() const { return keys_dir_; }
  const std::string& diagnosis_endpoint() const { return diagnosis_endpoint_; }
  const std::string& analyzer_endpoint() const { return analyzer_endpoint_; }
  // Fault injection: SIGKILL (or `sig`) the analyzer, and start it again on
  // the same endpoint.
  void KillAnalyzer(int sig);
  absl::Status RestartAnalyzer();
  const std::string& admin_token() const { return admin_token_; }
  // The user token of `team` (one of options.teams); "" if none.
  std::string team_token(const std::string& team) const;

  // Every agent started, the extra cpu agent included.
  int agent_count() const { return static_cast<int>(agents_.size()); }

  // Fault injection for tests.
  void KillAgent(int i, int sig);
  void KillCoordinator(int sig);
  // Starts the coordinator again on the same port and data folder.
  absl::Status RestartCoordinator();
  absl::Status StartAgent(int i);
  Subprocess* coordinator() { return coordinator_.get(); }

  // SIGTERM to everything (agents first), then SIGKILL after a grace.
  void Stop();
  // Asks the coordinator to stop (SIGTERM), which ends every client stream;
  // safe from another thread while the owner waits on the farm.
  void Interrupt();
  std::string log_dir() const;

 private:
  absl::Status StartCoordinatorOn(const std::string& listen);
  absl::Status WriteTokens();
  absl::Status WriteCurveKeys();
  absl::Status StartAnalyzerOn(const std::string& bind);

  LocalFarmOptions options_;
  std::string address_;
  int port_ = 0;
  int metrics_port_ = 0;
  std::string analyzer_endpoint_;
  std::string diagnosis_endpoint_;
  std::string tokens_file_;
  std::string keys_dir_;
  std::string admin_token_;
  std::string agent_token_file_;
  std::map<std::string, std::string> team_tokens_;
  std::unique_ptr<Subprocess> coordinator_;
  std::unique_ptr<Subprocess> analyzer_;
  std::vector<std::unique_ptr<Subprocess>> agents_;
};

}  // namespace tunefarm

#endif  // TUNEFARM_CLI_LOCAL_FARM_H_
