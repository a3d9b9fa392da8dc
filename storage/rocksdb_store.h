// The RocksDB backend of Store (storage/store.h): how to open it. Only
// executables and tests wire it in (library tunefarm_storage); the core
// libraries see the Store interface alone.
//
// Ownership: OpenRocksDbStore returns a Store that owns its database; the
// database is closed (and its lock released) when the Store is destroyed.
// Thread-safety: as every Store. No RocksDB header leaks through this file.
#ifndef TUNEFARM_STORAGE_ROCKSDB_STORE_H_
#define TUNEFARM_STORAGE_ROCKSDB_STORE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "storage/store.h"

namespace tunefarm {

struct RocksDbStoreOptions {
  // Commits are refused (RESOURCE_EXHAUSTED, nothing written) while the
  // file system holding the database has less free than this, so RocksDB
  // never meets a full disk in the middle of a write: the RocksDB of
  // Debian 12 (7.8) aborts the process on a failed log write
  // (tests/storage/disk_full_test.cc). Memtables are capped at half of it,
  // so a flush still finds room.
  uint64_t min_free_bytes = uint64_t{64} << 20;
};

// Opens (creating if missing) a RocksDB database at `path` with column
// families sweeps, rounds, boards, events, metrics (plus default for meta).
// FAILED_PRECONDITION naming the path when another process (or another Store
// in this process) holds the database's lock; RESOURCE_EXHAUSTED "data disk
// full (…)" when the disk has no room to open it.
//
// After a background error (a flush or a write that met a full disk) the
// database stops writing; the store then refuses commits with "data disk
// full (…)" and calls DB::Resume once the free space is back above
// min_free_bytes, so it recovers without a restart.
absl::StatusOr<std::unique_ptr<Store>> OpenRocksDbStore(
    const std::string& path, const RocksDbStoreOptions& options = {});

}  // namespace tunefarm

#endif  // TUNEFARM_STORAGE_ROCKSDB_STORE_H_
