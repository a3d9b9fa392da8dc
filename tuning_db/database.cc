#include "tuning_db/database.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/files.h"
#include "common/params.h"
#include "common/speedup.h"

namespace tunefarm {
namespace {

using json = nlohmann::json;

std::string Date(int64_t unix_ms) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixMillis(unix_ms),
                          absl::UTCTimeZone());
}

// Typed field access with errors naming the path.
class Reader {
 public:
  explicit Reader(absl::string_view source) : source_(source) {}

  absl::Status Error(const std::string& path, absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(source_, ": ", path, ": ", what));
  }
  absl::StatusOr<const json*> Field(const json& obj, const std::string& path,
                                    const char* key, json::value_t type) const {
    auto it = obj.find(key);
    const std::string p = absl::StrCat(path, ".", key);
    if (it == obj.end()) return Error(p, "missing");
    const bool ok =
        type == json::value_t::number_float
            ? it->is_number()
            : (type == json::value_t::number_integer ? it->is_number_integer()
                                                     : it->type() == type);
    if (!ok) {
      return Error(p, absl::StrCat("expected ", json(type).type_name(),
                                   ", got ", it->type_name()));
    }
    return &*it;
  }
  absl::StatusOr<std::string> String(const json& obj, const std::string& path,
                                     const char* key) const {
    auto f = Field(obj, path, key, json::value_t::string);
    if (!f.ok()) return f.status();
    return (*f)->get<std::string>();
  }
  absl::StatusOr<double> Number(const json& obj, const std::string& path,
                                const char* key) const {
    auto f = Field(obj, path, key, json::value_t::number_float);
    if (!f.ok()) return f.status();
    return (*f)->get<double>();
  }
  absl::StatusOr<int64_t> Int(const json& obj, const std::string& path,
                              const char* key) const {
    auto f = Field(obj, path, key, json::value_t::number_integer);
    if (!f.ok()) return f.status();
    return (*f)->get<int64_t>();
  }
  absl::StatusOr<bool> Bool(const json& obj, const std::string& path,
                            const char* key) const {
    auto f = Field(obj, path, key, json::value_t::boolean);
    if (!f.ok()) return f.status();
    return (*f)->get<bool>();
  }
  // A parameter object: every value a scalar.
  absl::StatusOr<json> Params(const json& obj, const std::string& path) const {
    auto f = Field(obj, path, "params", json::value_t::object);
    if (!f.ok()) return f.status();
    for (auto it = (*f)->begin(); it != (*f)->end(); ++it) {
      if (!it->is_primitive() || it->is_null()) {
        return Error(absl::StrCat(path, ".params.", it.key()),
                     "expected a number, string or boolean");
      }
    }
    return **f;
  }

 private:
  std::string source_;
};

#define TF_READ(lhs, expr)                        \
  do {                                            \
    auto tf_read_ = (expr);                       \
    if (!tf_read_.ok()) return tf_read_.status(); \
    lhs = *std::move(tf_read_);                   \
  } while (0)

json EntryToJson(const TunedEntry& e) {
  json dims = json::object();
  for (const auto& [k, v] : e.dims) dims[k] = v;
  return json{{"operator", e.op},
              {"backend", e.backend},
              {"device", e.device},
              {"dtype", e.dtype},
              {"dims", dims},
              {"workload", e.workload},
              {"params", e.params},
              {"time_us", e.time_us},
              {"interval_us", {e.p20_us, e.p80_us}},
              {"samples", e.samples},
              {"baseline_us", e.baseline_us},
              {"simulated", e.simulated},
              {"replayed", e.replayed},
              {"provenance",
               {{"sweep", e.sweep_id},
                {"round", e.round},
                {"board", e.board},
                {"date", Date(e.date_unix_ms)},
                {"date_unix_ms", e.date_unix_ms},
                {"operator_source_hash", e.source_hash}}}};
}

absl::StatusOr<TunedEntry> EntryFromJson(const json& j, const std::string& p,
                                         const Reader& r) {
  if (!j.is_object()) return r.Error(p, "expected an object");
  TunedEntry e;
  TF_READ(e.op, r.String(j, p, "operator"));
  TF_READ(e.backend, r.String(j, p, "backend"));
  TF_READ(e.device, r.String(j, p, "device"));
  TF_READ(e.dtype, r.String(j, p, "dtype"));
  const json* dims = nullptr;
  TF_READ(dims, r.Field(j, p, "dims", json::value_t::object));
  for (auto it = dims->begin(); it != dims->end(); ++it) {
    if (!it->is_number_integer() || it->get<int64_t>() <= 0) {
      return r.Error(absl::StrCat(p, ".dims.", it.key()),
                     "expected a positive integer");
    }
    e.dims[it.key()] = it->get<int64_t>();
  }
  if (e.dims.empty()) return r.Error(p + ".dims", "must not be empty");
  TF_READ(e.workload, r.String(j, p, "workload"));
  TF_READ(e.params, r.Params(j, p));
  TF_READ(e.time_us, r.Number(j, p, "time_us"));
  if (!(e.time_us > 0) || !std::isfinite(e.time_us)) {
    return r.Error(p + ".time_us", "must be a positive number");
  }
  const json* interval = nullptr;
  TF_READ(interval, r.Field(j, p, "interval_us", json::value_t::array));
  if (interval->size() != 2 || !(*interval)[0].is_number() ||
      !(*interval)[1].is_number()) {
    return r.Error(p + ".interval_us", "expected [p20, p80] in µs");
  }
  e.p20_us = (*interval)[0].get<double>();
  e.p80_us = (*interval)[1].get<double>();
  int64_t samples = 0;
  TF_READ(samples, r.Int(j, p, "samples"));
  e.samples = static_cast<int>(samples);
  TF_READ(e.baseline_us, r.Number(j, p, "baseline_us"));
  TF_READ(e.simulated, r.Bool(j, p, "simulated"));
  TF_READ(e.replayed, r.Bool(j, p, "replayed"));
  const json* prov = nullptr;
  TF_READ(prov, r.Field(j, p, "provenance", json::value_t::object));
  const std::string pp = p + ".provenance";
  TF_READ(e.sweep_id, r.String(*prov, pp, "sweep"));
  TF_READ(e.round, r.Int(*prov, pp, "round"));
  TF_READ(e.board, r.String(*prov, pp, "board"));
  TF_READ(e.date_unix_ms, r.Int(*prov, pp, "date_unix_ms"));
  TF_READ(e.source_hash, r.String(*prov, pp, "operator_source_hash"));
  return e;
}

std::string EntryText(const TunedEntry& e) {
  return absl::StrFormat(
      "%.2f µs (sweep %s round %d, %s%s)", e.time_us, e.sweep_id, e.round,
      Date(e.date_unix_ms),
      e.source_hash.empty()
          ? ""
          : absl::StrCat(", source ", e.source_hash.substr(0, 12)));
}

void SortEntries(TuningDb* db) {
  std::sort(db->entries.begin(), db->entries.end(),
            [](const TunedEntry& a, const TunedEntry& b) {
              return a.Key() < b.Key();
            });
  std::sort(db->defaults.begin(), db->defaults.end(),
            [](const OperatorDefault& a, const OperatorDefault& b) {
              return std::tie(a.op, a.backend) < std::tie(b.op, b.backend);
            });
}

}  // namespace

std::string DimsText(const std::map<std::string, int64_t>& dims) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : dims) parts.push_back(absl::StrCat(k, "=", v));
  return absl::StrJoin(parts, ",");
}

std::string TunedEntry::Key() const {
  return absl::StrCat(op, "/", backend, "/", device, "/", dtype, "/",
                      DimsText(dims));
}

namespace {

// The entry of `best`, a passing round measuring `workload`.
TunedEntry EntryOf(const v1::Sweep& sweep, const v1::Round& best,
                   const v1::Workload& workload, double baseline_us,
                   const std::vector<v1::BoardInfo>& boards) {
  const v1::SweepSpec& spec = sweep.spec();
  const v1::Measurement& m = best.result().measurement();
  TunedEntry e;
  e.op = spec.operator_name();
  e.backend = spec.boards().kind();
  e.device = spec.boards().chip();
  for (const v1::BoardInfo& b : boards) {
    if (b.board_id() == best.board_id()) e.device = b.chip();
  }
  e.dtype = workload.dtype();
  for (const auto& [k, v] : workload.dims()) e.dims[k] = v;
  e.workload = workload.name();
  e.params = ParamsToJson(best.params());
  e.time_us = m.median_us();
  e.p20_us = m.p20_us();
  e.p80_us = m.p80_us();
  e.samples = m.samples();
  e.baseline_us = baseline_us;
  e.simulated = m.simulated();
  e.replayed = m.replayed();
  e.sweep_id = sweep.sweep_id();
  e.round = best.round_id();
  e.board = best.board_id();
  e.date_unix_ms = best.finished_unix_ms();
  e.source_hash = spec.operator_source_hash();
  return e;
}

const v1::Round* PassingRound(const std::vector<v1::Round>& rounds,
                              int64_t id) {
  if (id < 0) return nullptr;
  for (const v1::Round& r : rounds) {
    if (r.round_id() != id) continue;
    return r.result().outcome() == v1::OUTCOME_OK &&
                   r.result().measurement().median_us() > 0
               ? &r
               : nullptr;
  }
  return nullptr;
}

absl::Status NothingToExport(const v1::Sweep& sweep) {
  return absl::FailedPreconditionError(absl::StrCat(
      "sweep ", sweep.sweep_id(), " has no passing configuration to export (",
      sweep.termination_detail().empty() ? v1::SweepState_Name(sweep.state())
                                         : sweep.termination_detail(),
      ")"));
}

}  // namespace

absl::StatusOr<TunedEntry> EntryFromSweep(
    const v1::Sweep& sweep, const std::vector<v1::Round>& rounds,
    const std::vector<v1::BoardInfo>& boards) {
  const v1::Round* best = PassingRound(rounds, sweep.best_round());
  if (best == nullptr) return NothingToExport(sweep);
  // A database entry says "use this instead of the default": not for a best
  // that its side-by-side check with the baseline did not show faster.
  const v1::ClosingCheck& check = sweep.closing_check();
  if (NotShownFaster(check)) {
    return absl::FailedPreconditionError(
        absl::StrCat("sweep ", sweep.sweep_id(),
                     ": its closing check did not show the best, round ",
                     check.best_round(), ", faster than the baseline (",
                     check.outcome(), "); nothing to export"));
  }
  return EntryOf(sweep, *best, sweep.spec().workload(), sweep.baseline_us(),
                 boards);
}

absl::StatusOr<std::vector<TunedEntry>> EntriesFromSweep(
    const v1::Sweep& sweep, const std::vector<v1::Round>& rounds,
    const std::vector<v1::BoardInfo>& boards) {
  const v1::SweepSpec& spec = sweep.spec();
  if (spec.workloads().empty()) {
    absl::StatusOr<TunedEntry> e = EntryFromSweep(sweep, rounds, boards);
    if (!e.ok()) return e.status();
    return std::vector<TunedEntry>{*std::move(e)};
  }
  std::vector<TunedEntry> out;
  for (int i = 0;
       i < spec.workloads_size() && i < sweep.workload_progress_size(); ++i) {
    const v1::WorkloadProgress& w = sweep.workload_progress(i);
    const v1::Round* best = PassingRound(rounds, w.best_round());
    if (best == nullptr) continue;
    out.push_back(
        EntryOf(sweep, *best, spec.workloads(i), w.baseline_us(), boards));
  }
  if (out.empty()) return NothingToExport(sweep);
  return out;
}

nlohmann::json TuningDbToJson(const TuningDb& db_in) {
  TuningDb db = db_in;
  SortEntries(&db);
  json entries = json::array();
  for (const TunedEntry& e : db.entries) entries.push_back(EntryToJson(e));
  json defaults = json::array();
  for (const OperatorDefault& d : db.defaults) {
    defaults.push_back({{"operator", d.op},
                        {"backend", d.backend},
                        {"params", d.params},
                        {"operator_source_hash", d.source_hash},
                        {"date_unix_ms", d.date_unix_ms}});
  }
  return json{{"format", kTuningDbFormat},
              {"version", kTuningDbVersion},
              {"lookup",
               "exact dims; else nearest by sum |ln(dim/entry dim)| among the "
               "same operator, backend, device, dtype and dim names; else the "
               "operator's default on the backend"},
              {"entries", entries},
              {"defaults", defaults}};
}

std::string TuningDbText(const TuningDb& db) {
  return TuningDbToJson(db).dump(2, ' ', false,
                                 json::error_handler_t::replace) +
         "\n";
}

absl::StatusOr<TuningDb> ParseTuningDb(absl::string_view text,
                                       absl::string_view source) {
  Reader r(source);
  json doc = json::parse(text.begin(), text.end(), nullptr,
                         /*allow_exceptions=*/false);
  if (doc.is_discarded()) return r.Error("(document)", "not valid JSON");
  if (!doc.is_object()) return r.Error("(document)", "expected an object");
  std::string format;
  TF_READ(format, r.String(doc, "", "format"));
  if (format != kTuningDbFormat) {
    return r.Error(".format", absl::StrCat("expected \"", kTuningDbFormat,
                                           "\", got \"", format, "\""));
  }
  int64_t version = 0;
  TF_READ(version, r.Int(doc, "", "version"));
  if (version < 1 || version > kTuningDbVersion) {
    return r.Error(".version",
                   absl::StrCat("version ", version,
                                " is not supported (this tunefarm reads 1..",
                                kTuningDbVersion, ")"));
  }
  TuningDb db;
  const json* entries = nullptr;
  TF_READ(entries, r.Field(doc, "", "entries", json::value_t::array));
  for (size_t i = 0; i < entries->size(); ++i) {
    TunedEntry e;
    TF_READ(e,
            EntryFromJson((*entries)[i], absl::StrCat(".entries[", i, "]"), r));
    db.entries.push_back(std::move(e));
  }
  const json* defaults = nullptr;
  TF_READ(defaults, r.Field(doc, "", "defaults", json::value_t::array));
  for (size_t i = 0; i < defaults->size(); ++i) {
    const json& j = (*defaults)[i];
    const std::string p = absl::StrCat(".defaults[", i, "]");
    if (!j.is_object()) return r.Error(p, "expected an object");
    OperatorDefault d;
    TF_READ(d.op, r.String(j, p, "operator"));
    TF_READ(d.backend, r.String(j, p, "backend"));
    TF_READ(d.params, r.Params(j, p));
    TF_READ(d.source_hash, r.String(j, p, "operator_source_hash"));
    TF_READ(d.date_unix_ms, r.Int(j, p, "date_unix_ms"));
    db.defaults.push_back(std::move(d));
  }
  // Duplicate keys would make lookups ambiguous.
  SortEntries(&db);
  for (size_t i = 1; i < db.entries.size(); ++i) {
    if (db.entries[i].Key() == db.entries[i - 1].Key()) {
      return r.Error(".entries",
                     absl::StrCat("two entries for ", db.entries[i].Key()));
    }
  }
  return db;
}

absl::StatusOr<TuningDb> LoadTuningDb(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat(path,
                                     ": cannot read the tuning "
                                     "database: ",
                                     text.status().message()));
  }
  return ParseTuningDb(*text, path);
}

void SetDefault(TuningDb* db, OperatorDefault def) {
  for (OperatorDefault& d : db->defaults) {
    if (d.op == def.op && d.backend == def.backend) {
      if (def.date_unix_ms >= d.date_unix_ms) d = std::move(def);
      return;
    }
  }
  db->defaults.push_back(std::move(def));
}

void MergeTuningDb(TuningDb* into, const TuningDb& from,
                   std::vector<std::string>* log) {
  for (const TunedEntry& in : from.entries) {
    const std::string key = in.Key();
    auto it = std::find_if(into->entries.begin(), into->entries.end(),
                           [&](const TunedEntry& e) { return e.Key() == key; });
    if (it == into->entries.end()) {
      into->entries.push_back(in);
      log->push_back(absl::StrCat("added ", key, ": ", EntryText(in)));
      continue;
    }
    const bool newer = in.date_unix_ms > it->date_unix_ms;
    const bool other_code = !in.source_hash.empty() &&
                            !it->source_hash.empty() &&
                            in.source_hash != it->source_hash;
    bool replace = false;
    std::string why;
    if (other_code) {
      replace = newer;
      why = newer ? "the operator's source changed and this is newer"
                  : "the operator's source differs and the one there is "
                    "newer";
    } else if (in.time_us < it->time_us ||
               (in.time_us == it->time_us && newer)) {
      replace = true;
      why = in.time_us < it->time_us ? "faster" : "as fast and newer";
    } else {
      why = in.time_us == it->time_us ? "as fast and not newer"
                                      : "slower than the one there";
    }
    if (in.sweep_id == it->sweep_id && in.round == it->round &&
        in.time_us == it->time_us) {
      continue;  // the same measurement exported twice
    }
    if (replace) {
      log->push_back(absl::StrCat("replaced ", key, ": ", EntryText(*it),
                                  " -> ", EntryText(in), ": ", why));
      *it = in;
    } else {
      log->push_back(absl::StrCat("kept ", key, ": ", EntryText(*it),
                                  "; ignored ", EntryText(in), ": ", why));
    }
  }
  for (const OperatorDefault& d : from.defaults) SetDefault(into, d);
  SortEntries(into);
}

const char* LookupSourceName(Lookup::Source s) {
  switch (s) {
    case Lookup::Source::kExact:
      return "exact";
    case Lookup::Source::kNearest:
      return "nearest";
    case Lookup::Source::kDefault:
      return "default";
    case Lookup::Source::kNone:
      break;
  }
  return "none";
}

Lookup LookupConfig(const TuningDb& db, absl::string_view op,
                    absl::string_view backend, absl::string_view device,
                    absl::string_view dtype,
                    const std::map<std::string, int64_t>& dims) {
  Lookup best;
  double best_distance = std::numeric_limits<double>::infinity();
  for (const TunedEntry& e : db.entries) {
    if (e.op != op || e.backend != backend || e.dtype != dtype) continue;
    if (!device.empty() && e.device != device) continue;
    if (e.dims.size() != dims.size()) continue;
    double distance = 0;
    bool same_names = true;
    for (const auto& [k, v] : dims) {
      auto it = e.dims.find(k);
      if (it == e.dims.end() || v <= 0) {
        same_names = false;
        break;
      }
      distance += std::fabs(
          std::log(static_cast<double>(v) / static_cast<double>(it->second)));
    }
    if (!same_names) continue;
    // Entries are sorted by key, so the first of equals is the lower key.
    if (distance < best_distance ||
        (distance == best_distance && best.entry != nullptr &&
         e.time_us < best.entry->time_us)) {
      best_distance = distance;
      best.entry = &e;
      best.distance = distance;
      best.source =
          distance == 0 ? Lookup::Source::kExact : Lookup::Source::kNearest;
    }
  }
  if (best.entry != nullptr) return best;
  for (const OperatorDefault& d : db.defaults) {
    if (d.op == op && d.backend == backend) {
      best.def = &d;
      best.source = Lookup::Source::kDefault;
      return best;
    }
  }
  return best;
}

}  // namespace tunefarm
