#include "engine/wal_syncer.h"

#include "engine/status_util.h"

namespace idem {

rocksdb::Status WriteSyncBarrier(rocksdb::DB* db) {
  // Log data is written to the WAL only: no sequence number, no memtable.
  rocksdb::WriteBatch barrier;
  rocksdb::Status s = barrier.PutLogData("idem.sync");
  if (!s.ok()) return s;
  rocksdb::WriteOptions options;
  options.sync = true;
  return db->Write(options, &barrier);
}

absl::Status WalSyncer::WaitDurable(rocksdb::DB* db, uint64_t sequence) {
  if (sequence <= durable_sequence()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  if (sequence <= durable_sequence()) return absl::OkStatus();
  // Every commit published up to `target` precedes the barrier in the WAL.
  const uint64_t target = db->GetLatestSequenceNumber();
  if (!skip_sync_) {
    rocksdb::Status s = WriteSyncBarrier(db);
    if (!s.ok()) return FromRocksStatus(s, "syncing the write-ahead log");
  }
  MarkDurable(target);
  return absl::OkStatus();
}

void WalSyncer::MarkDurable(uint64_t sequence) {
  uint64_t current = durable_.load(std::memory_order_acquire);
  while (current < sequence &&
         !durable_.compare_exchange_weak(current, sequence,
                                         std::memory_order_acq_rel)) {
  }
}

}  // namespace idem
