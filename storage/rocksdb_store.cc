// The RocksDB implementation of Store.
//
// Layout (one column family per record type, meta in "default"):
//   sweeps   <sweep_id>                                  -> v1::Sweep
//   rounds   <P(sweep_id)><round_id:20>                  -> v1::Round
//   boards   <board_id>                                  -> v1::BoardInfo
//   events   <P(sweep_id)><seq:20>                       -> v1::SweepEvent
//   metrics  <P(sweep_id)><round_id:20><epoch:20>        -> v1::Measurement
//   default  <key>                                       -> raw meta value
// P(id) is the id's length as 8 hex digits followed by the id: a length
// prefix, so that sweep "a" never sees the keys of sweep "ab" whatever bytes
// ids contain. Numbers are zero-padded decimal so keys sort numerically.
#include "storage/rocksdb_store.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "rocksdb/db.h"
#include "rocksdb/listener.h"
#include "rocksdb/options.h"
#include "rocksdb/write_batch.h"
#include "storage/store.h"

namespace tunefarm {
namespace {

constexpr char kSweepsCf[] = "sweeps";
constexpr char kRoundsCf[] = "rounds";
constexpr char kBoardsCf[] = "boards";
constexpr char kEventsCf[] = "events";
constexpr char kMetricsCf[] = "metrics";
constexpr char kMetaCf[] = "default";

std::string SweepPrefix(const std::string& sweep_id) {
  return absl::StrFormat("%08x", sweep_id.size()) + sweep_id;
}

std::string Num(int64_t n) { return absl::StrFormat("%020d", n); }

std::string RoundKey(const std::string& sweep_id, int64_t round_id) {
  return SweepPrefix(sweep_id) + Num(round_id);
}

std::string EventKey(const std::string& sweep_id, int64_t seq) {
  return SweepPrefix(sweep_id) + Num(seq);
}

std::string MetricKey(const std::string& sweep_id, int64_t round_id,
                      int64_t epoch) {
  return SweepPrefix(sweep_id) + Num(round_id) + Num(epoch);
}

// Maps a RocksDB status to absl, keeping RocksDB's message.
absl::Status FromRocks(const rocksdb::Status& s, absl::string_view what) {
  if (s.ok()) return absl::OkStatus();
  std::string msg = absl::StrCat(what, ": rocksdb: ", s.ToString());
  switch (s.code()) {
    case rocksdb::Status::kNotFound:
      return absl::NotFoundError(msg);
    case rocksdb::Status::kCorruption:
      return absl::DataLossError(msg);
    case rocksdb::Status::kNotSupported:
      return absl::UnimplementedError(msg);
    case rocksdb::Status::kInvalidArgument:
      return absl::InvalidArgumentError(msg);
    case rocksdb::Status::kBusy:
    case rocksdb::Status::kTryAgain:
      return absl::UnavailableError(msg);
    case rocksdb::Status::kTimedOut:
      return absl::DeadlineExceededError(msg);
    case rocksdb::Status::kAborted:
      return absl::AbortedError(msg);
    case rocksdb::Status::kIOError:
      return absl::UnavailableError(msg);
    default:
      return absl::InternalError(msg);
  }
}

std::string PrintableKey(const rocksdb::Slice& key) {
  return absl::CHexEscape(absl::string_view(key.data(), key.size()));
}

// Free bytes for an unprivileged writer on the file system holding `path`,
// or nullopt when statvfs fails.
std::optional<uint64_t> FreeBytes(const std::string& path) {
  struct statvfs st;
  if (statvfs(path.c_str(), &st) != 0) return std::nullopt;
  return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
}

std::string MiB(uint64_t bytes) {
  return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / (1 << 20));
}

// RocksDB calls these with its own mutex held: they only note the error.
class BackgroundErrors : public rocksdb::EventListener {
 public:
  void OnBackgroundError(rocksdb::BackgroundErrorReason,
                         rocksdb::Status* bg_error) override {
    absl::MutexLock lock(&mu_);
    error_ = bg_error->ToString();
    no_space_ = bg_error->IsNoSpace();
    set_ = true;
  }
  void OnErrorRecoveryEnd(
      const rocksdb::BackgroundErrorRecoveryInfo& info) override {
    if (info.new_bg_error.ok()) Clear();
  }

  // A failed write: RocksDB must not be written again before Resume (a
  // write after a failed log write trips its assertions).
  void Note(const rocksdb::Status& s) {
    absl::MutexLock lock(&mu_);
    error_ = s.ToString();
    no_space_ = s.IsNoSpace();
    set_ = true;
  }

  // The background error RocksDB stopped writing for, if any.
  bool Get(std::string* error, bool* no_space) {
    absl::MutexLock lock(&mu_);
    *error = error_;
    *no_space = no_space_;
    return set_;
  }
  void Clear() {
    absl::MutexLock lock(&mu_);
    set_ = false;
    error_.clear();
  }

 private:
  absl::Mutex mu_;
  bool set_ ABSL_GUARDED_BY(mu_) = false;
  bool no_space_ ABSL_GUARDED_BY(mu_) = false;
  std::string error_ ABSL_GUARDED_BY(mu_);
};

template <typename Proto>
absl::StatusOr<Proto> Parse(const char* cf, const rocksdb::Slice& key,
                            const rocksdb::Slice& value) {
  Proto msg;
  if (!msg.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
    return absl::DataLossError(absl::StrCat(
        "corrupt ", Proto::descriptor()->name(), " in column family '", cf,
        "' at key \"", PrintableKey(key), "\" (", value.size(), " bytes)"));
  }
  return msg;
}

class RocksDbStore : public Store {
 public:
  RocksDbStore(
      std::string path, RocksDbStoreOptions options,
      std::shared_ptr<BackgroundErrors> errors, std::unique_ptr<rocksdb::DB> db,
      std::vector<rocksdb::ColumnFamilyHandle*> handles,
      rocksdb::ColumnFamilyHandle* sweeps, rocksdb::ColumnFamilyHandle* rounds,
      rocksdb::ColumnFamilyHandle* boards, rocksdb::ColumnFamilyHandle* events,
      rocksdb::ColumnFamilyHandle* metrics, rocksdb::ColumnFamilyHandle* meta)
      : path_(std::move(path)),
        options_(options),
        errors_(std::move(errors)),
        db_(std::move(db)),
        handles_(std::move(handles)),
        sweeps_(sweeps),
        rounds_(rounds),
        boards_(boards),
        events_(events),
        metrics_(metrics),
        meta_(meta) {}

  ~RocksDbStore() override {
    for (rocksdb::ColumnFamilyHandle* h : handles_) {
      db_->DestroyColumnFamilyHandle(h);
    }
    // Close flushes nothing we rely on (every commit is synced to the WAL);
    // it releases the lock so the path can be reopened.
    db_->Close();
  }

  absl::Status Commit(const WriteSet& writes) override {
    if (writes.empty()) return absl::OkStatus();
    TF_RETURN_IF_ERROR(writes.Validate());
    TF_RETURN_IF_ERROR(Writable());
    rocksdb::WriteBatch batch;
    for (const WriteSet::Mutation& m : writes.mutations()) {
      rocksdb::Status s;
      using Kind = WriteSet::Mutation::Kind;
      switch (m.kind) {
        case Kind::kPutSweep:
          s = batch.Put(sweeps_, m.id, m.value);
          break;
        case Kind::kPutRound:
          s = batch.Put(rounds_, RoundKey(m.id, m.a), m.value);
          break;
        case Kind::kPutBoard:
          s = batch.Put(boards_, m.id, m.value);
          break;
        case Kind::kDeleteBoard:
          s = batch.Delete(boards_, m.id);
          break;
        case Kind::kAppendEvent:
          s = batch.Put(events_, EventKey(m.id, m.a), m.value);
          break;
        case Kind::kPutMeasurement:
          s = batch.Put(metrics_, MetricKey(m.id, m.a, m.b), m.value);
          break;
        case Kind::kPutMeta:
          s = batch.Put(meta_, m.id, m.value);
          break;
      }
      TF_RETURN_IF_ERROR(FromRocks(s, "building write batch"));
    }
    rocksdb::WriteOptions options;
    options.sync = true;  // acknowledged means on disk (survives kill -9)
    rocksdb::Status s = db_->Write(options, &batch);
    if (s.IsIOError()) errors_->Note(s);
    if (s.IsNoSpace()) {
      return absl::ResourceExhaustedError(
          absl::StrCat("data disk full (commit to ", path_,
                       ": rocksdb: ", s.ToString(), ")"));
    }
    return FromRocks(s, absl::StrCat("commit to ", path_));
  }

  absl::Status Writable() override {
    const std::optional<uint64_t> free = FreeBytes(path_);
    if (free.has_value() && *free < options_.min_free_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "data disk full (", MiB(*free), " free on ", path_, ", below the ",
          MiB(options_.min_free_bytes), " the store keeps in reserve)"));
    }
    std::string error;
    bool no_space = false;
    if (!errors_->Get(&error, &no_space)) return absl::OkStatus();
    // Space is back: ask RocksDB to leave read-only mode, at most once a
    // second (Resume flushes).
    absl::Status resumed;
    {
      absl::MutexLock lock(&resume_mu_);
      const absl::Time now = absl::Now();
      if (now - last_resume_ >= absl::Seconds(1)) {
        last_resume_ = now;
        rocksdb::Status r = db_->Resume();
        if (r.ok()) {
          errors_->Clear();
          return absl::OkStatus();
        }
        error = absl::StrCat(error, "; resume: ", r.ToString());
      }
    }
    if (no_space) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "data disk full (", path_,
          " stopped writing after a background error: ", error, ")"));
    }
    return absl::UnavailableError(absl::StrCat(
        "store ", path_, " stopped writing after a background error: ", error));
  }

  absl::StatusOr<v1::Sweep> GetSweep(const std::string& sweep_id) override {
    std::string value;
    rocksdb::Status s =
        db_->Get(rocksdb::ReadOptions(), sweeps_, sweep_id, &value);
    if (s.IsNotFound()) {
      return absl::NotFoundError(
          absl::StrCat("sweep '", sweep_id, "' not found"));
    }
    TF_RETURN_IF_ERROR(FromRocks(s, absl::StrCat("get sweep ", sweep_id)));
    return Parse<v1::Sweep>(kSweepsCf, sweep_id, value);
  }

  absl::StatusOr<std::vector<v1::Sweep>> ListSweeps() override {
    return Scan<v1::Sweep>(sweeps_, kSweepsCf, "", "", 0);
  }

  absl::StatusOr<v1::Round> GetRound(const std::string& sweep_id,
                                     int64_t round_id) override {
    if (round_id < 0) {
      return absl::NotFoundError(absl::StrCat("round ", round_id, " of sweep '",
                                              sweep_id, "' not found"));
    }
    const std::string key = RoundKey(sweep_id, round_id);
    std::string value;
    rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), rounds_, key, &value);
    if (s.IsNotFound()) {
      return absl::NotFoundError(absl::StrCat("round ", round_id, " of sweep '",
                                              sweep_id, "' not found"));
    }
    TF_RETURN_IF_ERROR(FromRocks(
        s, absl::StrCat("get round ", round_id, " of sweep ", sweep_id)));
    return Parse<v1::Round>(kRoundsCf, key, value);
  }

  absl::StatusOr<std::vector<v1::Round>> ListRounds(
      const std::string& sweep_id) override {
    const std::string prefix = SweepPrefix(sweep_id);
    return Scan<v1::Round>(rounds_, kRoundsCf, prefix, prefix, 0);
  }

  absl::StatusOr<std::vector<v1::Round>> ListRoundsFrom(
      const std::string& sweep_id, int64_t from_round_id, int limit) override {
    if (limit < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("ListRoundsFrom: limit must be >= 0, got ", limit));
    }
    const std::string prefix = SweepPrefix(sweep_id);
    return Scan<v1::Round>(
        rounds_, kRoundsCf, prefix,
        RoundKey(sweep_id, std::max<int64_t>(0, from_round_id)), limit);
  }

  absl::StatusOr<std::vector<v1::SweepEvent>> ReadEvents(
      const std::string& sweep_id, int64_t from_seq, int limit) override {
    if (limit < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("ReadEvents: limit must be >= 0, got ", limit));
    }
    if (from_seq < 0) from_seq = 0;
    const std::string prefix = SweepPrefix(sweep_id);
    return Scan<v1::SweepEvent>(events_, kEventsCf, prefix,
                                EventKey(sweep_id, from_seq), limit);
  }

  absl::StatusOr<std::vector<v1::BoardInfo>> ListBoards() override {
    return Scan<v1::BoardInfo>(boards_, kBoardsCf, "", "", 0);
  }

  absl::StatusOr<std::vector<v1::Measurement>> ListMeasurements(
      const std::string& sweep_id, int64_t round_id) override {
    if (round_id < 0) return std::vector<v1::Measurement>{};
    const std::string prefix = RoundKey(sweep_id, round_id);
    return Scan<v1::Measurement>(metrics_, kMetricsCf, prefix, prefix, 0);
  }

  absl::StatusOr<std::optional<std::string>> GetMeta(
      const std::string& key) override {
    std::string value;
    rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), meta_, key, &value);
    if (s.IsNotFound()) return std::optional<std::string>();
    TF_RETURN_IF_ERROR(FromRocks(s, absl::StrCat("get meta ", key)));
    return std::optional<std::string>(std::move(value));
  }

 private:
  // Records whose key starts with `prefix`, from `start` (>= prefix) on, at
  // most `limit` (0 = all).
  template <typename Proto>
  absl::StatusOr<std::vector<Proto>> Scan(rocksdb::ColumnFamilyHandle* cf,
                                          const char* cf_name,
                                          const std::string& prefix,
                                          const std::string& start, int limit) {
    std::vector<Proto> out;
    std::unique_ptr<rocksdb::Iterator> it(
        db_->NewIterator(rocksdb::ReadOptions(), cf));
    for (it->Seek(start); it->Valid(); it->Next()) {
      if (!it->key().starts_with(prefix)) break;
      TF_ASSIGN_OR_RETURN(Proto msg,
                          Parse<Proto>(cf_name, it->key(), it->value()));
      out.push_back(std::move(msg));
      if (limit > 0 && static_cast<int>(out.size()) >= limit) break;
    }
    TF_RETURN_IF_ERROR(
        FromRocks(it->status(), absl::StrCat("scan of ", cf_name)));
    return out;
  }

  const std::string path_;
  const RocksDbStoreOptions options_;
  std::shared_ptr<BackgroundErrors> errors_;
  absl::Mutex resume_mu_;
  absl::Time last_resume_ ABSL_GUARDED_BY(resume_mu_) = absl::InfinitePast();
  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;  // owned, all of them
  rocksdb::ColumnFamilyHandle* sweeps_;
  rocksdb::ColumnFamilyHandle* rounds_;
  rocksdb::ColumnFamilyHandle* boards_;
  rocksdb::ColumnFamilyHandle* events_;
  rocksdb::ColumnFamilyHandle* metrics_;
  rocksdb::ColumnFamilyHandle* meta_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> OpenRocksDbStore(
    const std::string& path, const RocksDbStoreOptions& options) {
  // Opening writes (a new log, the manifest): on a full disk RocksDB would
  // fail half-way, so refuse before it starts. The folder may not exist
  // yet; its parent then tells the space.
  std::string probe = path;
  std::optional<uint64_t> free;
  while (!(free = FreeBytes(probe)).has_value() && probe.size() > 1) {
    const size_t slash = probe.find_last_of('/');
    if (slash == std::string::npos) {
      probe = ".";
    } else {
      probe = slash == 0 ? "/" : probe.substr(0, slash);
    }
  }
  if (free.has_value() && *free < options.min_free_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "data disk full (", MiB(*free), " free for ", path, ", below the ",
        MiB(options.min_free_bytes), " the store keeps in reserve)"));
  }
  auto errors = std::make_shared<BackgroundErrors>();
  rocksdb::DBOptions db_options;
  db_options.listeners.push_back(errors);
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  db_options.paranoid_checks = true;
  // Memtables are flushed before they outgrow half the reserve, so a flush
  // on a nearly full disk still finds room.
  if (options.min_free_bytes > 0) {
    db_options.db_write_buffer_size =
        std::max<uint64_t>(4 << 20, options.min_free_bytes / 2);
  }

  // RocksDB insists on opening every existing column family, so open any
  // unknown ones too (a newer version may have added some).
  std::vector<std::string> names = {kMetaCf,   kSweepsCf, kRoundsCf,
                                    kBoardsCf, kEventsCf, kMetricsCf};
  std::vector<std::string> existing;
  if (rocksdb::DB::ListColumnFamilies(db_options, path, &existing).ok()) {
    for (const std::string& name : existing) {
      if (std::find(names.begin(), names.end(), name) == names.end()) {
        names.push_back(name);
      }
    }
  }
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const std::string& name : names) {
    descriptors.emplace_back(name, rocksdb::ColumnFamilyOptions());
  }

  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s =
      rocksdb::DB::Open(db_options, path, descriptors, &handles, &raw);
  if (!s.ok()) {
    std::string text = s.ToString();
    // Another process (or Store) holds the database: RocksDB reports an I/O
    // error on the LOCK file.
    if (s.IsIOError() &&
        (absl::StrContains(text, "lock") || absl::StrContains(text, "LOCK"))) {
      return absl::FailedPreconditionError(absl::StrCat(
          "RocksDB store at ", path,
          " is locked: another process (or Store) has it open: rocksdb: ",
          text));
    }
    if (s.IsNoSpace()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "data disk full (open RocksDB store at ", path, ": ", text, ")"));
    }
    return FromRocks(s, absl::StrCat("open RocksDB store at ", path));
  }
  std::unique_ptr<rocksdb::DB> db(raw);
  // handles are in descriptor order.
  return std::unique_ptr<Store>(new RocksDbStore(
      path, options, std::move(errors), std::move(db), handles, handles[1],
      handles[2], handles[3], handles[4], handles[5], handles[0]));
}

}  // namespace tunefarm
