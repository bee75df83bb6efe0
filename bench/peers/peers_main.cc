// idem_peers_bench: idem against PostgreSQL, Redis and RocksDB on one
// message stream. Parses flags and hands over to idem::peers::RunPeersBench
// (bench/peers/peers_bench.h), which holds the logic. Run it with
// bench/peers/run.sh, which starts the servers; see bench/peers/README.md.

#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "bench/peers/peers_bench.h"

ABSL_FLAG(int64_t, messages, 50000, "Messages in the stream (per config).");
ABSL_FLAG(int64_t, slow_messages, 10000,
          "Messages for the configs that sync once per message (at most "
          "--messages).");
ABSL_FLAG(double, duplicate_rate, 0.1,
          "Fraction of deliveries that redeliver a recent message.");
ABSL_FLAG(uint64_t, seed, 42, "Seed of the message stream.");
ABSL_FLAG(int, accounts, 10000, "Distinct state keys (account balances).");
ABSL_FLAG(int, batch, 500, "Messages per poll for the batched configs.");
ABSL_FLAG(int, clients, 16,
          "Concurrent clients for the multi-client rows (postgres and idem); "
          "0 or 1 leaves those rows out.");
ABSL_FLAG(double, time_cap_s, 20,
          "Seconds after which a config stops early (the rate is then over "
          "the messages it did).");
ABSL_FLAG(double, fsync_seconds, 3, "Duration of the write+fdatasync loop.");
ABSL_FLAG(int, rounds, 3,
          "Times every config runs, in turn; each row reports its median "
          "round and the range.");
ABSL_FLAG(std::string, only, "",
          "Comma-separated peers to run: postgres, redis, rocksdb, idem, "
          "ceiling. Empty: all.");
ABSL_FLAG(bool, json, false, "Print the results as one JSON object.");
ABSL_FLAG(std::string, dir, "",
          "Scratch directory for the embedded stores and the fsync file "
          "(empty: a new directory under $TMPDIR or /tmp, removed at the "
          "end). Put it on the device you want to measure.");
ABSL_FLAG(std::string, pg,
          "host=127.0.0.1 port=55432 user=postgres dbname=postgres "
          "connect_timeout=3",
          "libpq connection string of the PostgreSQL server.");
ABSL_FLAG(std::string, redis_durable, "127.0.0.1:56379",
          "host:port of a Redis server with appendonly yes, appendfsync "
          "always.");
ABSL_FLAG(std::string, redis_memory, "127.0.0.1:56380",
          "host:port of a Redis server with no persistence.");
ABSL_FLAG(std::string, pg_test_fsync, "",
          "Path of pg_test_fsync to add its fdatasync figure (empty: skip).");

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Runs one seeded message stream with the same work per message (dedupe "
      "by ID, then one balance update, atomically) through idem, PostgreSQL, "
      "Redis and RocksDB used directly, and prints one table. The servers "
      "must be running: bench/peers/run.sh starts them on loopback, runs "
      "this and stops them.\n"
      "Example: idem_peers_bench --messages=50000 --only=idem,rocksdb");
  // --help lists this file's flags (the binary's name does not match it).
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view path) {
    return absl::EndsWith(path, "peers_main.cc");
  };
  absl::SetFlagsUsageConfig(usage);
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) {
    std::cerr << "peers_bench: unexpected argument '" << rest[1]
              << "' (see --help)\n";
    return 2;
  }
  idem::peers::PeersBenchArgs args;
  const int64_t messages = absl::GetFlag(FLAGS_messages);
  const int64_t slow_messages = absl::GetFlag(FLAGS_slow_messages);
  args.messages = messages > 0 ? static_cast<size_t>(messages) : 0;
  args.slow_messages =
      slow_messages > 0 ? static_cast<size_t>(slow_messages) : 1;
  args.duplicate_rate = absl::GetFlag(FLAGS_duplicate_rate);
  args.seed = absl::GetFlag(FLAGS_seed);
  args.accounts = absl::GetFlag(FLAGS_accounts);
  args.batch = absl::GetFlag(FLAGS_batch);
  args.clients = absl::GetFlag(FLAGS_clients);
  args.time_cap_s = absl::GetFlag(FLAGS_time_cap_s);
  args.fsync_seconds = absl::GetFlag(FLAGS_fsync_seconds);
  args.rounds = absl::GetFlag(FLAGS_rounds);
  args.only = absl::GetFlag(FLAGS_only);
  args.json = absl::GetFlag(FLAGS_json);
  args.dir = absl::GetFlag(FLAGS_dir);
  args.pg = absl::GetFlag(FLAGS_pg);
  args.redis_durable = absl::GetFlag(FLAGS_redis_durable);
  args.redis_memory = absl::GetFlag(FLAGS_redis_memory);
  args.pg_test_fsync = absl::GetFlag(FLAGS_pg_test_fsync);
  return idem::peers::RunPeersBench(args, std::cout, std::cerr);
}
