// idem-scaling-bench: how idem's throughput grows with threads for handlers
// that do W µs of real CPU work. Parses flags (CLI11, through
// cli/tool_usage.h, like every tool) and hands over to
// idem::scaling::RunScaling (bench/scaling/scaling_run.h), which holds the
// logic. bench/scaling/serial_share.sh profiles one row with perf.

#include <iostream>
#include <memory>
#include <optional>

#include "bench/scaling/scaling_run.h"
#include "cli/tool_usage.h"

int main(int argc, char** argv) {
  std::unique_ptr<CLI::App> app = idem::cli::MakeToolApp(
      "idem-scaling-bench",
      "Measures idem's throughput on N threads against 1 thread, in paired "
      "rounds\n(1 thread then N threads, back to back, each on a fresh store, "
      "kBuffered),\nwith handlers that read a key of their own, hash the "
      "payload for W µs of\nCPU time and write the key. Reports each row's "
      "median ratio, the serial\nfraction it implies (Karp-Flatt) and the "
      "speedup Amdahl's law projects on\n16 and 32 cores. Progress on stderr. "
      "Exit code 0, 1 if a run failed, 2 for a\nbad flag.\n"
      "Example: idem-scaling-bench --work_us=20 --batch=500 --threads=2 "
      "--json");
  idem::scaling::ScalingArgs args;
  app->add_option("--work_us", args.work_us,
                  "CPU work per message in µs, comma-separated.")
      ->delimiter(',');
  app->add_option("--threads", args.threads,
                  "Thread counts (>= 2) measured against 1 thread, "
                  "comma-separated.")
      ->delimiter(',');
  app->add_option("--batch", args.batches,
                  "Messages per ProcessBatch call, comma-separated.")
      ->delimiter(',');
  app->add_option("--one_shard", args.one_shard,
                  "Run rows whose N threads share one shard (true/false).");
  app->add_option("--shard_per_thread", args.shard_per_thread,
                  "Run rows with a shard per thread, Options::shards = N "
                  "(true/false).");
  app->add_option("--rounds", args.rounds, "Paired rounds per row (>= 1).");
  idem::cli::AddDurationFlag(*app, "duration", &args.duration,
                             "How long each side of a pair runs, e.g. 2s.");
  app->add_option("--keys_per_thread", args.keys_per_thread,
                  "Distinct state keys each thread updates (>= 1).");
  app->add_option("--payload_bytes", args.payload_bytes,
                  "Bytes of each message's payload, what the work hashes.");
  app->add_option("--dir", args.dir,
                  "Where the stores go (default: the temp directory).");
  app->add_flag("--json", args.json, "Print the report as one JSON object.");
  if (std::optional<int> code =
          idem::cli::ParseToolFlags(*app, argc, argv, std::cout, std::cerr)) {
    return *code;
  }
  if (absl::Status s = idem::scaling::ValidateScalingArgs(args); !s.ok()) {
    return idem::cli::ReportUsageError("idem-scaling-bench", s.message(),
                                       std::cerr);
  }
  absl::StatusOr<idem::scaling::ScalingReport> report =
      idem::scaling::RunScaling(args, std::cerr);
  if (!report.ok()) {
    std::cerr << "idem-scaling-bench: " << report.status() << "\n";
    return 1;
  }
  idem::scaling::PrintScalingReport(*report, args.json, std::cout);
  return 0;
}
