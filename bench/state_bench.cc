// The state API's costs (docs/state.md), each against what it replaces or
// what RocksDB does alone, both taken in the same run:
//   BM_ScanPrefix: Txn::ScanPrefix of 100 keys (16-byte keys, 100-byte
//     values, nothing in flight) inside a handler, against a raw RocksDB
//     iterator with iterate_upper_bound over a copy of the same data;
//     reports each one's p50 and p99 per scan (µs) and their ratios.
//   BM_ScanValidation: a one-message commit whose handler scans 10 keys and
//     writes one, with the scanned range validated at commit or not (the
//     broken variant's hook), so the difference is the validation's cost.
//   BM_HotCounter: 1 and 16 threads bump one key, kBuffered, by Merge
//     (after waiting 1 ms) or by Get, a 1 ms wait, then Put; reports reruns
//     per message.
//   BM_GetMerged: Txn::Get of a key holding a base value and 4 merge
//     operands, and of a plain value, against a raw RocksDB Get of a plain
//     value in a store of the same data (the merged key's five writes as
//     plain values).
//   BM_GetTtl: Txn::Get of a value written with a TTL (an envelope, its
//     expiry checked) against Txn::Get of a plain value of the same size,
//     in a store of format 5, and GetState of each (ratios ttl/plain).
// Figures are of the machine and run they come from: noisy.
//
//   build/bench/idem_state_bench --benchmark_min_time=1

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "benchmark/benchmark.h"
#include "engine/engine_hooks.h"
#include "idem/engine.h"
#include "rocksdb/db.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

constexpr int kCustomers = 200;
constexpr int kKeysPerCustomer = 100;

// 16-byte keys "c<6 digits>/k<7 digits>" and 100-byte values.
std::string ScanKey(int customer, int k) {
  return absl::StrFormat("c%06d/k%07d", customer, k);
}
std::string ScanPrefixOf(int customer) {
  return absl::StrFormat("c%06d/", customer);
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}

double MicrosSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now() - start)
      .count();
}

// An engine (kBuffered) and a plain RocksDB database side by side, in a
// temporary directory removed with them.
struct Stores {
  std::optional<util::TempDir> dir;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<rocksdb::DB> raw;

  static std::optional<Stores> Open() {
    Stores stores;
    absl::StatusOr<util::TempDir> dir = util::TempDir::Create("idem_bench_");
    if (!dir.ok()) return std::nullopt;
    stores.dir.emplace(*std::move(dir));
    Options options;
    options.durability = Durability::kBuffered;
    auto engine = Engine::Open(stores.dir->Sub("idem"), options);
    if (!engine.ok()) return std::nullopt;
    stores.engine = *std::move(engine);
    rocksdb::DB* raw = nullptr;
    rocksdb::Options raw_options;
    raw_options.create_if_missing = true;
    if (!rocksdb::DB::Open(raw_options, stores.dir->Sub("raw"), &raw).ok()) {
      return std::nullopt;
    }
    stores.raw.reset(raw);
    return stores;
  }
};

void BM_ScanPrefix(benchmark::State& state) {
  std::optional<Stores> stores = Stores::Open();
  if (!stores.has_value()) return state.SkipWithError("cannot open stores");
  std::unique_ptr<Engine>& engine = stores->engine;
  std::unique_ptr<rocksdb::DB>& raw = stores->raw;
  const std::string value(100, 'v');
  for (int c = 0; c < kCustomers; ++c) {
    rocksdb::WriteBatch batch;
    auto r = engine->Process(
        Message{.id = absl::StrCat("load", c)}, [&](const Message&, Txn& txn) {
          for (int k = 0; k < kKeysPerCustomer; ++k) {
            txn.Put(ScanKey(c, k), value);
            batch.Put(ScanKey(c, k), value).PermitUncheckedError();
          }
          return absl::OkStatus();
        });
    if (!r.ok() || !raw->Write(rocksdb::WriteOptions(), &batch).ok()) {
      return state.SkipWithError("cannot load the data");
    }
  }
  std::vector<double> idem_micros, raw_micros;
  int64_t scans = 0;
  uint64_t checksum = 0;
  for (auto _ : state) {
    // One handler call scans every customer once; the raw loop the same.
    auto r = engine->Process(
        Message{.id = absl::StrCat("scan", scans)},
        [&](const Message&, Txn& txn) {
          for (int c = 0; c < kCustomers; ++c) {
            const auto start = std::chrono::steady_clock::now();
            absl::Status s = txn.ScanPrefix(
                ScanPrefixOf(c), [&](std::string_view k, std::string_view v) {
                  checksum += k.size() + v.size();
                  return true;
                });
            idem_micros.push_back(MicrosSince(start));
            if (!s.ok()) return s;
          }
          return absl::OkStatus();
        });
    if (!r.ok()) return state.SkipWithError("scan failed");
    for (int c = 0; c < kCustomers; ++c) {
      const auto start = std::chrono::steady_clock::now();
      const std::string prefix = ScanPrefixOf(c);
      std::string end = prefix;
      end.back() = static_cast<char>(end.back() + 1);
      rocksdb::Slice upper(end);
      rocksdb::ReadOptions read;
      read.iterate_upper_bound = &upper;
      std::unique_ptr<rocksdb::Iterator> it(raw->NewIterator(read));
      for (it->Seek(prefix); it->Valid(); it->Next()) {
        checksum += it->key().size() + it->value().size();
      }
      raw_micros.push_back(MicrosSince(start));
    }
    scans += kCustomers;
  }
  benchmark::DoNotOptimize(checksum);
  state.SetItemsProcessed(scans);
  const double idem_p50 = Percentile(idem_micros, 0.5);
  const double idem_p99 = Percentile(idem_micros, 0.99);
  const double raw_p50 = Percentile(raw_micros, 0.5);
  const double raw_p99 = Percentile(raw_micros, 0.99);
  state.counters["idem_p50_us"] = idem_p50;
  state.counters["idem_p99_us"] = idem_p99;
  state.counters["raw_p50_us"] = raw_p50;
  state.counters["raw_p99_us"] = raw_p99;
  state.counters["p50_ratio"] = idem_p50 / raw_p50;
  state.counters["p99_ratio"] = idem_p99 / raw_p99;
}
BENCHMARK(BM_ScanPrefix)->Unit(benchmark::kMillisecond);

void BM_ScanValidation(benchmark::State& state) {
  const bool validate = state.range(0) == 1;
  absl::StatusOr<util::TempDir> dir = util::TempDir::Create("idem_bench_");
  if (!dir.ok()) return state.SkipWithError("no temporary directory");
  Options options;
  options.durability = Durability::kBuffered;
  EngineHooks hooks;
  hooks.skip_range_validation = !validate;
  auto engine = OpenEngineWithHooks(dir->Sub("idem"), options, hooks);
  if (!engine.ok()) return state.SkipWithError("cannot open the store");
  auto seeded =
      (*engine)->Process(Message{.id = "seed"}, [](const Message&, Txn& txn) {
        for (int k = 0; k < 10; ++k) txn.Put(ScanKey(0, k), "v");
        return absl::OkStatus();
      });
  if (!seeded.ok()) return state.SkipWithError("cannot seed");
  int64_t i = 0;
  for (auto _ : state) {
    auto r = (*engine)->Process(
        Message{.id = absl::StrCat("m", i++)}, [&](const Message&, Txn& txn) {
          int rows = 0;
          absl::Status s = txn.ScanPrefix(
              ScanPrefixOf(0), [&](std::string_view, std::string_view) {
                ++rows;
                return true;
              });
          txn.Put(ScanKey(1, static_cast<int>(i % 1000)), "w");
          return s;
        });
    if (!r.ok()) return state.SkipWithError("commit failed");
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ScanValidation)->ArgName("validate")->Arg(0)->Arg(1);

struct HotRun {
  std::optional<util::TempDir> dir;
  std::unique_ptr<Engine> engine;
};
HotRun* hot_run = nullptr;  // set up and torn down by thread 0

void BM_HotCounter(benchmark::State& state) {
  const bool merge = state.range(0) == 1;
  if (state.thread_index() == 0) {
    hot_run = new HotRun;
    absl::StatusOr<util::TempDir> dir = util::TempDir::Create("idem_bench_");
    if (dir.ok()) {
      hot_run->dir.emplace(*std::move(dir));
      Options options;
      options.durability = Durability::kBuffered;
      auto opened = Engine::Open(hot_run->dir->Sub("store"), options);
      if (opened.ok()) hot_run->engine = *std::move(opened);
    }
  }
  int64_t i = 0;
  for (auto _ : state) {
    Engine* engine = hot_run->engine.get();
    if (engine == nullptr) return state.SkipWithError("no engine");
    auto r = engine->Process(
        Message{.id = absl::StrCat("t", state.thread_index(), "-", i++)},
        [&](const Message&, Txn& txn) -> absl::Status {
          // A handler that calls out (1 ms) between reading the counter
          // and writing it; the merge reads nothing.
          if (merge) {
            absl::SleepFor(absl::Milliseconds(1));
            return txn.Merge("hot", MergeOp::kAddInt64, Int64Operand(1));
          }
          auto v = txn.Get("hot");
          if (!v.ok()) return v.status();
          absl::SleepFor(absl::Milliseconds(1));
          txn.Put("hot",
                  Int64Operand(ReadInt64(v->value_or("")).value_or(0) + 1));
          return absl::OkStatus();
        });
    if (!r.ok() || r->outcome != Outcome::kProcessed) {
      return state.SkipWithError("a message was not processed");
    }
  }
  state.SetItemsProcessed(state.iterations());
  if (state.thread_index() == 0) {
    if (hot_run->engine != nullptr) {
      auto stats = hot_run->engine->GetStats();
      if (stats.ok() && stats->processed > 0) {
        state.counters["reruns/msg"] =
            static_cast<double>(stats->handler_reruns) /
            static_cast<double>(stats->processed);
      }
    }
    delete hot_run;
    hot_run = nullptr;
  }
}
BENCHMARK(BM_HotCounter)
    ->ArgName("merge")
    ->Arg(0)
    ->Arg(1)
    ->Threads(1)
    ->Threads(16)
    ->UseRealTime();

// Times kGets calls of `get` (each returning a StatusOr of an optional
// value, which must hold one) and appends the mean ns per call to `out`.
// Each caller passes its own lambda, so that a profile (callgrind) tells
// the kinds of Get apart by function.
constexpr int kGets = 1000;
template <typename Get>
ABSL_ATTRIBUTE_NOINLINE absl::Status TimeGets(std::vector<double>& out,
                                              Get get) {
  const auto start = std::chrono::steady_clock::now();
  for (int g = 0; g < kGets; ++g) {
    auto v = get();
    if (!v.ok() || !v->has_value()) return absl::InternalError("get");
    benchmark::DoNotOptimize(v);
  }
  out.push_back(MicrosSince(start) * 1000 / kGets);
  return absl::OkStatus();
}

// A raw RocksDB Get in TimeGets' terms.
absl::StatusOr<std::optional<std::string>> RawGet(rocksdb::DB& raw,
                                                  std::string_view key) {
  std::string value;
  rocksdb::Status s = raw.Get(rocksdb::ReadOptions(),
                              rocksdb::Slice(key.data(), key.size()), &value);
  if (!s.ok()) return absl::InternalError(s.ToString());
  return std::optional<std::string>(std::move(value));
}

void BM_GetMerged(benchmark::State& state) {
  std::optional<Stores> stores = Stores::Open();
  if (!stores.has_value()) return state.SkipWithError("cannot open stores");
  std::unique_ptr<Engine>& engine = stores->engine;
  std::unique_ptr<rocksdb::DB>& raw = stores->raw;
  // The raw store holds the same data, as plain values: "merged" written
  // five times (the folded values), then "plain"; so each Get searches a
  // memtable of the same six entries.
  for (int m = 0; m < 5; ++m) {
    raw->Put(rocksdb::WriteOptions(), "merged", Int64Operand(m + 1))
        .PermitUncheckedError();
  }
  raw->Put(rocksdb::WriteOptions(), "plain", Int64Operand(1))
      .PermitUncheckedError();
  for (int m = 0; m < 5; ++m) {
    auto r = engine->Process(
        Message{.id = absl::StrCat("w", m)}, [&](const Message&, Txn& txn) {
          if (m == 0) {
            txn.Put("merged", Int64Operand(1));
            txn.Put("plain", Int64Operand(1));
            return absl::OkStatus();
          }
          return txn.Merge("merged", MergeOp::kAddInt64, Int64Operand(1));
        });
    if (!r.ok()) return state.SkipWithError("cannot write");
  }
  std::vector<double> idem_ns, plain_ns, raw_ns;
  int64_t round = 0;
  for (auto _ : state) {
    auto r = engine->Process(
        Message{.id = absl::StrCat("g", round++)},
        [&](const Message&, Txn& txn) -> absl::Status {
          if (absl::Status s =
                  TimeGets(idem_ns, [&] { return txn.Get("merged"); });
              !s.ok()) {
            return s;
          }
          return TimeGets(plain_ns, [&] { return txn.Get("plain"); });
        });
    if (!r.ok() || r->outcome != Outcome::kProcessed) {
      return state.SkipWithError("get failed");
    }
    if (!TimeGets(raw_ns, [&] { return RawGet(*raw, "plain"); }).ok()) {
      return state.SkipWithError("raw get failed");
    }
  }
  const double idem = Percentile(idem_ns, 0.5);
  const double idem_plain = Percentile(plain_ns, 0.5);
  const double raw_plain = Percentile(raw_ns, 0.5);
  state.counters["idem_merged_get_ns"] = idem;
  state.counters["idem_plain_get_ns"] = idem_plain;
  state.counters["raw_get_ns"] = raw_plain;
  state.counters["ratio"] = idem / raw_plain;
  state.counters["plain_ratio"] = idem_plain / raw_plain;
}
BENCHMARK(BM_GetMerged);

void BM_GetTtl(benchmark::State& state) {
  std::optional<Stores> stores = Stores::Open();
  if (!stores.has_value()) return state.SkipWithError("cannot open stores");
  std::unique_ptr<Engine>& engine = stores->engine;
  const std::string value(100, 'v');
  auto w = engine->Process(
      Message{.id = "w"}, [&](const Message&, Txn& txn) -> absl::Status {
        txn.Put("plain", value);
        return txn.Put("ttl", value, PutOptions{.ttl = absl::Hours(24)});
      });
  if (!w.ok() || w->outcome != Outcome::kProcessed) {
    return state.SkipWithError("cannot write");
  }
  std::vector<double> ttl_ns, plain_ns, ttl_state_ns, plain_state_ns;
  int64_t round = 0;
  for (auto _ : state) {
    auto r = engine->Process(
        Message{.id = absl::StrCat("g", round++)},
        [&](const Message&, Txn& txn) -> absl::Status {
          // Alternated, so that neither gets a warmer cache.
          if (absl::Status s = TimeGets(ttl_ns, [&] { return txn.Get("ttl"); });
              !s.ok()) {
            return s;
          }
          return TimeGets(plain_ns, [&] { return txn.Get("plain"); });
        });
    if (!r.ok() || r->outcome != Outcome::kProcessed) {
      return state.SkipWithError("get failed");
    }
    if (!TimeGets(ttl_state_ns, [&] { return engine->GetState("ttl"); }).ok() ||
        !TimeGets(plain_state_ns, [&] {
           return engine->GetState("plain");
         }).ok()) {
      return state.SkipWithError("GetState failed");
    }
  }
  const double ttl = Percentile(ttl_ns, 0.5);
  const double plain = Percentile(plain_ns, 0.5);
  const double ttl_state = Percentile(ttl_state_ns, 0.5);
  const double plain_state = Percentile(plain_state_ns, 0.5);
  state.counters["ttl_get_ns"] = ttl;
  state.counters["plain_get_ns"] = plain;
  state.counters["ratio"] = ttl / plain;
  state.counters["ttl_getstate_ns"] = ttl_state;
  state.counters["plain_getstate_ns"] = plain_state;
  state.counters["getstate_ratio"] = ttl_state / plain_state;
}
BENCHMARK(BM_GetTtl);

}  // namespace
}  // namespace idem

BENCHMARK_MAIN();
