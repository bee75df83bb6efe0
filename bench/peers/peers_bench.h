// idem-peers-bench's driver: runs one seeded message stream, with the same
// logical work per message (drop the message if its ID was seen, else record
// the ID and add the message's amount to one account balance, atomically),
// through idem and through the systems users would pick instead, and prints
// one table (or JSON). See bench/peers/README.md.
//
// Peers (each in the configuration its users would deploy for this job):
//   postgres  bench/peers/postgres_peer.h     redis    bench/peers/redis_peer.h
//   rocksdb   bench/peers/rocksdb_peer.h      idem     bench/peers/idem_peer.h
//   ceiling   the RocksDB put-only ceiling (rocksdb_peer.h), a write+fdatasync
//             loop and pg_test_fsync's fdatasync figure (fsync_ceiling.h).
//
// Servers are not started here: bench/peers/run.sh starts PostgreSQL and two
// Redis servers on loopback and passes their addresses. Every config runs
// `rounds` times, the configs in turn, and the table shows its median round.
// Every run is checked: the number of messages that did the work, the IDs
// stored and the sum of the balances must equal what the stream implies.
// bench/peers/peers_main.cc parses the flags and calls RunPeersBench.

#ifndef IDEM_BENCH_PEERS_PEERS_BENCH_H_
#define IDEM_BENCH_PEERS_PEERS_BENCH_H_

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace idem::peers {

// The flags of idem-peers-bench (bench/peers/peers_main.cc declares them,
// with these defaults; ValidatePeersBenchArgs gives their bounds).
struct PeersBenchArgs {
  // Deliveries per config, redeliveries included. >= 1.
  size_t messages = 50000;
  // Deliveries for the configs that sync once per message (at most
  // `messages` are used). >= 1.
  size_t slow_messages = 10000;
  // Fraction of deliveries that redeliver a recent message. In [0, 1).
  double duplicate_rate = 0.1;
  uint64_t seed = 42;
  // Distinct state keys (account balances). >= 1.
  int accounts = 10000;
  // Messages per poll for the batched configs. >= 1.
  int batch = 500;
  // Only the rows whose polls hold this many messages (1 or `batch`); 0:
  // every row. For profiling one batch size (bench/peers/profile.sh).
  int only_batch = 0;
  // Clients of the multi-client rows (postgres and idem); 0 or 1 leaves
  // those rows out. >= 0.
  int clients = 16;
  // Wall-time limit per config: a config stops early after it (its rate is
  // then over the messages it did). > 0.
  absl::Duration duration = absl::Seconds(20);
  // How long the write+fdatasync loop runs. > 0.
  absl::Duration fsync_duration = absl::Seconds(3);
  // Times every config runs, in turn; each row reports its median round.
  // >= 1.
  int rounds = 3;
  // Comma-separated peers to run: postgres, redis, rocksdb, idem, ceiling.
  // Empty: all.
  std::string only;
  bool json = false;
  // Scratch directory for the embedded stores and the fsync file, created if
  // missing and kept. Empty: a new directory under $TMPDIR or /tmp, removed
  // at the end.
  std::string dir;
  // libpq connection string of the PostgreSQL server.
  std::string pg =
      "host=127.0.0.1 port=55432 user=postgres dbname=postgres "
      "connect_timeout=3";
  // host:port of a Redis server with appendonly yes, appendfsync always; and
  // of one with no persistence.
  std::string redis_durable = "127.0.0.1:56379";
  std::string redis_memory = "127.0.0.1:56380";
  // Path of pg_test_fsync, whose fdatasync figure is added (empty: skip).
  std::string pg_test_fsync;
};

// OK, or kInvalidArgument naming the first flag out of bounds (e.g.
// "--batch must be >= 1, got 0").
absl::Status ValidatePeersBenchArgs(const PeersBenchArgs& args);

// Runs the benchmark: the results go to `out`, progress lines and errors to
// `err`. Returns the process exit code (cli/tool_usage.h): kExitOk (every
// run checked out), kExitFailure (a run failed or a check did not hold) or
// kExitUsage (a flag out of bounds, named on `err`, or a server not
// reachable).
int RunPeersBench(const PeersBenchArgs& args, std::ostream& out,
                  std::ostream& err);

}  // namespace idem::peers

#endif  // IDEM_BENCH_PEERS_PEERS_BENCH_H_
