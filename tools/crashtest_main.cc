// idem-crashtest: kills and power-fails real worker processes running an idem
// consumer, then checks that no acknowledged message was lost and none was
// applied twice. See docs/crash-testing.md.

#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "cli/crashtest.h"
#include "cli/tool_usage.h"

ABSL_FLAG(std::string, workload, "ledger", "Workload: ledger or inventory.");
ABSL_FLAG(int, cycles, 20,
          "Crash cycles, in [0, 1000000]: N worker runs that each end in a "
          "crash of --mode's kind, then one crash-free final run. A run whose "
          "worker consumes its stream before the crash is not a cycle: the "
          "cycle runs again on a new epoch.");
ABSL_FLAG(std::string, mode, "kill",
          "Crash kind: kill (SIGKILL at a random time), powerloss (SIGKILL, "
          "then unsynced writes dropped, sometimes torn), killpoint (kill at "
          "a seeded Nth append/sync/rename, unsynced writes dropped), or "
          "mixed.");
ABSL_FLAG(std::string, durability, "sync", "Engine durability: sync or buffered.");
ABSL_FLAG(uint64_t, seed, 1, "Seed for the stream, kill points and choices.");
ABSL_FLAG(int, threads, 2,
          "Worker threads delivering concurrently, in [1, 256].");
ABSL_FLAG(std::string, dir, "",
          "Scratch directory (empty: a new temporary one, removed on PASS).");
ABSL_FLAG(bool, keep, false, "Keep the scratch directory.");
ABSL_FLAG(bool, json, false, "Print the report as one JSON object.");
ABSL_FLAG(uint64_t, messages, 0,
          "Unique messages per epoch; each epoch is a fresh store whose "
          "stream is consumed over several cycles (0: min(20000, 500 per "
          "cycle)); at most 2000000 (the harness keeps every message in "
          "memory).");
ABSL_FLAG(int, partitions, 4,
          "Partitions of the simulated broker, in [1, 1024].");
ABSL_FLAG(int, max_batch, 32,
          "Largest batch passed to ProcessBatch, in [1, 10000].");
ABSL_FLAG(int, expiry_buckets, 0,
          "Options::expiry_buckets of the worker's engine, in [0, 64].");
ABSL_FLAG(double, recovery_crash_rate, 0.2,
          "Fraction of crash cycles whose recovery is crashed too, in "
          "[0, 1].");
ABSL_FLAG(std::string, self_test, "none",
          "Break the engine on purpose to see the harness catch it: none, "
          "ack_before_durable (use with --durability=buffered and "
          "--mode=powerloss) or split_commit.");

int main(int argc, char** argv) {
  idem::cli::InitToolUsage(
      "crashtest_main.cc",
      "Crash-tests an idem consumer: repeatedly kills (or power-fails) a "
      "worker process mid-stream, recovers, and checks that no acknowledged "
      "message is lost and none is applied twice.\n"
      "Example: idem-crashtest --cycles=100 --mode=mixed --durability=buffered");
  if (!idem::cli::ParseToolFlags(argc, argv, "idem-crashtest")) return 2;
  idem::cli::CrashtestArgs args;
  args.workload = absl::GetFlag(FLAGS_workload);
  args.cycles = absl::GetFlag(FLAGS_cycles);
  args.mode = absl::GetFlag(FLAGS_mode);
  args.durability = absl::GetFlag(FLAGS_durability);
  args.seed = absl::GetFlag(FLAGS_seed);
  args.threads = absl::GetFlag(FLAGS_threads);
  args.dir = absl::GetFlag(FLAGS_dir);
  args.keep = absl::GetFlag(FLAGS_keep);
  args.json = absl::GetFlag(FLAGS_json);
  args.messages = absl::GetFlag(FLAGS_messages);
  args.partitions = absl::GetFlag(FLAGS_partitions);
  args.max_batch = absl::GetFlag(FLAGS_max_batch);
  args.expiry_buckets = absl::GetFlag(FLAGS_expiry_buckets);
  args.recovery_crash_rate = absl::GetFlag(FLAGS_recovery_crash_rate);
  args.self_test = absl::GetFlag(FLAGS_self_test);
  return idem::cli::RunCrashtest(args, std::cout, std::cerr);
}
