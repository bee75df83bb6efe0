// Options controls how an idem::Engine stores, expires and persists dedupe
// records. A plain value type: not thread-safe, copied by Engine::Open, so it
// may be discarded after Open returns. The pointers it holds (clock, env) are
// borrowed and must outlive every Engine opened with them.
//
// Engine::Open validates the options and rejects bad values or combinations
// with kInvalidArgument; it never clamps silently.

#ifndef IDEM_OPTIONS_H_
#define IDEM_OPTIONS_H_

#include <cstddef>

#include "absl/time/time.h"

namespace rocksdb {
class Env;
}  // namespace rocksdb

namespace idem {

class Clock;
class Logger;

// When a committed outcome becomes durable (survives a power loss).
enum class Durability {
  // Each commit fdatasyncs the write-ahead log before Process/ProcessBatch
  // returns: a returned outcome is durable. Costs one fdatasync per call, so
  // batch messages (ProcessBatch) for throughput. Commits of concurrent calls
  // that reach the write-ahead log together share one fdatasync (group
  // commit, engine/commit_queue.h), but each call still waits for a sync; for
  // many concurrent callers that need not wait, use kBuffered and
  // WaitDurable.
  kSync,
  // Commits are written to the write-ahead log without a sync; they survive a
  // process crash but not a power loss until WaitDurable(result.sequence)
  // returns OK. WaitDurable syncs once for every commit made before it, and
  // concurrent callers share syncs (group commit).
  kBuffered,
};

// Which deliveries are the same message (share one dedupe record).
enum class DedupeScope {
  // A message ID names one message in the whole store, whatever its source
  // and partition: a producer duplicate that lands on another partition is
  // still a duplicate.
  kStore,
  // A message ID names one message per (Message::source,
  // Message::partition): the same ID on two partitions (or two sources) is
  // two messages, each processed once. Each partition's records form one key
  // range, so they can be exported, restored and dropped with the
  // partition. Engine::Seen and Forget then need the source and partition.
  kPartition,
};

struct Options {
  // ---- Behaviour ----

  // How long a message ID is remembered: a redelivery within this window is a
  // duplicate. Make it longer than the broker's longest redelivery delay (a
  // common choice is twice that). Longer windows cost disk and memory in
  // proportion to the message rate. Must be positive and finite.
  // Default: 7 days.
  absl::Duration dedupe_window = absl::Hours(24 * 7);

  // See Durability. Default: kSync.
  Durability durability = Durability::kSync;

  // See DedupeScope. A property of the store, fixed when it is created: a
  // writable Open with the other scope fails with kFailedPrecondition and
  // changes nothing; a read-only Open uses the store's own. A
  // partition-scoped store is format 3, which builds that read only formats
  // 1 and 2 refuse to open. Default: kStore.
  DedupeScope dedupe_scope = DedupeScope::kStore;

  // How many independent write paths the store has: 1 to 256. With more
  // than one, `path` holds that many stores (shards), each with its own
  // RocksDB database, write-ahead log, group commit, offsets and outbox,
  // and every message commits in the shard of its partition
  // (Engine::ShardOf: partition modulo shards, so partition p of every
  // source shares a shard, as Kafka Streams co-partitions tasks). State is
  // then partition-local: a handler reads and writes its own shard only,
  // so inputs must be keyed by the state they touch. Needs
  // DedupeScope::kPartition (an ID is deduplicated within its partition's
  // shard). A property of the store, fixed when it is created: opening it
  // with another count fails with kFailedPrecondition naming both.
  // docs/design.md, "Shards". Default: 1 (one store, global state).
  int shards = 1;

  // How long every state value lives after its last write (Txn::Put,
  // Txn::Merge), as Flink's StateTtlConfig with OnCreateAndWrite: each
  // write sets the key's expiry to the engine's time plus this, and once
  // it passes every read sees the key as absent and compaction drops it
  // (processing time: `clock`; docs/state.md, "State that expires").
  // PutOptions::ttl overrides it for one write. The first write with an
  // expiry marks the store format 6, which older builds refuse to open.
  // Must be positive; infinite means none. Default: infinite (no expiry).
  absl::Duration state_ttl = absl::InfiniteDuration();

  // Time source for expiry decisions. Borrowed. A clock that returns a
  // non-finite time or throws fails the calls that read it; one set back
  // does not move the engine's time back (see idem/clock.h).
  // nullptr: SystemClock(). Default: nullptr.
  Clock* clock = nullptr;

  // RocksDB environment for all file I/O (wrap it to inject faults). Borrowed.
  // Its file system (Env::GetFileSystem) does every file operation; RocksDB's
  // background threads and clock are those of rocksdb::Env::Default().
  // nullptr: rocksdb::Env::Default(). Default: nullptr.
  rocksdb::Env* env = nullptr;

  // Receives RocksDB's info log (warnings and errors) and the engine's own
  // events. Borrowed; see idem/logger.h. nullptr: appended to the file LOG in
  // the store directory (read-only opens log nowhere). Default: nullptr.
  Logger* logger = nullptr;

  // Dedupe policies (docs/design.md, "Dedupe policies").
  // Each record keeps a 64-bit fingerprint of its first delivery
  // (Message::fingerprint, or the payload), and a later delivery of a live
  // ID with another fingerprint is kConflict instead of kDuplicate (a reused
  // ID with other content: silent message loss otherwise). Costs 8 bytes
  // per record and one hash per message. Default: false.
  bool detect_conflicts = false;
  // A sliding window: a duplicate moves its record's expiry to now + its
  // ttl (in the duplicate's own commit, into the right expiry bucket), so an
  // ID redelivered more often than its window never expires. A refresh never
  // brings an expiry earlier: a duplicate whose now + ttl falls before the
  // record's expiry leaves the record as it is. Costs a write per duplicate
  // that extends a record. Default: false (expiry fixed at the first
  // processing).
  bool refresh_on_duplicate = false;

  // Create an empty store when `path` does not exist or is an empty
  // directory. Default: true.
  bool create_if_missing = true;

  // Open an existing store for reads only: nothing on disk changes (the WAL
  // is replayed in memory), the store may be open in another engine at the
  // same time (reads then see the commits as of this Open), and
  // ProcessBatch/Process, Forget, AckOutbox, CompactExpired, Checkpoint,
  // SetCommittedOffset, ImportPartition and ApplyPartitionChanges fail with
  // kFailedPrecondition. create_if_missing is ignored. Default: false.
  bool read_only = false;

  // ---- Performance ----

  // Shared LRU block cache for all column families. More cache means fewer
  // disk reads for duplicate checks and state reads. It is a limit, not an
  // allocation: the cache grows up to it as blocks are read, so a value
  // beyond the machine's memory lets the process grow until it is killed.
  // Must be in [0, 1 TiB]. Default: 64 MiB.
  size_t block_cache_bytes = size_t{64} << 20;

  // Memtable size per column family. Larger memtables mean fewer, larger
  // flushes (lower write amplification) at the cost of memory and longer
  // recovery replay after a crash. A store-scoped store's dedupe memtable
  // gets 1.3 times it: it is hashed, its records take more memory each, and
  // it holds as many records per flush as a sorted one of this size
  // (docs/design.md). Disk too: each write-ahead log file is preallocated
  // at about 1.1 times this size, and the logs together are bounded at 4
  // times it. Must be in [64 KiB, 4 GiB]. Default: 64 MiB.
  size_t write_buffer_bytes = size_t{64} << 20;

  // Bloom filter bits per key for the dedupe records. Most lookups are for
  // new IDs (misses), which the filter answers without a disk read; 10 bits
  // give about 1% false positives. 0 disables the filter. Must be in [0, 64].
  // Default: 10.
  int bloom_bits_per_key = 10;

  // Background flush and compaction threads (RocksDB's thread pools grow to
  // this many at Open). More threads keep up with a higher write rate on fast
  // disks, up to about the number of cores. Must be in [1, 256]. Default: 2.
  int max_background_jobs = 2;

  // 0: all dedupe records live in one column family, and the TTL compaction
  // filter drops expired ones as compaction rewrites them. N > 0: new
  // records are grouped by expiry time into column families ("buckets") that
  // each cover dedupe_window / N of expiry time, and a bucket is dropped
  // whole once all its records have expired (at the next commit or
  // CompactExpired after its end). No compaction ever rewrites an expired
  // record, so write amplification stays near WAL + one flush and space is
  // reclaimed at each bucket boundary; the price is that every duplicate
  // check probes each live bucket (about N + 2 lookups instead of 1), and a
  // bucket is created or dropped (a MANIFEST write) inside a commit once per
  // dedupe_window / N. Records whose per-message ttl reaches past the newest
  // bucket stay in the filtered family. A store that has held buckets is
  // format 2 and cannot be opened by a build that reads only format 1; the
  // setting may change between opens (records keep their family). Must be
  // in [0, 64], with dedupe_window / N at least one second. Default: 0.
  int expiry_buckets = 0;
};

}  // namespace idem

#endif  // IDEM_OPTIONS_H_
