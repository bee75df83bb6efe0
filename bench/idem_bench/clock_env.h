// RocksDB on a simulated clock, so that a run of minutes covers many
// dedupe windows.

#ifndef IDEM_BENCH_IDEM_BENCH_CLOCK_ENV_H_
#define IDEM_BENCH_IDEM_BENCH_CLOCK_ENV_H_

#include <memory>

#include "idem/clock.h"
#include "rocksdb/env.h"

namespace idem::bench {

// A rocksdb::Env whose wall-clock time in seconds (Env::GetCurrentTime and
// its SystemClock's) comes from an idem::Clock, so that RocksDB's own
// time-based decisions (FIFO ttl, periodic compaction, file ages) follow a
// simulated clock. Everything else goes to `base`. Both are borrowed.
std::unique_ptr<rocksdb::Env> NewClockEnv(rocksdb::Env* base, Clock* clock);

}  // namespace idem::bench

#endif  // IDEM_BENCH_IDEM_BENCH_CLOCK_ENV_H_
