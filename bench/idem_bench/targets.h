// Storage layouts that idem-bench compares on the same workload.
//
// kEngine drives the real idem::Engine (with Options::expiry_buckets from
// TargetOptions, the engine's own time-bucket layout; with
// TargetOptions::emit, its outbox: the handler emits, ProcessBatch
// acknowledges). The other layouts
// open RocksDB directly with the engine's schema and commit path: the
// engine's lookups, record placement and batch builder
// (engine/commit_batch.h; XXH3-128 keys and records from engine/record.h,
// the TTL filter from engine/ttl_filter.h), with a handler whose only work
// is the state write. They differ only in how the dedupe family is
// configured, which the engine does not offer:
//
//   kLeveled    the engine's options (engine/store.cc): leveled compaction
//               with dynamic level sizes, the TTL filter at flush and
//               compaction, periodic compaction once per window; unlike
//               kEngine it reports the dedupe family's rocksdb.stats
//   kUniversal  universal compaction, same filter and periodic compaction
//   kFifo       FIFO compaction: whole files are deleted once their newest
//               record has expired (ttl = window + slack; the memtable is
//               flushed at least once per slack); the filter runs at flush
//
// targets.cc implements the targets; layout_options.h holds each layout's
// options. A Target is safe for concurrent use (commits are serialised by a
// lock, as in the engine). The idem::Clock and rocksdb::Env in TargetOptions
// are borrowed and must outlive the Target.

#ifndef IDEM_BENCH_IDEM_BENCH_TARGETS_H_
#define IDEM_BENCH_IDEM_BENCH_TARGETS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "bench/idem_bench/workload.h"
#include "engine/latency_histogram.h"
#include "idem/clock.h"
#include "idem/options.h"
#include "rocksdb/env.h"

namespace idem::bench {

enum class Layout { kEngine, kLeveled, kUniversal, kFifo };

const char* LayoutName(Layout layout);
// Parses a layout name ("engine", "leveled", "universal", "fifo");
// kInvalidArgument otherwise.
absl::StatusOr<Layout> ParseLayout(std::string_view name);

struct TargetOptions {
  Layout layout = Layout::kEngine;
  absl::Duration window = absl::Hours(1);
  Durability durability = Durability::kSync;
  // Under kBuffered: make every batch durable (WaitDurable / SyncWAL) before
  // returning it, as a consumer does before acknowledging.
  bool ack_durable = true;
  // Bytes the handler writes to one state key per processed message (0: no
  // state write), over `state_keys` distinct keys.
  int state_bytes = 0;
  int64_t state_keys = 100000;
  size_t write_buffer_bytes = size_t{64} << 20;  // per column family
  // Options::expiry_buckets of the engine layout (the others ignore it).
  int expiry_buckets = 0;
  // Options::detect_conflicts of the engine layout (the others ignore it).
  bool detect_conflicts = false;
  // kEngine only (OpenTarget refuses emit > 0 for the others): records each
  // processed message emits (to kEmitDestination, keyed by its ID, values of
  // emit_bytes bytes), and every how many batches ProcessBatch acknowledges
  // every entry committed so far (0: never). See BenchOptions.
  int emit = 0;
  int emit_bytes = 64;
  int outbox_ack_every = 1;
  size_t block_cache_bytes = size_t{64} << 20;
  int bloom_bits_per_key = 10;
  int max_background_jobs = 2;
  // Borrowed; both required.
  Clock* clock = nullptr;
  rocksdb::Env* env = nullptr;
};

// What one commit did.
struct BatchOutcome {
  int processed = 0;
  int duplicates = 0;
  // Deliveries whose outcome differs from Delivery::expect_duplicate.
  int missed_duplicates = 0;  // expected a duplicate, got processed
  int false_duplicates = 0;   // expected processed, got a duplicate
};

// Cumulative counters since the target was opened.
struct TargetCounters {
  uint64_t user_bytes = 0;  // WriteBatch::GetDataSize of every commit
  uint64_t wal_bytes = 0;
  uint64_t flush_bytes = 0;
  uint64_t compaction_bytes = 0;
  // Records removed by the TTL compaction filter (kRemove decisions).
  uint64_t expired_dropped = 0;
  // Records removed without a rewrite: entries of files FIFO deleted, or of
  // the engine's expiry buckets dropped.
  uint64_t expired_dropped_whole = 0;
  uint64_t live_sst_bytes = 0;
  // RocksDB's estimate of dedupe records held (live and not yet removed).
  uint64_t estimated_records = 0;
  uint64_t written_bytes() const {
    return wal_bytes + flush_bytes + compaction_bytes;
  }
};

// The outbox's figures (kEngine only).
struct OutboxFigures {
  // From idem::Stats: entries committed since Open, acknowledged since
  // Open, and committed but not acknowledged.
  uint64_t emitted = 0;
  uint64_t acknowledged = 0;
  uint64_t pending = 0;
  // The wall time of each of the target's Engine::AckOutbox calls (part of
  // its batch's latency); count is the number of calls.
  LatencySummary ack_latency;
};

// RocksDB-internal figures that only a directly opened layout can report.
struct InternalFigures {
  // The "Sum" row's W-Amp of the dedupe column family's compaction stats
  // (rocksdb.stats), relative to flushed bytes, without the WAL.
  std::optional<double> rocksdb_sum_wamp;
  std::string rocksdb_stats;         // the dedupe family's rocksdb.stats text
  uint64_t memtable_bytes = 0;       // rocksdb.cur-size-all-mem-tables
  uint64_t table_readers_bytes = 0;  // rocksdb.estimate-table-readers-mem
  uint64_t block_cache_usage = 0;    // rocksdb.block-cache-usage
};

class Target {
 public:
  virtual ~Target() = default;

  // Delivers `batch` as one commit at the clock's current time.
  virtual absl::StatusOr<BatchOutcome> ProcessBatch(
      absl::Span<const Delivery> batch) = 0;
  virtual absl::StatusOr<TargetCounters> Counters() = 0;
  // For kEngine from idem::Stats (rocksdb_stats stays empty).
  virtual std::optional<InternalFigures> Internals() = 0;
  // kEngine: the outbox's figures (an error if the engine's Stats cannot be
  // read); the other layouts have no outbox: nullopt.
  virtual absl::StatusOr<std::optional<OutboxFigures>> Outbox() = 0;
  // Closes the store (the Target is unusable afterwards).
  virtual absl::Status Close() = 0;
};

// Where the engine target's handler emits (TargetOptions::emit).
inline constexpr char kEmitDestination[] = "bench.out";

// Opens a new store of `options.layout` at `path` (which must not exist).
// kInvalidArgument for emit > 0 with a layout other than kEngine.
absl::StatusOr<std::unique_ptr<Target>> OpenTarget(
    const std::string& path, const TargetOptions& options);

// Parses the W-Amp of the "Sum" row from a rocksdb.stats text; nullopt if
// the text has no compaction stats table.
std::optional<double> ParseSumWriteAmp(std::string_view rocksdb_stats);

}  // namespace idem::bench

#endif  // IDEM_BENCH_IDEM_BENCH_TARGETS_H_
