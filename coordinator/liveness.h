// AgentLiveness: when each agent was last heard from, on any call. The gRPC
// threads stamp it as a call arrives, before the call waits for the control
// loop, so a loop slowed by lease traffic or slow commits cannot make a
// live agent look silent; the Coordinator's Tick reads it.
//
// Thread-safe. The clock must outlive it.
#ifndef TUNEFARM_COORDINATOR_LIVENESS_H_
#define TUNEFARM_COORDINATOR_LIVENESS_H_

#include <map>
#include <optional>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace tunefarm {

class AgentLiveness {
 public:
  explicit AgentLiveness(Clock* clock) : clock_(clock) {}

  // The agent called just now.
  void Heard(const std::string& agent_id) {
    if (agent_id.empty()) return;
    const absl::Time now = clock_->Now();
    absl::MutexLock lock(&mu_);
    absl::Time& last = heard_[agent_id];
    if (now > last) last = now;
  }
  // When it last called; nullopt when never.
  std::optional<absl::Time> LastHeard(const std::string& agent_id) const {
    absl::MutexLock lock(&mu_);
    auto it = heard_.find(agent_id);
    if (it == heard_.end()) return std::nullopt;
    return it->second;
  }

 private:
  Clock* const clock_;
  mutable absl::Mutex mu_;
  std::map<std::string, absl::Time> heard_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_LIVENESS_H_
