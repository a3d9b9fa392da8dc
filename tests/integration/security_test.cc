// Security as a standing test (issue 16), against a whole farm of real
// processes on loopback (LocalFarm: CurveZMQ keys per process, bearer
// tokens on):
// - forged and garbage frames to every ZeroMQ endpoint (the coordinator's
//   diagnosis ROUTER, the analyzer's bundle ROUTER) are refused: plain
//   ZeroMQ, a CURVE client with an unknown key, a CURVE client with a key
//   allow-listed at the other endpoint, raw bytes. A forged diagnosis with
//   the exact sweep, round, epoch and bundle id never lands; the genuine
//   diagnoses still do;
// - the CLI's doors: `submit /dev/zero`, an oversized and a non-UTF-8 spec,
//   labels no board can carry (exit 2, saying why), a selector no board
//   matches yet (a warning), another team's sweep id answered exactly like
//   an unknown one (exit 3).
// The gRPC role matrix (every RPC as nobody, as the wrong team, with the
// wrong role) is auth_test's.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/files.h"
#include "common/subprocess.h"
#include "pipeline/transport.h"
#include "tests/integration/farm_fixture.h"

namespace tunefarm {
namespace {

constexpr char kForgedOp[] = "FORGED_BY_ATTACKER";

std::string SpecYaml(int rounds, const std::string& team = "demo",
                     const std::string& boards = "{kind: sim}") {
  return absl::StrCat("name: security\nteam: ", team,
                      "\noperator: sim_matmul\nworkload: square_2k\n"
                      "goal: {speedup: 100}\nstrategy: grid\n"
                      "budget: {max_rounds: ",
                      rounds, ", max_rounds_without_gain: ", rounds,
                      "}\nmin_gain: 0.02\nboards: ", boards,
                      "\nmeasurement: {warmup: 1, samples: 5}\n");
}

// Writes `bytes` to 127.0.0.1:<port of endpoint> as a raw TCP client.
void SendRawTcp(const std::string& endpoint, const std::string& bytes) {
  int port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(endpoint.substr(endpoint.rfind(':') + 1), &port))
      << endpoint;
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  (void)::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  absl::SleepFor(absl::Milliseconds(50));
  ::close(fd);
}

// Every way an attacker on the host can try to write to `endpoint`: each
// `msg` goes out as plain ZeroMQ, with a fresh unknown CURVE key, and with
// `insider` (a real key of the farm that this endpoint must not take), then
// raw garbage follows. Returns how many sends ZeroMQ even accepted.
int Attack(const std::string& endpoint, const std::string& server_key,
           const CurveKeyPair& insider,
           const std::vector<v1::PipelineMessage>& msgs) {
  std::vector<std::unique_ptr<PipelineSender>> senders;
  if (auto plain = PipelineSender::Connect({endpoint}); plain.ok()) {
    senders.push_back(*std::move(plain));
  }
  std::vector<CurveKeyPair> keys = {insider};
  if (auto stranger = NewCurveKeyPair(); stranger.ok()) {
    keys.push_back(*stranger);
  }
  for (const CurveKeyPair& k : keys) {
    PipelineSecurity s;
    s.own = k;
    s.server_public_key = server_key;
    if (auto sender = PipelineSender::Connect({endpoint}, s); sender.ok()) {
      senders.push_back(*std::move(sender));
    }
  }
  int accepted = 0;
  for (auto& sender : senders) {
    for (const v1::PipelineMessage& m : msgs) {
      accepted += sender->Send(m, absl::Milliseconds(300)).ok() ? 1 : 0;
    }
  }
  SendRawTcp(endpoint, "GET /metrics HTTP/1.1\r\n\r\n");
  std::string greeting(64, '\0');
  greeting[0] = '\xff';
  greeting[9] = '\x7f';
  greeting[10] = 3;
  greeting.replace(12, 4, "NULL");
  SendRawTcp(endpoint, greeting + std::string(4096, '\x01'));
  SendRawTcp(endpoint, std::string(256 << 10, '\xa5'));
  return accepted;
}

class SecurityTest : public FarmFixture {
 protected:
  std::string KeyFile(const std::string& name) const {
    return absl::StrCat(farm_->keys_dir(), "/", name);
  }
  CurveKeyPair Keys(const std::string& name) const {
    absl::StatusOr<CurveKeyPair> k = LoadCurveKeyPair(KeyFile(name + ".key"));
    EXPECT_TRUE(k.ok()) << k.status();
    return k.ok() ? *k : CurveKeyPair();
  }

  // Runs the CLI as `team`'s user; its exit code, stderr in `*err`.
  int Cli(const std::vector<std::string>& args, const std::string& team,
          std::string* err = nullptr) {
    const std::string token_file = absl::StrCat(dir_, "/", team, ".token");
    EXPECT_TRUE(WriteFileAtomic(token_file, farm_->team_token(team)).ok());
    std::vector<std::string> argv = {
        absl::StrCat(kFarmBinDir, "/tunefarm"), "--coordinator",
        farm_->coordinator_address(), "--token_file", token_file};
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string log = absl::StrCat(dir_, "/cli-", ++cli_runs_, ".log");
    auto proc = Subprocess::Start(argv, log);
    EXPECT_TRUE(proc.ok()) << proc.status();
    if (!proc.ok()) return -1;
    std::optional<int> status = (*proc)->Wait(absl::Seconds(60));
    EXPECT_TRUE(status.has_value())
        << "the CLI hung: " << absl::StrJoin(argv, " ");
    if (err != nullptr) *err = ReadFile(log).value_or("");
    return status.has_value() && WIFEXITED(*status) ? WEXITSTATUS(*status) : -1;
  }

  int cli_runs_ = 0;
};

TEST_F(SecurityTest, ForgedAndGarbageFramesToEveryZeroMqEndpointAreRefused) {
  if (!CheckCurveAvailable().ok()) GTEST_SKIP() << "libzmq without CURVE";
  LocalFarmOptions o;
  o.agents = 1;
  o.boards_per_agent = 1;
  o.cpu_boards = 0;
  // Bundles sent to the dead analyzer come back soon after it restarts.
  o.agent_flags = {"--bundle_ack_timeout_ms=2000"};
  StartFarm(o);
  ASSERT_FALSE(farm_->keys_dir().empty()) << "the farm runs without CURVE";

  // No genuine diagnosis can land while the forgeries are tried.
  farm_->KillAnalyzer(SIGKILL);
  const std::string id = Submit(SpecYaml(3));
  ASSERT_EQ(WaitFinished(id, absl::Seconds(120)).state(),
            v1::SWEEP_STATE_SUCCEEDED);
  std::vector<v1::Round> done;
  const v1::ListRoundsResponse finished = Rounds(id);
  for (const v1::Round& r : finished.rounds()) {
    if (r.state() == v1::ROUND_STATE_DONE && !r.result().bundle_id().empty()) {
      done.push_back(r);
    }
  }
  ASSERT_FALSE(done.empty()) << "no round produced a profile bundle";

  // Forged diagnoses naming exactly what the coordinator leased out.
  std::vector<v1::PipelineMessage> forged;
  for (const v1::Round& r : done) {
    v1::PipelineMessage m;
    m.set_version(kPipelineVersion);
    v1::Diagnosis* d = m.mutable_diagnosis();
    d->set_sweep_id(id);
    d->set_round_id(r.round_id());
    d->set_epoch(r.lease().epoch());
    d->set_bundle_id(r.result().bundle_id());
    d->set_analyzer_id("attacker");
    d->add_hotspots()->set_op_name(kForgedOp);
    forged.push_back(m);
  }
  const std::string coordinator_pub =
      LoadCurvePublicKey(KeyFile("coordinator.pub")).value_or("");
  // The agent's key is genuine, but only the analyzer takes it.
  const int accepted = Attack(farm_->diagnosis_endpoint(), coordinator_pub,
                              Keys("agent-1"), forged);
  EXPECT_EQ(accepted, 0) << "a forged diagnosis got through a handshake";
  absl::SleepFor(absl::Seconds(1));
  const v1::ListRoundsResponse after_attack = Rounds(id);
  for (const v1::Round& r : after_attack.rounds()) {
    EXPECT_FALSE(r.has_diagnosis())
        << "round " << r.round_id() << " got a diagnosis from "
        << r.diagnosis().analyzer_id() << " while no analyzer ran";
  }

  // Forged bundles to the analyzer, which would have made it diagnose them.
  ASSERT_TRUE(farm_->RestartAnalyzer().ok());
  std::vector<v1::PipelineMessage> bundles;
  for (const v1::Round& r : done) {
    v1::PipelineMessage m;
    m.set_version(kPipelineVersion);
    v1::ProfileBundle* b = m.mutable_bundle();
    b->set_bundle_id(r.result().bundle_id());
    b->set_sweep_id(id);
    b->set_round_id(r.round_id());
    b->set_epoch(r.lease().epoch());
    b->set_profiler("msprof");
    v1::ProfileFile* f = b->add_files();
    f->set_path("PROF_1/mindstudio_profiler_output/op_summary_1.csv");
    f->set_content(absl::StrCat("Op Name,OP Type,Task Duration(us)\n",
                                kForgedOp, ",MatMul,999999\n"));
    bundles.push_back(m);
  }
  const std::string analyzer_pub =
      LoadCurvePublicKey(KeyFile("analyzer.pub")).value_or("");
  // The coordinator's key is genuine, but the analyzer takes only agents.
  EXPECT_EQ(Attack(farm_->analyzer_endpoint(), analyzer_pub,
                   Keys("coordinator"), bundles),
            0)
      << "a forged bundle got through a handshake";

  // The genuine bundles (kept in the agent's outbox) are diagnosed.
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  std::vector<v1::Round> rounds;
  auto all_diagnosed = [&] {
    rounds.clear();
    const v1::ListRoundsResponse now = Rounds(id);
    for (const v1::Round& r : now.rounds()) rounds.push_back(r);
    for (const v1::Round& r : rounds) {
      if (r.state() == v1::ROUND_STATE_DONE &&
          !r.result().bundle_id().empty() && !r.has_diagnosis()) {
        return false;
      }
    }
    return true;
  };
  while (!all_diagnosed() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(200));
  }
  for (const v1::Round& r : rounds) {
    if (r.result().bundle_id().empty()) continue;
    ASSERT_TRUE(r.has_diagnosis())
        << "round " << r.round_id() << ": genuine diagnosis lost";
    EXPECT_EQ(r.diagnosis().analyzer_id(), "analyzer-1");
    EXPECT_EQ(r.diagnosis().bundle_id(), r.result().bundle_id());
    for (const v1::Hotspot& h : r.diagnosis().hotspots()) {
      EXPECT_NE(h.op_name(), kForgedOp) << "round " << r.round_id();
    }
  }
  // The analyzer saw none of the forged bundles: every one it took was
  // from the agent.
  const std::string log =
      ReadFile(farm_->log_dir() + "/analyzer.log").value_or("");
  EXPECT_FALSE(absl::StrContains(log, kForgedOp));
  EXPECT_TRUE(absl::StrContains(log, "refused a ZeroMQ peer")) << log;
}

TEST_F(SecurityTest, CliDoorsAreBoundedAndIdsCannotBeProbed) {
  LocalFarmOptions o;
  o.agents = 1;
  o.boards_per_agent = 1;
  o.cpu_boards = 0;
  o.teams = {"alpha", "beta"};
  StartFarm(o);
  std::string err;

  // Unbounded and binary input stops at the limit, exit 2, saying why.
  EXPECT_EQ(Cli({"submit", "/dev/zero"}, "alpha", &err), 2);
  EXPECT_TRUE(absl::StrContains(err, "/dev/zero is larger than")) << err;
  const std::string big = dir_ + "/big.yaml";
  {
    std::ofstream f(big);
    f << SpecYaml(2, "alpha") << "# " << std::string(5 << 20, 'x') << "\n";
  }
  EXPECT_EQ(Cli({"submit", big}, "alpha", &err), 2);
  EXPECT_TRUE(absl::StrContains(err, "the limit for a sweep spec")) << err;
  const std::string binary = dir_ + "/binary.yaml";
  ASSERT_TRUE(
      WriteFileAtomic(binary, "name: \xff\xfe\x00\x01\n" + SpecYaml(2)).ok());
  EXPECT_EQ(Cli({"submit", binary}, "alpha", &err), 2);
  EXPECT_TRUE(absl::StrContains(err, "not UTF-8")) << err;

  // Labels no board can carry: refused at submit.
  const std::string shell = dir_ + "/shell.yaml";
  ASSERT_TRUE(WriteFileAtomic(
                  shell, SpecYaml(2, "alpha",
                                  "{kind: sim, labels: {pool: \"$(reboot)\"}}"))
                  .ok());
  EXPECT_EQ(Cli({"submit", shell}, "alpha", &err), 2);
  EXPECT_TRUE(absl::StrContains(err, "can match no board")) << err;
  // Possible labels that no registered board has: accepted with a warning.
  const std::string nowhere = dir_ + "/nowhere.yaml";
  ASSERT_TRUE(
      WriteFileAtomic(
          nowhere, SpecYaml(2, "alpha", "{kind: sim, labels: {pool: nowhere}}"))
          .ok());
  EXPECT_EQ(Cli({"submit", nowhere}, "alpha", &err), 0) << err;
  EXPECT_TRUE(absl::StrContains(err, "warning: no registered board matches"))
      << err;

  // Another team's sweep id answers exactly like an unknown one.
  const std::string spec = dir_ + "/alpha.yaml";
  ASSERT_TRUE(WriteFileAtomic(spec, SpecYaml(2, "alpha")).ok());
  std::string out;
  ASSERT_EQ(Cli({"submit", spec}, "alpha", &out), 0) << out;
  const size_t at = out.find("submitted ");
  ASSERT_NE(at, std::string::npos) << out;
  const std::string id = out.substr(at + 10, out.find(' ', at + 10) - at - 10);
  std::string theirs, unknown;
  for (const char* verb : {"status", "rounds", "report", "cancel"}) {
    EXPECT_EQ(Cli({verb, id}, "beta", &theirs), 3) << verb << ": " << theirs;
    EXPECT_EQ(Cli({verb, "sw-999999"}, "beta", &unknown), 3) << verb;
    EXPECT_EQ(absl::StrReplaceAll(theirs, {{id, "<id>"}}),
              absl::StrReplaceAll(unknown, {{"sw-999999", "<id>"}}))
        << verb;
  }
  EXPECT_EQ(Cli({"status", id}, "alpha", &out), 0) << out;
}

// `tunefarm keygen DIR --agent NODE`: each agent its own key pair, which the
// analyzer lets in by name; running keygen again adds agents without
// changing handed-out keys, and deleting one agent's files then revokes it
// alone (the allow-list is read on every handshake: no restart).
TEST(CurveKeygenTest, EachAgentHasItsOwnKeyAndIsRevokedAlone) {
  if (!CheckCurveAvailable().ok()) GTEST_SKIP() << CheckCurveAvailable();
  absl::StatusOr<std::string> dir = MakeTempDir("curve_keygen_test");
  ASSERT_TRUE(dir.ok()) << dir.status();
  const std::string keys = *dir + "/keys";
  EXPECT_TRUE(absl::IsInvalidArgument(
      WriteFarmCurveKeys(keys, {"node-a", "x;rm -rf"})));
  ASSERT_TRUE(WriteFarmCurveKeys(keys, {"node-a", "node-b"}).ok());
  const std::string analyzer_pub = ReadFile(keys + "/analyzer.pub").value();
  const std::string a_key = ReadFile(keys + "/agents/node-a.key").value();
  ASSERT_TRUE(WriteFarmCurveKeys(keys, {"node-c"}).ok());
  EXPECT_EQ(ReadFile(keys + "/analyzer.pub").value(), analyzer_pub);
  EXPECT_EQ(ReadFile(keys + "/agents/node-a.key").value(), a_key);
  EXPECT_NE(ReadFile(keys + "/agents/node-b.key").value(), a_key);

  absl::StatusOr<PipelineSecurity> analyzer = PipelineSecurityFromFiles(
      keys + "/analyzer.key", keys + "/analyzer.allow", "");
  ASSERT_TRUE(analyzer.ok()) << analyzer.status();
  auto receiver = PipelineReceiver::Bind("tcp://127.0.0.1:*", *analyzer);
  ASSERT_TRUE(receiver.ok()) << receiver.status();
  // Sends one bundle as `node`'s agent; the allow-list name it arrived
  // under, or "" when it was not let in.
  auto deliver = [&](const std::string& node) -> std::string {
    absl::StatusOr<PipelineSecurity> agent = PipelineSecurityFromFiles(
        keys + "/agents/" + node + ".key", "", keys + "/analyzer.pub");
    if (!agent.ok()) return "";
    auto sender =
        PipelineSender::Connect({(*receiver)->bound_endpoint()}, *agent);
    if (!sender.ok()) return "";
    v1::PipelineMessage m;
    m.mutable_bundle()->set_bundle_id("b-" + node);
    if (!(*sender)->Send(m, absl::Milliseconds(1500)).ok()) return "";
    absl::StatusOr<PipelineDelivery> got =
        (*receiver)->Receive(absl::Seconds(5));
    if (!got.ok()) return "";
    EXPECT_EQ(got->message.bundle().bundle_id(), "b-" + node);
    return got->identity;
  };
  EXPECT_EQ(deliver("node-a"), "agent-node-a");
  EXPECT_EQ(deliver("node-b"), "agent-node-b");
  EXPECT_EQ(deliver("node-c"), "agent-node-c");

  // Revoke node-a: its files go, keygen rewrites the allow-list.
  const std::string revoked = keys + "/agents/node-a.key";
  const std::string kept_copy = *dir + "/node-a.key";
  ASSERT_TRUE(WriteFileAtomic(kept_copy, a_key).ok());
  ASSERT_EQ(std::remove(revoked.c_str()), 0);
  ASSERT_EQ(std::remove((keys + "/agents/node-a.pub").c_str()), 0);
  ASSERT_TRUE(WriteFarmCurveKeys(keys).ok());
  EXPECT_EQ(ReadFile(keys + "/analyzer.allow")->find("node-a"),
            std::string::npos);
  ASSERT_TRUE(WriteFileAtomic(revoked, a_key).ok());  // the thief's copy
  EXPECT_EQ(deliver("node-a"), "") << "a revoked agent was let in";
  EXPECT_EQ(deliver("node-b"), "agent-node-b");
  receiver->reset();
  EXPECT_TRUE(RemoveAll(*dir).ok());
}

}  // namespace
}  // namespace tunefarm
