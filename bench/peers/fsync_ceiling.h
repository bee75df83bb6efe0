// The device's sync rate, which bounds every config that syncs once per
// message: a write+fdatasync loop of our own, and the fdatasync line of
// PostgreSQL's pg_test_fsync. Both report syncs per second as the rate.

#ifndef IDEM_BENCH_PEERS_FSYNC_CEILING_H_
#define IDEM_BENCH_PEERS_FSYNC_CEILING_H_

#include <string>

#include "bench/peers/measure.h"

namespace idem::peers {

// Overwrites 8 KiB at offset 0 of a preallocated 16 MiB file under `scratch`
// and fdatasyncs it, in a loop for `seconds` (what pg_test_fsync's fdatasync
// line measures); the file is removed afterwards.
ResultRow RunFsyncLoop(const std::string& scratch, double seconds);

// Runs the pg_test_fsync at `binary` (2 s per test, its file under `scratch`)
// and reports its "one 8kB write" fdatasync line; latency is its mean.
ResultRow RunPgTestFsync(const std::string& binary, const std::string& scratch);

}  // namespace idem::peers

#endif  // IDEM_BENCH_PEERS_FSYNC_CEILING_H_
