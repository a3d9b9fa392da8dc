#include "agent/agent.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "spdlog/spdlog.h"

namespace tunefarm {

struct Agent::Slot {
  std::unique_ptr<Board> board;
  absl::Mutex mu;
  std::string lease_id ABSL_GUARDED_BY(mu);  // "" when free
  std::atomic<bool> cancel{false};           // the current lease was revoked
  // A lease held ahead (build/run overlap) and its background build.
  struct Ahead {
    v1::WorkItem work;
    std::shared_ptr<std::atomic<bool>> cancel;  // aborts its build
    std::shared_ptr<std::atomic<bool>> built;   // its build has ended
  };
  // The leases held ahead, in the order granted; each runs once its build
  // has ended, the first such one first.
  std::deque<Ahead> ahead ABSL_GUARDED_BY(mu);
  // Background builds of leases ahead: threads and their "finished" flags.
  struct Build {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> finished;
  };
  std::vector<Build> builds ABSL_GUARDED_BY(mu);
  // The latest builds (Board::Prefetch) and evaluations, in seconds. Their
  // medians set how many leases are held ahead: one 20 s variant among
  // half-second rounds must not shrink the build window for the next dozen.
  RecentTimes build_s ABSL_GUARDED_BY(mu);
  RecentTimes eval_s ABSL_GUARDED_BY(mu);
  // Reports the last evaluated lease while the board runs the next one (a
  // durable commit on the coordinator is a round trip the board need not
  // wait for). One report at a time, in order; only the worker touches it.
  std::thread reporter;
  // The lease whose result the reporter is sending ("" when none): claimed
  // when the agent registers again, so a restarted coordinator keeps it.
  std::string reporting ABSL_GUARDED_BY(mu);
  // Without build-ahead: the answer to the next lease the last report asked
  // for, for the worker once the reporter has ended.
  std::optional<v1::LeaseWorkResponse> next ABSL_GUARDED_BY(mu);
};

void Agent::RecentTimes::Add(double seconds) {
  if (samples.size() >= kKept) samples.pop_front();
  samples.push_back(seconds);
}

double Agent::RecentTimes::Median() const {
  if (samples.empty()) return -1;
  std::vector<double> sorted(samples.begin(), samples.end());
  std::sort(sorted.begin(), sorted.end());
  return sorted[sorted.size() / 2];
}

Agent::Agent(AgentOptions options, CoordinatorClient* client, BundleSink* sink,
             std::vector<std::unique_ptr<Board>> boards)
    : options_(std::move(options)),
      clock_(options_.clock != nullptr ? *options_.clock : SystemClock()),
      client_(client),
      sink_(sink) {
  for (auto& b : boards) {
    auto slot = std::make_unique<Slot>();
    slot->board = std::move(b);
    slots_.push_back(std::move(slot));
  }
}

Agent::~Agent() = default;

absl::Duration Agent::heartbeat_interval() {
  absl::MutexLock lock(&mu_);
  return heartbeat_interval_;
}

void Agent::MarkUnregistered() {
  absl::MutexLock lock(&mu_);
  registered_ = false;
}

bool Agent::EnsureRegistered(const std::atomic<bool>& stop) {
  absl::MutexLock lock(&mu_);
  absl::Duration backoff = absl::Milliseconds(100);
  while (!registered_ && !stop.load()) {
    v1::RegisterAgentRequest request;
    request.set_agent_id(options_.agent_id);
    request.set_node(options_.node);
    request.set_version("tunefarm-agent 0.1");
    for (auto& slot : slots_) {
      v1::BoardInfo* info = request.add_boards();
      *info = slot->board->info();
      info->set_agent_id(options_.agent_id);
      absl::MutexLock slot_lock(&slot->mu);
      info->set_current_lease_id(slot->lease_id);
      // The lease being reported first: the coordinator counted it the
      // board's current one until its result comes in.
      std::vector<std::string> held;
      if (!slot->reporting.empty()) held.push_back(slot->reporting);
      for (const Slot::Ahead& a : slot->ahead) {
        held.push_back(a.work.lease_id());
      }
      for (size_t i = 0; i < held.size(); ++i) {
        if (i == 0) {
          info->set_lease_ahead_id(held[i]);
        } else {
          info->add_more_lease_ahead_ids(held[i]);
        }
      }
    }
    auto response = client_->RegisterAgent(request);
    if (response.ok()) {
      registered_ = true;
      heartbeat_interval_ = absl::Milliseconds(
          std::max<int64_t>(10, response->heartbeat_interval_ms()));
      spdlog::info("registered {} board(s) with the coordinator",
                   slots_.size());
      break;
    }
    spdlog::warn("register: {} (retrying in {})", response.status().ToString(),
                 absl::FormatDuration(backoff));
    mu_.Unlock();
    clock_.SleepFor(backoff, &stop);
    mu_.Lock();
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
  return registered_;
}

void Agent::HeartbeatLoop(const std::atomic<bool>& stop) {
  while (!stop.load()) {
    clock_.SleepFor(heartbeat_interval(), &stop);
    if (stop.load() || !EnsureRegistered(stop)) break;
    v1::HeartbeatRequest request;
    request.set_agent_id(options_.agent_id);
    for (auto& slot : slots_) {
      v1::BoardInfo* info = request.add_boards();
      info->set_board_id(slot->board->info().board_id());
      info->set_health_detail(slot->board->info().health_detail());
      info->set_state(slot->board->info().state());
      absl::MutexLock lock(&slot->mu);
      info->set_current_lease_id(slot->lease_id);
    }
    auto response = client_->Heartbeat(request);
    if (!response.ok()) {
      if (absl::IsNotFound(response.status())) MarkUnregistered();
      spdlog::warn("heartbeat: {}", response.status().ToString());
      continue;
    }
    for (const std::string& revoked : response->revoked_lease_ids()) {
      for (auto& slot : slots_) {
        absl::MutexLock lock(&slot->mu);
        if (slot->lease_id == revoked) {
          spdlog::warn("lease {} revoked by the coordinator", revoked);
          slot->cancel = true;
        }
      }
    }
    for (const std::string& board_id : response->readmitted_board_ids()) {
      for (auto& slot : slots_) {
        if (slot->board->info().board_id() != board_id) continue;
        spdlog::info("{} re-admitted by an admin: quarantine lifted", board_id);
        slot->board->Readmit();
      }
    }
  }
}

void Agent::Worker(Slot& slot, const std::atomic<bool>& stop) {
  const std::string board_id = slot.board->info().board_id();
  absl::Duration backoff = absl::Milliseconds(100);
  while (!stop.load()) {
    if (!EnsureRegistered(stop)) break;
    // A board that quarantined itself (repeated device errors) asks for no
    // work: its faults must not be blamed on variants.
    if (slot.board->info().state() == v1::BOARD_STATE_QUARANTINED) {
      clock_.SleepFor(absl::Seconds(1), &stop);
      continue;
    }
    // A lease held ahead is already ours: run it before asking for more.
    if (v1::WorkItem work; TakeAhead(slot, &work, stop)) {
      RunLease(slot, work, stop);
      continue;
    }
    // Profile bundles wait for the analyzers: take no more work than they
    // can keep up with.
    if (sink_ != nullptr && !sink_->AcceptingWork()) {
      clock_.SleepFor(absl::Milliseconds(200), &stop);
      continue;
    }
    // A plain lease gives up what the coordinator counts as the board's
    // lease: the report of the last one must be in first, or that result
    // is discarded as stale (the reporter is only the worker's).
    if (slot.reporter.joinable()) slot.reporter.join();
    absl::StatusOr<v1::LeaseWorkResponse> response;
    if (std::optional<v1::LeaseWorkResponse> next = TakeNext(slot);
        next.has_value()) {
      response = std::move(*next);
    } else {
      v1::LeaseWorkRequest request;
      request.set_agent_id(options_.agent_id);
      request.set_board_id(board_id);
      response = client_->LeaseWork(request);
    }
    if (!response.ok()) {
      if (absl::IsNotFound(response.status())) MarkUnregistered();
      spdlog::warn("lease for {}: {}", board_id, response.status().ToString());
      clock_.SleepFor(backoff, &stop);
      backoff = std::min(backoff * 2, options_.max_backoff);
      continue;
    }
    backoff = absl::Milliseconds(100);
    if (!response->granted()) {
      clock_.SleepFor(absl::Milliseconds(std::clamp<int64_t>(
                          response->retry_after_ms(), 10, 5000)),
                      &stop);
      continue;
    }
    RunLease(slot, response->work(), stop);
  }
  if (slot.reporter.joinable()) slot.reporter.join();
  ReapBuilds(slot, /*all=*/true);
}

void Agent::ReapBuilds(Slot& slot, bool all) {
  std::vector<Slot::Build> done;
  {
    absl::MutexLock lock(&slot.mu);
    if (all) {
      for (Slot::Ahead& a : slot.ahead) *a.cancel = true;
    }
    for (auto it = slot.builds.begin(); it != slot.builds.end();) {
      if (all || it->finished->load()) {
        done.push_back(std::move(*it));
        it = slot.builds.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (Slot::Build& b : done) b.thread.join();
}

int Agent::WantedAhead(Slot& slot) {
  // More leases ahead than the host's compilers can build for this board
  // only queue: each waits longer, which would call for more still.
  const int cores =
      static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int per_board =
      std::max(1, cores / static_cast<int>(std::max<size_t>(1, slots_.size())));
  const int most =
      std::min(std::clamp(options_.max_ahead, 1, kMostAhead), per_board + 1);
  absl::MutexLock lock(&slot.mu);
  const double build = slot.build_s.Median(), eval = slot.eval_s.Median();
  if (build < 0 || eval <= 0) return 1;
  // A board that evaluates in R and builds in B keeps its compilers busy
  // ceil(B / R) variants ahead; one more absorbs the spread.
  const double ratio = build / std::max(eval, 0.05);
  return std::clamp(static_cast<int>(std::ceil(ratio)) + 1, 1, most);
}

void Agent::RunLease(Slot& slot, const v1::WorkItem& work,
                     const std::atomic<bool>& stop) {
  const std::string board_id = slot.board->info().board_id();
  {
    absl::MutexLock lock(&slot.mu);
    slot.lease_id = work.lease_id();
  }
  slot.cancel = false;
  spdlog::info("{}: lease {} (sweep {} round {})", board_id, work.lease_id(),
               work.sweep_id(), work.round_id());

  // Keep the lease alive while the board works; a refused renewal means the
  // coordinator gave the round away, so the board stops. The lease held
  // ahead is renewed until this one is reported: it waits behind it.
  std::atomic<bool> evaluated{false}, done{false};
  std::thread renewer([&] {
    const absl::Duration every =
        absl::Milliseconds(std::max<int64_t>(10, work.lease_duration_ms() / 3));
    while (!done.load() && !stop.load()) {
      clock_.SleepFor(every, &done);
      if (done.load()) break;
      if (!evaluated.load() && !slot.cancel.load() && !LeaseStillValid(work)) {
        spdlog::warn("{}: lease {} is no longer valid; stopping the variant",
                     board_id, work.lease_id());
        slot.cancel = true;
      }
      RenewAhead(slot);
    }
  });
  // Build/run overlap: the next variants are leased and compiled while this
  // one builds and runs, so that a board whose strategy hands out a batch of
  // new candidates waits for one compile, not one per round.
  std::thread ahead;
  if (options_.prefetch) {
    ahead = std::thread([&] { LeaseAhead(slot, evaluated, stop); });
    const absl::Time build_start = absl::Now();
    if (absl::Status st = slot.board->Prefetch(work, slot.cancel); !st.ok()) {
      spdlog::warn("{}: build ahead of {}: {}", board_id, work.lease_id(),
                   st.ToString());
    }
    const double waited = absl::ToDoubleSeconds(absl::Now() - build_start);
    // Waiting here for a build the pool still runs is what leases further
    // ahead avoid: count it as build time.
    if (waited > 0.05) {
      absl::MutexLock lock(&slot.mu);
      slot.build_s.Add(waited);
    }
  }
  const absl::Time start = absl::Now();
  absl::StatusOr<Evaluation> evaluation =
      slot.board->Evaluate(work, slot.cancel);
  evaluated = true;
  {
    absl::MutexLock lock(&slot.mu);
    slot.eval_s.Add(absl::ToDoubleSeconds(absl::Now() - start));
  }

  v1::RoundResult result;
  std::optional<v1::ProfileBundle> bundle;
  if (evaluation.ok()) {
    result = evaluation->result;
    bundle = std::move(evaluation->bundle);
    // A health check's profile has no round to diagnose.
    if (work.health_check()) bundle.reset();
    if (bundle.has_value()) result.set_bundle_id(bundle->bundle_id());
  } else {
    // The board failed, not the variant.
    result.set_outcome(v1::OUTCOME_BOARD_LOST);
    result.set_detail(std::string(evaluation.status().message()));
  }
  result.set_eval_s(absl::ToDoubleSeconds(absl::Now() - start));
  if (options_.on_round) options_.on_round(result, absl::Now() - start);
  // Where a round's time goes (build, the timed blocks, the rest: reference,
  // profile), for an operator reading the agent's log.
  spdlog::info(
      "{}: round {} {} in {:.2f} s (build {:.2f} s, run {:.2f} s over {} A/B "
      "pair(s), timed kernels {:.3f} s, runner starts {})",
      board_id, work.round_id(), v1::Outcome_Name(result.outcome()),
      absl::ToDoubleSeconds(absl::Now() - start), result.build_s(),
      result.run_s(), result.measurement().pairs(), result.timed_s(),
      result.runner_starts());

  // The previous report has long ended (a whole evaluation ago); waiting
  // for it keeps reports in order and at most one in flight.
  if (slot.reporter.joinable()) slot.reporter.join();
  if (slot.cancel.load() || stop.load()) {
    spdlog::info("{}: lease {} abandoned (revoked or stopping)", board_id,
                 work.lease_id());
  } else {
    v1::ReportResultRequest request;
    request.set_agent_id(options_.agent_id);
    request.set_board_id(board_id);
    request.set_lease_id(work.lease_id());
    request.set_epoch(work.epoch());
    request.set_sweep_id(work.sweep_id());
    request.set_round_id(work.round_id());
    *request.mutable_result() = std::move(result);
    // Without build-ahead the board's next lease rides with its report:
    // one call a round, not two (none while the analyzers are behind).
    if (!options_.prefetch &&
        slot.board->info().state() != v1::BOARD_STATE_QUARANTINED &&
        (sink_ == nullptr || sink_->AcceptingWork())) {
      request.mutable_next_lease();
    }
    {
      absl::MutexLock lock(&slot.mu);
      slot.reporting = work.lease_id();
    }
    slot.reporter =
        std::thread([this, &slot, &stop, board_id, request = std::move(request),
                     bundle = std::move(bundle)]() mutable {
          std::optional<v1::LeaseWorkResponse> next =
              Report(board_id, request, std::move(bundle), stop);
          absl::MutexLock lock(&slot.mu);
          slot.reporting.clear();
          slot.next = std::move(next);
        });
  }
  {
    absl::MutexLock lock(&slot.mu);
    slot.lease_id.clear();
  }
  // Leasing ahead stops with the evaluation; the builds it started go on
  // in the background (the next RunLease renews their leases).
  if (ahead.joinable()) ahead.join();
  ReapBuilds(slot, /*all=*/stop.load());
  done = true;
  renewer.join();
}

std::optional<v1::LeaseWorkResponse> Agent::Report(
    const std::string& board_id, const v1::ReportResultRequest& request,
    std::optional<v1::ProfileBundle> bundle, const std::atomic<bool>& stop) {
  const std::string& lease_id = request.lease_id();
  // The bundle is on disk before the result is reported, so no crash of
  // this agent (or of the coordinator before it replies) loses it.
  bool kept = false;
  if (bundle.has_value() && sink_ != nullptr) {
    if (absl::Status st = sink_->Keep(*bundle); st.ok()) {
      kept = true;
    } else {
      spdlog::warn("{}: profile bundle of {} not kept: {}", board_id, lease_id,
                   st.ToString());
    }
  }
  // Retries until the coordinator answers: recording is exactly-once on
  // its side, so a retry of an acknowledged result is harmless.
  absl::Duration backoff = absl::Milliseconds(100);
  const absl::Time start = absl::Now();
  std::optional<v1::LeaseWorkResponse> next;
  while (!stop.load()) {
    auto response = client_->ReportResult(request);
    if (response.ok()) {
      if (!response->accepted()) {
        spdlog::warn("{}: result of {} discarded: {}", board_id, lease_id,
                     response->reason());
      }
      if (response->has_next_lease()) {
        next = std::move(*response->mutable_next_lease());
      }
      break;
    }
    if (absl::IsInvalidArgument(response.status()) ||
        absl::IsNotFound(response.status())) {
      spdlog::error("{}: result of {} refused: {}", board_id, lease_id,
                    response.status().ToString());
      break;
    }
    clock_.SleepFor(backoff, &stop);
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
  // Sent whatever the answer: the analyzer and the coordinator are
  // idempotent, and the coordinator refuses a diagnosis of a result it did
  // not record. Stopping before an answer leaves it kept on disk; the
  // restarted agent sends it.
  if (kept && !stop.load()) sink_->Release(bundle->bundle_id());
  spdlog::debug("{}: result of {} reported in {:.3f} s", board_id, lease_id,
                absl::ToDoubleSeconds(absl::Now() - start));
  return next;
}

std::optional<v1::LeaseWorkResponse> Agent::TakeNext(Slot& slot) {
  absl::MutexLock lock(&slot.mu);
  std::optional<v1::LeaseWorkResponse> next = std::move(slot.next);
  slot.next.reset();
  return next;
}

bool Agent::LeaseStillValid(const v1::WorkItem& work) {
  v1::RenewLeaseRequest request;
  request.set_agent_id(options_.agent_id);
  request.set_lease_id(work.lease_id());
  request.set_epoch(work.epoch());
  auto response = client_->RenewLease(request);
  return !response.ok() || response->valid();
}

void Agent::LeaseAhead(Slot& slot, const std::atomic<bool>& evaluated,
                       const std::atomic<bool>& stop) {
  const std::string board_id = slot.board->info().board_id();
  while (!evaluated.load() && !stop.load()) {
    const int wanted = WantedAhead(slot);
    size_t held = 0;
    {
      absl::MutexLock lock(&slot.mu);
      held = slot.ahead.size();
    }
    // No work ahead while the analyzers are behind (as in Worker).
    if (static_cast<int>(held) >= wanted ||
        (sink_ != nullptr && !sink_->AcceptingWork())) {
      clock_.SleepFor(absl::Milliseconds(50), &evaluated);
      continue;
    }
    v1::LeaseWorkRequest request;
    request.set_agent_id(options_.agent_id);
    request.set_board_id(board_id);
    request.set_prefetch(true);
    request.set_max_ahead(wanted);
    auto response = client_->LeaseWork(request);
    if (response.ok() && response->granted()) {
      const v1::WorkItem& next = response->work();
      spdlog::info(
          "{}: lease {} ahead (sweep {} round {}; {} of {} ahead); "
          "building it",
          board_id, next.lease_id(), next.sweep_id(), next.round_id(), held + 1,
          wanted);
      auto cancel = std::make_shared<std::atomic<bool>>(false);
      auto finished = std::make_shared<std::atomic<bool>>(false);
      absl::MutexLock lock(&slot.mu);
      slot.ahead.push_back({next, cancel, finished});
      // The build runs beside the board (and beside the other builds); the
      // board's Prefetch never touches the device.
      slot.builds.push_back(
          {std::thread([this, &slot, next, cancel, finished, board_id] {
             const absl::Time t0 = absl::Now();
             absl::Status st = slot.board->Prefetch(next, *cancel);
             if (!st.ok()) {
               spdlog::warn("{}: build ahead of {}: {}", board_id,
                            next.lease_id(), st.ToString());
             } else {
               absl::MutexLock lock(&slot.mu);
               slot.build_s.Add(absl::ToDoubleSeconds(absl::Now() - t0));
             }
             *finished = true;
           }),
           finished});
      continue;
    }
    const int64_t wait_ms =
        response.ok()
            ? std::clamp<int64_t>(response->retry_after_ms(), 10, 5000)
            : 1000;
    clock_.SleepFor(absl::Milliseconds(wait_ms), &evaluated);
  }
}

void Agent::RenewAhead(Slot& slot) {
  std::vector<Slot::Ahead> ahead;
  {
    absl::MutexLock lock(&slot.mu);
    ahead.assign(slot.ahead.begin(), slot.ahead.end());
  }
  for (const Slot::Ahead& a : ahead) {
    if (LeaseStillValid(a.work)) continue;
    absl::MutexLock lock(&slot.mu);
    for (auto it = slot.ahead.begin(); it != slot.ahead.end(); ++it) {
      if (it->work.lease_id() != a.work.lease_id()) continue;
      spdlog::warn("{}: lease {} held ahead was revoked; dropped",
                   slot.board->info().board_id(), a.work.lease_id());
      *it->cancel = true;
      slot.ahead.erase(it);
      break;
    }
  }
}

bool Agent::TakeAhead(Slot& slot, v1::WorkItem* work,
                      const std::atomic<bool>& stop) {
  while (!stop.load()) {
    std::shared_ptr<std::atomic<bool>> cancel;
    bool waiting = false;
    {
      absl::MutexLock lock(&slot.mu);
      if (slot.ahead.empty()) return false;
      // Builds end out of order (a large variant compiles for longer): the
      // board runs the first one built rather than wait behind the first
      // one granted. The coordinator follows (Heartbeat).
      auto built =
          std::find_if(slot.ahead.begin(), slot.ahead.end(),
                       [](const Slot::Ahead& a) { return a.built->load(); });
      if (built == slot.ahead.end()) {
        waiting = true;
      } else {
        *work = built->work;
        cancel = built->cancel;
        slot.ahead.erase(built);
      }
    }
    if (waiting) {
      // The builds run in real time, whatever clock the agent waits on.
      absl::SleepFor(absl::Milliseconds(10));
      continue;
    }
    // It may have been revoked since the last renewal (cancelled sweep).
    if (LeaseStillValid(*work)) return true;
    *cancel = true;
    spdlog::warn("{}: lease {} held ahead was revoked; dropped",
                 slot.board->info().board_id(), work->lease_id());
  }
  return false;
}

void Agent::Run(const std::atomic<bool>& stop) {
  EnsureRegistered(stop);
  std::vector<std::thread> threads;
  threads.emplace_back([&] { HeartbeatLoop(stop); });
  for (auto& slot : slots_) {
    threads.emplace_back([&, s = slot.get()] { Worker(*s, stop); });
  }
  for (auto& t : threads) t.join();
}

}  // namespace tunefarm
