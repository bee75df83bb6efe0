// CommitQueue: the ordered write path of an engine, a group commit in the
// manner of LevelDB's writer queue (db/db_impl.cc, DBImpl::Write).
//
// Callers add their WriteBatch in the order their commits were decided (the
// engine's short ordered critical section; docs/design.md, "Concurrency"),
// then wait outside it. The writer at the front of the queue leads: it
// merges its batch and those queued behind it, up to kMaxGroupBytes, into one
// WriteBatch, writes it with one RocksDB write (with sync=true under kSync:
// one fdatasync for the whole group), and wakes them. So the writes land in
// the order they were added, each commit's batch stays atomic (a group
// lands whole or not at all), and concurrent kSync commits share syncs
// without any engine lock held through the sync.
//
// A writer whose batch is empty is a barrier: it writes nothing, and its
// Wait returns once every write added before it has landed (or failed: then
// it fails too).
//
// After a failed write every later writer fails with the same status,
// without writing, until Reset: the engine then reopens the store, and
// nothing decided on top of the failed commits (outbox positions, offsets)
// reaches the log.
//
// Safe for concurrent access from multiple threads without external
// synchronization. A Writer belongs to its caller and must live until Wait
// returns.

#ifndef IDEM_ENGINE_COMMIT_QUEUE_H_
#define IDEM_ENGINE_COMMIT_QUEUE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "engine/plain_mutex.h"
#include "rocksdb/db.h"
#include "rocksdb/write_batch.h"

namespace idem {

class CommitQueue {
 public:
  // A group stops growing past this many bytes (the leader's own batch is
  // always written, whatever its size).
  static constexpr size_t kMaxGroupBytes = size_t{1} << 20;

  // One queued write.
  class Writer {
   public:
    // `batch` is borrowed; it must not change until Wait returns.
    explicit Writer(rocksdb::WriteBatch* batch) : batch_(batch) {}
    Writer(const Writer&) = delete;
    Writer& operator=(const Writer&) = delete;

    // Once Wait returned OK: the sequence number of the last record of this
    // writer's batch, exactly (no other write's records share or follow
    // within it), even when it landed in a group with others. 0 for a
    // barrier, which wrote nothing.
    uint64_t last_sequence() const { return last_sequence_; }

   private:
    friend class CommitQueue;
    rocksdb::WriteBatch* const batch_;
    uint64_t last_sequence_ = 0;
    bool done_ = false;
    // done_, readable without the lock: Wait's spin looks at it first.
    std::atomic<bool> done_hint_{false};
    rocksdb::Status status_;
  };

  // `sync`: write every group with WriteOptions::sync.
  explicit CommitQueue(bool sync) : sync_(sync) {}
  CommitQueue(const CommitQueue&) = delete;
  CommitQueue& operator=(const CommitQueue&) = delete;

  // Queues `writer` behind every writer added before it.
  void Add(Writer* writer) ABSL_LOCKS_EXCLUDED(mu_);

  // Returns once the write of `writer` (added before) has landed in `db`
  // (synced, if the queue syncs) or failed: the RocksDB status of its
  // group. Leads the group write when `writer` reaches the front.
  rocksdb::Status Wait(rocksdb::DB* db, Writer* writer)
      ABSL_LOCKS_EXCLUDED(mu_);

  // How long Wait looks, yielding, for its writer's write to land or for
  // the writer to lead, before it sleeps until woken.
  static constexpr std::chrono::microseconds kSpin{50};

  // The sequence number of the last record of `written`, a batch (with at
  // least one record) that DB::Write has just written successfully.
  static uint64_t LastSequenceOf(const rocksdb::WriteBatch& written);

  // Clears the failure that fails every write (after the store was
  // reopened). REQUIRES: no writer is queued, and none that decided on a
  // value of a failed write is still to be added (the engine holds its
  // store lock exclusively: no commit in flight).
  void Reset() ABSL_LOCKS_EXCLUDED(mu_);

  // Groups written, and writers in them, since construction.
  uint64_t groups() const ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t writes() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void SpinBriefly(const Writer* writer) const;
  // Writes the batches of `group` as one write (none if every batch is
  // empty) and sets each writer's last_sequence_. Never throws: an exception
  // becomes a failed status.
  rocksdb::Status WriteGroup(rocksdb::DB* db, const std::vector<Writer*>& group)
      ABSL_LOCKS_EXCLUDED(mu_);

  const bool sync_;
  // A PlainMutex, not an absl::Mutex: taken three times a commit
  // (engine/plain_mutex.h says what that saves).
  mutable PlainMutex mu_;
  // Notified when writers are done and when the front changes: the
  // writers done wake, and so does the next leader.
  std::condition_variable changed_;
  // Front: the leader while its group is written, then the next leader.
  std::deque<Writer*> queue_ ABSL_GUARDED_BY(mu_);
  // queue_.front() (null when empty), readable without the lock.
  std::atomic<Writer*> front_hint_{nullptr};
  // The first failed write's status; fails every later one.
  rocksdb::Status failed_ ABSL_GUARDED_BY(mu_);
  uint64_t groups_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t writes_ ABSL_GUARDED_BY(mu_) = 0;
};

// `batches` as one WriteBatch, in order: the records of each after the
// header of the first (the WriteBatch format of RocksDB's write-ahead log,
// db/write_batch.cc: an 8-byte sequence, a 4-byte count, then the records).
rocksdb::WriteBatch MergeBatches(const rocksdb::WriteBatch* const* batches,
                                 size_t n);

}  // namespace idem

#endif  // IDEM_ENGINE_COMMIT_QUEUE_H_
