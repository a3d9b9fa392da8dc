#include "coordinator/board_registry.h"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "coordinator/farm_metrics.h"
#include "coordinator/health_checker.h"
#include "coordinator/lease_id.h"
#include "coordinator/lease_table.h"
#include "coordinator/liveness.h"
#include "coordinator/placement.h"
#include "coordinator/staging.h"
#include "coordinator/sweep_book.h"
#include "spdlog/spdlog.h"

namespace tunefarm {

void BoardRegistry::Recover(std::vector<v1::BoardInfo> boards) {
  for (v1::BoardInfo& b : boards) {
    // Until its agent registers again, a board cannot be trusted.
    b.set_state(v1::BOARD_STATE_LOST);
    b.clear_current_lease_id();
    b.set_reserved_for(parts_.placement->ReservedFor(b));
    boards_[b.board_id()].info = std::move(b);
  }
}

absl::Status BoardRegistry::Register(Txn& txn,
                                     const v1::RegisterAgentRequest& request) {
  if (request.agent_id().empty()) {
    return absl::InvalidArgumentError("agent_id: must not be empty");
  }
  if (request.boards().empty()) {
    return absl::InvalidArgumentError("boards: an agent needs a board");
  }
  std::set<std::string> ids;
  for (const v1::BoardInfo& b : request.boards()) {
    if (b.board_id().empty()) {
      return absl::InvalidArgumentError("boards[].board_id: must not be empty");
    }
    if (!ids.insert(b.board_id()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("boards: duplicate board_id ", b.board_id()));
    }
    auto it = boards_.find(b.board_id());
    if (it != boards_.end() &&
        it->second.info.agent_id() != request.agent_id() &&
        agents_.contains(it->second.info.agent_id())) {
      return absl::AlreadyExistsError(absl::StrCat("board ", b.board_id(),
                                                   " is registered by agent ",
                                                   it->second.info.agent_id()));
    }
  }
  LeaseTable& leases = *parts_.leases;
  const absl::Time now = parts_.clock->Now();
  for (const v1::BoardInfo& b : request.boards()) {
    parts_.staging->SaveBoard(txn, b.board_id());
    BoardRuntime& br = boards_[b.board_id()];
    // A lease on this board that the agent does not claim is work it lost
    // (an agent restart), a lease a restarted coordinator recovered
    // included. Either claim covers either lease: the agent may have moved
    // its lease ahead up before this coordinator saw the current result.
    const auto claimed = [&b](const std::string& id) {
      return id == b.current_lease_id() || id == b.lease_ahead_id() ||
             std::find(b.more_lease_ahead_ids().begin(),
                       b.more_lease_ahead_ids().end(),
                       id) != b.more_lease_ahead_ids().end();
    };
    for (auto& [sweep_id, s] : parts_.book->sweeps()) {
      for (const int64_t id : s->leased) {
        if (id >= static_cast<int64_t>(s->rounds.size())) continue;
        v1::Round& r = s->rounds[id];
        if (r.state() == v1::ROUND_STATE_LEASED &&
            r.lease().board_id() == b.board_id() &&
            !claimed(r.lease().lease_id())) {
          leases.Requeue(txn, *s, r,
                         absl::StrCat("agent ", request.agent_id(),
                                      " re-registered without the lease"));
        }
      }
    }
    if (!br.lease_id.empty() && !claimed(br.lease_id)) {
      leases.FreeBoard(txn, b.board_id(), br.lease_id);  // a health check's
    }
    // After a coordinator restart the agent may still run, or hold ahead, a
    // lease this coordinator recovered: adopt it, so its result is still
    // welcome and a lost board requeues it at once.
    const auto recovered = [&](const std::string& id) {
      const v1::Round* r = leases.Live(id);
      return r != nullptr && r->lease().board_id() == b.board_id();
    };
    if (br.lease_id.empty() && recovered(b.current_lease_id())) {
      br.lease_id = b.current_lease_id();
    }
    if (br.prefetch_lease_ids.empty()) {
      std::vector<std::string> ahead = {b.lease_ahead_id()};
      ahead.insert(ahead.end(), b.more_lease_ahead_ids().begin(),
                   b.more_lease_ahead_ids().end());
      for (const std::string& id : ahead) {
        if (id != br.lease_id && recovered(id)) {
          br.prefetch_lease_ids.push_back(id);
        }
      }
      // An agent between two runs holds leases ahead and no current one:
      // the first is what the recorded result had made current.
      if (br.lease_id.empty() && !br.prefetch_lease_ids.empty()) {
        const std::string first = br.prefetch_lease_ids.front();
        leases.PromoteAhead(txn, br, first);  // a copy: it erases the entry
      }
    }
    const int64_t rounds_run = br.info.rounds_run();
    // An admin's drain outlives the agent's reconnects.
    const bool draining = br.info.state() == v1::BOARD_STATE_DRAINING;
    br.info = b;
    br.info.set_agent_id(request.agent_id());
    br.info.set_node(request.node());
    br.info.set_rounds_run(rounds_run);
    br.info.set_last_seen_unix_ms(absl::ToUnixMillis(now));
    br.info.set_current_lease_id(br.lease_id);
    // Kept as br.prefetch_lease_ids.
    br.info.clear_lease_ahead_id();
    br.info.clear_more_lease_ahead_ids();
    br.info.set_state(draining              ? v1::BOARD_STATE_DRAINING
                      : br.lease_id.empty() ? v1::BOARD_STATE_IDLE
                                            : v1::BOARD_STATE_BUSY);
    br.info.set_reserved_for(parts_.placement->ReservedFor(br.info));
    // LAVA: a board that joins proves itself on its golden first.
    br.check_due = parts_.health->Checks(br.info.kind());
    txn.writes.PutBoard(br.info);
  }
  parts_.staging->SaveAgent(txn, request.agent_id());
  AgentRuntime& agent = agents_[request.agent_id()];
  agent.last_seen = now;
  agent.board_ids.assign(ids.begin(), ids.end());
  return absl::OkStatus();
}

absl::StatusOr<bool> BoardRegistry::Heartbeat(
    Txn& txn, const v1::HeartbeatRequest& request,
    v1::HeartbeatResponse* response) {
  auto it = agents_.find(request.agent_id());
  if (it == agents_.end()) {
    return absl::NotFoundError(
        absl::StrCat("agent ", request.agent_id(), " is not registered"));
  }
  Clock* clock = parts_.clock;
  it->second.last_seen = clock->Now();
  bool boards_changed = false;
  for (const v1::BoardInfo& b : request.boards()) {
    auto bit = boards_.find(b.board_id());
    if (bit == boards_.end() ||
        bit->second.info.agent_id() != request.agent_id()) {
      continue;
    }
    parts_.staging->SaveBoard(txn, b.board_id());
    bit->second.info.set_last_seen_unix_ms(clock->NowUnixMs());
    // The agent's word on health, when it has one; else the coordinator's
    // (admin action, health check) stands.
    if (!b.health_detail().empty()) {
      bit->second.info.set_health_detail(b.health_detail());
    }
    if (b.state() != v1::BOARD_STATE_QUARANTINED) {
      bit->second.readmit_pending = false;  // the agent lifted its flag
    } else if (bit->second.readmit_pending) {
      response->add_readmitted_board_ids(b.board_id());
    } else if (bit->second.info.state() != v1::BOARD_STATE_QUARANTINED) {
      bit->second.info.set_state(v1::BOARD_STATE_QUARANTINED);
      txn.writes.PutBoard(bit->second.info);
      boards_changed = true;
      txn.after_commit.push_back(
          [metrics = parts_.metrics, info = bit->second.info] {
            if (metrics != nullptr) metrics->BoardQuarantined(info);
            spdlog::warn("board {} quarantined by its agent: {}",
                         info.board_id(), info.health_detail());
          });
    }
    if (!b.current_lease_id().empty() &&
        b.current_lease_id() != bit->second.lease_id &&
        !parts_.leases->PromoteAhead(txn, bit->second, b.current_lease_id())) {
      response->add_revoked_lease_ids(b.current_lease_id());
    }
  }
  return boards_changed;
}

absl::StatusOr<BoardRuntime*> BoardRegistry::CallerBoard(
    const std::string& agent_id, const std::string& board_id) {
  auto agent = agents_.find(agent_id);
  if (agent == agents_.end()) {
    return absl::NotFoundError(
        absl::StrCat("agent ", agent_id, " is not registered"));
  }
  agent->second.last_seen = parts_.clock->Now();
  auto bit = boards_.find(board_id);
  if (bit == boards_.end() || bit->second.info.agent_id() != agent_id) {
    return absl::NotFoundError(absl::StrCat(
        "board ", board_id, " is not registered by agent ", agent_id));
  }
  return &bit->second;
}

void BoardRegistry::NoteSeen(const std::string& agent_id) {
  if (auto a = agents_.find(agent_id); a != agents_.end()) {
    a->second.last_seen = parts_.clock->Now();
  }
}

bool BoardRegistry::LoseSilentAgents(Txn& txn, absl::Time now,
                                     absl::Duration timeout,
                                     const AgentLiveness* liveness) {
  bool boards_changed = false;
  for (auto it = agents_.begin(); it != agents_.end();) {
    // Any call counts, the ones still waiting for the loop included.
    absl::Time last_seen = it->second.last_seen;
    if (liveness != nullptr) {
      if (std::optional<absl::Time> heard = liveness->LastHeard(it->first)) {
        last_seen = std::max(last_seen, *heard);
      }
    }
    if (now - last_seen <= timeout) {
      ++it;
      continue;
    }
    const std::string why = absl::StrCat("agent ", it->first, " silent for ",
                                         absl::FormatDuration(now - last_seen));
    spdlog::warn("{}: its boards are lost", why);
    parts_.staging->SaveAgent(txn, it->first);
    for (const std::string& board_id : it->second.board_ids) {
      auto b = boards_.find(board_id);
      if (b == boards_.end()) continue;
      parts_.staging->SaveBoard(txn, board_id);
      // The lease held ahead first, so it is not promoted in its place.
      parts_.leases->RequeueAhead(txn, b->second,
                                  absl::StrCat("board lost: ", why));
      if (const std::optional<LeaseId> lease =
              LeaseId::Parse(b->second.lease_id);
          lease.has_value()) {
        SweepRuntime* s = parts_.book->Find(lease->sweep_id);
        const int64_t round_id = lease->round_id;
        if (s != nullptr && round_id < static_cast<int64_t>(s->rounds.size()) &&
            s->rounds[round_id].state() == v1::ROUND_STATE_LEASED &&
            s->rounds[round_id].lease().lease_id() == b->second.lease_id) {
          parts_.leases->Requeue(txn, *s, s->rounds[round_id],
                                 absl::StrCat("board lost: ", why));
        }
      }
      b->second.lease_id.clear();
      b->second.info.clear_current_lease_id();
      b->second.info.set_state(v1::BOARD_STATE_LOST);
      b->second.info.set_health_detail(why);
      txn.writes.PutBoard(b->second.info);
      boards_changed = true;
    }
    it = agents_.erase(it);
  }
  return boards_changed;
}

absl::StatusOr<BoardRuntime*> BoardRegistry::Drain(
    Txn& txn, const v1::BoardAdminRequest& request) {
  auto it = boards_.find(request.board_id());
  if (it == boards_.end()) {
    return absl::NotFoundError(absl::StrCat("no board ", request.board_id()));
  }
  // The round it runs now finishes; LeaseWork gives it nothing more, and
  // a round it holds ahead goes back to the queue (its renewals now fail,
  // so the agent drops it unrun): draining means no new variant starts.
  parts_.staging->SaveBoard(txn, it->first);
  it->second.info.set_state(v1::BOARD_STATE_DRAINING);
  it->second.info.set_health_detail(
      absl::StrCat("drained by an admin", request.reason().empty() ? "" : ": ",
                   request.reason()));
  parts_.leases->RequeueAhead(
      txn, it->second, absl::StrCat("board ", request.board_id(), " drained"));
  txn.writes.PutBoard(it->second.info);
  return &it->second;
}

absl::StatusOr<BoardRuntime*> BoardRegistry::Admit(
    Txn& txn, const v1::BoardAdminRequest& request) {
  auto it = boards_.find(request.board_id());
  if (it == boards_.end()) {
    return absl::NotFoundError(absl::StrCat("no board ", request.board_id()));
  }
  parts_.staging->SaveBoard(txn, it->first);
  v1::BoardInfo& info = it->second.info;
  // The agent may hold its own quarantine flag (device errors): the next
  // heartbeats tell it to lift it.
  if (info.state() == v1::BOARD_STATE_QUARANTINED) {
    it->second.readmit_pending = true;
  }
  // An admin's word replaces a pending or failed health check.
  it->second.check_due = false;
  it->second.next_check =
      parts_.health->NextCheck(parts_.clock->Now(), /*passed=*/true);
  if (info.state() == v1::BOARD_STATE_QUARANTINED ||
      info.state() == v1::BOARD_STATE_DRAINING) {
    info.set_state(it->second.lease_id.empty() ? v1::BOARD_STATE_IDLE
                                               : v1::BOARD_STATE_BUSY);
  }
  info.set_health_detail(absl::StrCat("admitted by an admin",
                                      request.reason().empty() ? "" : ": ",
                                      request.reason()));
  txn.writes.PutBoard(info);
  return &it->second;
}

void BoardRegistry::RefreshReservations(Txn& txn) {
  for (auto& [id, b] : boards_) {
    const std::string team = parts_.placement->ReservedFor(b.info);
    if (team == b.info.reserved_for()) continue;
    parts_.staging->SaveBoard(txn, id);
    b.info.set_reserved_for(team);
    txn.writes.PutBoard(b.info);
  }
}

bool BoardRegistry::Matches(const v1::BoardInfo& board,
                            const v1::BoardSelector& selector) {
  if (!selector.kind().empty() && selector.kind() != board.kind()) {
    return false;
  }
  if (!selector.chip().empty() && selector.chip() != board.chip()) {
    return false;
  }
  for (const auto& [key, value] : selector.labels()) {
    auto it = board.labels().find(key);
    if (it == board.labels().end() || it->second != value) return false;
  }
  return true;
}

std::vector<v1::BoardInfo> BoardRegistry::List(
    const v1::BoardSelector& selector) const {
  std::vector<v1::BoardInfo> out;
  for (const auto& [id, b] : boards_) {
    if (Matches(b.info, selector)) out.push_back(b.info);
  }
  return out;
}

std::map<std::string, int> BoardRegistry::CountByState() const {
  std::map<std::string, int> counts;
  for (v1::BoardState st :
       {v1::BOARD_STATE_IDLE, v1::BOARD_STATE_BUSY, v1::BOARD_STATE_LOST,
        v1::BOARD_STATE_QUARANTINED, v1::BOARD_STATE_DRAINING}) {
    counts[StateName(st)] = 0;
  }
  for (const auto& [id, b] : boards_) ++counts[StateName(b.info.state())];
  return counts;
}

std::string BoardRegistry::StateName(v1::BoardState state) {
  switch (state) {
    case v1::BOARD_STATE_IDLE:
      return "idle";
    case v1::BOARD_STATE_BUSY:
      return "busy";
    case v1::BOARD_STATE_LOST:
      return "lost";
    case v1::BOARD_STATE_QUARANTINED:
      return "quarantined";
    case v1::BOARD_STATE_DRAINING:
      return "draining";
    default:
      return "unknown";
  }
}

}  // namespace tunefarm
