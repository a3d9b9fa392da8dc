// MemoryStore: a Store that keeps every record in memory, with the same
// ordering, validation and error texts as the RocksDB store but no
// durability (everything is gone when it is destroyed). For tests and
// benchmarks that need a store without a disk, and as the base a
// FaultInjectingStore wraps.
//
// Thread-safety: thread-safe (one mutex; each Commit is atomic).
#ifndef TUNEFARM_STORAGE_MEMORY_STORE_H_
#define TUNEFARM_STORAGE_MEMORY_STORE_H_

#include <memory>

#include "storage/store.h"

namespace tunefarm {

std::unique_ptr<Store> NewMemoryStore();

}  // namespace tunefarm

#endif  // TUNEFARM_STORAGE_MEMORY_STORE_H_
