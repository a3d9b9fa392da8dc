// storage_crash_writer DB_PATH: opens the store at DB_PATH and commits
// WriteSets in a loop (round i + its event i, for i = 1, 2, …), printing i
// to stdout, flushed, after each Commit returned OK. crash_test.cc SIGKILLs
// it mid-write and checks that every printed commit survived.
#include <cstdint>
#include <cstdio>
#include <memory>

#include "storage/rocksdb_store.h"
#include "storage/store.h"
#include "tests/storage/crash_record.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DB_PATH\n", argv[0]);
    return 2;
  }
  auto store = tunefarm::OpenRocksDbStore(argv[1]);
  if (!store.ok()) {
    std::fprintf(stderr, "storage_crash_writer: %s\n",
                 store.status().ToString().c_str());
    return 1;
  }
  // Bounded so that a forgotten writer cannot fill the disk; the test kills
  // it long before.
  for (int64_t i = 1; i <= 1000000; ++i) {
    tunefarm::WriteSet ws;
    ws.PutRound(tunefarm::CrashRound(i));
    ws.AppendEvent(tunefarm::CrashEvent(i));
    absl::Status s = (*store)->Commit(ws);
    if (!s.ok()) {
      std::fprintf(stderr, "storage_crash_writer: commit %lld: %s\n",
                   static_cast<long long>(i), s.ToString().c_str());
      return 1;
    }
    std::printf("%lld\n", static_cast<long long>(i));
    std::fflush(stdout);
  }
  return 0;
}
