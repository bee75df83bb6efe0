// idem_peers_bench's driver: runs one seeded message stream, with the same
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

namespace idem::peers {

// The flags of idem_peers_bench (see bench/peers/peers_main.cc for each).
struct PeersBenchArgs {
  size_t messages = 0;
  size_t slow_messages = 0;
  double duplicate_rate = 0;
  uint64_t seed = 0;
  int accounts = 0;
  int batch = 0;
  int clients = 0;
  double time_cap_s = 0;
  double fsync_seconds = 0;
  int rounds = 0;
  std::string only;
  bool json = false;
  std::string dir;
  std::string pg;
  std::string redis_durable;
  std::string redis_memory;
  std::string pg_test_fsync;
};

// Runs the benchmark: the results go to `out`, progress lines and errors to
// `err`. Returns the process exit code (0: every run checked out, 1: a run
// failed or a check did not hold, 2: bad arguments or a server not
// reachable).
int RunPeersBench(const PeersBenchArgs& args, std::ostream& out,
                  std::ostream& err);

}  // namespace idem::peers

#endif  // IDEM_BENCH_PEERS_PEERS_BENCH_H_
