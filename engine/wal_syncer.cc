#include "engine/wal_syncer.h"

#include <algorithm>

#include "engine/status_util.h"
#include "engine/tsan_scope.h"

namespace idem {

rocksdb::Status WriteSyncBarrier(rocksdb::DB* db) {
  // Log data is written to the WAL only: no sequence number, no memtable.
  rocksdb::WriteBatch barrier;
  rocksdb::Status s = barrier.PutLogData("idem.sync");
  if (!s.ok()) return s;
  rocksdb::WriteOptions options;
  options.sync = true;
  RocksWriteScope rocks_write;
  return db->Write(options, &barrier);
}

absl::Status WalSyncer::WaitDurable(rocksdb::DB* db, uint64_t sequence) {
  if (sequence <= durable_sequence()) return absl::OkStatus();
  absl::Duration group_wait;
  {
    absl::MutexLock lock(&mu_);
    // Wait out a running sync: it may cover `sequence`.
    auto covered_or_idle = [this,
                            sequence]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return sequence <= durable_sequence() || !sync_running_;
    };
    mu_.Await(absl::Condition(&covered_or_idle));
    if (sequence <= durable_sequence()) return absl::OkStatus();
    sync_running_ = true;
    group_wait =
        group_wait_for_testing_.value_or(std::min(last_sync_, kMaxGroupWait));
  }
  // This caller leads the next sync; the lock is free meanwhile, so waiters
  // it covers return as soon as it is done.
  WaitForCommitsInFlight(group_wait);
  // Every commit published up to `target` precedes the barrier in the WAL.
  const uint64_t target = db->GetLatestSequenceNumber();
  rocksdb::Status s;
  const absl::Time start = absl::Now();
  if (!skip_sync_) s = WriteSyncBarrier(db);
  const absl::Duration took = absl::Now() - start;
  absl::MutexLock lock(&mu_);
  sync_running_ = false;
  last_sync_ = took;
  if (!s.ok()) return FromRocksStatus(s, "syncing the write-ahead log");
  MarkDurable(target);
  return absl::OkStatus();
}

void WalSyncer::WaitForCommitsInFlight(absl::Duration limit) {
  if (limit <= absl::ZeroDuration()) return;
  leader_waiting_.store(true);
  auto none_in_flight = [](std::atomic<int>* in_flight) {
    return in_flight->load() == 0;
  };
  commits_mu_.LockWhenWithTimeout(
      absl::Condition(+none_in_flight, &commits_in_flight_), limit);
  commits_mu_.Unlock();
  leader_waiting_.store(false);
}

WalSyncer::CommitScope::CommitScope(WalSyncer* syncer) : syncer_(syncer) {
  syncer_->commits_in_flight_.fetch_add(1);
}

WalSyncer::CommitScope::~CommitScope() {
  if (syncer_->commits_in_flight_.fetch_sub(1) == 1 &&
      syncer_->leader_waiting_.load() && !syncer_->skip_wakeup_) {
    // Releasing the mutex re-evaluates the waiting leader's condition.
    absl::MutexLock lock(&syncer_->commits_mu_);
  }
}

void WalSyncer::MarkDurable(uint64_t sequence) {
  uint64_t current = durable_.load(std::memory_order_acquire);
  while (current < sequence &&
         !durable_.compare_exchange_weak(current, sequence,
                                         std::memory_order_acq_rel)) {
  }
}

}  // namespace idem
