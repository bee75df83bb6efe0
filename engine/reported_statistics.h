// The rocksdb::Statistics an engine's store records into: the tickers that
// Engine::GetStats reports (kReportedTickers) and nothing else. RocksDB
// records a dozen tickers on every read (keys and bytes read, memtable hits,
// merge operations and their time), each an atomic add on a per-core
// counter; a store's statistics keep only those GetStats reads, so a read
// pays a virtual call and a table lookup for the rest. No histograms: the
// level is kExceptHistogramOrTimers, so RocksDB times nothing for them.
//
// Safe for concurrent access from multiple threads without external
// synchronization, as any rocksdb::Statistics.

#ifndef IDEM_ENGINE_REPORTED_STATISTICS_H_
#define IDEM_ENGINE_REPORTED_STATISTICS_H_

#include <memory>

#include "rocksdb/statistics.h"

namespace idem {

// Every ticker Engine::GetStats reads (engine/engine_inspect.cc): the write
// amplification's three (WAL, flush and compaction bytes), the Bloom
// filter's two and the data blocks read.
inline constexpr rocksdb::Tickers kReportedTickers[] = {
    rocksdb::WAL_FILE_BYTES,
    rocksdb::FLUSH_WRITE_BYTES,
    rocksdb::COMPACT_WRITE_BYTES,
    rocksdb::BLOOM_FILTER_USEFUL,
    rocksdb::BLOOM_FILTER_FULL_POSITIVE,
    rocksdb::BLOCK_CACHE_DATA_MISS,
};

// New statistics that count the kReportedTickers (getTickerCount) and
// read 0 for any other ticker.
std::shared_ptr<rocksdb::Statistics> NewReportedStatistics();

}  // namespace idem

#endif  // IDEM_ENGINE_REPORTED_STATISTICS_H_
