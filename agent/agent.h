// Agent: the daemon that serves one host's boards to the coordinator. It
// registers its boards, heartbeats, and runs one worker thread per board:
// lease a variant, keep the lease renewed while the board evaluates it,
// keep the profile bundle in the sink (durably), report the typed result
// until the coordinator answers, then release the bundle to the analyzers
// whatever the answer (a duplicate too: the coordinator may have committed
// the result and died before replying). A crash anywhere after the bundle
// is kept leaves it on disk, and the restarted agent sends it.
//
// Build/run overlap (AgentOptions::prefetch): while a board's current variant
// builds and runs, its worker leases the board's NEXT variants ahead
// (LeaseWorkRequest.prefetch) and builds them (Board::Prefetch) in parallel
// on background threads, renewing those leases too. How many: the board's
// measured build time over its evaluation time (medians of the latest few),
// rounded up, plus one; at least 1, at most AgentOptions::max_ahead and at
// most one more than the host's cores per board, so a compile never waits in
// front of the board; the compilers themselves share the host's cores
// (BuildVariant bounds them). The board still runs one variant at a time; a
// reporter thread per board keeps the bundle and reports the result while
// the next one runs (one report in flight, in order). A lease ahead the
// coordinator revokes is dropped unrun.
//
// Owns its boards. Run() blocks; Stop-by-flag from any thread. The client
// and the sink must outlive Run().
#ifndef TUNEFARM_AGENT_AGENT_H_
#define TUNEFARM_AGENT_AGENT_H_

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "agent/board.h"
#include "agent/coordinator_client.h"
#include "common/clock.h"
#include "tunefarm/v1/pipeline.pb.h"

namespace tunefarm {

// Where profile bundles go (the analyzers). Thread-safe.
class BundleSink {
 public:
  virtual ~BundleSink() = default;
  // Keeps `bundle` durably, not yet sent; it survives a crash of the agent
  // (and is then sent by the restarted agent).
  virtual absl::Status Keep(const v1::ProfileBundle& bundle) = 0;
  // Sends a bundle given to Keep(); its round's result has been answered.
  virtual void Release(const std::string& bundle_id) = 0;
  // False while the sink is backed up: the agent then leases no new work
  // (back-pressure) until it drains.
  virtual bool AcceptingWork() const { return true; }
};

struct AgentOptions {
  std::string agent_id;
  std::string node;
  // Longest pause between retries when the coordinator is unreachable.
  absl::Duration max_backoff = absl::Seconds(2);
  // Lease and build each board's next variants while the current one runs.
  bool prefetch = true;
  // Most leases one board holds ahead (1..Agent::kMostAhead).
  int max_ahead = 16;
  // What the agent's waits (heartbeats, renewals, retries, back-off) sleep
  // on; SystemClock() when null. Not owned. Durations it measures (build
  // and run times) are real time.
  Clock* clock = nullptr;
  // Called after each evaluated round (metrics). May be empty.
  std::function<void(const v1::RoundResult&, absl::Duration)> on_round;
};

class Agent {
 public:
  // The most leases a board may hold ahead (the coordinator's bound too).
  static constexpr int kMostAhead = 32;

  // `sink` may be null (no analyzers).
  Agent(AgentOptions options, CoordinatorClient* client, BundleSink* sink,
        std::vector<std::unique_ptr<Board>> boards);
  ~Agent();

  // Serves until `stop` becomes true. Returns once every worker stopped.
  void Run(const std::atomic<bool>& stop);

 private:
  // The latest durations of one kind, for a median that ignores outliers.
  struct RecentTimes {
    static constexpr size_t kKept = 9;
    std::deque<double> samples;
    void Add(double seconds);
    double Median() const;  // < 0 until measured
  };
  struct Slot;  // one board and its worker's state

  bool EnsureRegistered(const std::atomic<bool>& stop);
  void MarkUnregistered();
  void HeartbeatLoop(const std::atomic<bool>& stop);
  void Worker(Slot& slot, const std::atomic<bool>& stop);
  void RunLease(Slot& slot, const v1::WorkItem& work,
                const std::atomic<bool>& stop);
  // Leases the board's next variants ahead (as many as WantedAhead says)
  // and starts their builds in the background; gives up once `evaluated`
  // (the current variant ended) or `stop` becomes true.
  void LeaseAhead(Slot& slot, const std::atomic<bool>& evaluated,
                  const std::atomic<bool>& stop);
  // How many leases ahead the board's build and run times call for.
  int WantedAhead(Slot& slot);
  // Renews the leases held ahead; drops (and stops building) revoked ones.
  void RenewAhead(Slot& slot);
  // Moves the first lease held ahead whose build has ended (waiting for one
  // when none has) and that the coordinator did not revoke into `work`;
  // false when none is held, or on `stop`.
  bool TakeAhead(Slot& slot, v1::WorkItem* work, const std::atomic<bool>& stop);
  // Joins the slot's finished background builds (all of them, cancelling
  // any still running, when `all`).
  void ReapBuilds(Slot& slot, bool all);
  // Keeps the round's profile bundle on disk, then reports its result
  // until the coordinator answers (or `stop`); runs on the slot's reporter.
  // Returns the answer to the next lease the report asked for, if any.
  std::optional<v1::LeaseWorkResponse> Report(
      const std::string& board_id, const v1::ReportResultRequest& request,
      std::optional<v1::ProfileBundle> bundle, const std::atomic<bool>& stop);
  // Moves out the next lease the slot's last report brought, if any.
  std::optional<v1::LeaseWorkResponse> TakeNext(Slot& slot);
  // RenewLease: false when the coordinator answers that the lease is over
  // (an unreachable coordinator is not an answer).
  bool LeaseStillValid(const v1::WorkItem& work);
  absl::Duration heartbeat_interval();

  AgentOptions options_;
  Clock& clock_;
  CoordinatorClient* client_;
  BundleSink* sink_;
  std::vector<std::unique_ptr<Slot>> slots_;

  absl::Mutex mu_;
  bool registered_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration heartbeat_interval_ ABSL_GUARDED_BY(mu_) = absl::Seconds(1);
};

}  // namespace tunefarm

#endif  // TUNEFARM_AGENT_AGENT_H_
