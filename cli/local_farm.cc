#include "cli/local_farm.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/files.h"
#include "common/status_macros.h"
#include "ops/catalog.h"
#include "ops/spaces/space_file.h"
#include "pipeline/transport.h"

namespace tunefarm {

namespace {

// 32 hex characters from the kernel's random source.
absl::StatusOr<std::string> RandomToken() {
  FILE* f = std::fopen("/dev/urandom", "rb");
  if (f == nullptr) return absl::UnavailableError("cannot open /dev/urandom");
  unsigned char raw[16];
  const size_t n = std::fread(raw, 1, sizeof(raw), f);
  std::fclose(f);
  if (n != sizeof(raw)) return absl::UnavailableError("short random read");
  std::string hex;
  for (unsigned char c : raw)
    absl::StrAppend(&hex, absl::Hex(c, absl::kZeroPad2));
  return hex;
}

}  // namespace

absl::StatusOr<ReplayPlan> PrepareReplay(
    const std::string& space_file, const std::string& data_dir,
    const std::vector<std::string>& ops_dirs) {
  std::error_code ec;
  ReplayPlan plan;
  plan.space_file =
      std::filesystem::absolute(space_file, ec).lexically_normal().string();
  TF_ASSIGN_OR_RETURN(Space space, LoadSpaceFile(plan.space_file));
  if (space.best_index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(space_file,
                     ": no configuration in it passed; there is "
                     "nothing to tune"));
  }
  v1::OperatorManifest op = ManifestFromSpace(space);
  for (const std::string& dir : ops_dirs) {
    if (std::filesystem::exists(
            absl::StrCat(dir, "/", op.name(), "/", kManifestFileName), ec)) {
      op.set_name(absl::StrCat("replay_", op.name()));
      break;
    }
  }
  plan.operator_name = op.name();
  plan.device = space.device.empty() ? "an unnamed GPU" : space.device;
  plan.tool = space.tool;
  plan.configs = space.configs.size();
  plan.best_us = space.best_us;
  const std::string root = absl::StrCat(data_dir, "/replay");
  plan.ops_dir = absl::StrCat(root, "/ops");
  TF_RETURN_IF_ERROR(MakeDirs(absl::StrCat(plan.ops_dir, "/", op.name())));
  const std::string manifest = SpaceManifestYaml(space, op.name());
  // Names the catalog would refuse (two parameters that differ only in
  // case) are said here, before any process starts.
  TF_RETURN_IF_ERROR(ParseOperatorManifest(manifest, plan.space_file).status());
  TF_RETURN_IF_ERROR(WriteFileAtomic(
      absl::StrCat(plan.ops_dir, "/", op.name(), "/", kManifestFileName),
      manifest));
  // Names are at most 64 characters ([A-Za-z0-9._-]).
  std::string name = absl::StrCat("replay-", op.name());
  std::replace(name.begin(), name.end(), '_', '-');
  if (name.size() > 64) name.resize(64);
  plan.spec_path = absl::StrCat(root, "/", op.name(), ".yaml");
  const std::string spec = absl::StrCat(
      "# A guided sweep over the measured space ", plan.space_file, "\n# (",
      plan.configs, " configurations, measured on ", plan.device, " by ",
      plan.tool,
      "). Every number is replayed from the file.\n"
      "name: ",
      name, "\nteam: demo\noperator: ", op.name(),
      "\nworkload: recorded\n"
      "# The file's best recorded time: the sweep ends when it finds it.\n"
      "goal: {target_us: ",
      absl::StrFormat("%.17g", plan.best_us),
      "}\nstrategy: {name: guided, seed: 1}\n"
      "budget: {max_rounds: 300, time_limit: 10m, "
      "max_rounds_without_gain: 60}\n"
      "min_gain: 0.01\nboards: {kind: replay}\n"
      "measurement: {mode: independent}\n");
  TF_RETURN_IF_ERROR(WriteFileAtomic(plan.spec_path, spec));
  return plan;
}

std::string LocalFarm::team_token(const std::string& team) const {
  auto it = team_tokens_.find(team);
  return it == team_tokens_.end() ? "" : it->second;
}

absl::Status LocalFarm::WriteTokens() {
  const std::string run = options_.data_dir + "/run";
  std::string yaml = "tokens:\n";
  TF_ASSIGN_OR_RETURN(admin_token_, RandomToken());
  absl::StrAppend(&yaml, "  - {name: local-admin, role: admin, token: \"",
                  admin_token_, "\"}\n");
  TF_ASSIGN_OR_RETURN(std::string agent_token, RandomToken());
  absl::StrAppend(&yaml, "  - {name: local-agents, role: agent, token: \"",
                  agent_token, "\"}\n");
  for (const std::string& team : options_.teams) {
    TF_ASSIGN_OR_RETURN(std::string token, RandomToken());
    team_tokens_[team] = token;
    absl::StrAppend(&yaml, "  - {name: ", team, "-user, team: ", team,
                    ", role: user, token: \"", token, "\"}\n");
  }
  tokens_file_ = run + "/tokens.yaml";
  agent_token_file_ = run + "/agent.token";
  TF_RETURN_IF_ERROR(WriteFileAtomic(tokens_file_, yaml));
  return WriteFileAtomic(agent_token_file_, agent_token + "\n");
}

namespace {

// Writes a new key pair as <path>.key and <path>.pub; returns the public key.
absl::StatusOr<std::string> WriteNewKeyPair(const std::string& path) {
  TF_ASSIGN_OR_RETURN(CurveKeyPair keys, NewCurveKeyPair());
  TF_RETURN_IF_ERROR(WriteCurveKeyPair(path + ".key", keys));
  TF_RETURN_IF_ERROR(WriteFileAtomic(path + ".pub", keys.public_key + "\n"));
  return keys.public_key;
}

// The public key in <path>.pub, making the pair first when <path>.key is
// missing: keys already handed out stay valid.
absl::StatusOr<std::string> KeepOrMakeKeyPair(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path + ".key", ec)) {
    return WriteNewKeyPair(path);
  }
  TF_ASSIGN_OR_RETURN(std::string pub, ReadFile(path + ".pub"));
  return std::string(absl::StripAsciiWhitespace(pub));
}

}  // namespace

absl::Status ValidCurveAgentName(const std::string& name) {
  const bool ok = !name.empty() && name.size() <= 253 &&
                  std::isalnum(static_cast<unsigned char>(name.front())) &&
                  std::all_of(name.begin(), name.end(), [](char c) {
                    return std::isalnum(static_cast<unsigned char>(c)) ||
                           c == '-' || c == '.' || c == '_';
                  });
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("agent name '", name,
                   "' is not a key name: 1-253 letters, digits, '-', '.' or "
                   "'_', starting with a letter or digit (a node name)"));
}

absl::Status WriteFarmCurveKeys(const std::string& dir,
                                const std::vector<std::string>& agents) {
  for (const std::string& agent : agents) {
    TF_RETURN_IF_ERROR(ValidCurveAgentName(agent));
  }
  TF_RETURN_IF_ERROR(MakeDirs(dir));
  const std::string agents_dir = dir + "/agents";
  std::error_code ec;
  if (agents.empty() && !std::filesystem::is_directory(agents_dir, ec)) {
    std::map<std::string, std::string> pub;
    for (const char* name : {"coordinator", "analyzer", "agent"}) {
      TF_ASSIGN_OR_RETURN(pub[name],
                          WriteNewKeyPair(absl::StrCat(dir, "/", name)));
    }
    TF_RETURN_IF_ERROR(
        WriteFileAtomic(dir + "/coordinator.allow",
                        absl::StrCat(pub["analyzer"], " analyzer\n")));
    return WriteFileAtomic(dir + "/analyzer.allow",
                           absl::StrCat(pub["agent"], " agent\n"));
  }
  // One pair per agent; run again to add agents without changing the keys
  // already handed out.
  TF_ASSIGN_OR_RETURN(std::string analyzer_pub,
                      KeepOrMakeKeyPair(dir + "/analyzer"));
  TF_RETURN_IF_ERROR(KeepOrMakeKeyPair(dir + "/coordinator").status());
  TF_RETURN_IF_ERROR(WriteFileAtomic(
      dir + "/coordinator.allow", absl::StrCat(analyzer_pub, " analyzer\n")));
  TF_RETURN_IF_ERROR(MakeDirs(agents_dir));
  for (const std::string& agent : agents) {
    TF_RETURN_IF_ERROR(
        KeepOrMakeKeyPair(absl::StrCat(agents_dir, "/", agent)).status());
  }
  // The allow-list is every agent whose pair is in agents/: deleting an
  // agent's files and running keygen again revokes it alone.
  std::vector<std::string> names;
  for (const auto& entry :
       std::filesystem::directory_iterator(agents_dir, ec)) {
    const std::filesystem::path& p = entry.path();
    if (p.extension() == ".key") names.push_back(p.stem().string());
  }
  if (ec) {
    return absl::InternalError(
        absl::StrCat("cannot list ", agents_dir, ": ", ec.message()));
  }
  std::sort(names.begin(), names.end());
  std::string allowed;
  for (const std::string& name : names) {
    TF_ASSIGN_OR_RETURN(std::string pub,
                        KeepOrMakeKeyPair(absl::StrCat(agents_dir, "/", name)));
    absl::StrAppend(&allowed, pub, " agent-", name, "\n");
  }
  return WriteFileAtomic(dir + "/analyzer.allow", allowed);
}

absl::Status LocalFarm::WriteCurveKeys() {
  keys_dir_ = options_.data_dir + "/run/keys";
  TF_RETURN_IF_ERROR(MakeDirs(keys_dir_));
  std::vector<std::string> names = {"coordinator", "analyzer"};
  for (int i = 0; i < agent_count(); ++i) {
    names.push_back(absl::StrCat("agent-", i + 1));
  }
  std::string agents_allowed;
  for (const std::string& name : names) {
    TF_ASSIGN_OR_RETURN(CurveKeyPair keys, NewCurveKeyPair());
    TF_RETURN_IF_ERROR(
        WriteCurveKeyPair(absl::StrCat(keys_dir_, "/", name, ".key"), keys));
    TF_RETURN_IF_ERROR(WriteFileAtomic(
        absl::StrCat(keys_dir_, "/", name, ".pub"), keys.public_key + "\n"));
    if (name == "analyzer") {
      TF_RETURN_IF_ERROR(
          WriteFileAtomic(keys_dir_ + "/coordinator.allow",
                          absl::StrCat(keys.public_key, " analyzer-1\n")));
    } else if (name != "coordinator") {
      absl::StrAppend(&agents_allowed, keys.public_key, " ", name, "\n");
    }
  }
  return WriteFileAtomic(keys_dir_ + "/analyzer.allow", agents_allowed);
}

LocalFarm::LocalFarm(LocalFarmOptions options) : options_(std::move(options)) {
  agents_.resize(options_.agents + (options_.cpu_boards > 0 ? 1 : 0));
}

LocalFarm::~LocalFarm() { Stop(); }

std::string LocalFarm::log_dir() const { return options_.data_dir + "/logs"; }

absl::Status LocalFarm::StartCoordinatorOn(const std::string& listen) {
  const std::string run = options_.data_dir + "/run";
  (void)::unlink((run + "/coordinator.port").c_str());
  (void)::unlink((run + "/diagnosis.endpoint").c_str());
  (void)::unlink((run + "/coordinator.metrics").c_str());
  std::vector<std::string> argv = {options_.bin_dir + "/tunefarm-coordinator",
                                   "--data_dir",
                                   options_.data_dir,
                                   "--listen",
                                   listen,
                                   "--port_file",
                                   run + "/coordinator.port",
                                   "--diagnosis_endpoint_file",
                                   run + "/diagnosis.endpoint",
                                   "--metrics_port_file",
                                   run + "/coordinator.metrics",
                                   "--lease_ms",
                                   absl::StrCat(options_.lease_ms),
                                   "--heartbeat_ms",
                                   absl::StrCat(options_.heartbeat_ms),
                                   "--agent_timeout_ms",
                                   absl::StrCat(options_.agent_timeout_ms),
                                   "--log_level",
                                   options_.log_level};
  // A restarted coordinator keeps its diagnosis endpoint, so analyzers
  // already connected to it keep delivering.
  if (!diagnosis_endpoint_.empty()) {
    argv.push_back("--diagnosis_bind");
    argv.push_back(diagnosis_endpoint_);
  }
  if (!keys_dir_.empty()) {
    argv.insert(argv.end(),
                {"--curve_key_file", keys_dir_ + "/coordinator.key",
                 "--curve_allow_list", keys_dir_ + "/coordinator.allow"});
  }
  if (!tokens_file_.empty()) {
    argv.push_back("--tokens_file");
    argv.push_back(tokens_file_);
  }
  if (options_.metrics_team_labels) argv.push_back("--metrics_team_labels");
  if (!options_.policy_file.empty()) {
    argv.push_back("--policy_file");
    argv.push_back(options_.policy_file);
  }
  for (const std::string& d : options_.ops_dirs) {
    if (d.empty()) continue;
    argv.push_back("--ops_dir");
    argv.push_back(d);
  }
  TF_ASSIGN_OR_RETURN(coordinator_,
                      Subprocess::Start(argv, log_dir() + "/coordinator.log"));
  auto port = WaitForFile(run + "/coordinator.port", absl::Seconds(30));
  if (!port.ok()) {
    return absl::UnavailableError(
        absl::StrCat("the coordinator did not start (see ", log_dir(),
                     "/coordinator.log): ", port.status().message()));
  }
  if (!absl::SimpleAtoi(*port, &port_)) {
    return absl::InternalError(absl::StrCat("bad port file: ", *port));
  }
  address_ = absl::StrCat("127.0.0.1:", port_);
  TF_ASSIGN_OR_RETURN(
      diagnosis_endpoint_,
      WaitForFile(run + "/diagnosis.endpoint", absl::Seconds(10)));
  auto metrics = WaitForFile(run + "/coordinator.metrics", absl::Seconds(10));
  if (metrics.ok()) (void)absl::SimpleAtoi(*metrics, &metrics_port_);
  return absl::OkStatus();
}

absl::Status LocalFarm::Start() {
  TF_RETURN_IF_ERROR(MakeDirs(log_dir()));
  TF_RETURN_IF_ERROR(MakeDirs(options_.data_dir + "/run"));
  if (options_.auth) TF_RETURN_IF_ERROR(WriteTokens());
  if (options_.curve) TF_RETURN_IF_ERROR(WriteCurveKeys());
  TF_RETURN_IF_ERROR(StartCoordinatorOn("127.0.0.1:0"));
  TF_RETURN_IF_ERROR(StartAnalyzerOn("tcp://127.0.0.1:*"));
  for (int i = 0; i < agent_count(); ++i) {
    TF_RETURN_IF_ERROR(StartAgent(i));
  }
  // An agent that cannot serve its boards (no GPU found, bad flag) exits at
  // once: say so now rather than leave the sweep waiting for boards.
  for (int i = 0; i < agent_count(); ++i) {
    if (agents_[i]->Wait(absl::Milliseconds(i == 0 ? 1500 : 0)).has_value()) {
      const std::string log = absl::StrCat(log_dir(), "/agent-", i + 1, ".log");
      std::string tail = ReadFile(log).value_or("");
      if (tail.size() > 2000) tail = tail.substr(tail.size() - 2000);
      return absl::FailedPreconditionError(absl::StrCat(
          "agent-", i + 1, " exited at start (", log, "):\n", tail));
    }
  }
  return absl::OkStatus();
}

absl::Status LocalFarm::StartAnalyzerOn(const std::string& bind) {
  const std::string endpoint_file =
      options_.data_dir + "/run/analyzer.endpoint";
  (void)::unlink(endpoint_file.c_str());
  std::vector<std::string> argv = {options_.bin_dir + "/tunefarm-analyzer",
                                   "--bind",
                                   bind,
                                   "--endpoint_file",
                                   endpoint_file,
                                   "--coordinator",
                                   diagnosis_endpoint_,
                                   "--id",
                                   "analyzer-1",
                                   "--log_level",
                                   options_.log_level,
                                   "--metrics_port_file",
                                   options_.data_dir + "/run/analyzer.metrics"};
  if (!keys_dir_.empty()) {
    argv.insert(
        argv.end(),
        {"--curve_key_file", keys_dir_ + "/analyzer.key", "--curve_allow_list",
         keys_dir_ + "/analyzer.allow", "--coordinator_public_key_file",
         keys_dir_ + "/coordinator.pub"});
  }
  TF_ASSIGN_OR_RETURN(analyzer_,
                      Subprocess::Start(argv, log_dir() + "/analyzer.log"));
  auto endpoint = WaitForFile(endpoint_file, absl::Seconds(30));
  if (!endpoint.ok()) {
    return absl::UnavailableError(
        absl::StrCat("the analyzer did not start (see ", log_dir(),
                     "/analyzer.log): ", endpoint.status().message()));
  }
  analyzer_endpoint_ = *endpoint;
  return absl::OkStatus();
}

void LocalFarm::KillAnalyzer(int sig) {
  if (analyzer_) {
    analyzer_->Signal(sig);
    analyzer_->Wait(absl::Seconds(10));
  }
}

absl::Status LocalFarm::RestartAnalyzer() {
  if (analyzer_ && analyzer_->running()) KillAnalyzer(SIGKILL);
  return StartAnalyzerOn(analyzer_endpoint_);
}

absl::Status LocalFarm::StartAgent(int i) {
  if (i < 0 || i >= static_cast<int>(agents_.size())) {
    return absl::OutOfRangeError(absl::StrCat("no agent ", i));
  }
  const std::string id = absl::StrCat("agent-", i + 1);
  std::string boards =
      options_.board_kind == "cuda"
          ? std::string("cuda:all")
          : absl::StrCat(options_.board_kind, ":", options_.boards_per_agent);
  if (!options_.boards_flag.empty()) boards = options_.boards_flag;
  if (i >= options_.agents) boards = absl::StrCat("cpu:", options_.cpu_boards);
  std::vector<std::string> argv = {
      options_.bin_dir + "/tunefarm-agent",
      "--coordinator",
      address_,
      "--agent_id",
      id,
      "--node",
      "localhost",
      "--boards",
      boards,
      "--analyzer",
      analyzer_endpoint_,
      "--work_dir",
      options_.data_dir + "/work",
      "--bin_dir",
      options_.bin_dir,
      "--sim_delay_ms",
      absl::StrCat(options_.sim_delay_ms),
      "--seed",
      absl::StrCat(100 * (i + 1)),
      "--log_level",
      options_.log_level,
      "--metrics_port_file",
      absl::StrCat(options_.data_dir, "/run/", id, ".metrics")};
  if (!agent_token_file_.empty()) {
    argv.push_back("--token_file");
    argv.push_back(agent_token_file_);
  }
  if (!keys_dir_.empty()) {
    argv.insert(argv.end(),
                {"--curve_key_file", absl::StrCat(keys_dir_, "/", id, ".key"),
                 "--analyzer_public_key_file", keys_dir_ + "/analyzer.pub"});
  }
  argv.insert(argv.end(), options_.agent_flags.begin(),
              options_.agent_flags.end());
  TF_ASSIGN_OR_RETURN(
      agents_[i],
      Subprocess::Start(argv, absl::StrCat(log_dir(), "/", id, ".log")));
  return absl::OkStatus();
}

std::map<std::string, int> LocalFarm::MetricsPorts() const {
  std::map<std::string, int> ports;
  if (metrics_port_ > 0) ports["coordinator"] = metrics_port_;
  std::vector<std::string> names = {"analyzer"};
  for (int i = 0; i < agent_count(); ++i) {
    names.push_back(absl::StrCat("agent-", i + 1));
  }
  for (const std::string& name : names) {
    auto text =
        WaitForFile(absl::StrCat(options_.data_dir, "/run/", name, ".metrics"),
                    absl::Seconds(5));
    int port = 0;
    if (text.ok() && absl::SimpleAtoi(*text, &port)) ports[name] = port;
  }
  return ports;
}

void LocalFarm::KillAgent(int i, int sig) {
  if (i >= 0 && i < static_cast<int>(agents_.size()) && agents_[i]) {
    agents_[i]->Signal(sig);
    if (sig == SIGKILL) agents_[i]->Wait(absl::Seconds(10));
  }
}

void LocalFarm::KillCoordinator(int sig) {
  if (coordinator_) {
    coordinator_->Signal(sig);
    coordinator_->Wait(absl::Seconds(10));
  }
}

absl::Status LocalFarm::RestartCoordinator() {
  if (coordinator_ && coordinator_->running()) KillCoordinator(SIGKILL);
  return StartCoordinatorOn(absl::StrCat("127.0.0.1:", port_));
}

void LocalFarm::Interrupt() {
  if (coordinator_) ::kill(coordinator_->pid(), SIGTERM);
}

void LocalFarm::Stop() {
  for (auto& a : agents_) {
    if (a) a->Signal(SIGTERM);
  }
  for (auto& a : agents_) {
    if (a) a->Stop(absl::Seconds(5));
  }
  if (analyzer_) analyzer_->Stop(absl::Seconds(5));
  if (coordinator_) coordinator_->Stop(absl::Seconds(5));
}

}  // namespace tunefarm
