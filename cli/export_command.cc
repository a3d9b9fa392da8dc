#include "cli/export_command.h"

#include <filesystem>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/files.h"
#include "ops/catalog.h"
#include "tuning_db/codegen.h"
#include "tuning_db/database.h"

namespace tunefarm {
namespace {

int Fail(const absl::Status& status) {
  std::cerr << "tunefarm export: " << status.message() << "\n";
  return ExitCodeFor(status);
}

}  // namespace

std::string TuningDbJsonPath(const std::string& out_dir) {
  return out_dir + "/tuning_db.json";
}

int RunExport(FarmClient& client, const ExportOptions& options) {
  if (options.sweeps.empty() && options.merge_files.empty()) {
    return Fail(absl::InvalidArgumentError(
        "name at least one sweep, or --merge database files"));
  }
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  std::vector<std::string> log;
  TuningDb fresh;
  for (const std::string& file : options.merge_files) {
    absl::StatusOr<TuningDb> db = LoadTuningDb(file);
    if (!db.ok()) return Fail(db.status());
    MergeTuningDb(&fresh, *db, &log);
  }
  absl::StatusOr<OperatorCatalog> catalog =
      OperatorCatalog::LoadFromDirs(options.ops_dirs);
  if (!catalog.ok() && !options.sweeps.empty()) {
    std::cerr << "tunefarm export: operator packages not loaded ("
              << catalog.status().message()
              << "); lookups will have no manifest default\n";
  }
  std::vector<v1::BoardInfo> boards;
  if (!options.sweeps.empty()) {
    if (absl::Status st = client.FetchBoards(&boards); !st.ok()) {
      return Fail(st);
    }
  }
  int exported = 0;
  for (const std::string& id : options.sweeps) {
    v1::Sweep sweep;
    std::vector<v1::Round> rounds;
    if (absl::Status st = client.FetchSweep(id, &sweep, &rounds); !st.ok()) {
      return Fail(
          absl::Status(st.code(), absl::StrCat(id, ": ", st.message())));
    }
    absl::StatusOr<std::vector<TunedEntry>> entries =
        EntriesFromSweep(sweep, rounds, boards);
    if (!entries.ok()) {
      std::cerr << "tunefarm export: skipped " << id << ": "
                << entries.status().message() << "\n";
      continue;
    }
    ++exported;
    TuningDb one;
    one.entries = *entries;
    const TunedEntry& entry = entries->front();
    // The manifest default on the backend: the lookup's last fallback.
    if (catalog.ok()) {
      absl::StatusOr<const v1::OperatorManifest*> op = catalog->Find(entry.op);
      if (op.ok()) {
        OperatorDefault def;
        def.op = entry.op;
        def.backend = entry.backend;
        def.params =
            ParamsToJson(DefaultParams(ProjectManifest(**op, entry.backend)));
        def.source_hash = (*op)->source_hash();
        def.date_unix_ms = now_ms;
        one.defaults.push_back(std::move(def));
      }
    }
    MergeTuningDb(&fresh, one, &log);
  }
  if (!options.sweeps.empty() && exported == 0 && options.merge_files.empty()) {
    return Fail(absl::FailedPreconditionError(
        "no sweep had a passing configuration; nothing written"));
  }
  // The database already in the folder is the base: what was exported
  // before stays unless the merge rule replaces it.
  TuningDb db;
  const std::string json_path = TuningDbJsonPath(options.out_dir);
  std::error_code ec;
  if (std::filesystem::exists(json_path, ec)) {
    absl::StatusOr<TuningDb> existing = LoadTuningDb(json_path);
    if (!existing.ok()) return Fail(existing.status());
    db = *std::move(existing);
    // Additions count against the existing database; what the batch itself
    // decided (two sweeps of one shape) stays.
    std::vector<std::string> batch;
    for (std::string& line : log) {
      if (line.rfind("added ", 0) != 0) batch.push_back(std::move(line));
    }
    log = std::move(batch);
    MergeTuningDb(&db, fresh, &log);
  } else {
    db = std::move(fresh);
  }
  if (absl::Status st = WriteTuningDbFiles(db, options.out_dir); !st.ok()) {
    return Fail(st);
  }
  const std::string log_path = options.out_dir + "/merge.log";
  std::string log_text = ReadFile(log_path).value_or("");
  const std::string stamp = absl::FormatTime(
      "%Y-%m-%dT%H:%M:%SZ", absl::FromUnixMillis(now_ms), absl::UTCTimeZone());
  for (const std::string& line : log) {
    absl::StrAppend(&log_text, stamp, " ", line, "\n");
  }
  if (absl::Status st = WriteFileAtomic(log_path, log_text); !st.ok()) {
    return Fail(st);
  }
  if (client.context().json) {
    nlohmann::json out = {{"path", json_path},
                          {"header", options.out_dir + "/tuning_db.h"},
                          {"python", options.out_dir + "/tuning_db.py"},
                          {"merge_log", log_path},
                          {"entries", db.entries.size()},
                          {"changes", log}};
    std::cout << out.dump() << "\n";
    return kExitOk;
  }
  for (const std::string& line : log) std::cout << "  " << line << "\n";
  std::cout << "tuning database: " << json_path << " (" << db.entries.size()
            << " entries; C++ header " << options.out_dir
            << "/tuning_db.h, Python module " << options.out_dir
            << "/tuning_db.py; changes in " << log_path << ")\n";
  return kExitOk;
}

}  // namespace tunefarm
