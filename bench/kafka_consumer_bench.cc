// Throughput of the Kafka consumer loop (idem::kafka::Consumer::PollBatch)
// against librdkafka's in-process mock cluster: 100,000 records with
// message-id headers (10% producer duplicates) over 4 partitions, consumed
// from the start by a fresh group into a fresh store per iteration. Timed
// from the end of the first batch (joining the group is not throughput) to
// the last record. Reported: items_per_second (records), and the shares of
// that time spent in idem (processing batches: Engine calls) and in
// librdkafka (polls and offset commits); the rest is the loop itself.
//
//   build/bench/idem_kafka_bench --benchmark_counters_tabular=true
//
// The mock cluster serves fetches from memory over loopback TCP, so the
// librdkafka share is a floor for a real cluster, where the network and the
// brokers' disks add latency.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
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

constexpr int kRecords = 100000;
constexpr int kPartitions = 4;
constexpr char kTopic[] = "bench";

// The cluster and its records, made once per process.
MockCluster* Cluster() {
  static MockCluster* cluster = [] {
    auto started = MockCluster::Start(1);
    if (!started.ok() || !(*started)->CreateTopic(kTopic, kPartitions).ok()) {
      return static_cast<MockCluster*>(nullptr);
    }
    auto producer = Producer::Create((*started)->bootstrap_servers());
    if (!producer.ok()) return static_cast<MockCluster*>(nullptr);
    std::vector<OutgoingRecord> records;
    for (int i = 0; i < kRecords; ++i) {
      OutgoingRecord r;
      r.topic = kTopic;
      // Every 10th record re-publishes the ID of record i - 5.
      r.key = absl::StrCat("order-", i % 10 == 9 ? i - 5 : i);
      r.value = absl::StrCat("{\"order\":", i, ",\"amount\":", i % 1000,
                             ",\"currency\":\"EUR\"}");
      r.headers = {{"message-id", r.key}};
      records.push_back(std::move(r));
    }
    if (!(*producer)->Produce(records).ok()) {
      return static_cast<MockCluster*>(nullptr);
    }
    return started->release();
  }();
  return cluster;
}

absl::Status WriteOneValue(const Record& record, Txn& txn) {
  txn.Put(absl::StrCat("order/", std::string(record.id)), record.value);
  return absl::OkStatus();
}

// Args: durability (0 kSync, 1 kBuffered), max_batch.
void BM_ConsumeAll(benchmark::State& state) {
  MockCluster* cluster = Cluster();
  if (cluster == nullptr) {
    state.SkipWithError("the mock cluster could not be set up");
    return;
  }
  static int group = 0;
  double records = 0, seconds = 0, engine = 0, kafka = 0;
  for (auto _ : state) {
    auto dir = util::TempDir::Create("idem_kafka_bench_");
    if (!dir.ok()) {
      state.SkipWithError("no temporary directory");
      return;
    }
    Options engine_options;
    engine_options.durability =
        state.range(0) == 0 ? Durability::kSync : Durability::kBuffered;
    auto store = Engine::Open(dir->Sub("store"), engine_options);
    if (!store.ok()) {
      state.SkipWithError(store.status().ToString().c_str());
      return;
    }
    ConsumerOptions options;
    options.brokers = cluster->bootstrap_servers();
    options.group_id = absl::StrCat("bench-", ++group);
    options.topics = {kTopic};
    options.max_batch = static_cast<int>(state.range(1));
    options.kafka_config = {{"log_level", "3"}};
    auto consumer = Consumer::Create(store->get(), options);
    if (!consumer.ok()) {
      state.SkipWithError(consumer.status().ToString().c_str());
      return;
    }
    // Up to the end of the first batch: joining the group, not timed.
    while ((*consumer)->stats().records == 0) {
      if (!(*consumer)->PollBatch(WriteOneValue).ok()) {
        state.SkipWithError("PollBatch failed");
        return;
      }
    }
    const ConsumerStats before = (*consumer)->stats();
    const absl::Time start = absl::Now();
    while ((*consumer)->stats().records < kRecords) {
      if (!(*consumer)->PollBatch(WriteOneValue).ok()) {
        state.SkipWithError("PollBatch failed");
        return;
      }
    }
    const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
    const ConsumerStats after = (*consumer)->stats();
    state.SetIterationTime(elapsed);
    records += static_cast<double>(after.records - before.records);
    seconds += elapsed;
    engine += absl::ToDoubleSeconds(after.engine_time - before.engine_time);
    kafka += absl::ToDoubleSeconds(after.kafka_time - before.kafka_time);
    (*consumer)->Close().IgnoreError();  // the measurement is taken
  }
  state.counters["items_per_second"] = seconds > 0 ? records / seconds : 0;
  state.counters["idem_share"] = seconds > 0 ? engine / seconds : 0;
  state.counters["librdkafka_share"] = seconds > 0 ? kafka / seconds : 0;
}
BENCHMARK(BM_ConsumeAll)
    ->ArgNames({"buffered", "batch"})
    ->Args({0, 500})
    ->Args({1, 500})
    ->Args({0, 100})
    ->Iterations(2)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace idem::kafka

BENCHMARK_MAIN();
