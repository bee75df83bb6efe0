// What transactional output (OutboxRelayOptions::transactional_id,
// ConsumerOptions::transactional_output) costs the outbox relay, against
// the at-least-once relay, in one run on librdkafka's in-process mock
// cluster.
//
// BM_TransactionalRelay/round:N: per iteration two fresh stores (kBuffered)
// each commit 20,000 messages that emit one record (not timed); one is
// drained by the at-least-once relay, the other by a transactional one (a
// fresh transactional.id), both at rounds of N entries
// (OutboxRelayOptions::max_batch: one produce call, or one transaction), in
// alternating order. round:500 is the default round size; round:2000 shows
// whether larger rounds spread a transaction's fixed cost. Reported:
// plain_per_second, transactional_per_second and transactional_over_plain
// (their ratio within each iteration, averaged): the target is >= 0.75 at
// the default round size. Also the process's CPU time per entry of each
// drain (*_cpu_us_per_entry: this process runs the mock cluster too) and
// the cores it kept busy meanwhile (*_cores: CPU time over wall time; 2 on
// a 2-core machine means the drain waited for CPU, not for the brokers).
// *_rdk_main_us_per_round: the CPU time of librdkafka's main threads (named
// rdk:main; one per client) per round. librdkafka 2.0.2, Debian 12's,
// serves its main thread's queue with a timeout in whole milliseconds, so
// while a timer is due within the next millisecond that thread spins; each
// transaction starts such a timer (1 ms, before registering its partitions
// with the coordinator). librdkafka fixed this in 2.4.0 (its #4671).
//
// BM_TransactionalLatency: rounds of one entry (commit one message, then
// one RelayOnce: read, produce, wait for the acknowledgement, and for the
// transactional relay begin, progress record, commit), 300 per relay,
// interleaved. Reported: p50 and p99 of each relay's round, in
// milliseconds, and the p50 and p99 the transaction adds.
//
//   build/bench/idem_kafka_bench --benchmark_filter=Transactional
//       --benchmark_counters_tabular=true   (one command line)
//
// The mock cluster keeps no transaction state (EndTxn writes no markers to
// the partitions, the coordinator keeps no log), so a real cluster's
// transactions cost more than these: read the figures as the client's
// share of the cost.

#include <time.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "benchmark/benchmark.h"
#include "idem/engine.h"
#include "idem/kafka/mock_cluster.h"
#include "idem/kafka/outbox_relay.h"
#include "util/temp_dir.h"

namespace idem::kafka {
namespace {

constexpr char kTxnOutTopic[] = "bench.txn.out";
constexpr char kProgressTopic[] = "idem.relay.progress";
constexpr int kTxnRecords = 20000;
constexpr int kLatencyRounds = 300;

MockCluster* TxnCluster() {
  static MockCluster* cluster = [] {
    auto started = MockCluster::Start(1);
    if (!started.ok() || !(*started)->CreateTopic(kTxnOutTopic, 4).ok() ||
        !(*started)->CreateTopic(kProgressTopic, 1).ok()) {
      return static_cast<MockCluster*>(nullptr);
    }
    return started->release();
  }();
  return cluster;
}

// A store in a directory of its own, removed with it.
struct TxnStore {
  util::TempDir dir;
  std::unique_ptr<Engine> engine;
};

absl::StatusOr<TxnStore> OpenTxnStore() {
  absl::StatusOr<util::TempDir> dir = util::TempDir::Create("idem_txn_bench_");
  if (!dir.ok()) return dir.status();
  Options options;
  options.durability = Durability::kBuffered;
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Open(dir->Sub("store"), options);
  if (!engine.ok()) return engine.status();
  return TxnStore{*std::move(dir), *std::move(engine)};
}

// Commits messages "<prefix>-<first>".. up to `count` of them, in batches of
// 500, each emitting one record; waits until they are durable.
absl::Status CommitEmits(Engine& engine, const std::string& prefix, int first,
                         int count) {
  auto handler = [](const Message& m, Txn& txn) {
    txn.Emit(kTxnOutTopic, m.id, m.payload);
    return absl::OkStatus();
  };
  for (int begin = first; begin < first + count; begin += 500) {
    std::vector<std::string> ids;
    for (int i = begin; i < std::min(first + count, begin + 500); ++i) {
      ids.push_back(absl::StrCat(prefix, "-", i));
    }
    std::vector<Message> messages;
    for (const std::string& id : ids) {
      messages.push_back(Message{.id = id, .payload = "{\"amount\":1}"});
    }
    absl::StatusOr<std::vector<Result>> results =
        engine.ProcessBatch(messages, handler);
    if (!results.ok()) return results.status();
    uint64_t sequence = 0;
    for (const Result& r : *results) sequence = std::max(sequence, r.sequence);
    if (absl::Status s = engine.WaitDurable(sequence); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<OutboxRelay>> MakeRelay(
    Engine& engine, const std::string& transactional_id, int round_size) {
  OutboxRelayOptions options;
  options.brokers = TxnCluster()->bootstrap_servers();
  options.kafka_config = {{"log_level", "3"}};
  options.transactional_id = transactional_id;
  options.max_batch = round_size;
  return OutboxRelay::Create(&engine, options);
}

// A relay with its connection warm (one entry drained, not timed) over a
// fresh store holding `records` more entries.
struct WarmRelay {
  TxnStore store;
  std::unique_ptr<OutboxRelay> relay;
};

absl::StatusOr<WarmRelay> Warm(const std::string& transactional_id, int records,
                               int round_size) {
  absl::StatusOr<TxnStore> store = OpenTxnStore();
  if (!store.ok()) return store.status();
  absl::StatusOr<std::unique_ptr<OutboxRelay>> relay =
      MakeRelay(*store->engine, transactional_id, round_size);
  if (!relay.ok()) return relay.status();
  if (absl::Status s = CommitEmits(*store->engine, "warm", 0, 1); !s.ok()) {
    return s;
  }
  if (absl::StatusOr<RelayReport> d = (*relay)->Drain(); !d.ok()) {
    return d.status();
  }
  if (absl::Status s = CommitEmits(*store->engine, "m", 0, records); !s.ok()) {
    return s;
  }
  return WarmRelay{*std::move(store), *std::move(relay)};
}

// This process's CPU time (every thread's, the mock cluster's included).
double ProcessCpuSeconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) +
         1e-9 * static_cast<double>(now.tv_nsec);
}

// The CPU time of this process's threads named rdk:main (librdkafka's main
// thread of each client), from /proc/self/task/<tid>/schedstat
// (nanoseconds on the CPU, first field); 0 where that is not readable.
double RdkMainCpuSeconds() {
  double seconds = 0;
  std::error_code error;
  for (const auto& task :
       std::filesystem::directory_iterator("/proc/self/task", error)) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    if (!std::getline(comm, name) || name != "rdk:main") continue;
    std::ifstream schedstat(task.path() / "schedstat");
    uint64_t run_ns = 0;
    if (schedstat >> run_ns) seconds += 1e-9 * static_cast<double>(run_ns);
  }
  return seconds;
}

// One drain's wall time, and the CPU time meanwhile of the process and of
// its librdkafka main threads.
struct DrainTime {
  double seconds = 0;
  double cpu_seconds = 0;
  double rdk_main_cpu_seconds = 0;
};

// Times draining the relay's outbox; an error if it published too few.
absl::StatusOr<DrainTime> TimedDrain(OutboxRelay& relay, int records) {
  const double rdk_main_start = RdkMainCpuSeconds();
  const double cpu_start = ProcessCpuSeconds();
  const absl::Time start = absl::Now();
  absl::StatusOr<RelayReport> drained = relay.Drain();
  DrainTime time;
  time.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  time.cpu_seconds = ProcessCpuSeconds() - cpu_start;
  time.rdk_main_cpu_seconds = RdkMainCpuSeconds() - rdk_main_start;
  if (!drained.ok()) return drained.status();
  if (drained->published != records) {
    return absl::InternalError("the relay published too few entries");
  }
  return time;
}

// Sums of one relay's drains over the iterations.
struct DrainSums {
  double rate = 0;
  double cpu_us_per_entry = 0;
  double cores = 0;
  double rdk_main_us_per_round = 0;

  void Add(const DrainTime& time, int records, int round_size) {
    rate += records / time.seconds;
    cpu_us_per_entry += 1e6 * time.cpu_seconds / records;
    cores += time.cpu_seconds / time.seconds;
    const int rounds = (records + round_size - 1) / round_size;
    rdk_main_us_per_round += 1e6 * time.rdk_main_cpu_seconds / rounds;
  }
};

int iteration_serial = 0;  // fresh transactional.ids per iteration

void BM_TransactionalRelay(benchmark::State& state) {
  if (TxnCluster() == nullptr) {
    state.SkipWithError("the mock cluster could not be set up");
    return;
  }
  const int round_size = static_cast<int>(state.range(0));
  DrainSums plain_sums, txn_sums;
  double ratio_sum = 0;
  int iterations = 0;
  for (auto _ : state) {
    const std::string id = absl::StrCat("bench-relay-", ++iteration_serial);
    absl::StatusOr<WarmRelay> plain = Warm("", kTxnRecords, round_size);
    absl::StatusOr<WarmRelay> txn = Warm(id, kTxnRecords, round_size);
    if (!plain.ok() || !txn.ok()) {
      state.SkipWithError(
          (!plain.ok() ? plain.status() : txn.status()).ToString().c_str());
      return;
    }
    // Alternate which goes first, so neither always meets a warmer machine.
    absl::StatusOr<DrainTime> plain_time, txn_time;
    if (iterations % 2 == 0) {
      plain_time = TimedDrain(*plain->relay, kTxnRecords);
      txn_time = TimedDrain(*txn->relay, kTxnRecords);
    } else {
      txn_time = TimedDrain(*txn->relay, kTxnRecords);
      plain_time = TimedDrain(*plain->relay, kTxnRecords);
    }
    if (!plain_time.ok() || !txn_time.ok()) {
      state.SkipWithError(
          (!plain_time.ok() ? plain_time.status() : txn_time.status())
              .ToString()
              .c_str());
      return;
    }
    state.SetIterationTime(txn_time->seconds);
    plain_sums.Add(*plain_time, kTxnRecords, round_size);
    txn_sums.Add(*txn_time, kTxnRecords, round_size);
    ratio_sum += plain_time->seconds / txn_time->seconds;
    ++iterations;
  }
  if (iterations == 0) return;
  state.counters["plain_per_second"] = plain_sums.rate / iterations;
  state.counters["transactional_per_second"] = txn_sums.rate / iterations;
  state.counters["transactional_over_plain"] = ratio_sum / iterations;
  state.counters["plain_cpu_us_per_entry"] =
      plain_sums.cpu_us_per_entry / iterations;
  state.counters["transactional_cpu_us_per_entry"] =
      txn_sums.cpu_us_per_entry / iterations;
  state.counters["plain_cores"] = plain_sums.cores / iterations;
  state.counters["transactional_cores"] = txn_sums.cores / iterations;
  state.counters["plain_rdk_main_us_per_round"] =
      plain_sums.rdk_main_us_per_round / iterations;
  state.counters["transactional_rdk_main_us_per_round"] =
      txn_sums.rdk_main_us_per_round / iterations;
  state.SetItemsProcessed(static_cast<int64_t>(iterations) * kTxnRecords);
}
BENCHMARK(BM_TransactionalRelay)
    ->ArgName("round")
    ->Arg(OutboxRelayOptions().max_batch)  // the default
    ->Arg(2000)
    ->Iterations(8)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t index =
      std::min(values.size() - 1,
               static_cast<size_t>(p * static_cast<double>(values.size())));
  return values[index];
}

void BM_TransactionalLatency(benchmark::State& state) {
  if (TxnCluster() == nullptr) {
    state.SkipWithError("the mock cluster could not be set up");
    return;
  }
  std::vector<double> plain_ms, txn_ms;
  for (auto _ : state) {
    const std::string id = absl::StrCat("bench-latency-", ++iteration_serial);
    const int round_size = OutboxRelayOptions().max_batch;
    absl::StatusOr<WarmRelay> plain = Warm("", 0, round_size);
    absl::StatusOr<WarmRelay> txn = Warm(id, 0, round_size);
    if (!plain.ok() || !txn.ok()) {
      state.SkipWithError(
          (!plain.ok() ? plain.status() : txn.status()).ToString().c_str());
      return;
    }
    double total = 0;
    for (int round = 0; round < kLatencyRounds; ++round) {
      for (WarmRelay* side : {&*plain, &*txn}) {
        if (absl::Status s = CommitEmits(*side->store.engine, "one", round, 1);
            !s.ok()) {
          state.SkipWithError(s.ToString().c_str());
          return;
        }
        const absl::Time start = absl::Now();
        absl::StatusOr<RelayReport> once = side->relay->RelayOnce();
        const double ms = absl::ToDoubleMilliseconds(absl::Now() - start);
        if (!once.ok() || once->published != 1) {
          state.SkipWithError("a round published nothing");
          return;
        }
        (side == &*plain ? plain_ms : txn_ms).push_back(ms);
        total += ms;
      }
    }
    state.SetIterationTime(total / 1000);
  }
  const double plain_p50 = Percentile(plain_ms, 0.5);
  const double plain_p99 = Percentile(plain_ms, 0.99);
  const double txn_p50 = Percentile(txn_ms, 0.5);
  const double txn_p99 = Percentile(txn_ms, 0.99);
  state.counters["plain_p50_ms"] = plain_p50;
  state.counters["plain_p99_ms"] = plain_p99;
  state.counters["transactional_p50_ms"] = txn_p50;
  state.counters["transactional_p99_ms"] = txn_p99;
  state.counters["added_p50_ms"] = txn_p50 - plain_p50;
  state.counters["added_p99_ms"] = txn_p99 - plain_p99;
}
BENCHMARK(BM_TransactionalLatency)
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace idem::kafka
