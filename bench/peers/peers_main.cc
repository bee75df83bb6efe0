// idem-peers-bench: idem against PostgreSQL, Redis and RocksDB on one
// message stream. Parses flags (CLI11, through cli/tool_usage.h, like every
// tool) and hands over to idem::peers::RunPeersBench
// (bench/peers/peers_bench.h), which holds the logic. Run it with
// bench/peers/run.sh, which starts the servers; see bench/peers/README.md.

#include <iostream>
#include <memory>
#include <optional>

#include "bench/peers/peers_bench.h"
#include "cli/tool_usage.h"

int main(int argc, char** argv) {
  std::unique_ptr<CLI::App> app = idem::cli::MakeToolApp(
      "idem-peers-bench",
      "Runs one seeded message stream with the same work per message (dedupe "
      "by ID,\nthen one balance update, atomically) through idem, "
      "PostgreSQL, Redis and\nRocksDB used directly, and prints one table. "
      "The servers must be running:\nbench/peers/run.sh starts them on "
      "loopback, runs this and stops them. Exit\ncode 0 if every run checked "
      "out, 1 if a run failed or a check did not hold,\n2 for a bad flag or "
      "a server not reachable.\n"
      "Example: idem-peers-bench --messages=50000 --only=idem,rocksdb");
  idem::peers::PeersBenchArgs args;
  app->add_option("--messages", args.messages,
                  "Deliveries per config, redeliveries included (>= 1).");
  app->add_option("--slow_messages", args.slow_messages,
                  "Deliveries for the configs that sync once per message "
                  "(>= 1; at most --messages are used).");
  app->add_option("--duplicate_rate", args.duplicate_rate,
                  "Fraction of deliveries that redeliver a recent message, "
                  "in [0, 1).");
  app->add_option("--seed", args.seed, "Seed of the message stream.");
  app->add_option("--accounts", args.accounts,
                  "Distinct state keys (account balances), >= 1.");
  app->add_option("--batch", args.batch,
                  "Messages per poll for the batched configs, >= 1.");
  app->add_option("--only_batch", args.only_batch,
                  "Run only the rows whose polls hold this many messages (1 "
                  "or --batch); 0: every row.");
  app->add_option("--clients", args.clients,
                  "Concurrent clients for the multi-client rows (postgres "
                  "and idem); 0 or 1 leaves those rows out.");
  idem::cli::AddDurationFlag(
      *app, "duration", &args.duration,
      "Wall-time limit per config, e.g. 20s: a config stops early after it "
      "(the rate is then over the messages it did).");
  idem::cli::AddDurationFlag(*app, "fsync_duration", &args.fsync_duration,
                             "How long the write+fdatasync loop runs, e.g. "
                             "3s.");
  app->add_option("--rounds", args.rounds,
                  "Times every config runs, in turn; each row reports its "
                  "median round and the range (>= 1).");
  app->add_option("--only", args.only,
                  "Comma-separated peers to run: postgres, redis, rocksdb, "
                  "idem, ceiling. Empty: all.");
  app->add_flag("--json", args.json, "Print the results as one JSON object.");
  app->add_option(
      "--dir", args.dir,
      "Working directory for the embedded stores and the fsync file, "
      "created if missing and kept (empty: a new directory under $TMPDIR or "
      "/tmp, removed at the end). Put it on the device you want to measure.");
  app->add_option("--pg", args.pg,
                  "libpq connection string of the PostgreSQL server.");
  app->add_option("--redis_durable", args.redis_durable,
                  "host:port of a Redis server with appendonly yes, "
                  "appendfsync always.");
  app->add_option("--redis_memory", args.redis_memory,
                  "host:port of a Redis server with no persistence.");
  app->add_option("--pg_test_fsync", args.pg_test_fsync,
                  "Path of pg_test_fsync, to add its fdatasync figure (empty: "
                  "skip).");
  if (std::optional<int> code =
          idem::cli::ParseToolFlags(*app, argc, argv, std::cout, std::cerr)) {
    return *code;
  }
  return idem::peers::RunPeersBench(args, std::cout, std::cerr);
}
