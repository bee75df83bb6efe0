// The cost of a dedupe lookup in a store idem-bench wrote: Bloom filters
// consulted, data blocks read and time per lookup, and the memory of the
// index and filters. Measured after a run, on the closed store reopened
// read-only. Thread-compatible.

#ifndef IDEM_BENCH_IDEM_BENCH_READ_COST_H_
#define IDEM_BENCH_IDEM_BENCH_READ_COST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/idem_bench/targets.h"

namespace idem::bench {

// The cost of one dedupe lookup, averaged over a set of lookups.
struct LookupCost {
  int64_t lookups = 0;
  int64_t found = 0;
  double filter_probes = 0;     // SST Bloom filters consulted per lookup
  double filter_negatives = 0;  // of which answered "absent" (useful)
  double data_blocks_read = 0;  // data blocks read from disk per lookup
  double micros = 0;            // mean wall time per lookup
};

struct ReadCost {
  LookupCost miss;  // IDs never delivered
  LookupCost hit;   // the most recently processed IDs (live records)
  // Index and filter memory of the SST files (they are not held in the
  // block cache): rocksdb.estimate-table-readers-mem.
  uint64_t table_readers_bytes = 0;
};

// Reopens the closed store at `path` read-only with a fresh block cache and
// looks up `miss_ids` then `hit_ids` one Get at a time, counting Bloom
// filter results (Statistics tickers) and disk block reads (PerfContext).
absl::StatusOr<ReadCost> MeasureReadCost(
    const std::string& path, const TargetOptions& options,
    const std::vector<std::string>& miss_ids,
    const std::vector<std::string>& hit_ids);

}  // namespace idem::bench

#endif  // IDEM_BENCH_IDEM_BENCH_READ_COST_H_
