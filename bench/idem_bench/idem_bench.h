// idem-bench: a workload generator and runner for the dedupe engine and for
// alternative RocksDB layouts of the same records (targets.h).
//
// A run delivers a stream of message IDs (workload.h) in batches from one or
// more threads, optionally on a SIMULATED clock (idem::ManualClock advanced
// by batch_size / sim_messages_per_second per batch, shared with RocksDB
// through an Env, see clock_env.h) so that a run
// of minutes covers many dedupe windows and expiry reaches a steady state.
// It reports throughput, commit latency, write amplification (cumulative,
// per window and steady state), space amplification, records expired, memory
// per live ID and the cost of a lookup, and with BenchOptions::emit the
// outbox's figures; optionally a CSV time series and a gnuplot PNG.
//
// RunBench / RunBenchTool hold all the logic (tools/idem_bench_main.cc only
// parses flags), so tests drive them directly. Each layout's store lives in
// a fresh directory under BenchOptions::dir (default $TMPDIR or /tmp),
// removed after the run unless `keep`. Thread-compatible: concurrent runs
// are independent.
//
// The library's files, one concern each: runner.cc (RunBench: the runs and
// the figures), options_check.cc (ValidateBenchOptions), report.cc
// (PrintBenchReport), series.cc (WriteBenchCsv, WriteBenchPlot), tool.cc
// (RunBenchTool), targets.{h,cc} with layout_options.{h,cc} (the layouts),
// read_cost.{h,cc}, clock_env.{h,cc} and workload.{h,cc}.

#ifndef IDEM_BENCH_IDEM_BENCH_IDEM_BENCH_H_
#define IDEM_BENCH_IDEM_BENCH_IDEM_BENCH_H_

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/idem_bench/read_cost.h"
#include "bench/idem_bench/targets.h"
#include "bench/idem_bench/workload.h"
#include "engine/latency_histogram.h"
#include "idem/options.h"

namespace idem::bench {

struct BenchOptions {
  // Layouts to run, one after the other, on the same stream. Non-empty.
  std::vector<Layout> layouts = {Layout::kEngine};
  // Stop after this many deliveries (0: no limit) or this much wall time
  // (zero: no limit), whichever comes first; at least one must be set.
  // messages in [0, 10^10], duration in [0, 7 days].
  int64_t messages = 1000000;
  absl::Duration duration = absl::ZeroDuration();
  IdShape id_shape = IdShape::kUuid;
  // Bytes the handler writes to one of `state_keys` state keys per processed
  // message; 0: the handler writes nothing. In [0, 1 MiB].
  int state_bytes = 0;
  int64_t state_keys = 100000;  // in [1, 10^12]
  // Fraction of deliveries that are redeliveries, in [0, 1), of one of the
  // last `duplicate_reach` distinct IDs, in [1, 10^8] (8 bytes each).
  double duplicate_rate = 0.1;
  int64_t duplicate_reach = 10000;
  int batch = 100;  // messages per commit, in [1, 100000]
  Durability durability = Durability::kSync;
  // kBuffered only: make each batch durable before counting it done.
  bool ack_durable = true;
  int threads = 1;                         // delivering threads, in [1, 64]
  absl::Duration window = absl::Hours(1);  // the dedupe window, 1 s..365 d
  // In [0.01, 10^9]: simulated clock advancing this many messages per
  // simulated second. 0: the real clock.
  double sim_messages_per_second = 100;
  // Time-series interval in clock time, at most `window`; zero: window / 10
  // (simulated) or 1 s (real clock).
  absl::Duration sample_every = absl::ZeroDuration();
  // Steady-state write amplification is measured over the last this many
  // whole windows (needs at least steady_windows + 1 windows). In
  // [1, 1000].
  int steady_windows = 3;
  // Lookups of new and of live IDs after the run (read cost). In
  // [0, 10^7].
  int64_t lookups = 10000;
  // Memtable size per column family (Options::write_buffer_bytes), in
  // [64 KiB, 4 GiB].
  size_t write_buffer_bytes = size_t{64} << 20;
  // Options::expiry_buckets for the engine layout, in [0, 64].
  int expiry_buckets = 0;
  // Options::detect_conflicts for the engine layout.
  bool detect_conflicts = false;
  // The outbox (engine layout only): each processed message's handler
  // emits this many records (Txn::Emit to kEmitDestination, keyed by the
  // message ID, a value of `emit_bytes` bytes), in [0, 1000]; 0: none.
  int emit = 0;
  int emit_bytes = 64;  // in [0, 1 MiB]
  // With emit > 0: every this many batches (counted over all threads) the
  // delivering thread acknowledges every entry committed so far
  // (Engine::AckOutbox), inside the timed batch, as a relay draining after
  // each batch would; the report gives the acknowledgements' count and time.
  // 0: never acknowledge (entries accumulate; the report says how many are
  // pending). In [0, 1000000].
  int outbox_ack_every = 1;
  uint64_t seed = 1;
  std::string dir;    // parent directory of the stores
  bool keep = false;  // keep the stores (their paths are reported)
};

// Returns kInvalidArgument naming the flag if `options` is out of range.
absl::Status ValidateBenchOptions(const BenchOptions& options);

// One point of the time series (taken when the clock crosses a multiple of
// sample_every, and at the end).
struct Sample {
  double clock_seconds = 0;  // clock time since the start (simulated or real)
  double wall_seconds = 0;
  int64_t messages = 0;     // deliveries handed out
  uint64_t disk_bytes = 0;  // all files under the store directory
  uint64_t live_sst_bytes = 0;
  int64_t live_records = 0;        // exact: processed less than a window ago
  uint64_t estimated_records = 0;  // RocksDB's estimate (includes expired)
  uint64_t user_bytes = 0;
  uint64_t written_bytes = 0;  // WAL + flush + compaction
  uint64_t expired_dropped = 0;
  uint64_t expired_dropped_whole = 0;
  uint64_t logical_bytes = 0;  // of the live records (and state)
  double cumulative_wa = 0;
  // Write amplification over the last window of clock time; nullopt until a
  // whole window is covered.
  std::optional<double> window_wa;
};

struct LayoutReport {
  Layout layout = Layout::kEngine;
  std::string store_path;  // kept only with BenchOptions::keep
  // The stream.
  int64_t messages = 0;
  int64_t unique_ids = 0;
  int64_t redeliveries = 0;
  int64_t expired_redeliveries = 0;  // redelivered after their window
  // Outcomes.
  int64_t processed = 0;
  int64_t duplicates = 0;
  // Outcomes that differ from the truth; only checked with one thread on a
  // simulated clock (nullopt otherwise).
  std::optional<int64_t> dedupe_errors;
  // Speed.
  double wall_seconds = 0;
  double messages_per_second = 0;
  LatencySummary batch_latency;    // one ProcessBatch (+ ack) call
  LatencySummary message_latency;  // batch latency / messages in batch
  // Time covered.
  double clock_seconds = 0;
  double windows_covered = 0;
  // Writes.
  uint64_t user_bytes = 0, wal_bytes = 0, flush_bytes = 0, compaction_bytes = 0;
  double cumulative_wa = 0;
  std::optional<double> steady_wa;    // over the last steady_windows windows
  std::vector<double> wa_per_window;  // each whole window, in order
  std::optional<double> rocksdb_sum_wamp;
  // Expiry.
  uint64_t expired_dropped = 0;        // by the TTL filter
  uint64_t expired_dropped_whole = 0;  // in deleted files / dropped families
  // Space at the end.
  int64_t live_records = 0;
  uint64_t estimated_records = 0;
  uint64_t logical_live_bytes = 0;  // live records x (key + value) + state
  uint64_t live_sst_bytes = 0;
  uint64_t disk_bytes = 0;
  double space_amp = 0;  // live_sst_bytes / logical_live_bytes
  // Over the samples of the last steady_windows windows (nullopt without a
  // steady state): mean live_sst_bytes / logical bytes, and disk bytes.
  std::optional<double> steady_space_amp;
  std::optional<double> steady_disk_bytes_mean;
  std::optional<uint64_t> steady_disk_bytes_max;
  // Memory (RocksDB properties; nullopt where the engine hides them).
  std::optional<uint64_t> memtable_bytes;
  std::optional<uint64_t> block_cache_usage;
  uint64_t table_readers_bytes = 0;  // index + filters, read-only reopen
  // Index and filter bytes per live record: the part of memory that grows
  // with the live set (memtables and block cache are bounded by options).
  double index_filter_bytes_per_live_id = 0;
  // (memtables + index + filters) / live records; nullopt for kEngine.
  std::optional<double> memory_per_live_id;
  // Read cost after the run (read-only reopen, cold block cache).
  std::optional<ReadCost> read_cost;
  // The outbox at the end of the run: with emit > 0 only.
  std::optional<OutboxFigures> outbox;
  std::vector<Sample> samples;
  std::vector<std::string> notes;
};

struct BenchReport {
  BenchOptions options;
  std::string date;  // UTC, when the run started
  std::vector<LayoutReport> layouts;
};

// Runs every layout of `options`. Progress lines go to `progress` (may be
// null) every few seconds. kInvalidArgument for bad options; otherwise the
// first storage error.
absl::StatusOr<BenchReport> RunBench(const BenchOptions& options,
                                     std::ostream* progress);

// Writes `report` for people, or as one JSON object when `json`.
void PrintBenchReport(const BenchReport& report, bool json, std::ostream& out);

// Writes the time series of every layout as CSV to `path`.
absl::Status WriteBenchCsv(const BenchReport& report, const std::string& path);

// Plots disk bytes and write amplification over clock time to the PNG at
// `path` with gnuplot. kUnavailable if gnuplot is not on $PATH.
absl::Status WriteBenchPlot(const BenchReport& report, const std::string& path);

// The command line as the tool receives it, before parsing the names.
struct BenchToolArgs {
  BenchOptions options;             // numeric fields; the fields below override
  std::string layout = "engine";    // comma-separated names, or "all"
  std::string id_shape = "uuid";    // uuid | kafka
  std::string durability = "sync";  // sync | buffered
  double write_buffer_mib = 64;
  bool json = false;
  std::string csv;   // time-series CSV path; empty: none
  std::string plot;  // PNG path; empty: none
  bool progress = true;
};

// Parses and validates `args`, runs, prints. Returns 0 on success, 1 if the
// run failed or a layout gave a wrong dedupe answer, 2 for bad arguments
// (message on `err` naming the flag; nothing is run), which include an
// option out of range, a --csv or --plot file that cannot be written and a
// --dir that is not a writable directory. A missing gnuplot only skips the
// plot, with a message.
int RunBenchTool(const BenchToolArgs& args, std::ostream& out,
                 std::ostream& err);

}  // namespace idem::bench

#endif  // IDEM_BENCH_IDEM_BENCH_IDEM_BENCH_H_
