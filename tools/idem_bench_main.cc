// idem-bench: workload generator and runner. Parses flags and hands over to
// idem::bench::RunBenchTool (bench/idem_bench/idem_bench.h), which holds the
// logic.

#include <cstdint>
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/time/time.h"
#include "bench/idem_bench/idem_bench.h"
#include "cli/tool_usage.h"

ABSL_FLAG(int64_t, messages, 1000000,
          "Deliveries per layout, redeliveries included, in [0, 10000000000] "
          "(0: no limit; then --duration must be set).");
ABSL_FLAG(absl::Duration, duration, absl::ZeroDuration(),
          "Wall-time limit per layout, e.g. 60s, at most 168h (0: none). The "
          "run stops at --messages or --duration, whichever comes first.");
ABSL_FLAG(std::string, id_shape, "uuid",
          "Message IDs: uuid (36-byte UUID strings) or kafka "
          "(\"orders-<partition>-<offset>\", 12 partitions, offsets "
          "recorded).");
ABSL_FLAG(int32_t, state_bytes, 0,
          "Bytes the handler writes to one state key per processed message, "
          "in [0, 1048576] (0: none).");
ABSL_FLAG(int64_t, state_keys, 100000,
          "Distinct state keys the handler writes to, in [1, 10^12].");
ABSL_FLAG(double, duplicate_rate, 0.10,
          "Fraction of deliveries that redeliver an earlier ID, in [0, 1).");
ABSL_FLAG(int64_t, duplicate_reach, 10000,
          "Redeliveries repeat one of the last N distinct IDs (uniformly); "
          "N in [1, 100000000] (8 bytes of memory each).");
ABSL_FLAG(int32_t, batch, 100,
          "Messages per ProcessBatch call, in [1, 100000].");
ABSL_FLAG(std::string, durability, "sync",
          "sync (fdatasync per batch inside the commit) or buffered.");
ABSL_FLAG(bool, ack_durable, true,
          "With --durability=buffered: WaitDurable after every batch before "
          "counting it done (group commit across --threads). "
          "--noack_durable never syncs (survives a process crash only).");
ABSL_FLAG(int32_t, threads, 1,
          "Threads delivering batches concurrently, in [1, 64].");
ABSL_FLAG(absl::Duration, window, absl::Hours(1),
          "Dedupe window (Options::dedupe_window), e.g. 1h; from 1s to "
          "8760h.");
ABSL_FLAG(double, sim_messages_per_second, 100,
          "Simulated clock: advance idem::ManualClock (shared with RocksDB) "
          "by batch/N seconds per batch, so a short run covers many windows; "
          "N in [0.01, 1e9]. 0: real clock.");
ABSL_FLAG(absl::Duration, sample_every, absl::ZeroDuration(),
          "Time-series interval in clock time (0: window/10 when simulated, "
          "1s on the real clock); at most --window.");
ABSL_FLAG(int32_t, steady_windows, 3,
          "Steady-state write amplification is measured over the last N "
          "windows, N in [1, 1000].");
ABSL_FLAG(int64_t, lookups, 10000,
          "Lookups of new and of live IDs after the run, to measure read "
          "cost, in [0, 10000000] (0: skip).");
ABSL_FLAG(double, write_buffer_mib, 64,
          "Memtable size per column family in MiB (Options::"
          "write_buffer_bytes), in [0.0625, 4096].");
ABSL_FLAG(int32_t, expiry_buckets, 0,
          "Options::expiry_buckets of the engine layout: 0 keeps one dedupe "
          "column family with the TTL filter; N in [1, 64] groups records "
          "into time buckets dropped whole once expired.");
ABSL_FLAG(std::string, layout, "engine",
          "Comma-separated layouts to run on the same stream: engine, "
          "leveled, universal, fifo, buckets; or all.");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the stream.");
ABSL_FLAG(std::string, dir, "",
          "Parent directory of the stores (default $TMPDIR or /tmp); must "
          "exist and be writable (checked before the run).");
ABSL_FLAG(bool, keep, false, "Keep the stores after the run.");
ABSL_FLAG(bool, json, false, "Print the report as one JSON object.");
ABSL_FLAG(std::string, csv, "",
          "Write the time series (clock time, messages, disk bytes, live "
          "records, cumulative and last-window WA, ...) to this CSV file "
          "(checked writable before the run).");
ABSL_FLAG(std::string, plot, "",
          "Plot disk bytes and write amplification over time to this PNG "
          "(needs gnuplot; skipped with a message otherwise; checked "
          "writable before the run).");
ABSL_FLAG(bool, progress, true, "Progress lines on stderr every 2 s.");

int main(int argc, char** argv) {
  idem::cli::InitToolUsage(
      "idem_bench_main.cc",
      "Generates a message stream with redeliveries, runs it through the\n"
      "idem engine (or alternative RocksDB layouts of the same records) and\n"
      "reports throughput, latency, write/space amplification, expiry,\n"
      "memory per live ID and lookup cost. Exit code 0 on success, 1 if a\n"
      "run failed or gave a wrong dedupe answer, 2 for bad flags.\n"
      "\n"
      "Example (12 simulated one-hour windows in about a minute):\n"
      "  idem-bench --messages=2160000 --window=1h "
      "--sim_messages_per_second=50 \\\n"
      "    --durability=buffered --noack_durable --write_buffer_mib=1 "
      "--layout=all \\\n"
      "    --csv=wa.csv --plot=wa.png");
  if (!idem::cli::ParseToolFlags(argc, argv, "idem-bench")) return 2;
  idem::bench::BenchToolArgs args;
  idem::bench::BenchOptions& o = args.options;
  o.messages = absl::GetFlag(FLAGS_messages);
  o.duration = absl::GetFlag(FLAGS_duration);
  o.state_bytes = absl::GetFlag(FLAGS_state_bytes);
  o.state_keys = absl::GetFlag(FLAGS_state_keys);
  o.duplicate_rate = absl::GetFlag(FLAGS_duplicate_rate);
  o.duplicate_reach = absl::GetFlag(FLAGS_duplicate_reach);
  o.batch = absl::GetFlag(FLAGS_batch);
  o.ack_durable = absl::GetFlag(FLAGS_ack_durable);
  o.threads = absl::GetFlag(FLAGS_threads);
  o.window = absl::GetFlag(FLAGS_window);
  o.sim_messages_per_second = absl::GetFlag(FLAGS_sim_messages_per_second);
  o.sample_every = absl::GetFlag(FLAGS_sample_every);
  o.steady_windows = absl::GetFlag(FLAGS_steady_windows);
  o.lookups = absl::GetFlag(FLAGS_lookups);
  o.seed = absl::GetFlag(FLAGS_seed);
  o.dir = absl::GetFlag(FLAGS_dir);
  o.keep = absl::GetFlag(FLAGS_keep);
  args.layout = absl::GetFlag(FLAGS_layout);
  args.id_shape = absl::GetFlag(FLAGS_id_shape);
  args.durability = absl::GetFlag(FLAGS_durability);
  args.write_buffer_mib = absl::GetFlag(FLAGS_write_buffer_mib);
  args.options.expiry_buckets = absl::GetFlag(FLAGS_expiry_buckets);
  args.json = absl::GetFlag(FLAGS_json);
  args.csv = absl::GetFlag(FLAGS_csv);
  args.plot = absl::GetFlag(FLAGS_plot);
  args.progress = absl::GetFlag(FLAGS_progress);
  return idem::bench::RunBenchTool(args, std::cout, std::cerr);
}
