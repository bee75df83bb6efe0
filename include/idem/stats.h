// Stats is a snapshot of an engine's counters and of RocksDB-derived size and
// write figures, returned by Engine::GetStats. A plain value type: not
// thread-safe. Counters start at zero when the engine is opened.

#ifndef IDEM_STATS_H_
#define IDEM_STATS_H_

#include <array>
#include <cstdint>

#include "absl/time/time.h"

namespace idem {

// Upper bounds, in seconds, of the buckets of CommitDurations: 10 us to 10 s
// in steps of 1, 2.5 and 5.
inline constexpr std::array<double, 19> kCommitDurationBounds = {
    10e-6, 25e-6, 50e-6,  100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3,
    25e-3, 50e-3, 100e-3, 250e-3, 500e-3, 1,      2.5,  5,      10};

// How long the engine's commits took (for each Process/ProcessBatch call
// that committed, from queueing its WriteBatch until the group write that
// carries it landed: the wait behind earlier groups, the write, and its WAL
// sync under Durability::kSync), as a histogram over kCommitDurationBounds.
// Buckets are 1% wide inside the engine, so a commit within 1% above a bound
// may count under that bound.
struct CommitDurations {
  // counts[i]: commits that took at most kCommitDurationBounds[i] and more
  // than the bound before it; counts.back(): longer than the last bound.
  std::array<uint64_t, kCommitDurationBounds.size() + 1> counts{};
  uint64_t count = 0;      // the sum of counts
  double sum_seconds = 0;  // the total time of those commits
};

struct Stats {
  // Outcomes returned since Open.
  uint64_t processed = 0;
  uint64_t duplicates = 0;
  uint64_t failed = 0;
  // Options::detect_conflicts: kConflict outcomes since Open.
  uint64_t conflicts = 0;
  // Handler calls made again since Open because a concurrent commit changed
  // a state key the handler had read before its own commit (Txn::Get; see
  // Handler in idem/txn.h). Zero when concurrent handlers touch disjoint
  // keys.
  uint64_t handler_reruns = 0;
  // Duplicates whose record was more than 80% through its window (from its
  // first processing to its expiry) when they arrived: a window too short
  // for the broker's redelivery delays (make it at least twice the longest).
  // And the age of the record at each duplicate (now - first processed),
  // over the duplicates since Open whose record knows it (an estimate from
  // a log-scale histogram, within about 4%); zero before the first.
  uint64_t late_duplicates = 0;
  absl::Duration redelivery_age_p50;
  absl::Duration redelivery_age_p99;
  absl::Duration redelivery_age_max;
  // The outbox (idem/outbox.h): entries committed and not yet acknowledged
  // (a figure of the store, not since Open), entries committed since Open,
  // and entries acknowledged (removed by Engine::AckOutbox) since Open.
  uint64_t outbox_pending = 0;
  uint64_t outbox_emitted = 0;
  uint64_t outbox_acknowledged = 0;
  // Timers (Engine::FireTimers) whose fire committed since Open, those of
  // them whose handler failed permanently (deleted without their effects),
  // and handler calls of fires that failed transiently (the timer stays).
  uint64_t timers_fired = 0;
  uint64_t timers_dead_lettered = 0;
  uint64_t timer_failures = 0;
  // Dedupe records removed by the TTL compaction filter since Open.
  uint64_t expired_dropped = 0;
  // Bytes of the WriteBatches the engine committed since Open (keys, values
  // and RocksDB's per-entry framing): the "user bytes" of write amplification.
  uint64_t user_bytes = 0;
  // Bytes RocksDB wrote since Open: to the write-ahead log, to SST files by
  // memtable flushes, and to SST files by compactions (its WAL_FILE_BYTES,
  // FLUSH_WRITE_BYTES and COMPACT_WRITE_BYTES tickers).
  uint64_t wal_bytes = 0;
  uint64_t flush_bytes = 0;
  uint64_t compaction_bytes = 0;
  // (wal_bytes + flush_bytes + compaction_bytes) / user_bytes; 0 when
  // nothing was committed.
  double write_amplification = 0;
  // Current total size of live SST files across all column families.
  uint64_t live_sst_bytes = 0;
  // RocksDB's estimate of the number of dedupe records (live and expired but
  // not yet compacted away or dropped), over every dedupe column family.
  uint64_t estimated_live_records = 0;
  // Options::expiry_buckets: the bucket column families the store holds
  // now, and those dropped whole since Open because every record in them
  // had expired.
  uint64_t expiry_buckets = 0;
  uint64_t expiry_buckets_dropped = 0;
  // RocksDB's estimate of the records those dropped families held.
  uint64_t expiry_bucket_records_dropped = 0;

  // RocksDB's own figure for the dedupe column family: the "Sum" row's W-Amp
  // of its compaction stats, (flush + compaction bytes) / flush bytes since
  // Open (with expiry buckets, over all dedupe families together). It leaves
  // out the WAL, so it reads about one less than write_amplification would for
  // that family alone. 0 before the first flush.
  double dedupe_compaction_write_amplification = 0;

  // Memory now: memtables of all column families (active and unflushed),
  // block cache in use, and the index and filter blocks held by open SST
  // readers (outside the block cache).
  uint64_t memtable_bytes = 0;
  uint64_t block_cache_bytes = 0;
  uint64_t table_reader_bytes = 0;

  // Lookup cost since Open, all column families: SST files a Bloom filter
  // ruled out (BLOOM_FILTER_USEFUL), filter checks that said "maybe"
  // (BLOOM_FILTER_FULL_POSITIVE), and data blocks read from disk because
  // the block cache missed them (BLOCK_CACHE_DATA_MISS).
  uint64_t bloom_filter_useful = 0;
  uint64_t bloom_filter_positive = 0;
  uint64_t data_blocks_read = 0;

  // The commits since Open (see CommitDurations).
  CommitDurations commit_durations;
};

}  // namespace idem

#endif  // IDEM_STATS_H_
