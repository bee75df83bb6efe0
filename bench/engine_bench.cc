// Throughput of Engine::ProcessBatch with batches of 500 messages:
//   - all new IDs, or 10% redeliveries of IDs from earlier batches;
//   - Durability::kSync (one WAL fsync per batch inside ProcessBatch) or
//     kBuffered followed by one WaitDurable per batch (the same fsync, issued
//     by the caller before acknowledging).
// The handler writes one small state value per message. Each benchmark run
// uses a fresh store in a fresh directory under $TMPDIR (or /tmp), removed
// afterwards. Reported: items_per_second (messages) and the engine's write
// amplification (Stats::write_amplification) with its byte components per
// message. The first four runs use the default Options (64 MiB memtables);
// two more repeat the 10% case with 1 MiB memtables so flushes and
// compactions show up in the write amplification.
//
//   build/bench/idem_engine_bench --benchmark_min_time=2

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "benchmark/benchmark.h"
#include "idem/engine.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

constexpr int kBatch = 500;

absl::Status WriteOneValue(const Message& m, Txn& txn) {
  txn.Put(m.id, "v:0123456789");  // one small state value per message
  return absl::OkStatus();
}

// Arguments: duplicate percentage (0 or 10), durability (0 kSync,
// 1 kBuffered), memtable size in MiB (Options::write_buffer_bytes).
void BM_ProcessBatch(benchmark::State& state) {
  const int duplicate_percent = static_cast<int>(state.range(0));
  const bool buffered = state.range(1) == 1;
  const size_t memtable_mib = static_cast<size_t>(state.range(2));
  absl::StatusOr<util::TempDir> dir = util::TempDir::Create("idem_bench_");
  if (!dir.ok()) {
    state.SkipWithError("cannot create a temporary directory");
    return;
  }
  Options options;
  options.durability = buffered ? Durability::kBuffered : Durability::kSync;
  options.write_buffer_bytes = memtable_mib << 20;
  absl::StatusOr<std::unique_ptr<Engine>> opened =
      Engine::Open(dir->Sub("store"), options);
  if (!opened.ok()) {
    state.SkipWithError(opened.status().ToString().c_str());
    return;
  }
  Engine& engine = **opened;

  // With duplicate_percent > 0, every stride-th slot of a batch (after the
  // first) redelivers the ID that was new one slot earlier in the previous
  // batch: deterministic, spread evenly, each redelivered ID a distinct one.
  const int duplicates_per_batch = kBatch * duplicate_percent / 100;
  const int stride =
      duplicates_per_batch > 0 ? kBatch / duplicates_per_batch : kBatch + 1;
  std::vector<std::string> ids(kBatch);
  std::vector<std::string> previous;
  std::vector<Message> batch(kBatch);
  int64_t next_id = 0;
  int64_t expected_duplicates = 0;
  for (auto _ : state) {
    for (int i = 0; i < kBatch; ++i) {
      if (!previous.empty() && i % stride == stride - 1) {
        ids[i] = previous[i - 1];
        ++expected_duplicates;
      } else {
        ids[i] = absl::StrCat("msg-", next_id++);
      }
      batch[i] = Message{.id = ids[i]};
    }
    absl::StatusOr<std::vector<Result>> results =
        engine.ProcessBatch(batch, WriteOneValue);
    if (!results.ok()) {
      state.SkipWithError(results.status().ToString().c_str());
      return;
    }
    if (buffered) {
      uint64_t last = 0;
      for (const Result& r : *results) last = std::max(last, r.sequence);
      if (absl::Status s = engine.WaitDurable(last); !s.ok()) {
        state.SkipWithError(s.ToString().c_str());
        return;
      }
    }
    previous = ids;
  }
  state.SetItemsProcessed(state.iterations() * kBatch);

  absl::StatusOr<Stats> stats = engine.GetStats();
  if (!stats.ok()) {
    state.SkipWithError(stats.status().ToString().c_str());
    return;
  }
  if (stats->duplicates != static_cast<uint64_t>(expected_duplicates)) {
    state.SkipWithError("duplicate count differs from the injected one");
    return;
  }
  const double messages = static_cast<double>(state.iterations() * kBatch);
  state.counters["write_amp"] = stats->write_amplification;
  state.counters["user_B/msg"] =
      static_cast<double>(stats->user_bytes) / messages;
  state.counters["wal_B/msg"] =
      static_cast<double>(stats->wal_bytes) / messages;
  state.counters["flush_B/msg"] =
      static_cast<double>(stats->flush_bytes) / messages;
  state.counters["compact_B/msg"] =
      static_cast<double>(stats->compaction_bytes) / messages;
  state.counters["dup_frac"] =
      static_cast<double>(stats->duplicates) / messages;
}

// The default 64 MiB memtables do not fill up in a short run, so write
// amplification there is the WAL's alone; the 1 MiB runs flush and compact,
// showing the LSM's share.
BENCHMARK(BM_ProcessBatch)
    ->ArgNames({"dup_pct", "buffered", "memtable_mib"})
    ->Args({0, 0, 64})
    ->Args({0, 1, 64})
    ->Args({10, 0, 64})
    ->Args({10, 1, 64})
    ->Args({10, 0, 1})
    ->Args({10, 1, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// ---- Parallel calls
// ----------------------------------------------------------
//
// BM_ParallelProcess: every benchmark thread calls Process with one new
// message at a time on one shared engine; the handler reads one state key,
// waits `wait_us` (an external call) and writes the key back incremented:
// its own
// (distinct keys) or, with hot = 1, one key shared by every thread
// (contention: the handlers that read it while another commit changed it
// run again). Each configuration runs with 1 and 16 threads in the same
// process run, so the ratio of their items_per_second is taken within one
// run. Reported besides: reruns per message (Stats::handler_reruns).
//
//   build/bench/idem_engine_bench --benchmark_filter=BM_ParallelProcess

// The parallel benchmarks' handler: reads `key` as a decimal counter, waits
// `wait` (an external call, between the read and the write: the widest
// window for a concurrent commit of the same key) and writes it back
// incremented.
absl::Status IncrementCounter(Txn& txn, const std::string& key,
                              absl::Duration wait) {
  absl::StatusOr<std::optional<std::string>> v = txn.Get(key);
  if (!v.ok()) return v.status();
  if (wait > absl::ZeroDuration()) absl::SleepFor(wait);
  int64_t n = 0;
  if (v->has_value() && !absl::SimpleAtoi(**v, &n)) {
    return absl::InternalError("bad counter");
  }
  txn.Put(key, absl::StrCat(n + 1));
  return absl::OkStatus();
}

struct ParallelRun {
  std::optional<util::TempDir> dir;
  std::unique_ptr<Engine> engine;
  uint64_t reruns_before = 0;
};
ParallelRun* parallel_run = nullptr;  // set up and torn down by thread 0

void BM_ParallelProcess(benchmark::State& state) {
  const absl::Duration wait = absl::Microseconds(state.range(0));
  const bool buffered = state.range(1) == 1;
  const bool hot = state.range(2) == 1;
  if (state.thread_index() == 0) {
    parallel_run = new ParallelRun;
    absl::StatusOr<util::TempDir> dir = util::TempDir::Create("idem_bench_");
    if (dir.ok()) {
      parallel_run->dir.emplace(*std::move(dir));
      Options options;
      options.durability = buffered ? Durability::kBuffered : Durability::kSync;
      absl::StatusOr<std::unique_ptr<Engine>> opened =
          Engine::Open(parallel_run->dir->Sub("store"), options);
      if (opened.ok()) parallel_run->engine = *std::move(opened);
    }
  }
  // Every thread starts its loop once thread 0 has set up (the loop begins
  // with a barrier).
  int64_t i = 0;
  for (auto _ : state) {
    Engine* engine = parallel_run->engine.get();
    if (engine == nullptr) {
      state.SkipWithError("cannot open an engine");
      break;
    }
    const std::string id = absl::StrCat("t", state.thread_index(), "-", i++);
    const std::string key = hot ? std::string("hot") : id;
    absl::StatusOr<Result> r =
        engine->Process(Message{.id = id}, [&](const Message&, Txn& txn) {
          return IncrementCounter(txn, key, wait);
        });
    if (!r.ok() || r->outcome != Outcome::kProcessed) {
      state.SkipWithError("a message was not processed");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
  // The loop ends with a barrier too: every thread's calls have returned.
  if (state.thread_index() == 0) {
    if (parallel_run->engine != nullptr) {
      absl::StatusOr<Stats> stats = parallel_run->engine->GetStats();
      if (stats.ok() && stats->processed > 0) {
        state.counters["reruns/msg"] =
            static_cast<double>(stats->handler_reruns) /
            static_cast<double>(stats->processed);
      }
    }
    delete parallel_run;
    parallel_run = nullptr;
  }
}

BENCHMARK(BM_ParallelProcess)
    ->ArgNames({"wait_us", "buffered", "hot"})
    ->Args({1000, 1, 0})  // a handler that waits 1 ms, kBuffered
    ->Args({0, 0, 0})     // kSync, nothing to wait for
    ->Args({1000, 1, 1})  // contention: one hot key, waiting handlers
    ->Args({0, 1, 1})     // contention: one hot key, CPU-bound handlers
    ->Threads(1)
    ->Threads(16)
    ->UseRealTime();

// ---- A large live keyspace
// ---------------------------------------------------
//
// BM_ParallelKeyspace: `keys` state keys are written first (in batches of
// 1,000), then 8 threads call Process, each message a CPU-bound Get and Put
// of a key of its thread's own (the keys taken in turn, so no two threads
// share one). The version table (engine/state_versions.h) must not fall off
// a cliff with 1M live keys against 1K: compare items_per_second, and
// reruns per 1,000 commits (target: at most 1; disjoint keys never
// conflict, so any rerun is a spurious one).
//
//   build/bench/idem_engine_bench --benchmark_filter=BM_ParallelKeyspace

std::string KeyspaceKey(int64_t n) { return absl::StrCat("key-", n); }

void BM_ParallelKeyspace(benchmark::State& state) {
  const int64_t keys = state.range(0);
  if (state.thread_index() == 0) {
    parallel_run = new ParallelRun;
    absl::StatusOr<util::TempDir> dir = util::TempDir::Create("idem_bench_");
    if (dir.ok()) {
      parallel_run->dir.emplace(*std::move(dir));
      Options options;
      options.durability = Durability::kBuffered;
      absl::StatusOr<std::unique_ptr<Engine>> opened =
          Engine::Open(parallel_run->dir->Sub("store"), options);
      if (opened.ok()) parallel_run->engine = *std::move(opened);
    }
    constexpr int64_t kLoadBatch = 1000;
    for (int64_t first = 0; parallel_run->engine != nullptr && first < keys;
         first += kLoadBatch) {
      const std::string id = absl::StrCat("load-", first);
      absl::StatusOr<Result> r = parallel_run->engine->Process(
          Message{.id = id}, [&](const Message&, Txn& txn) {
            for (int64_t n = first; n < std::min(keys, first + kLoadBatch);
                 ++n) {
              txn.Put(KeyspaceKey(n), "0");
            }
            return absl::OkStatus();
          });
      if (!r.ok()) parallel_run->engine.reset();
    }
    if (parallel_run->engine != nullptr) {
      absl::StatusOr<Stats> stats = parallel_run->engine->GetStats();
      if (stats.ok()) parallel_run->reruns_before = stats->handler_reruns;
    }
  }
  const int threads = state.threads();
  int64_t i = 0;
  for (auto _ : state) {
    Engine* engine = parallel_run->engine.get();
    if (engine == nullptr) {
      state.SkipWithError("cannot open or load an engine");
      break;
    }
    const std::string id = absl::StrCat("t", state.thread_index(), "-", i);
    const std::string key =
        KeyspaceKey((i++ * threads + state.thread_index()) % keys);
    absl::StatusOr<Result> r =
        engine->Process(Message{.id = id}, [&](const Message&, Txn& txn) {
          return IncrementCounter(txn, key, absl::ZeroDuration());
        });
    if (!r.ok() || r->outcome != Outcome::kProcessed) {
      state.SkipWithError("a message was not processed");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    if (parallel_run->engine != nullptr) {
      absl::StatusOr<Stats> stats = parallel_run->engine->GetStats();
      const double commits = static_cast<double>(state.iterations()) *
                             static_cast<double>(threads);
      if (stats.ok() && commits > 0) {
        state.counters["reruns/1000"] =
            1000.0 *
            static_cast<double>(stats->handler_reruns -
                                parallel_run->reruns_before) /
            commits;
      }
    }
    delete parallel_run;
    parallel_run = nullptr;
  }
}

BENCHMARK(BM_ParallelKeyspace)
    ->ArgName("keys")
    ->Arg(1000)
    ->Arg(1000000)
    ->Threads(8)
    ->UseRealTime();

// ---- A slow handler during CompactExpired
// --------------------------------------
//
// BM_CommitsDuringCompact: one handler runs for 1 s; once it runs,
// CompactExpired starts on another thread, and this thread commits one
// message at a time (a Put of its own key, kBuffered) until the slow
// handler's commit returns. Reported: the others' commits during it, and
// the p99 and the longest of their latencies in milliseconds (issue 50's
// target: p99 <= 50 ms; before CompactExpired stopped taking the store
// lock exclusively, every commit behind it waited for the slow handler).
// Arg 1: the store uses state TTLs (a Put with a ttl first marks it of
// format 6), so CompactExpired also sets a removal horizon
// (engine/commit_time_watermark.h).
//
//   build/bench/idem_engine_bench --benchmark_filter=BM_CommitsDuringCompact

void BM_CommitsDuringCompact(benchmark::State& state) {
  absl::StatusOr<util::TempDir> dir = util::TempDir::Create("idem_bench_");
  if (!dir.ok()) {
    state.SkipWithError("cannot create a directory");
    return;
  }
  Options options;
  options.durability = Durability::kBuffered;
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Open(dir->Sub("store"), options);
  if (!engine.ok()) {
    state.SkipWithError("cannot open an engine");
    return;
  }
  if (state.range(0) == 1) {
    absl::StatusOr<Result> marked =
        (*engine)->Process(Message{.id = "ttl"}, [](const Message&, Txn& txn) {
          return txn.Put("ttl", "v", PutOptions{.ttl = absl::Hours(1)});
        });
    if (!marked.ok() || marked->outcome != Outcome::kProcessed) {
      state.SkipWithError("cannot put a value with a ttl");
      return;
    }
  }
  std::vector<double> latencies_ms;
  int64_t round = 0;
  for (auto _ : state) {
    std::atomic<bool> running{false};
    std::atomic<bool> done{false};
    std::thread slow([&] {
      (void)(*engine)->Process(Message{.id = absl::StrCat("slow-", round)},
                               [&](const Message&, Txn& txn) {
                                 running.store(true);
                                 absl::SleepFor(absl::Seconds(1));
                                 txn.Put("slow", "done");
                                 return absl::OkStatus();
                               });
      done.store(true);
    });
    while (!running.load()) absl::SleepFor(absl::Microseconds(100));
    std::thread compact([&] { (void)(*engine)->CompactExpired(); });
    for (int64_t i = 0; !done.load(); ++i) {
      const absl::Time start = absl::Now();
      absl::StatusOr<Result> r = (*engine)->Process(
          Message{.id = absl::StrCat("quick-", round, "-", i)},
          [&](const Message&, Txn& txn) {
            txn.Put(absl::StrCat("quick-", i), "1");
            return absl::OkStatus();
          });
      if (!r.ok()) {
        state.SkipWithError("a commit failed");
        break;
      }
      latencies_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
    }
    compact.join();
    slow.join();
    ++round;
  }
  if (latencies_ms.empty()) return;
  std::sort(latencies_ms.begin(), latencies_ms.end());
  state.counters["commits"] = static_cast<double>(latencies_ms.size());
  state.counters["p99_ms"] = latencies_ms[std::min(
      latencies_ms.size() - 1, latencies_ms.size() * 99 / 100)];
  state.counters["max_ms"] = latencies_ms.back();
}

BENCHMARK(BM_CommitsDuringCompact)
    ->Arg(0)
    ->Arg(1)
    ->Iterations(3)
    ->UseRealTime();

}  // namespace
}  // namespace idem

BENCHMARK_MAIN();
