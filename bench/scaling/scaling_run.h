// How idem's throughput grows with threads for CPU-bound handlers: the logic
// of idem-scaling-bench (bench/scaling/scaling_main.cc parses its flags).
//
// Each row is one (work W µs, batch size, N threads, shards) configuration,
// measured in paired rounds: one thread on an ordinary store (shards 1) for
// `duration`, then N threads on a store of the row's shards (1, or N: one
// per thread) for `duration`, back to back, each on a fresh store under
// kBuffered. The
// row's speedup is the median over rounds of rate(N) / rate(1); pairing
// keeps a slow moment of the machine from landing on one side only.
//
// Every thread calls Engine::ProcessBatch with new messages of its own
// partition (thread t: partition t, so with one shard per thread each
// thread commits in its own shard) whose handler reads one state key of the
// thread's own (so no two threads conflict), hashes the payload for W µs of
// CPU time (CpuWork) and writes the hash back. Sharded stores are
// partition-scoped (Options::shards needs DedupeScope::kPartition).
//
// From a row's speedup S on N threads the run derives the serial fraction
// by Karp and Flatt's metric, e = (1/S - 1/N) / (1 - 1/N), the s in
// Amdahl's law S(n) = 1 / (s + (1 - s) / n) that would give S, and projects
// S(16) and S(32) from it. Only rows with N at most the machine's cores get
// one: past the cores the threads share them, and S measures the sharing.
// Not thread-safe; one run at a time.

#ifndef IDEM_BENCH_SCALING_SCALING_RUN_H_
#define IDEM_BENCH_SCALING_SCALING_RUN_H_

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace idem::scaling {

// The flags of idem-scaling-bench.
struct ScalingArgs {
  std::vector<int> work_us = {0, 5, 20, 100};
  std::vector<int> threads = {2, 4, 8};  // each measured against 1 thread
  std::vector<int> batches = {1, 500};
  // Rows with one shard; and rows with one shard per thread.
  bool one_shard = true;
  bool shard_per_thread = true;
  int rounds = 5;
  absl::Duration duration = absl::Seconds(1);  // per side of a pair
  int keys_per_thread = 1000;
  int payload_bytes = 256;
  std::string dir;  // where the stores go; empty: the default temp parent
  bool json = false;
};

// One side of a pair: `threads` threads for the duration.
struct SideFigures {
  double messages_per_s = 0;
  double reruns_per_1000 = 0;  // Stats::handler_reruns per 1,000 commits
};

// One configuration's rounds and what follows from them.
struct ScalingRow {
  int work_us = 0;
  int batch = 0;
  int threads = 0;
  int shards = 1;              // of the N-thread side; the 1-thread side has 1
  std::vector<double> ratios;  // rate(N) / rate(1), one per round
  double median_ratio = 0;
  double median_one_thread = 0;  // messages/s
  double median_n_threads = 0;
  double max_reruns_per_1000 = 0;  // the worst side of any round
  // Karp-Flatt serial fraction and the speedups it projects; unset when
  // threads exceed the machine's cores.
  std::optional<double> serial_fraction;
  std::optional<double> projected_16;
  std::optional<double> projected_32;
};

struct ScalingReport {
  unsigned cores = 0;
  double hash_rounds_per_us = 0;
  std::vector<ScalingRow> rows;
};

// kInvalidArgument for a value out of range (naming the flag); otherwise OK.
absl::Status ValidateScalingArgs(const ScalingArgs& args);

// Runs every configuration; progress lines go to `progress`. The first
// failed open or commit ends the run with its error.
absl::StatusOr<ScalingReport> RunScaling(const ScalingArgs& args,
                                         std::ostream& progress);

// Prints the report as a table, or as one JSON object with `json`.
void PrintScalingReport(const ScalingReport& report, bool json,
                        std::ostream& out);

// Karp and Flatt's serial fraction for speedup `speedup` on `threads` > 1
// threads, and Amdahl's speedup on `cores` with serial fraction `serial`.
double KarpFlattSerialFraction(double speedup, int threads);
double AmdahlSpeedup(double serial, int cores);

}  // namespace idem::scaling

#endif  // IDEM_BENCH_SCALING_SCALING_RUN_H_
