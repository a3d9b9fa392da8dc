// The `tunefarm` command line's verbs, each a function over the user-facing
// gRPC service that prints in text or JSON and returns the process exit code
// (cli/exit_codes.h). Not thread-safe; one CLI invocation, one thread.
#ifndef TUNEFARM_CLI_FARM_CLIENT_H_
#define TUNEFARM_CLI_FARM_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/grpc_client.h"
#include "tunefarm/v1/farm.grpc.pb.h"

namespace tunefarm {

// Exit codes, documented in docs/cli.md: scripts tell bad input from
// failure.
enum ExitCode {
  kExitOk = 0,
  kExitFailure = 1,      // internal or storage failure
  kExitBadInput = 2,     // usage, unreadable or invalid spec, bad argument
  kExitNotFound = 3,     // unknown sweep
  kExitDenied = 4,       // unauthenticated or permission denied
  kExitUnavailable = 5,  // coordinator unreachable
  kExitSweepFailed = 6,  // the watched sweep failed or was cancelled
};

int ExitCodeFor(const absl::Status& status);

// The largest spec file `tunefarm submit` reads (the coordinator's YAML
// document limit, yamlf::kMaxDocumentBytes); a larger one exits 2.
inline constexpr int64_t kMaxSpecFileBytes = 1 << 20;

struct CliContext {
  std::string coordinator;  // host:port
  ClientSecurity security;  // TLS and bearer token
  bool json = false;        // --output json
  bool terminal = false;    // stdout is a terminal: live progress allowed
  // `watch` reconnects to a coordinator that went away for this long.
  absl::Duration reconnect_for = absl::Minutes(5);
};

// `tunefarm report`: the Markdown on stdout, the report JSON
// (format "json"), or the whole folder (docs/report.md) when out_dir is set.
struct ReportOptions {
  std::string format = "md";  // md | json
  std::string out_dir;
};

class FarmClient {
 public:
  explicit FarmClient(CliContext ctx);

  int Submit(const std::string& spec_path, const std::string& idempotency_key,
             bool watch, std::string* sweep_id_out = nullptr);
  int Status(const std::string& sweep_id);  // "" lists sweeps
  int Watch(const std::string& sweep_id);
  int Cancel(const std::string& sweep_id, const std::string& reason);
  int Rounds(const std::string& sweep_id);
  int Report(const std::string& sweep_id, const ReportOptions& options = {});
  int Boards();
  int Teams();
  int Drain(const std::string& board_id, const std::string& reason);
  int Admit(const std::string& board_id, const std::string& reason);
  int SetQuota(const v1::TeamQuota& quota);
  // `reserve` false lifts the reservation with the same board / labels.
  int Reserve(const v1::BoardReservation& reservation, bool reserve);
  // The closing summary: best configuration, speedup, report path.
  int Summary(const std::string& sweep_id);

  // For commands that combine several reads (cli/export_command.h).
  absl::Status FetchSweep(const std::string& sweep_id, v1::Sweep* sweep,
                          std::vector<v1::Round>* rounds);
  absl::Status FetchBoards(std::vector<v1::BoardInfo>* boards);
  const CliContext& context() const { return ctx_; }

 private:
  int Fail(const absl::Status& status, const std::string& what);
  // A multi-workload sweep's objective and each workload's best.
  void PrintWorkloads(const v1::Sweep& sweep);
  void PrintRounds(const v1::ListRoundsResponse& page);
  // After a submit: a warning on stderr when no registered board matches
  // the sweep's boards selector (it would wait for one).
  void WarnIfNoBoardMatches(const v1::Sweep& sweep);
  std::unique_ptr<grpc::ClientContext> Context(absl::Duration timeout) const;

  CliContext ctx_;
  std::unique_ptr<v1::TuneFarm::Stub> stub_;
};

}  // namespace tunefarm

#endif  // TUNEFARM_CLI_FARM_CLIENT_H_
