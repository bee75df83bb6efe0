// The stats of a sharded engine: the sum of its shards' (Stats, idem/stats.h).
// Counters and byte figures add; the commit-duration histograms add bucket
// by bucket; write amplification is recomputed from the summed bytes; the
// redelivery ages, which are percentiles, are the largest any shard
// reports (an upper bound of the whole's), and so is RocksDB's dedupe write
// amplification (the bytes behind it are not in Stats). Functions only;
// thread-safe.

#ifndef IDEM_ENGINE_STATS_SUM_H_
#define IDEM_ENGINE_STATS_SUM_H_

#include "idem/stats.h"

namespace idem {

// Adds `shard` into `total`.
void AddStats(const Stats& shard, Stats& total);

// Recomputes what does not add (write amplification) once every shard is in.
void FinishStatsSum(Stats& total);

}  // namespace idem

#endif  // IDEM_ENGINE_STATS_SUM_H_
