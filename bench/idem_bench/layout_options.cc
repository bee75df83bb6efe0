// How each layout configures its store (bench/idem_bench/layout_options.h).

#include "bench/idem_bench/layout_options.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/expiry_buckets.h"
#include "engine/reported_statistics.h"
#include "engine/store.h"

namespace idem::bench {
namespace {

// The engine's options for the same sizes (engine/store.h builds the
// RocksDB options from them, so "leveled" is the engine's configuration).
Options EngineOptionsFor(const TargetOptions& o) {
  Options options;
  options.dedupe_window = o.window;
  options.write_buffer_bytes = o.write_buffer_bytes;
  options.bloom_bits_per_key = o.bloom_bits_per_key;
  options.max_background_jobs = o.max_background_jobs;
  return options;
}

rocksdb::ColumnFamilyOptions RawStateOptions(const TargetOptions& o,
                                             const RawParts& parts,
                                             size_t write_buffer_bytes) {
  return MakeStateOptions(EngineOptionsFor(o), parts.cache, write_buffer_bytes);
}

}  // namespace

absl::Status FromRocks(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat(std::string(what), ": ", s.ToString()));
}

Options EngineOptions(const TargetOptions& t) {
  Options o;
  o.dedupe_window = t.window;
  o.durability = t.durability;
  o.clock = t.clock;
  o.env = t.env;
  o.block_cache_bytes = t.block_cache_bytes;
  o.write_buffer_bytes = t.write_buffer_bytes;
  o.bloom_bits_per_key = t.bloom_bits_per_key;
  o.max_background_jobs = t.max_background_jobs;
  o.expiry_buckets = t.expiry_buckets;
  o.detect_conflicts = t.detect_conflicts;
  return o;
}

int64_t FifoSlackSeconds(absl::Duration window) {
  return std::max<int64_t>(1, absl::ToInt64Seconds(window) / 4);
}

rocksdb::DBOptions RawDbOptions(const TargetOptions& o, rocksdb::Env* env,
                                const RawParts& parts) {
  rocksdb::DBOptions db =
      MakeDbOptions(EngineOptionsFor(o), env, parts.statistics);
  if (parts.fifo_drops != nullptr) db.listeners.push_back(parts.fifo_drops);
  return db;
}

// The engine's dedupe options, then the layout's changes.
rocksdb::ColumnFamilyOptions RawDedupeOptions(const TargetOptions& o,
                                              const RawParts& parts) {
  rocksdb::ColumnFamilyOptions cf =
      MakeDedupeOptions(EngineOptionsFor(o), parts.cache, parts.filter,
                        /*partition_scope=*/false);
  switch (o.layout) {
    case Layout::kEngine:
    case Layout::kLeveled:
      break;
    case Layout::kUniversal:
      cf.compaction_style = rocksdb::kCompactionStyleUniversal;
      break;
    case Layout::kFifo:
      cf.compaction_style = rocksdb::kCompactionStyleFIFO;
      // Never delete files for size: that would lose live records.
      cf.compaction_options_fifo.max_table_files_size = uint64_t{1} << 50;
      cf.compaction_options_fifo.allow_compaction = false;
      // A file's creation_time is the time of its oldest record; its newest
      // is at most one slack later (the memtable is flushed at least that
      // often), so every record in it has expired once ttl has passed.
      cf.ttl = static_cast<uint64_t>(absl::ToInt64Seconds(o.window) +
                                     FifoSlackSeconds(o.window) + 1);
      cf.periodic_compaction_seconds = 0;
      break;
  }
  return cf;
}

// The dedupe families of every layout: idem.dedupe, and the engine's expiry
// buckets (idem.dedupe.until.<end>).
bool IsDedupeFamily(const std::string& name) {
  return name == kDedupeColumnFamily || ParseBucketFamilyName(name).has_value();
}

rocksdb::ColumnFamilyOptions RawOptionsFor(const std::string& name,
                                           const TargetOptions& o,
                                           const RawParts& parts) {
  if (IsDedupeFamily(name)) return RawDedupeOptions(o, parts);
  if (name == kStateColumnFamily) {
    return RawStateOptions(o, parts, o.write_buffer_bytes);
  }
  return RawStateOptions(o, parts, kSmallWriteBufferBytes);
}

RawParts MakeRawParts(const TargetOptions& o) {
  RawParts parts;
  parts.statistics = NewReportedStatistics();  // as the engine's
  parts.cache = rocksdb::NewLRUCache(o.block_cache_bytes);
  parts.filter = std::make_shared<TtlFilterFactory>(o.clock);
  if (o.layout == Layout::kFifo) {
    parts.fifo_drops = std::make_shared<FifoDropCounter>();
  }
  return parts;
}

}  // namespace idem::bench
