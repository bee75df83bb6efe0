// BM_ParallelWorkers: the Kafka consumer with parallel handlers
// (ConsumerOptions::workers, ::ordering) against the same consumer with one
// worker, in one run, on librdkafka's in-process mock cluster. The handler
// waits 1 ms, as a handler that calls an external service does, then writes
// one state value. Per iteration and per side: a fresh store (kBuffered), a
// fresh topic and group; once the consumer holds the topic's partitions,
// 6,000 records with message-id headers are produced, and the consumer is
// timed from its first handler call to the last record handled (so the
// producer's and the first fetch's latency, the same for both sides, is
// left out).
//
// Args: ordering (0 kPartition over 8 partitions, 1 kKey over one partition
// with 1,000 keys) and workers. Reported: one_worker_per_second,
// workers_per_second and speedup (their ratio, both taken in the same
// iteration); items_per_second is the workers' rate.
//
//   build/bench/idem_kafka_bench --benchmark_filter=ParallelWorkers
//       --benchmark_counters_tabular=true   (one command line)

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "benchmark/benchmark.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "idem/kafka/mock_cluster.h"
#include "idem/kafka/producer.h"
#include "util/temp_dir.h"

namespace idem::kafka {
namespace {

constexpr int kWorkerRecords = 6000;
constexpr int kKeys = 1000;

MockCluster* WorkersCluster() {
  static MockCluster* cluster = [] {
    auto started = MockCluster::Start(1);
    return started.ok() ? started->release() : nullptr;
  }();
  return cluster;
}

// When the first handler call began, on any worker.
std::atomic<int64_t> first_call_ns{0};

absl::Status WaitThenWrite(const Record& record, Txn& txn) {
  int64_t unset = 0;
  first_call_ns.compare_exchange_strong(unset, absl::GetCurrentTimeNanos());
  absl::SleepFor(absl::Milliseconds(1));
  txn.Put(absl::StrCat("order/", std::string(record.id)), record.value);
  return absl::OkStatus();
}

// The records of one side: round-robin over `partitions`, or all on
// partition 0 with kKeys keys.
std::vector<OutgoingRecord> WorkerRecords(const std::string& topic,
                                          int partitions) {
  std::vector<OutgoingRecord> records;
  for (int i = 0; i < kWorkerRecords; ++i) {
    OutgoingRecord& r = records.emplace_back();
    r.topic = topic;
    r.partition = i % partitions;
    r.key = absl::StrCat("customer-", i % kKeys);
    r.value = absl::StrCat(i);
    r.headers = {{"message-id", absl::StrCat("order-", i)}};
  }
  return records;
}

// Consumes kWorkerRecords fresh records with `workers` workers; returns the
// records per second from their production to the last one handled.
absl::StatusOr<double> ConsumeWithWorkers(MockCluster& cluster, int workers,
                                          Ordering ordering) {
  static int run = 0;
  const std::string topic = absl::StrCat("workers-", ++run);
  const int partitions = ordering == Ordering::kKey ? 1 : 8;
  if (absl::Status s = cluster.CreateTopic(topic, partitions); !s.ok()) {
    return s;
  }
  absl::StatusOr<util::TempDir> dir = util::TempDir::Create("idem_workers_");
  if (!dir.ok()) return dir.status();
  Options engine_options;
  engine_options.durability = Durability::kBuffered;
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Open(dir->Sub("store"), engine_options);
  if (!engine.ok()) return engine.status();
  ConsumerOptions options;
  options.brokers = cluster.bootstrap_servers();
  options.group_id = topic;
  options.topics = {topic};
  options.workers = workers;
  options.ordering = ordering;
  options.poll_timeout = absl::Milliseconds(10);
  options.kafka_config = {{"log_level", "3"}};
  absl::StatusOr<std::unique_ptr<Consumer>> consumer =
      Consumer::Create(engine->get(), options);
  if (!consumer.ok()) return consumer.status();
  // Joining the group is not timed.
  while ((*consumer)->Assignment().size() < static_cast<size_t>(partitions)) {
    if (absl::Status s = (*consumer)->PollBatch(WaitThenWrite).status();
        !s.ok()) {
      return s;
    }
  }
  absl::StatusOr<std::unique_ptr<Producer>> producer =
      Producer::Create(cluster.bootstrap_servers());
  if (!producer.ok()) return producer.status();
  first_call_ns.store(0);
  if (absl::Status s = (*producer)->Produce(WorkerRecords(topic, partitions));
      !s.ok()) {
    return s;
  }
  while ((*consumer)->stats().records < kWorkerRecords) {
    if (absl::Status s = (*consumer)->PollBatch(WaitThenWrite).status();
        !s.ok()) {
      return s;
    }
  }
  const double seconds = absl::ToDoubleSeconds(
      absl::Now() - absl::FromUnixNanos(first_call_ns.load()));
  (*consumer)->Close().IgnoreError();  // the measurement is taken
  return kWorkerRecords / seconds;
}

// Args: ordering (0 kPartition, 1 kKey), workers.
void BM_ParallelWorkers(benchmark::State& state) {
  MockCluster* cluster = WorkersCluster();
  if (cluster == nullptr) {
    state.SkipWithError("the mock cluster could not be set up");
    return;
  }
  const Ordering ordering =
      state.range(0) == 0 ? Ordering::kPartition : Ordering::kKey;
  const int workers = static_cast<int>(state.range(1));
  double one = 0, many = 0;
  for (auto _ : state) {
    absl::StatusOr<double> one_rate = ConsumeWithWorkers(*cluster, 1, ordering);
    absl::StatusOr<double> many_rate =
        ConsumeWithWorkers(*cluster, workers, ordering);
    if (!one_rate.ok() || !many_rate.ok()) {
      state.SkipWithError(
          (one_rate.ok() ? many_rate.status() : one_rate.status())
              .ToString()
              .c_str());
      return;
    }
    state.SetIterationTime(kWorkerRecords / *many_rate);
    one += *one_rate;
    many += *many_rate;
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["one_worker_per_second"] = one / n;
  state.counters["workers_per_second"] = many / n;
  state.counters["items_per_second"] = many / n;
  state.counters["speedup"] = one > 0 ? many / one : 0;
}
BENCHMARK(BM_ParallelWorkers)
    ->ArgNames({"by_key", "workers"})
    ->Args({0, 8})
    ->Args({1, 16})
    ->Iterations(2)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace idem::kafka
