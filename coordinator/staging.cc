#include "coordinator/staging.h"

#include <functional>
#include <optional>
#include <string>
#include <utility>

namespace tunefarm {
namespace {

// Undo for `(*map)[id]`: puts back the entry as it is now, or erases it
// when there is none.
template <typename Map>
std::function<void()> RestoreEntry(Map* map, const std::string& id) {
  std::optional<typename Map::mapped_type> before;
  if (auto it = map->find(id); it != map->end()) before = it->second;
  return [map, id, before = std::move(before)] {
    if (before.has_value()) {
      (*map)[id] = *before;
    } else {
      map->erase(id);
    }
  };
}

}  // namespace

void Staging::SaveSweep(Txn& txn, SweepRuntime& s) {
  const std::string& id = s.sweep.sweep_id();
  if (!txn.saved_sweeps.emplace(id, s.rounds.size()).second) return;
  // The spec never changes after submission and is most of the record
  // (maps of parameters and dimensions): save the rest, on every call.
  v1::SweepSpec* spec = s.sweep.release_spec();
  v1::Sweep saved = s.sweep;
  s.sweep.set_allocated_spec(spec);
  txn.undo.push_back([book = book_, id, saved = std::move(saved),
                      finished = s.finished, size = s.rounds.size(),
                      queued_from = s.queued_from] {
    SweepRuntime* rt = book->Find(id);
    if (rt == nullptr) return;
    v1::SweepSpec* live = rt->sweep.release_spec();
    rt->sweep = saved;
    rt->sweep.set_allocated_spec(live);
    rt->finished = finished;
    rt->queued_from = queued_from;
    if (rt->rounds.size() > size) {
      rt->rounds.resize(size);
      rt->views.Truncated(size);
      ++rt->rewinds;
    }
  });
}

void Staging::Touch(Txn& txn, SweepRuntime& s) {
  SaveSweep(txn, s);
  txn.touched.insert(&s);
}

v1::Round* Staging::AddRound(Txn& txn, SweepRuntime& s, Candidate c,
                             int workload_index) {
  Touch(txn, s);  // before the round is added, so undo drops it
  v1::Round& round = s.rounds.emplace_back();
  round.set_sweep_id(s.sweep.sweep_id());
  round.set_round_id(static_cast<int64_t>(s.rounds.size()) - 1);
  round.set_parent_round(c.parent_round);
  *round.mutable_params() = std::move(c.params);
  for (v1::ParamChange& change : c.changes) {
    *round.add_changes() = std::move(change);
  }
  round.set_stage(std::move(c.stage));
  round.set_rationale(std::move(c.rationale));
  round.set_state(v1::ROUND_STATE_QUEUED);
  round.set_created_unix_ms(clock_->NowUnixMs());
  if (workload_index >= 0) {
    round.set_workload(s.sweep.spec().workloads(workload_index).name());
    round.set_workload_index(workload_index);
  }
  s.sweep.set_next_round_id(round.round_id() + 1);
  txn.writes.PutRound(round);
  return &round;
}

void Staging::SaveRound(Txn& txn, SweepRuntime& s, const v1::Round& round) {
  const std::string& id = s.sweep.sweep_id();
  const int64_t index = round.round_id();
  // On every call, not only the first: a strategy may have seen the round
  // between two changes in one transaction.
  if (IsMultiWorkload(s.sweep.spec())) s.views.Changed(index);
  if (!txn.saved_rounds.insert({id, index}).second) return;
  // A round created in this transaction goes with the sweep's size.
  SaveSweep(txn, s);
  if (index >= static_cast<int64_t>(txn.saved_sweeps[id])) return;
  // Kept serialized: one buffer instead of a copy of every field, map and
  // string, most of which the commit never undoes (a round's bytes read
  // back as the same round).
  txn.undo.push_back(
      [book = book_, id, index, before = round.SerializeAsString()] {
        SweepRuntime* rt = book->Find(id);
        if (rt != nullptr && index >= 0 &&
            index < static_cast<int64_t>(rt->rounds.size())) {
          rt->rounds[index].ParseFromString(before);
          ++rt->rewinds;
          if (IsMultiWorkload(rt->sweep.spec())) rt->views.Changed(index);
        }
      });
}

void Staging::SaveBoard(Txn& txn, const std::string& board_id) {
  if (!txn.saved_boards.insert(board_id).second) return;
  txn.undo.push_back(RestoreEntry(&registry_->boards(), board_id));
}

void Staging::SaveAgent(Txn& txn, const std::string& agent_id) {
  txn.undo.push_back(RestoreEntry(&registry_->agents(), agent_id));
}

void Staging::SaveTeamSeconds(Txn& txn, const std::string& team) {
  if (!txn.saved_teams.insert(team).second) return;
  txn.undo.push_back([placement = placement_, team,
                      before = placement_->RecordedSeconds(team)] {
    placement->RestoreRecordedSeconds(team, before);
  });
}

void Staging::SaveReservationList(Txn& txn) {
  if (txn.saved_reservations) return;
  txn.saved_reservations = true;
  txn.undo.push_back(
      [placement = placement_, before = placement_->reservations()] {
        placement->SetReservations(before);
      });
}

void Staging::AddEvent(Txn& txn, SweepRuntime& s, v1::EventKind kind,
                       std::string message, const v1::Round* round) {
  Touch(txn, s);
  v1::SweepEvent ev;
  ev.set_sweep_id(s.sweep.sweep_id());
  ev.set_seq(s.sweep.last_event_seq() + 1);
  s.sweep.set_last_event_seq(ev.seq());
  ev.set_time_unix_ms(clock_->NowUnixMs());
  ev.set_kind(kind);
  ev.set_message(std::move(message));
  if (kind != v1::EVENT_KIND_ROUND_LEASED &&
      kind != v1::EVENT_KIND_ROUND_FINISHED) {
    *ev.mutable_sweep() = s.sweep;
  }
  if (round == nullptr) {
    txn.writes.AppendEvent(ev);
  } else if (!round->has_diagnosis()) {
    txn.writes.AppendEvent(ev, *round);  // no copy of the round
  } else {
    *ev.mutable_round() = *round;
    ev.mutable_round()->clear_diagnosis();  // keeps events small
    txn.writes.AppendEvent(ev);
  }
}

}  // namespace tunefarm
