#include "coordinator/prometheus_metrics.h"

#include "absl/strings/ascii.h"
#include "absl/strings/strip.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"

namespace tunefarm {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

std::string StateLabel(v1::BoardState s) {
  return absl::AsciiStrToLower(
      absl::StripPrefix(v1::BoardState_Name(s), "BOARD_STATE_"));
}

class PrometheusFarmMetrics : public FarmMetrics {
 public:
  PrometheusFarmMetrics(prometheus::Registry& registry, bool team_labels)
      : team_labels_(team_labels),
        rounds_(BuildCounter()
                    .Name("tunefarm_rounds_total")
                    .Help("Round results recorded, by outcome")
                    .Register(registry)),
        boards_(BuildGauge()
                    .Name("tunefarm_boards")
                    .Help("Registered boards, by state")
                    .Register(registry)),
        queue_(BuildGauge()
                   .Name("tunefarm_queued_rounds")
                   .Help("Rounds waiting for a board")
                   .Register(registry)
                   .Add({})),
        lease_expired_(BuildCounter()
                           .Name("tunefarm_lease_expirations_total")
                           .Help("Leases that expired without a result")
                           .Register(registry)
                           .Add({})),
        diagnoses_(BuildCounter()
                       .Name("tunefarm_diagnoses_total")
                       .Help("Diagnoses received from analyzers")
                       .Register(registry)
                       .Add({})),
        lease_latency_(
            BuildHistogram()
                .Name("tunefarm_lease_latency_seconds")
                .Help("Time from a lease grant to its recorded result")
                .Register(registry)
                .Add({},
                     prometheus::Histogram::BucketBoundaries{
                         0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60,
                         300, 900})),
        queue_wait_(BuildHistogram()
                        .Name("tunefarm_round_queue_wait_seconds")
                        .Help("Time from a round's creation to its lease")
                        .Register(registry)
                        .Add({},
                             prometheus::Histogram::BucketBoundaries{
                                 0.001, 0.01, 0.1, 1, 10, 60, 600})),
        board_state_(BuildGauge()
                         .Name("tunefarm_board_state")
                         .Help("1 for the state each board is in, 0 for the "
                               "others")
                         .Register(registry)),
        board_busy_(BuildCounter()
                        .Name("tunefarm_board_busy_seconds_total")
                        .Help("Board time spent on recorded rounds")
                        .Register(registry)),
        board_quarantines_(BuildCounter()
                               .Name("tunefarm_board_quarantines_total")
                               .Help("Times a board was quarantined")
                               .Register(registry)),
        health_checks_(BuildCounter()
                           .Name("tunefarm_board_health_checks_total")
                           .Help("Board health checks (golden runs) by "
                                 "outcome: passed or failed")
                           .Register(registry)),
        team_rounds_(BuildCounter()
                         .Name("tunefarm_team_rounds_total")
                         .Help("Recorded rounds by team and outcome")
                         .Register(registry)),
        team_board_seconds_(BuildCounter()
                                .Name("tunefarm_team_board_seconds_total")
                                .Help("Board time used by each team's rounds")
                                .Register(registry)),
        commit_seconds_(
            BuildHistogram()
                .Name("tunefarm_store_commit_seconds")
                .Help("Durable commits to the store: how long each took "
                      "(what the calls of its batch waited to be durable)")
                .Register(registry)
                .Add({},
                     prometheus::Histogram::BucketBoundaries{
                         0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1,
                         0.5, 1, 5})),
        commit_writes_(
            BuildHistogram()
                .Name("tunefarm_store_commit_writes")
                .Help("Records per durable commit (group commit: the "
                      "records of every call in the batch share one sync)")
                .Register(registry)
                .Add({},
                     prometheus::Histogram::BucketBoundaries{
                         1, 4, 16, 64, 256, 1024, 4096, 16384})),
        commit_failures_(BuildCounter()
                             .Name("tunefarm_store_commit_failures_total")
                             .Help("Commits the store refused (nothing of "
                                   "them was applied or acknowledged)")
                             .Register(registry)
                             .Add({})),
        precision_failures_(BuildCounter()
                                .Name("tunefarm_precision_failures_total")
                                .Help("Variants that failed the precision "
                                      "check, by team")
                                .Register(registry)) {}

  void RoundRecorded(const std::string& outcome,
                     double lease_to_result_s) override {
    std::string label =
        absl::AsciiStrToLower(absl::StripPrefix(outcome, "OUTCOME_"));
    rounds_.Add({{"outcome", label}}).Increment();
    lease_latency_.Observe(lease_to_result_s);
  }
  void LeaseGranted(double queue_wait_s) override {
    queue_wait_.Observe(queue_wait_s);
  }
  void LeaseExpired() override { lease_expired_.Increment(); }
  void SetBoardsByState(const std::map<std::string, int>& counts) override {
    for (const auto& [state, n] : counts) {
      boards_.Add({{"state", state}}).Set(n);
    }
  }
  void SetQueueDepth(int queued) override { queue_.Set(queued); }
  void SetBoardStates(const std::vector<v1::BoardInfo>& boards) override {
    static const char* kStates[] = {"idle", "busy", "lost", "quarantined",
                                    "draining"};
    for (const v1::BoardInfo& b : boards) {
      const std::string now = StateLabel(b.state());
      for (const char* st : kStates) {
        board_state_
            .Add({{"board", b.board_id()},
                  {"node", b.node()},
                  {"chip", b.chip()},
                  {"state", st}})
            .Set(now == st ? 1 : 0);
      }
      // Present from the start, so rate() works before the first one.
      board_quarantines_.Add({{"board", b.board_id()}});
      for (const char* outcome : {"passed", "failed"}) {
        health_checks_.Add({{"board", b.board_id()}, {"outcome", outcome}});
      }
      board_busy_.Add(
          {{"board", b.board_id()}, {"node", b.node()}, {"chip", b.chip()}});
    }
  }
  void BoardQuarantined(const v1::BoardInfo& b) override {
    board_quarantines_.Add({{"board", b.board_id()}}).Increment();
  }
  void HealthCheckRecorded(const v1::BoardInfo& b, bool passed) override {
    health_checks_
        .Add({{"board", b.board_id()},
              {"outcome", passed ? "passed" : "failed"}})
        .Increment();
  }
  void BoardBusy(const v1::BoardInfo& b, double seconds) override {
    board_busy_
        .Add({{"board", b.board_id()}, {"node", b.node()}, {"chip", b.chip()}})
        .Increment(seconds);
  }
  void TeamRound(const std::string& given_team, const std::string& outcome,
                 double board_seconds) override {
    // Without team labels every team counts under team="" (no label).
    const std::string team = team_labels_ ? given_team : std::string();
    const std::string label =
        absl::AsciiStrToLower(absl::StripPrefix(outcome, "OUTCOME_"));
    team_rounds_.Add({{"team", team}, {"outcome", label}}).Increment();
    team_board_seconds_.Add({{"team", team}}).Increment(board_seconds);
    auto& precision = precision_failures_.Add({{"team", team}});
    if (label == "precision_failed") precision.Increment();
  }
  void DiagnosisRecorded() override { diagnoses_.Increment(); }
  void StoreCommitted(double seconds, size_t writes, bool ok) override {
    commit_seconds_.Observe(seconds);
    commit_writes_.Observe(static_cast<double>(writes));
    if (!ok) commit_failures_.Increment();
  }

 private:
  const bool team_labels_;
  prometheus::Family<prometheus::Counter>& rounds_;
  prometheus::Family<prometheus::Gauge>& boards_;
  prometheus::Gauge& queue_;
  prometheus::Counter& lease_expired_;
  prometheus::Counter& diagnoses_;
  prometheus::Histogram& lease_latency_;
  prometheus::Histogram& queue_wait_;
  prometheus::Family<prometheus::Gauge>& board_state_;
  prometheus::Family<prometheus::Counter>& board_busy_;
  prometheus::Family<prometheus::Counter>& board_quarantines_;
  prometheus::Family<prometheus::Counter>& health_checks_;
  prometheus::Family<prometheus::Counter>& team_rounds_;
  prometheus::Family<prometheus::Counter>& team_board_seconds_;
  prometheus::Histogram& commit_seconds_;
  prometheus::Histogram& commit_writes_;
  prometheus::Counter& commit_failures_;
  prometheus::Family<prometheus::Counter>& precision_failures_;
};

}  // namespace

std::unique_ptr<FarmMetrics> NewPrometheusFarmMetrics(
    prometheus::Registry& registry, bool team_labels) {
  return std::make_unique<PrometheusFarmMetrics>(registry, team_labels);
}

}  // namespace tunefarm
