// FarmMetrics: what the coordinator core reports for Prometheus, as a plain
// interface so the domain core never sees prometheus-cpp. The
// implementation (coordinator/prometheus_metrics.h) is wired in main.cc.
// Implementations are thread-safe.
#ifndef TUNEFARM_COORDINATOR_FARM_METRICS_H_
#define TUNEFARM_COORDINATOR_FARM_METRICS_H_

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

class FarmMetrics {
 public:
  virtual ~FarmMetrics() = default;
  // A round's result was recorded; `lease_to_result_s` is the time from
  // lease grant to the recorded result.
  virtual void RoundRecorded(const std::string& outcome,
                             double lease_to_result_s) = 0;
  virtual void LeaseGranted(double queue_wait_s) = 0;
  virtual void LeaseExpired() = 0;
  // Number of boards in each state ("idle", "busy", "lost" …).
  virtual void SetBoardsByState(const std::map<std::string, int>& counts) = 0;
  // The current state of the boards whose state, node or chip changed since
  // the last call, every board's the first time (per-board series: board,
  // node, chip).
  virtual void SetBoardStates(const std::vector<v1::BoardInfo>& boards) = 0;
  virtual void BoardQuarantined(const v1::BoardInfo& board) = 0;
  // A board's health check (its kind's golden) was judged.
  virtual void HealthCheckRecorded(const v1::BoardInfo& board, bool passed) {}
  // A board spent `seconds` on a round that got recorded.
  virtual void BoardBusy(const v1::BoardInfo& board, double seconds) = 0;
  // A team's round was recorded with `outcome` after `board_seconds`.
  virtual void TeamRound(const std::string& team, const std::string& outcome,
                         double board_seconds) = 0;
  virtual void SetQueueDepth(int queued_rounds) = 0;
  virtual void DiagnosisRecorded() = 0;
  // A commit to the store ended (`ok` or not) after `seconds`, with
  // `writes` records: under group commit one per batch, so this is what
  // every call in the batch waited for its durability, and how many
  // records shared the sync. Called on the thread that commits (the control
  // loop's writer when the commit is pipelined).
  virtual void StoreCommitted(double seconds, size_t writes, bool ok) {}
};

// Reports nothing: the shared base of fakes that look at only some reports
// (tests, benchmarks), which override just those. Thread-safe.
class NoFarmMetrics : public FarmMetrics {
 public:
  void RoundRecorded(const std::string&, double) override {}
  void LeaseGranted(double) override {}
  void LeaseExpired() override {}
  void SetBoardsByState(const std::map<std::string, int>&) override {}
  void SetBoardStates(const std::vector<v1::BoardInfo>&) override {}
  void BoardQuarantined(const v1::BoardInfo&) override {}
  void BoardBusy(const v1::BoardInfo&, double) override {}
  void TeamRound(const std::string&, const std::string&, double) override {}
  void SetQueueDepth(int) override {}
  void DiagnosisRecorded() override {}
};

}  // namespace tunefarm

#endif  // TUNEFARM_COORDINATOR_FARM_METRICS_H_
