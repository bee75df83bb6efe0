// What ConsumerOptions::transactional_output costs a consumer, end to end,
// on librdkafka's in-process mock cluster. transactional_output needs a
// changelog (ConsumerOptions::changelog_topic), so both sides run in
// changelog mode; they differ only in transactional_output, at the default
// transaction_interval and max_batch.
//
// BM_ConsumerTransactionalOutput: per iteration two fresh partition-scoped
// stores (kBuffered), each consumed by a fresh group from the start of an
// input topic of 20,000 records over 4 partitions (produced once); the
// handler writes one state value and emits one output. One side publishes
// at least once, the other in transactions, in alternating order. Timed
// from the end of the first batch (joining the group and checking the
// partitions is not throughput) until every record is handled and the
// outbox is empty (every output, changelog and dedupe record published).
// Reported: at_least_once_per_second, transactional_per_second and
// transactional_over_at_least_once (their ratio within each iteration,
// averaged; the target is >= 0.8).
//
// BM_CommitToVisible: the input produced at a steady 500 records/s for 4 s
// while Consumer::Run runs; a plain librdkafka consumer with
// isolation.level=read_committed reads the outputs. Reported: p50 and p99
// of the time from a record's handler call (its commit follows within the
// batch) to its output being visible to that reader, for both sides (the
// target is p99 <= 250 ms with transactional output). The mock cluster
// keeps no transaction state: it serves the records of an open transaction
// to read_committed readers at once. So with transactional output a record
// counts as visible at the later of its read and the end of the first
// transaction commit after its handler call (ConsumerHooks::relay_step
// "ack"). Handlers and relay rounds take turns on the polling thread, so
// that commit is the one of the first round after the record's batch; at
// this pace (about 200 outbox entries per 100 ms, below max_batch) that
// round carries the record's output, so the figure is the record's.
//
//   build/bench/idem_kafka_bench
//       --benchmark_filter='ConsumerTransactional|CommitToVisible'
//       --benchmark_counters_tabular=true   (one command line)

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "benchmark/benchmark.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "idem/kafka/mock_cluster.h"
#include "idem/kafka/producer.h"
#include "idem/partition_state.h"
#include "kafka/consumer_hooks.h"
#include "util/temp_dir.h"

namespace idem::kafka {
namespace {

constexpr char kEosInput[] = "bench.eos.in";
constexpr char kEosProgress[] = "idem.relay.progress";
constexpr int kEosPartitions = 4;
constexpr int kEosRecords = 20000;
// BM_CommitToVisible: the pace and length of its input.
constexpr int kPacedPerSecond = 500;
constexpr absl::Duration kPacedFor = absl::Seconds(4);

// Input records "<prefix>-<first>".. of `count`, over the partitions.
std::vector<OutgoingRecord> InputRecords(const std::string& topic,
                                         const std::string& prefix, int first,
                                         int count) {
  std::vector<OutgoingRecord> records;
  for (int i = first; i < first + count; ++i) {
    OutgoingRecord r;
    r.topic = topic;
    r.partition = i % kEosPartitions;
    r.key = absl::StrCat(prefix, "-", i);
    r.value = "{\"amount\":1}";
    r.headers = {{"message-id", r.key}};
    records.push_back(std::move(r));
  }
  return records;
}

MockCluster* EosCluster() {
  static MockCluster* cluster = [] {
    auto started = MockCluster::Start(1);
    if (!started.ok() ||
        !(*started)->CreateTopic(kEosInput, kEosPartitions).ok() ||
        !(*started)->CreateTopic(kEosProgress, 1).ok()) {
      return static_cast<MockCluster*>(nullptr);
    }
    auto producer = Producer::Create((*started)->bootstrap_servers());
    if (!producer.ok() ||
        !(*producer)
             ->Produce(InputRecords(kEosInput, "order", 0, kEosRecords))
             .ok()) {
      return static_cast<MockCluster*>(nullptr);
    }
    return started->release();
  }();
  return cluster;
}

int eos_serial = 0;  // fresh groups, changelogs and topics per run

// A partition-scoped store (changelog mode needs one) in a directory of its
// own, removed with it.
struct EosStore {
  util::TempDir dir;
  std::unique_ptr<Engine> engine;
};

absl::StatusOr<EosStore> OpenEosStore() {
  absl::StatusOr<util::TempDir> dir = util::TempDir::Create("idem_eos_bench_");
  if (!dir.ok()) return dir.status();
  Options options;
  options.durability = Durability::kBuffered;
  options.dedupe_scope = DedupeScope::kPartition;
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Open(dir->Sub("store"), options);
  if (!engine.ok()) return engine.status();
  return EosStore{*std::move(dir), *std::move(engine)};
}

// A changelog-mode member reading `input`, with or without transactional
// output, in a fresh group with a fresh changelog.
ConsumerOptions EosOptions(const std::string& input, bool transactional) {
  const int serial = ++eos_serial;
  ConsumerOptions options;
  options.brokers = EosCluster()->bootstrap_servers();
  options.group_id = absl::StrCat("bench-eos-", serial);
  options.topics = {input};
  options.changelog_topic = absl::StrCat("bench-eos-state-", serial);
  options.transactional_output = transactional;
  options.relay_progress_topic = kEosProgress;
  options.kafka_config = {{"log_level", "3"}};
  return options;
}

// The handler's output topic for run `serial`: emits one output per record
// whose value is the handler call's time (Unix nanoseconds).
struct Emitting {
  std::string out_topic;
  absl::Status operator()(const Record& record, Txn& txn) const {
    // Changelog mode: a partition's state goes under its prefix.
    PartitionTxn partition(txn, record.topic, record.partition);
    partition.Put(absl::StrCat("order/", std::string(record.id)), record.value);
    txn.Emit(out_topic, record.id,
             absl::StrCat(absl::ToUnixNanos(absl::Now())));
    return absl::OkStatus();
  }
};

// Consumes the whole input into a fresh store; the seconds from the end of
// the first batch until every record is handled and the outbox is empty.
absl::StatusOr<double> TimedConsume(bool transactional) {
  absl::StatusOr<EosStore> store = OpenEosStore();
  if (!store.ok()) return store.status();
  const std::string out = absl::StrCat("bench.eos.out.", ++eos_serial);
  if (absl::Status s = EosCluster()->CreateTopic(out, kEosPartitions);
      !s.ok()) {
    return s;
  }
  auto consumer = Consumer::Create(store->engine.get(),
                                   EosOptions(kEosInput, transactional));
  if (!consumer.ok()) return consumer.status();
  const Emitting handler{out};
  auto poll = [&]() -> absl::Status {
    return (*consumer)->PollBatch(handler).status();
  };
  while ((*consumer)->stats().records == 0) {
    if (absl::Status s = poll(); !s.ok()) return s;
  }
  const absl::Time start = absl::Now();
  while (true) {
    if (absl::Status s = poll(); !s.ok()) return s;
    if ((*consumer)->stats().records < kEosRecords) continue;
    absl::StatusOr<std::vector<OutboxEntry>> pending =
        store->engine->ReadOutbox(1);
    if (!pending.ok()) return pending.status();
    if (pending->empty()) break;
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  (*consumer)->Close().IgnoreError();  // the measurement is taken
  return seconds;
}

void BM_ConsumerTransactionalOutput(benchmark::State& state) {
  if (EosCluster() == nullptr) {
    state.SkipWithError("the mock cluster could not be set up");
    return;
  }
  double plain_rate = 0, txn_rate = 0, ratio = 0;
  int iterations = 0;
  for (auto _ : state) {
    absl::StatusOr<double> plain, txn;
    if (iterations % 2 == 0) {
      plain = TimedConsume(false);
      txn = TimedConsume(true);
    } else {
      txn = TimedConsume(true);
      plain = TimedConsume(false);
    }
    if (!plain.ok() || !txn.ok()) {
      state.SkipWithError(
          (!plain.ok() ? plain.status() : txn.status()).ToString().c_str());
      return;
    }
    state.SetIterationTime(*txn);
    plain_rate += kEosRecords / *plain;
    txn_rate += kEosRecords / *txn;
    ratio += *plain / *txn;
    ++iterations;
  }
  if (iterations == 0) return;
  state.counters["at_least_once_per_second"] = plain_rate / iterations;
  state.counters["transactional_per_second"] = txn_rate / iterations;
  state.counters["transactional_over_at_least_once"] = ratio / iterations;
}
BENCHMARK(BM_ConsumerTransactionalOutput)
    ->Iterations(4)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// Reads `topic` (every partition, from the start) with read_committed, and
// keeps when each record was read and the time its value carries.
class VisibilityReader {
 public:
  struct Read {
    absl::Time read;
    absl::Time handled;
  };

  static absl::StatusOr<std::unique_ptr<VisibilityReader>> Start(
      const std::string& brokers, const std::string& topic) {
    char error[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    const std::pair<const char*, std::string> settings[] = {
        {"bootstrap.servers", brokers},
        {"group.id", absl::StrCat("bench-eos-reader-", ++eos_serial)},
        {"isolation.level", "read_committed"},
        {"fetch.wait.max.ms", "5"},
        {"log_level", "3"}};
    for (const auto& [name, value] : settings) {
      if (rd_kafka_conf_set(conf, name, value.c_str(), error, sizeof(error)) !=
          RD_KAFKA_CONF_OK) {
        rd_kafka_conf_destroy(conf);
        return absl::InvalidArgumentError(error);
      }
    }
    rd_kafka_t* rk =
        rd_kafka_new(RD_KAFKA_CONSUMER, conf, error, sizeof(error));
    if (rk == nullptr) return absl::UnavailableError(error);
    rd_kafka_poll_set_consumer(rk);
    rd_kafka_topic_partition_list_t* list =
        rd_kafka_topic_partition_list_new(kEosPartitions);
    for (int p = 0; p < kEosPartitions; ++p) {
      rd_kafka_topic_partition_list_add(list, topic.c_str(), p)->offset =
          RD_KAFKA_OFFSET_BEGINNING;
    }
    rd_kafka_assign(rk, list);
    rd_kafka_topic_partition_list_destroy(list);
    return std::unique_ptr<VisibilityReader>(new VisibilityReader(rk));
  }

  ~VisibilityReader() {
    stop_.store(true);
    thread_.join();
    rd_kafka_consumer_close(rk_);
    rd_kafka_destroy(rk_);
  }

  int count() {
    absl::MutexLock lock(&mu_);
    return static_cast<int>(reads_.size());
  }
  std::vector<Read> reads() {
    absl::MutexLock lock(&mu_);
    return reads_;
  }

 private:
  explicit VisibilityReader(rd_kafka_t* rk)
      : rk_(rk), thread_([this] { Loop(); }) {}

  void Loop() {
    while (!stop_.load()) {
      rd_kafka_message_t* m = rd_kafka_consumer_poll(rk_, 5);
      if (m == nullptr) continue;
      const absl::Time now = absl::Now();
      int64_t nanos = 0;
      if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR &&
          absl::SimpleAtoi(
              absl::string_view(static_cast<const char*>(m->payload), m->len),
              &nanos)) {
        absl::MutexLock lock(&mu_);
        reads_.push_back({now, absl::FromUnixNanos(nanos)});
      }
      rd_kafka_message_destroy(m);
    }
  }

  rd_kafka_t* const rk_;
  std::atomic<bool> stop_{false};
  absl::Mutex mu_;
  std::vector<Read> reads_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: starts once the rest exists
};

double Quantile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[std::min(values.size() - 1,
                         static_cast<size_t>(q * values.size()))];
}

// Runs a member over a paced input; the milliseconds from each record's
// handler call to its output's visibility (see the file comment).
absl::StatusOr<std::vector<double>> VisibilityMillis(bool transactional) {
  const int serial = ++eos_serial;
  const std::string input = absl::StrCat("bench.eos.paced.", serial);
  const std::string out = absl::StrCat("bench.eos.visible.", serial);
  for (const std::string& topic : {input, out}) {
    if (absl::Status s = EosCluster()->CreateTopic(topic, kEosPartitions);
        !s.ok()) {
      return s;
    }
  }
  absl::StatusOr<EosStore> store = OpenEosStore();
  if (!store.ok()) return store.status();
  absl::Mutex commits_mu;
  std::vector<absl::Time> commits;  // ends of transaction commits
  ConsumerHooks hooks;
  hooks.relay_step = [&](const char* step) {
    if (std::string_view(step) != "ack") return;
    absl::MutexLock lock(&commits_mu);
    commits.push_back(absl::Now());
  };
  auto consumer = CreateConsumerWithHooks(
      store->engine.get(), EosOptions(input, transactional), hooks);
  if (!consumer.ok()) return consumer.status();
  auto producer = Producer::Create(EosCluster()->bootstrap_servers());
  if (!producer.ok()) return producer.status();
  auto reader = VisibilityReader::Start(EosCluster()->bootstrap_servers(), out);
  if (!reader.ok()) return reader.status();
  const Emitting handler{out};
  absl::Status ran;
  std::thread run([&] { ran = (*consumer)->Run(handler); });
  // One record first: the member joined and checked its partitions.
  absl::Status produced = (*producer)->Produce(InputRecords(input, "w", 0, 1));
  const absl::Time warm_deadline = absl::Now() + absl::Seconds(60);
  while (produced.ok() && (*reader)->count() == 0 &&
         absl::Now() < warm_deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  const absl::Time paced_start = absl::Now();
  const int total =
      static_cast<int>(kPacedPerSecond * absl::ToDoubleSeconds(kPacedFor));
  constexpr int kPerTick = 5;
  for (int i = 0; produced.ok() && i < total; i += kPerTick) {
    produced = (*producer)->Produce(InputRecords(input, "p", i, kPerTick));
    absl::SleepFor(paced_start +
                   absl::Seconds(1.0 * (i + kPerTick) / kPacedPerSecond) -
                   absl::Now());
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while ((*reader)->count() < total + 1 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  (*consumer)->Stop();
  run.join();
  if (!produced.ok()) return produced;
  if (!ran.ok()) return ran;
  std::vector<VisibilityReader::Read> reads = (*reader)->reads();
  if (static_cast<int>(reads.size()) < total + 1) {
    return absl::DeadlineExceededError("not every output became visible");
  }
  (*consumer)->Close().IgnoreError();
  absl::MutexLock lock(&commits_mu);
  std::vector<double> millis;
  for (const VisibilityReader::Read& r : reads) {
    if (r.handled < paced_start) continue;  // the warm-up record
    absl::Time visible = r.read;
    if (transactional) {
      auto commit = std::lower_bound(commits.begin(), commits.end(), r.handled);
      if (commit == commits.end()) continue;  // not reached: all committed
      visible = std::max(visible, *commit);
    }
    millis.push_back(absl::ToDoubleMilliseconds(visible - r.handled));
  }
  return millis;
}

void BM_CommitToVisible(benchmark::State& state) {
  if (EosCluster() == nullptr) {
    state.SkipWithError("the mock cluster could not be set up");
    return;
  }
  std::vector<double> plain, txn;
  for (auto _ : state) {
    absl::StatusOr<std::vector<double>> p = VisibilityMillis(false);
    absl::StatusOr<std::vector<double>> t = VisibilityMillis(true);
    if (!p.ok() || !t.ok()) {
      state.SkipWithError(
          (!p.ok() ? p.status() : t.status()).ToString().c_str());
      return;
    }
    plain.insert(plain.end(), p->begin(), p->end());
    txn.insert(txn.end(), t->begin(), t->end());
    state.SetIterationTime(absl::ToDoubleSeconds(2 * kPacedFor));
  }
  state.counters["at_least_once_p50_ms"] = Quantile(plain, 0.5);
  state.counters["at_least_once_p99_ms"] = Quantile(plain, 0.99);
  state.counters["transactional_p50_ms"] = Quantile(txn, 0.5);
  state.counters["transactional_p99_ms"] = Quantile(txn, 0.99);
  state.counters["outputs"] = static_cast<double>(txn.size());
}
BENCHMARK(BM_CommitToVisible)
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace idem::kafka
