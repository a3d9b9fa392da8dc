#include "storage/memory_store.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"

namespace tunefarm {
namespace {

template <typename Proto>
absl::StatusOr<Proto> Parse(const char* what, const std::string& key,
                            const std::string& value) {
  Proto msg;
  if (!msg.ParseFromString(value)) {
    return absl::DataLossError(absl::StrCat("corrupt ",
                                            Proto::descriptor()->name(), " in ",
                                            what, " at key \"", key, "\""));
  }
  return msg;
}

class MemoryStore : public Store {
 public:
  absl::Status Commit(const WriteSet& writes) override {
    if (writes.empty()) return absl::OkStatus();
    TF_RETURN_IF_ERROR(writes.Validate());
    absl::MutexLock lock(&mu_);
    using Kind = WriteSet::Mutation::Kind;
    for (const WriteSet::Mutation& m : writes.mutations()) {
      switch (m.kind) {
        case Kind::kPutSweep:
          sweeps_[m.id] = m.value;
          break;
        case Kind::kPutRound:
          rounds_[m.id][m.a] = m.value;
          break;
        case Kind::kPutBoard:
          boards_[m.id] = m.value;
          break;
        case Kind::kDeleteBoard:
          boards_.erase(m.id);
          break;
        case Kind::kAppendEvent:
          events_[m.id][m.a] = m.value;
          break;
        case Kind::kPutMeasurement:
          metrics_[m.id][{m.a, m.b}] = m.value;
          break;
        case Kind::kPutMeta:
          meta_[m.id] = m.value;
          break;
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<v1::Sweep> GetSweep(const std::string& sweep_id) override {
    absl::MutexLock lock(&mu_);
    auto it = sweeps_.find(sweep_id);
    if (it == sweeps_.end()) {
      return absl::NotFoundError(
          absl::StrCat("sweep '", sweep_id, "' not found"));
    }
    return Parse<v1::Sweep>("sweeps", sweep_id, it->second);
  }

  absl::StatusOr<std::vector<v1::Sweep>> ListSweeps() override {
    absl::MutexLock lock(&mu_);
    std::vector<v1::Sweep> out;
    for (const auto& [id, value] : sweeps_) {
      TF_ASSIGN_OR_RETURN(v1::Sweep s, Parse<v1::Sweep>("sweeps", id, value));
      out.push_back(std::move(s));
    }
    return out;
  }

  absl::StatusOr<v1::Round> GetRound(const std::string& sweep_id,
                                     int64_t round_id) override {
    absl::MutexLock lock(&mu_);
    auto sweep = rounds_.find(sweep_id);
    if (sweep != rounds_.end()) {
      auto it = sweep->second.find(round_id);
      if (it != sweep->second.end()) {
        return Parse<v1::Round>("rounds", absl::StrCat(sweep_id, "/", round_id),
                                it->second);
      }
    }
    return absl::NotFoundError(absl::StrCat("round ", round_id, " of sweep '",
                                            sweep_id, "' not found"));
  }

  absl::StatusOr<std::vector<v1::Round>> ListRounds(
      const std::string& sweep_id) override {
    absl::MutexLock lock(&mu_);
    return RoundsLocked(sweep_id);
  }

  absl::StatusOr<std::vector<v1::Round>> ListRoundsFrom(
      const std::string& sweep_id, int64_t from_round_id, int limit) override {
    if (limit < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("ListRoundsFrom: limit must be >= 0, got ", limit));
    }
    absl::MutexLock lock(&mu_);
    std::vector<v1::Round> out;
    auto sweep = rounds_.find(sweep_id);
    if (sweep == rounds_.end()) return out;
    for (auto it = sweep->second.lower_bound(from_round_id);
         it != sweep->second.end(); ++it) {
      TF_ASSIGN_OR_RETURN(
          v1::Round r,
          Parse<v1::Round>("rounds", absl::StrCat(sweep_id, "/", it->first),
                           it->second));
      out.push_back(std::move(r));
      if (limit > 0 && static_cast<int>(out.size()) >= limit) break;
    }
    return out;
  }

  absl::StatusOr<std::vector<v1::SweepEvent>> ReadEvents(
      const std::string& sweep_id, int64_t from_seq, int limit) override {
    if (limit < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("ReadEvents: limit must be >= 0, got ", limit));
    }
    absl::MutexLock lock(&mu_);
    std::vector<v1::SweepEvent> out;
    auto sweep = events_.find(sweep_id);
    if (sweep == events_.end()) return out;
    for (auto it = sweep->second.lower_bound(from_seq);
         it != sweep->second.end(); ++it) {
      TF_ASSIGN_OR_RETURN(
          v1::SweepEvent ev,
          Parse<v1::SweepEvent>(
              "events", absl::StrCat(sweep_id, "/", it->first), it->second));
      out.push_back(std::move(ev));
      if (limit > 0 && static_cast<int>(out.size()) >= limit) break;
    }
    return out;
  }

  absl::StatusOr<std::vector<v1::BoardInfo>> ListBoards() override {
    absl::MutexLock lock(&mu_);
    std::vector<v1::BoardInfo> out;
    for (const auto& [id, value] : boards_) {
      TF_ASSIGN_OR_RETURN(v1::BoardInfo b,
                          Parse<v1::BoardInfo>("boards", id, value));
      out.push_back(std::move(b));
    }
    return out;
  }

  absl::StatusOr<std::vector<v1::Measurement>> ListMeasurements(
      const std::string& sweep_id, int64_t round_id) override {
    absl::MutexLock lock(&mu_);
    std::vector<v1::Measurement> out;
    auto sweep = metrics_.find(sweep_id);
    if (sweep == metrics_.end()) return out;
    for (auto it = sweep->second.lower_bound({round_id, 0});
         it != sweep->second.end() && it->first.first == round_id; ++it) {
      TF_ASSIGN_OR_RETURN(
          v1::Measurement m,
          Parse<v1::Measurement>(
              "metrics", absl::StrCat(sweep_id, "/", round_id), it->second));
      out.push_back(std::move(m));
    }
    return out;
  }

  absl::StatusOr<std::optional<std::string>> GetMeta(
      const std::string& key) override {
    absl::MutexLock lock(&mu_);
    auto it = meta_.find(key);
    if (it == meta_.end()) return std::optional<std::string>();
    return std::optional<std::string>(it->second);
  }

 private:
  absl::StatusOr<std::vector<v1::Round>> RoundsLocked(
      const std::string& sweep_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<v1::Round> out;
    auto sweep = rounds_.find(sweep_id);
    if (sweep == rounds_.end()) return out;
    for (const auto& [id, value] : sweep->second) {
      TF_ASSIGN_OR_RETURN(
          v1::Round r,
          Parse<v1::Round>("rounds", absl::StrCat(sweep_id, "/", id), value));
      out.push_back(std::move(r));
    }
    return out;
  }

  absl::Mutex mu_;
  std::map<std::string, std::string> sweeps_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::map<int64_t, std::string>> rounds_
      ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> boards_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::map<int64_t, std::string>> events_
      ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::map<std::pair<int64_t, int64_t>, std::string>>
      metrics_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> meta_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<Store> NewMemoryStore() {
  return std::make_unique<MemoryStore>();
}

}  // namespace tunefarm
