// Durable typed records of the farm (sweeps, rounds and their lineage, boards,
// watch events, raw measurements, small meta values) and the WriteSet that
// changes them atomically.
//
// Ownership: a Store's records are returned by value; callers own the
// copies. The backends are opened through their own headers
// (storage/rocksdb_store.h, storage/memory_store.h).
//
// Thread-safety: Store implementations are thread-safe (any number of threads
// may read and commit concurrently; each Commit is atomic). A WriteSet is not
// thread-safe: build it on one thread, then commit it.
#ifndef TUNEFARM_STORAGE_STORE_H_
#define TUNEFARM_STORAGE_STORE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tunefarm/v1/types.pb.h"

namespace tunefarm {

// A set of mutations that Store::Commit applies atomically and durably.
// Records are copied (serialized) when added, so the caller's messages may
// change afterwards. Ids are validated by Commit, which names the bad field.
class WriteSet {
 public:
  // One typed mutation. Exposed for Store implementations; callers use the
  // Put/Delete/Append methods below.
  struct Mutation {
    enum class Kind {
      kPutSweep,
      kPutRound,
      kPutBoard,
      kDeleteBoard,
      kAppendEvent,
      kPutMeasurement,
      kPutMeta,
    };
    Kind kind = Kind::kPutMeta;
    std::string id;     // sweep_id, board_id or meta key
    int64_t a = 0;      // round_id (round, measurement) or seq (event)
    int64_t b = 0;      // epoch (measurement)
    std::string value;  // serialized record, or the meta value
    bool serialize_failed = false;
  };

  void PutSweep(const v1::Sweep& sweep);      // key: sweep_id
  void PutRound(const v1::Round& round);      // key: sweep_id + round_id
  void PutBoard(const v1::BoardInfo& board);  // key: board_id
  void DeleteBoard(const std::string& board_id);
  // key: sweep_id + seq (seq set by the caller, >= 1).
  void AppendEvent(const v1::SweepEvent& event);
  // The same event with `round` as its round field (`event`'s own must be
  // unset), serialized in place: a round event without a copy of the round.
  void AppendEvent(const v1::SweepEvent& event, const v1::Round& round);
  // Raw timing history of one attempt (epoch) of a round (metrics column
  // family); a second put for the same epoch replaces the first.
  void PutMeasurement(const std::string& sweep_id, int64_t round_id,
                      int64_t epoch, const v1::Measurement& m);
  // Idempotency keys, counters: an opaque value under an opaque key.
  void PutMeta(const std::string& key, const std::string& value);

  // Appends `other`'s mutations after these (a later put of the same key
  // wins, as in one Commit). The rvalue form moves them (no copies of the
  // serialized records) and leaves `other` empty.
  void Append(const WriteSet& other);
  void Append(WriteSet&& other);
  // Drops every mutation, keeping the memory for the next ones.
  void Clear() { mutations_.clear(); }
  // INVALID_ARGUMENT naming the field when a mutation has an empty id, a
  // negative round id or epoch, an event seq < 1, or failed to serialize.
  absl::Status Validate() const;

  bool empty() const { return mutations_.empty(); }
  size_t size() const { return mutations_.size(); }
  const std::vector<Mutation>& mutations() const { return mutations_; }

 private:
  std::vector<Mutation> mutations_;
};

// Durable typed records of the farm. Implementations are thread-safe.
// Every read that finds an unparseable value returns DATA_LOSS naming the
// column family and key.
class Store {
 public:
  virtual ~Store() = default;

  // Applies every mutation of `writes` or none, synced to disk before
  // returning OK. INVALID_ARGUMENT (nothing written) when a mutation has an
  // empty id, a negative round id or epoch, or an event seq < 1.
  virtual absl::Status Commit(const WriteSet& writes) = 0;

  // Whether commits can succeed now: OK, or RESOURCE_EXHAUSTED "data disk
  // full (…)" naming the path and what is free while the disk is short of
  // space or the database stopped writing after a background error. Cheap
  // (callers ask before taking new work); it never writes. A store that
  // recovers by itself (space returned) answers OK again.
  virtual absl::Status Writable() { return absl::OkStatus(); }

  // NOT_FOUND names the id.
  virtual absl::StatusOr<v1::Sweep> GetSweep(const std::string& sweep_id) = 0;
  // All sweeps, ordered by sweep_id.
  virtual absl::StatusOr<std::vector<v1::Sweep>> ListSweeps() = 0;
  // NOT_FOUND names the sweep and round.
  virtual absl::StatusOr<v1::Round> GetRound(const std::string& sweep_id,
                                             int64_t round_id) = 0;
  // The sweep's rounds, ascending round_id (empty for an unknown sweep).
  virtual absl::StatusOr<std::vector<v1::Round>> ListRounds(
      const std::string& sweep_id) = 0;
  // The rounds with round_id >= from_round_id, ascending, at most `limit`
  // (0 = all): one page of a long sweep. INVALID_ARGUMENT for a negative
  // limit.
  virtual absl::StatusOr<std::vector<v1::Round>> ListRoundsFrom(
      const std::string& sweep_id, int64_t from_round_id, int limit) = 0;
  // Events with seq >= from_seq, ascending, at most `limit` (0 = all).
  // INVALID_ARGUMENT for a negative limit.
  virtual absl::StatusOr<std::vector<v1::SweepEvent>> ReadEvents(
      const std::string& sweep_id, int64_t from_seq, int limit) = 0;
  // All boards, ordered by board_id.
  virtual absl::StatusOr<std::vector<v1::BoardInfo>> ListBoards() = 0;
  // The round's measurements, ascending epoch.
  virtual absl::StatusOr<std::vector<v1::Measurement>> ListMeasurements(
      const std::string& sweep_id, int64_t round_id) = 0;
  // nullopt when the key was never put.
  virtual absl::StatusOr<std::optional<std::string>> GetMeta(
      const std::string& key) = 0;

  // Lineage, the same for every store: these read the rounds with
  // GetSweep/ListRounds and walk them with storage/lineage.h.
  // Parent first, up to and including the baseline. NOT_FOUND for an unknown
  // round.
  absl::StatusOr<std::vector<int64_t>> Ancestors(const std::string& sweep_id,
                                                 int64_t round_id);
  // Direct children, ascending. NOT_FOUND for an unknown round.
  absl::StatusOr<std::vector<int64_t>> Children(const std::string& sweep_id,
                                                int64_t round_id);
  // baseline → … → sweep.best_round; empty while best_round < 0. NOT_FOUND
  // for an unknown sweep.
  absl::StatusOr<std::vector<int64_t>> KeptPath(const std::string& sweep_id);
};

}  // namespace tunefarm

#endif  // TUNEFARM_STORAGE_STORE_H_
