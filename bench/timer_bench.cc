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
//   BM_WindowCountVsLedger: a tumbling-window count (TumblingWindows::Add
//     of the message's key, 1-minute windows, no grace, and after each
//     batch a TimerPump firing the windows that closed, as a consumer's
//     timer_handler does: Close emits each key's count) against the
//     ledger's handler (examples/ledger.h: a Get and a Put of the account's
//     balance), each on a fresh store fed the same stream of 360,000
//     messages in ProcessBatch calls of 500: partition 0 of one source,
//     10,000 keys each once per 10,000 messages, event times 1 ms apart
//     (so six windows close, each emitting 10,000 counts); the two sides
//     alternate every 10 batches; messages per second of each (wall time
//     of the ProcessBatch and pump calls), the ratio windows / ledger, and
//     the pump's share of the windows' time.
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
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "benchmark/benchmark.h"
#include "examples/ledger.h"
#include "idem/clock.h"
#include "idem/engine.h"
#include "idem/stats.h"
#include "idem/timer_pump.h"
#include "idem/windows.h"
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

constexpr int kPairKeys = 10000;
constexpr int kPairBatch = 500;
constexpr int64_t kPairMessages = 360000;
// kPairMessages is a multiple of kPairBatch * kPairBatchesPerTurn.
constexpr int kPairBatchesPerTurn = 10;
constexpr int64_t kPairMessagesPerWindow = 60000;  // 1 minute at 1 ms each
// Minute-aligned, so that the last message's event time closes the sixth
// window.
const absl::Time kPairBase = absl::FromUnixSeconds(60 * 26'666'667);

// The key of the pair's message `i`: each of the kPairKeys once per
// kPairKeys messages (7919 is prime to kPairKeys), spread over the range.
int PairKey(int64_t i) { return static_cast<int>(i * 7919 % kPairKeys); }

// One side of BM_WindowCountVsLedger: a fresh store, the pair's stream (on
// `source`, with `payloads[key]` as the payload of a message for `key`)
// and the time its batches took.
struct PairSide {
  std::unique_ptr<TimerStore> store;
  std::string source;
  std::vector<std::string> payloads;
  std::vector<std::string> ids = std::vector<std::string>(kPairBatch);
  std::vector<Message> batch = std::vector<Message>(kPairBatch);
  int64_t next = 0;
  double seconds = 0;
  double pump_seconds = 0;  // of `seconds`

  // Builds the stream's next batch (untimed).
  void FillBatch() {
    for (int i = 0; i < kPairBatch; ++i, ++next) {
      ids[i] = absl::StrCat(source, "-", next);
      batch[i] =
          Message{.id = ids[i],
                  .payload = payloads[PairKey(next)],
                  .source = source,
                  .partition = 0,
                  .offset = next,
                  .event_time = kPairBase + absl::Milliseconds(next + 1)};
    }
  }

  // Runs the next batch through `handler`, then `pump` (if any) on the
  // partition; adds the time both took. False if a message did not commit
  // as new or a pump failed.
  bool RunBatch(Handler handler, TimerPump* pump) {
    FillBatch();
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<std::vector<Result>> results =
        store->engine->ProcessBatch(batch, handler);
    TimerPump::Pumped pumped;
    if (pump != nullptr) {
      const auto pump_start = std::chrono::steady_clock::now();
      pumped = pump->Pump(source, 0, store->clock.Now());
      pump_seconds += SecondsSince(pump_start);
    }
    seconds += SecondsSince(start);
    if (!results.ok() || pumped.failures > 0) return false;
    for (const Result& r : *results) {
      if (r.outcome != Outcome::kProcessed) return false;
    }
    return true;
  }
};

std::vector<std::string> LedgerPayloads() {
  std::vector<std::string> payloads;
  for (int key = 0; key < kPairKeys; ++key) {
    payloads.push_back(examples::EncodePayment({.account = key, .amount = 1}));
  }
  return payloads;
}

std::vector<std::string> WindowPayloads() {
  std::vector<std::string> payloads;
  for (int key = 0; key < kPairKeys; ++key) {
    payloads.push_back(examples::AccountName(key));
  }
  return payloads;
}

// Runs the pair's stream through both sides, taking turns of
// kPairBatchesPerTurn batches each: the ledger's handler on `ledger`, `add`
// and `pump` on `count`. False if a batch failed.
bool RunPair(PairSide& ledger, PairSide& count, Handler add, TimerPump& pump) {
  while (ledger.next < kPairMessages) {
    for (int b = 0; b < kPairBatchesPerTurn; ++b) {
      if (!ledger.RunBatch(examples::HandlePayment, nullptr)) return false;
    }
    for (int b = 0; b < kPairBatchesPerTurn; ++b) {
      if (!count.RunBatch(add, &pump)) return false;
    }
  }
  return true;
}

void BM_WindowCountVsLedger(benchmark::State& state) {
  absl::StatusOr<TumblingWindows> windows = TumblingWindows::Create(
      {.size = absl::Minutes(1), .name = "count", .destination = "counts"});
  if (!windows.ok()) return state.SkipWithError("bad window options");
  const auto add = [&](const Message& m, Txn& txn) -> absl::Status {
    absl::StatusOr<WindowAdd> added = windows->Add(m, txn, m.payload);
    if (!added.ok()) return added.status();
    if (*added != WindowAdd::kAccepted) return absl::InternalError("late");
    return absl::OkStatus();
  };
  int64_t closed = 0;
  const auto close = [&](const TimerFire& fire, Txn& txn) -> absl::Status {
    absl::StatusOr<bool> closes = windows->Close(fire, txn);
    if (!closes.ok()) return closes.status();
    if (!*closes) return absl::InternalError("not a window's timer");
    ++closed;
    return absl::OkStatus();
  };
  for (auto _ : state) {
    PairSide ledger{.store = TimerStore::Open(),
                    .source = "ledger",
                    .payloads = LedgerPayloads()};
    PairSide count{.store = TimerStore::Open(),
                   .source = "events",
                   .payloads = WindowPayloads()};
    if (ledger.store == nullptr || count.store == nullptr) {
      return state.SkipWithError("cannot open the stores");
    }
    TimerPump pump(count.store->engine.get(), close, kPairBatch);
    closed = 0;
    if (!RunPair(ledger, count, add, pump)) {
      return state.SkipWithError("a batch failed");
    }
    if (closed != kPairMessages / kPairMessagesPerWindow) {
      return state.SkipWithError("not every window closed");
    }
    // Each closed window emitted a count for each key.
    absl::StatusOr<Stats> stats = count.store->engine->GetStats();
    if (!stats.ok() ||
        stats->outbox_pending != static_cast<uint64_t>(closed) * kPairKeys) {
      return state.SkipWithError("the windows emitted other than one a key");
    }
    state.counters["ledger_msgs_per_s"] = kPairMessages / ledger.seconds;
    state.counters["window_msgs_per_s"] = kPairMessages / count.seconds;
    state.counters["window_over_ledger"] = ledger.seconds / count.seconds;
    state.counters["pump_share"] = count.pump_seconds / count.seconds;
  }
}
BENCHMARK(BM_WindowCountVsLedger)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace idem

BENCHMARK_MAIN();
