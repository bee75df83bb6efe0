// idem-crashtest: kills and power-fails real worker processes running an idem
// consumer, then checks that no acknowledged message was lost and none was
// applied twice. See docs/crash-testing.md.

#include <iostream>
#include <memory>
#include <optional>

#include "cli/crashtest.h"
#include "cli/tool_usage.h"

int main(int argc, char** argv) {
  std::unique_ptr<CLI::App> app = idem::cli::MakeToolApp(
      "idem-crashtest",
      "Crash-tests an idem consumer: repeatedly kills (or power-fails) a "
      "worker\nprocess mid-stream, recovers, and checks that no acknowledged "
      "message is lost\nand none is applied twice. Exit code 0: every "
      "invariant held; 1: a violation\nwas found; 2: a bad flag or a value "
      "out of range, or the harness could not run.\n"
      "Example: idem-crashtest --cycles=100 --mode=mixed "
      "--durability=buffered");
  idem::cli::CrashtestArgs args;
  app->add_option("--workload", args.workload,
                  "Workload: ledger, inventory, pipeline (the ledger, "
                  "emitting through the outbox to a downstream store that a "
                  "relay in the worker feeds), transfers (amounts moved "
                  "between four shared accounts by --threads threads), "
                  "orders (orders opened, closed and counted with prefix "
                  "scans, counters bumped with merges) or windows (events of "
                  "many keys with out-of-order event times, counted in "
                  "tumbling windows with grace whose timers the worker "
                  "fires: every (key, window) emitted once with its "
                  "accepted count).");
  app->add_option("--cycles", args.cycles,
                  "Crash cycles, in [0, 1000000]: N worker runs that each end "
                  "in a crash of --mode's kind, then one crash-free final "
                  "run. A run whose worker consumes its stream before the "
                  "crash is not a cycle: the cycle runs again on a new epoch.");
  app->add_option("--mode", args.mode,
                  "Crash kind: kill (SIGKILL at a random time), powerloss "
                  "(SIGKILL, then unsynced writes dropped, sometimes torn), "
                  "killpoint (kill at a seeded Nth append/sync/rename, "
                  "unsynced writes dropped), or mixed.");
  app->add_option("--durability", args.durability,
                  "Engine durability: sync or buffered.");
  app->add_option("--seed", args.seed,
                  "Seed for the stream, kill points and choices.");
  app->add_option("--threads", args.threads,
                  "Worker threads delivering concurrently, in [1, 256].");
  app->add_option("--dir", args.dir,
                  "Working directory: holds a store per epoch and the "
                  "workers' logs (so --dir, not --store). Empty: a new "
                  "temporary one, removed on PASS unless --keep.");
  app->add_flag("--keep", args.keep, "Keep the working directory.");
  app->add_flag("--json", args.json, "Print the report as one JSON object.");
  app->add_option("--messages", args.messages,
                  "Unique messages per epoch; each epoch is a fresh store "
                  "whose stream is consumed over several cycles (0: "
                  "min(20000, 500 per cycle)); at most 2000000 (the harness "
                  "keeps every message in memory).");
  app->add_option("--partitions", args.partitions,
                  "Partitions of the simulated broker, in [1, 1024].");
  app->add_option("--batch", args.batch,
                  "Largest batch passed to ProcessBatch, in [1, 10000].");
  app->add_option("--expiry_buckets", args.expiry_buckets,
                  "Options::expiry_buckets of the worker's engine, in "
                  "[0, 64].");
  app->add_option("--dedupe_scope", args.dedupe_scope,
                  "Options::dedupe_scope of the worker's engine: store or "
                  "partition.");
  app->add_flag("--detect_conflicts", args.detect_conflicts,
                "Options::detect_conflicts of the worker's engine; about half "
                "the producer duplicates become conflicting redeliveries, "
                "which must all be rejected (invariant conflicts_rejected).");
  app->add_flag("--refresh_on_duplicate", args.refresh_on_duplicate,
                "Options::refresh_on_duplicate of the worker's engine.");
  app->add_option("--shards", args.shards,
                  "Options::shards of the worker's engine, in [1, 256]: each "
                  "shard a store with its own write-ahead log, crashed and "
                  "power-failed with the others, checked shard by shard. "
                  "Above 1 it needs --dedupe_scope=partition and the ledger "
                  "or transfers workload (state is partition-local).");
  app->add_option("--recovery_crash_rate", args.recovery_crash_rate,
                  "Fraction of crash cycles whose recovery is crashed too, "
                  "in [0, 1].");
  app->add_option("--self_test", args.self_test,
                  "Break the engine on purpose to see the harness catch it: "
                  "none, ack_before_durable (use with --durability=buffered "
                  "and --mode=powerloss), split_commit, and with "
                  "--workload=pipeline emit_outside_commit (the handler "
                  "publishes its emits itself, outside the commit) or "
                  "ack_before_publish (the relay acknowledges outbox "
                  "entries before publishing them), lost_updates (no check "
                  "that a handler's reads are current at commit; with "
                  "--threads >= 2, e.g. --workload=transfers), and with "
                  "--detect_conflicts ignore_conflicts (conflicting "
                  "redeliveries answered as duplicates), "
                  "skip_range_validation (scanned ranges not checked at "
                  "commit; with --threads >= 2 and --workload=orders), "
                  "wrong_shard (partitions routed to another shard at each "
                  "open; with --shards >= 2), and with --workload=windows "
                  "fire_outside_commit (fired timers deleted in a write "
                  "apart from their effects).");
  if (std::optional<int> code =
          idem::cli::ParseToolFlags(*app, argc, argv, std::cout, std::cerr)) {
    return *code;
  }
  return idem::cli::RunCrashtest(args, std::cout, std::cerr);
}
