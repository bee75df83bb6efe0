// How each idem-bench layout configures its store (internal to
// bench/idem_bench/): the engine's Options for kEngine and, for the RocksDB
// layouts, the engine's own RocksDB options (engine/store.h) with each
// layout's changes (targets.h describes the layouts). The targets open
// stores with them (targets.cc), and the read-cost measurement reopens a
// store as it was written (read_cost.cc).

#ifndef IDEM_BENCH_IDEM_BENCH_LAYOUT_OPTIONS_H_
#define IDEM_BENCH_IDEM_BENCH_LAYOUT_OPTIONS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "bench/idem_bench/targets.h"
#include "engine/ttl_filter.h"
#include "idem/options.h"
#include "rocksdb/cache.h"
#include "rocksdb/listener.h"
#include "rocksdb/options.h"
#include "rocksdb/statistics.h"
#include "rocksdb/status.h"

namespace idem::bench {

// kUnavailable naming `what` unless `s` is OK.
absl::Status FromRocks(const rocksdb::Status& s, std::string_view what);

// The engine's Options for a kEngine target.
Options EngineOptions(const TargetOptions& t);

// Counts the entries of files that FIFO compaction deletes.
class FifoDropCounter : public rocksdb::EventListener {
 public:
  const char* Name() const override { return "idem.bench.FifoDropCounter"; }
  void OnCompactionCompleted(rocksdb::DB* /*db*/,
                             const rocksdb::CompactionJobInfo& info) override {
    if (info.compaction_reason != rocksdb::CompactionReason::kFIFOTtl &&
        info.compaction_reason != rocksdb::CompactionReason::kFIFOMaxSize) {
      return;
    }
    for (const std::string& file : info.input_files) {
      auto it = info.table_properties.find(file);
      if (it != info.table_properties.end() && it->second != nullptr) {
        dropped_.fetch_add(it->second->num_entries, std::memory_order_relaxed);
      }
    }
  }
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> dropped_{0};
};

struct RawParts {
  std::shared_ptr<rocksdb::Statistics> statistics;
  std::shared_ptr<rocksdb::Cache> cache;
  std::shared_ptr<TtlFilterFactory> filter;
  std::shared_ptr<FifoDropCounter> fifo_drops;
};

// kFifo flushes the memtable at least once per this many seconds.
int64_t FifoSlackSeconds(absl::Duration window);

// What a RocksDB layout's store shares between its column families.
RawParts MakeRawParts(const TargetOptions& o);

rocksdb::DBOptions RawDbOptions(const TargetOptions& o, rocksdb::Env* env,
                                const RawParts& parts);

// The options of a dedupe column family of layout `o.layout`.
rocksdb::ColumnFamilyOptions RawDedupeOptions(const TargetOptions& o,
                                              const RawParts& parts);

// Whether the family named `name` holds dedupe records, in any layout.
bool IsDedupeFamily(const std::string& name);

// The options of the column family named `name`.
rocksdb::ColumnFamilyOptions RawOptionsFor(const std::string& name,
                                           const TargetOptions& o,
                                           const RawParts& parts);

}  // namespace idem::bench

#endif  // IDEM_BENCH_IDEM_BENCH_LAYOUT_OPTIONS_H_
