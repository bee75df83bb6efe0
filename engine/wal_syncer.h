// WalSyncer makes buffered commits durable on demand, as a group commit: the
// first caller of WaitDurable whose sequence is not yet durable writes a sync
// barrier (an empty log record written with sync=true, which fdatasyncs every
// live WAL file through RocksDB's own write path), covering every commit
// published before it; callers arriving meanwhile wait and find themselves
// covered. Syncing through the write path, rather than DB::SyncWAL, keeps
// syncs ordered with writes, so a failed write is never followed by a sync of
// the same log file.
//
// Safe for concurrent access from multiple threads without external
// synchronization.

#ifndef IDEM_ENGINE_WAL_SYNCER_H_
#define IDEM_ENGINE_WAL_SYNCER_H_

#include <atomic>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "rocksdb/db.h"

namespace idem {

class WalSyncer {
 public:
  // Returns once every commit to `db` with a sequence <= `sequence` is
  // durable. On failure nothing newer than durable_sequence() is durable.
  absl::Status WaitDurable(rocksdb::DB* db, uint64_t sequence);

  // Records that every commit up to `sequence` is durable (e.g. after the
  // store was reopened and synced).
  void MarkDurable(uint64_t sequence);

  uint64_t durable_sequence() const {
    return durable_.load(std::memory_order_acquire);
  }

  // Test-only: pretend every sync succeeds without syncing (a broken variant
  // that acknowledges before durability).
  void set_skip_sync_for_testing(bool skip) { skip_sync_ = skip; }

 private:
  bool skip_sync_ = false;
  std::atomic<uint64_t> durable_{0};
  absl::Mutex mu_;  // held for the whole sync: one syncer at a time
};

// Writes the sync barrier described above to `db`.
rocksdb::Status WriteSyncBarrier(rocksdb::DB* db);

}  // namespace idem

#endif  // IDEM_ENGINE_WAL_SYNCER_H_
