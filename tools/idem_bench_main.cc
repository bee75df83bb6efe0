// idem-bench: workload generator and runner. Parses flags and hands over to
// idem::bench::RunBenchTool (bench/idem_bench/idem_bench.h), which holds the
// logic.

#include <iostream>
#include <memory>
#include <optional>

#include "bench/idem_bench/idem_bench.h"
#include "cli/tool_usage.h"

namespace {

using idem::bench::BenchToolArgs;

constexpr char kDescription[] =
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
    "    --csv=wa.csv --plot=wa.png";

// The stream: how long it runs, its IDs, the state each message writes and
// its redeliveries.
void AddStreamFlags(CLI::App& app, BenchToolArgs& args) {
  idem::bench::BenchOptions& o = args.options;
  app.add_option(
      "--messages", o.messages,
      "Deliveries per layout, redeliveries included, in [0, 10000000000] "
      "(0: no limit; then --duration must be set).");
  idem::cli::AddDurationFlag(
      app, "duration", &o.duration,
      "Wall-time limit per layout, e.g. 60s, at most 168h (0: none). The "
      "run stops at --messages or --duration, whichever comes first.");
  app.add_option("--id_shape", args.id_shape,
                 "Message IDs: uuid (36-byte UUID strings) or kafka "
                 "(\"orders-<partition>-<offset>\", 12 partitions, offsets "
                 "recorded).");
  app.add_option(
      "--state_bytes", o.state_bytes,
      "Bytes the handler writes to one state key per processed message, "
      "in [0, 1048576] (0: none).");
  app.add_option("--state_keys", o.state_keys,
                 "Distinct state keys the handler writes to, in [1, 10^12].");
  app.add_option(
      "--duplicate_rate", o.duplicate_rate,
      "Fraction of deliveries that redeliver an earlier ID, in [0, 1).");
  app.add_option(
      "--duplicate_reach", o.duplicate_reach,
      "Redeliveries repeat one of the last N distinct IDs (uniformly); "
      "N in [1, 100000000] (8 bytes of memory each).");
}

// How the stream is delivered: batches, durability and threads.
void AddDeliveryFlags(CLI::App& app, BenchToolArgs& args) {
  idem::bench::BenchOptions& o = args.options;
  app.add_option("--batch", o.batch,
                 "Messages per ProcessBatch call, in [1, 100000].");
  app.add_option("--durability", args.durability,
                 "sync (fdatasync per batch inside the commit) or buffered.");
  app.add_flag(
      "--ack_durable,!--noack_durable", o.ack_durable,
      "With --durability=buffered: WaitDurable after every batch before "
      "counting it done (group commit across --threads). "
      "--noack_durable never syncs (survives a process crash only).");
  app.add_option("--threads", o.threads,
                 "Threads delivering batches concurrently, in [1, 64].");
}

// The dedupe window, the clock and the time series measured on it.
void AddClockFlags(CLI::App& app, BenchToolArgs& args) {
  idem::bench::BenchOptions& o = args.options;
  idem::cli::AddDurationFlag(
      app, "window", &o.window,
      "Dedupe window (Options::dedupe_window), e.g. 1h; from 1s to "
      "8760h.");
  app.add_option(
      "--sim_messages_per_second", o.sim_messages_per_second,
      "Simulated clock: advance idem::ManualClock (shared with RocksDB) "
      "by batch/N seconds per batch, so a short run covers many windows; "
      "N in [0.01, 1e9]. 0: real clock.");
  idem::cli::AddDurationFlag(
      app, "sample_every", &o.sample_every,
      "Time-series interval in clock time (0: window/10 when simulated, "
      "1s on the real clock); at most --window.");
  app.add_option("--steady_windows", o.steady_windows,
                 "Steady-state write amplification is measured over the last N "
                 "windows, N in [1, 1000].");
}

// The lookups after the run and the options of the stores.
void AddStoreFlags(CLI::App& app, BenchToolArgs& args) {
  idem::bench::BenchOptions& o = args.options;
  app.add_option(
      "--lookups", o.lookups,
      "Lookups of new and of live IDs after the run, to measure read "
      "cost, in [0, 10000000] (0: skip).");
  app.add_option("--write_buffer_mib", args.write_buffer_mib,
                 "Memtable size per column family in MiB (Options::"
                 "write_buffer_bytes), in [0.0625, 4096].");
  app.add_option(
      "--expiry_buckets", o.expiry_buckets,
      "Options::expiry_buckets of the engine layout: 0 keeps one dedupe "
      "column family with the TTL filter; N in [1, 64] groups records "
      "into time buckets dropped whole once expired.");
  app.add_flag("--detect_conflicts", o.detect_conflicts,
               "Options::detect_conflicts of the engine layout: each record "
               "keeps the fingerprint of its payload (here the ID).");
}

// The outbox: what each handler emits and how often it is acknowledged.
void AddOutboxFlags(CLI::App& app, BenchToolArgs& args) {
  idem::bench::BenchOptions& o = args.options;
  app.add_option(
      "--emit", o.emit,
      "Outbox records each processed message's handler emits (Txn::Emit "
      "to \"bench.out\", keyed by the message ID), in [0, 1000]; engine "
      "layout only (0: none).");
  app.add_option("--emit_bytes", o.emit_bytes,
                 "Value bytes of each emitted record, in [0, 1048576].");
  app.add_option(
      "--outbox_ack_every", o.outbox_ack_every,
      "With --emit: every N batches, acknowledge every entry committed so "
      "far (Engine::AckOutbox, timed with its batch), as a relay draining "
      "after each batch would; N in [0, 1000000] (0: never, entries "
      "accumulate).");
}

// The layouts to run, the seed and where the stores go.
void AddRunFlags(CLI::App& app, BenchToolArgs& args) {
  idem::bench::BenchOptions& o = args.options;
  app.add_option("--layout", args.layout,
                 "Comma-separated layouts to run on the same stream: engine, "
                 "leveled, universal, fifo; or all.");
  app.add_option("--seed", o.seed, "Seed of the stream.");
  app.add_option(
      "--dir", o.dir,
      "Working directory: the parent of the stores, one per layout (so "
      "--dir, not --store; default $TMPDIR or /tmp); must "
      "exist and be writable (checked before the run).");
  app.add_flag("--keep", o.keep, "Keep the stores after the run.");
}

// The report's form, the time series' files and the progress lines.
void AddOutputFlags(CLI::App& app, BenchToolArgs& args) {
  app.add_flag("--json", args.json, "Print the report as one JSON object.");
  app.add_option(
      "--csv", args.csv,
      "Write the time series (clock time, messages, disk bytes, live "
      "records, cumulative and last-window WA, ...) to this CSV file "
      "(checked writable before the run).");
  app.add_option(
      "--plot", args.plot,
      "Plot disk bytes and write amplification over time to this PNG "
      "(needs gnuplot; skipped with a message otherwise; checked "
      "writable before the run).");
  app.add_flag("--progress,!--noprogress", args.progress,
               "Progress lines on stderr every 2 s.");
}

}  // namespace

int main(int argc, char** argv) {
  std::unique_ptr<CLI::App> app =
      idem::cli::MakeToolApp("idem-bench", kDescription);
  BenchToolArgs args;
  for (auto add :
       {AddStreamFlags, AddDeliveryFlags, AddClockFlags, AddStoreFlags,
        AddOutboxFlags, AddRunFlags, AddOutputFlags}) {
    add(*app, args);
  }
  if (std::optional<int> code =
          idem::cli::ParseToolFlags(*app, argc, argv, std::cout, std::cerr)) {
    return *code;
  }
  return idem::bench::RunBenchTool(args, std::cout, std::cerr);
}
