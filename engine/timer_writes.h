// The timer side of the commit path (docs/design.md, "Timers"): what one
// commit writes to the idem.timers column family (TimerWrites), the stream
// time of each partition as the commits queued so far leave it
// (StreamTimes), and where each partition's due timers start (TimerCursors).
//
// A commit's timer index writes are validated and published like state
// writes, through a StateVersions of their own (engine/state_versions.h):
// a handler that read a timer's index entry (to move, cancel or fire it)
// runs again if a commit queued since wrote that entry.
//
// TimerWrites is not thread-safe; it lives for one commit (or one message,
// laid onto its commit's by Absorb). StreamTimes and TimerCursors are safe
// for concurrent access from multiple threads without external
// synchronization.

#ifndef IDEM_ENGINE_TIMER_WRITES_H_
#define IDEM_ENGINE_TIMER_WRITES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "engine/state_layer.h"
#include "idem/timers.h"
#include "rocksdb/db.h"
#include "rocksdb/write_batch.h"

namespace idem {

// No stream time: absl::InfinitePast() in microseconds.
inline constexpr int64_t kNoStreamTime = INT64_MIN;

class TimerWrites {
 public:
  // The by-key index entries the commit writes (engine/timer_record.h), as
  // the last write of each leaves them.
  StateLayer& index() { return index_; }
  const StateLayer& index() const { return index_; }

  // Queue entries: the last write of a key wins.
  void PutQueued(std::string key, std::string payload);
  void DeleteQueued(std::string key);
  // A dead-lettered timer's record.
  void PutDead(std::string key, std::string value);

  // A committed message of the partition carried `micros` (the partition's
  // stream time becomes at least that).
  void AdvanceStreamTime(std::string_view partition_key, int64_t micros);
  // The largest event time the commit carries for the partition, or
  // kNoStreamTime.
  int64_t StreamTime(std::string_view partition_key) const;
  // An event-time timer at `fire_at_micros`: the commit must run again if
  // the partition's stream time, as the commits queued before it leave it,
  // reached it.
  void NoteEventTimer(std::string_view partition_key, int64_t fire_at_micros);

  // Lays `newer` (a later message's) on top of these writes; `newer` is left
  // empty.
  void Absorb(TimerWrites&& newer);

  bool empty() const;

  // Whether an event-time timer of the commit is at or below its
  // partition's stream time in `stream_times` (then the commit runs again;
  // not checked without `event_timers`, a broken variant's), or a partition
  // it writes has no stream time loaded (the same).
  bool Stale(const class StreamTimes& stream_times,
             bool event_timers = true) const;

  // Adds the writes to `batch` in `family`: the queue entries, the index,
  // the dead-lettered timers, and each stream time that moves forward past
  // `stream_times`, which it then records. Converted RocksDB error if
  // RocksDB refuses an entry.
  absl::Status Build(rocksdb::ColumnFamilyHandle* family,
                     class StreamTimes& stream_times,
                     rocksdb::WriteBatch& batch) const;

  // The queue keys the commit puts (for TimerCursors::Lower once it landed).
  std::vector<std::string> QueuedPuts() const;

 private:
  StateLayer index_;
  // Queue key -> payload, nullopt to delete; in key order, as they are
  // written.
  absl::btree_map<std::string, std::optional<std::string>> queue_;
  std::vector<std::pair<std::string, std::string>> dead_;
  absl::flat_hash_map<std::string, int64_t> stream_times_;
  std::vector<std::pair<std::string, int64_t>> event_timers_;
};

// The stream time of each partition as the commits queued so far leave it
// (the ordered critical section advances it), loaded from the store on
// first use. Cleared when the store is reopened.
class StreamTimes {
 public:
  // The partition's stream time in microseconds (kNoStreamTime for none),
  // read from `family` the first time. Converted RocksDB error, or kDataLoss
  // for a value that does not decode.
  absl::StatusOr<int64_t> Load(rocksdb::DB* db,
                               rocksdb::ColumnFamilyHandle* family,
                               std::string_view partition_key)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The loaded stream time, or nullopt if it was not loaded.
  std::optional<int64_t> Latest(std::string_view partition_key) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Records `micros` as the partition's stream time if it is later.
  void Advance(std::string_view partition_key, int64_t micros)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Forgets the partition's (an import replaced it) or every partition's.
  void Forget(std::string_view partition_key) ABSL_LOCKS_EXCLUDED(mu_);
  void Clear() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, int64_t> times_ ABSL_GUARDED_BY(mu_);
};

// Per (partition, domain), the queue key every live timer is at or after:
// FireTimers seeks there rather than to the start of the partition's queue,
// so a head of deleted timers (tombstones until compaction drops them) is
// not walked again on every call. In memory only: after a restart the
// first seek starts at the beginning.
class TimerCursors {
 public:
  // A cursor as read: the key to seek to (empty: the start) and the epoch
  // Advance must present.
  struct Cursor {
    std::string key;
    uint64_t epoch = 0;
  };
  Cursor Get(const std::string& queue_start) const ABSL_LOCKS_EXCLUDED(mu_);
  // After a fire read `cursor` and fired up to `key` inclusive: moves the
  // cursor past `key`, unless a timer was put below it since the read.
  void Advance(const std::string& queue_start, const Cursor& cursor,
               std::string_view key) ABSL_LOCKS_EXCLUDED(mu_);
  // A commit put a timer at queue key `key` (landed): the cursor of its
  // (partition, domain) moves back to it if it is past it.
  void Lower(std::string_view key) ABSL_LOCKS_EXCLUDED(mu_);
  void Clear() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // The start of the queue `key` is in ('Q' P domain).
  static std::string_view QueueStartOf(std::string_view key);

  mutable absl::Mutex mu_;
  // Bumped by each Lower: a fire that read an older epoch does not advance.
  uint64_t epochs_ ABSL_GUARDED_BY(mu_) = 0;
  // By queue start.
  absl::flat_hash_map<std::string, Cursor> cursors_ ABSL_GUARDED_BY(mu_);
};

}  // namespace idem

#endif  // IDEM_ENGINE_TIMER_WRITES_H_
