// Stats is a snapshot of an engine's counters and of RocksDB-derived size and
// write figures, returned by Engine::GetStats. A plain value type: not
// thread-safe. Counters start at zero when the engine is opened.

#ifndef IDEM_STATS_H_
#define IDEM_STATS_H_

#include <cstdint>

namespace idem {

struct Stats {
  // Outcomes returned since Open.
  uint64_t processed = 0;
  uint64_t duplicates = 0;
  uint64_t failed = 0;
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
  // not yet compacted away).
  uint64_t estimated_live_records = 0;
};

}  // namespace idem

#endif  // IDEM_STATS_H_
