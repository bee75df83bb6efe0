// Durable timers' costs (docs/state.md, "Time and timers"), each against
// its reference taken in the same run:
//   BM_FireVsProcess: one fired timer (the fire deletes its queue entry and
//     its index entry; the handler emits one message) against a Process
//     commit whose handler deletes two state keys and emits one message;
//     CPU time per call (the process's), and the ratio fire / process.
//   BM_FireManyVsRaw: FireTimers over 100,000 due timers (one call, one
//     thread, handler that does nothing) against a raw RocksDB iterator plus
//     WriteBatch delete loop over the same number of keys in a plain
//     database (written 256 deletes at a time, as FireTimers commits);
//     timers per second of each and the ratio idem / raw.
//   BM_FireAfterTombstones: firing 100 timers after 100,000 earlier timers
//     of the same partition were fired (and deleted), against firing 100
//     timers of a fresh partition; time of each and the ratio.
// All under Durability::kBuffered. Figures are of the machine and run they
// come from: noisy.
//
//   build/bench/idem_timer_bench

#include <time.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "benchmark/benchmark.h"
#include "idem/clock.h"
#include "idem/engine.h"
#include "rocksdb/db.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

constexpr char kBenchSource[] = "timers";
const absl::Time kDue = absl::FromUnixSeconds(1'600'000'000);

double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

// An engine (kBuffered, on a manual clock well past every timer) in a
// temporary directory removed with it.
struct TimerStore {
  std::optional<util::TempDir> dir;
  ManualClock clock{kDue + absl::Hours(24 * 365)};
  std::unique_ptr<Engine> engine;
  int64_t messages = 0;

  static std::unique_ptr<TimerStore> Open() {
    auto store = std::make_unique<TimerStore>();
    absl::StatusOr<util::TempDir> dir = util::TempDir::Create("idem_bench_");
    if (!dir.ok()) return nullptr;
    store->dir.emplace(*std::move(dir));
    Options options;
    options.durability = Durability::kBuffered;
    options.clock = &store->clock;
    auto engine = Engine::Open(store->dir->Sub("idem"), options);
    if (!engine.ok()) return nullptr;
    store->engine = *std::move(engine);
    return store;
  }

  // Sets `count` processing-time timers due at kDue + i µs on `partition`,
  // 1,000 per message.
  bool SetTimers(int32_t partition, int64_t count, int64_t first = 0) {
    for (int64_t begin = first; begin < first + count; begin += 1000) {
      const int64_t end = std::min(first + count, begin + 1000);
      auto r = engine->Process(Message{.id = absl::StrCat("set", messages++),
                                       .source = kBenchSource,
                                       .partition = partition},
                               [&](const Message&, Txn& txn) {
                                 for (int64_t i = begin; i < end; ++i) {
                                   absl::Status s = txn.SetTimer(
                                       absl::StrFormat("key%09d", i),
                                       TimeDomain::kProcessing,
                                       kDue + absl::Microseconds(i), "payload");
                                   if (!s.ok()) return s;
                                 }
                                 return absl::OkStatus();
                               });
      if (!r.ok() || r->outcome != Outcome::kProcessed) return false;
    }
    return true;
  }

  absl::StatusOr<size_t> Fire(int32_t partition, size_t max, bool emit) {
    return engine->FireTimers(kBenchSource, partition, TimeDomain::kProcessing,
                              absl::InfiniteFuture(), max,
                              [&](const TimerFire& fire, Txn& txn) {
                                if (emit) txn.Emit("out", fire.timer_key, "v");
                                return absl::OkStatus();
                              });
  }
};

void BM_FireVsProcess(benchmark::State& state) {
  std::unique_ptr<TimerStore> store = TimerStore::Open();
  if (store == nullptr) return state.SkipWithError("cannot open the store");
  constexpr int64_t kCalls = 20000;
  if (!store->SetTimers(0, kCalls)) return state.SkipWithError("set failed");
  double fire_cpu = 0;
  double process_cpu = 0;
  int64_t calls = 0;
  for (auto _ : state) {
    if (calls == kCalls) break;
    double start = ProcessCpuSeconds();
    absl::StatusOr<size_t> fired = store->Fire(0, 1, /*emit=*/true);
    fire_cpu += ProcessCpuSeconds() - start;
    if (!fired.ok() || *fired != 1) return state.SkipWithError("fire failed");
    start = ProcessCpuSeconds();
    auto r = store->engine->Process(
        Message{.id = absl::StrCat("p", calls), .source = "p", .offset = calls},
        [&](const Message&, Txn& txn) {
          txn.Delete(absl::StrCat("a", calls));
          txn.Delete(absl::StrCat("b", calls));
          txn.Emit("out", "k", "v");
          return absl::OkStatus();
        });
    process_cpu += ProcessCpuSeconds() - start;
    if (!r.ok()) return state.SkipWithError("process failed");
    ++calls;
  }
  if (calls == 0) return;
  state.counters["fire_cpu_us"] = fire_cpu / calls * 1e6;
  state.counters["process_cpu_us"] = process_cpu / calls * 1e6;
  state.counters["fire_over_process"] = fire_cpu / process_cpu;
}
BENCHMARK(BM_FireVsProcess)->Iterations(10000)->Unit(benchmark::kMicrosecond);

void BM_FireManyVsRaw(benchmark::State& state) {
  constexpr int64_t kTimers = 100000;
  for (auto _ : state) {
    std::unique_ptr<TimerStore> store = TimerStore::Open();
    if (store == nullptr) return state.SkipWithError("cannot open the store");
    if (!store->SetTimers(0, kTimers)) return state.SkipWithError("set failed");
    // The same number of keys, of the same size, in a plain database.
    rocksdb::DB* raw_db = nullptr;
    rocksdb::Options raw_options;
    raw_options.create_if_missing = true;
    if (!rocksdb::DB::Open(raw_options, store->dir->Sub("raw"), &raw_db).ok()) {
      return state.SkipWithError("cannot open the raw database");
    }
    std::unique_ptr<rocksdb::DB> raw(raw_db);
    rocksdb::WriteBatch load;
    for (int64_t i = 0; i < kTimers; ++i) {
      load.Put(absl::StrFormat("Q0000000%016d%09d", i, i), "payload")
          .PermitUncheckedError();
    }
    if (!raw->Write(rocksdb::WriteOptions(), &load).ok()) {
      return state.SkipWithError("raw load failed");
    }

    auto start = std::chrono::steady_clock::now();
    absl::StatusOr<size_t> fired = store->Fire(0, kTimers, /*emit=*/false);
    const double idem_seconds = SecondsSince(start);
    if (!fired.ok() || *fired != static_cast<size_t>(kTimers)) {
      return state.SkipWithError("fire failed");
    }

    start = std::chrono::steady_clock::now();
    std::unique_ptr<rocksdb::Iterator> it(
        raw->NewIterator(rocksdb::ReadOptions()));
    rocksdb::WriteBatch batch;
    int64_t deleted = 0;
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      batch.Delete(it->key()).PermitUncheckedError();
      if (++deleted % 256 == 0) {
        raw->Write(rocksdb::WriteOptions(), &batch).PermitUncheckedError();
        batch.Clear();
      }
    }
    raw->Write(rocksdb::WriteOptions(), &batch).PermitUncheckedError();
    const double raw_seconds = SecondsSince(start);
    state.counters["idem_timers_per_s"] = kTimers / idem_seconds;
    state.counters["raw_deletes_per_s"] = deleted / raw_seconds;
    state.counters["idem_over_raw"] = raw_seconds / idem_seconds;
  }
}
BENCHMARK(BM_FireManyVsRaw)->Iterations(1)->Unit(benchmark::kMillisecond);

void BM_FireAfterTombstones(benchmark::State& state) {
  constexpr int64_t kFired = 100000;
  constexpr int64_t kThen = 100;
  for (auto _ : state) {
    std::unique_ptr<TimerStore> store = TimerStore::Open();
    if (store == nullptr) return state.SkipWithError("cannot open the store");
    if (!store->SetTimers(0, kFired + kThen) || !store->SetTimers(1, kThen)) {
      return state.SkipWithError("set failed");
    }
    absl::StatusOr<size_t> fired = store->Fire(0, kFired, /*emit=*/false);
    if (!fired.ok() || *fired != static_cast<size_t>(kFired)) {
      return state.SkipWithError("fire failed");
    }
    // Best of a few, each on timers set anew behind the tombstones.
    double after = 1e9;
    double fresh = 1e9;
    for (int round = 0; round < 5; ++round) {
      if (round > 0 && (!store->SetTimers(0, kThen, kFired + kThen * round) ||
                        !store->SetTimers(1, kThen, kThen * round))) {
        return state.SkipWithError("set failed");
      }
      auto start = std::chrono::steady_clock::now();
      fired = store->Fire(0, kThen, /*emit=*/false);
      after = std::min(after, SecondsSince(start));
      if (!fired.ok() || *fired != static_cast<size_t>(kThen)) {
        return state.SkipWithError("fire after tombstones failed");
      }
      start = std::chrono::steady_clock::now();
      fired = store->Fire(1, kThen, /*emit=*/false);
      fresh = std::min(fresh, SecondsSince(start));
      if (!fired.ok() || *fired != static_cast<size_t>(kThen)) {
        return state.SkipWithError("fresh fire failed");
      }
    }
    state.counters["after_tombstones_us"] = after * 1e6;
    state.counters["fresh_us"] = fresh * 1e6;
    state.counters["after_over_fresh"] = after / fresh;
  }
}
BENCHMARK(BM_FireAfterTombstones)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace idem

BENCHMARK_MAIN();
