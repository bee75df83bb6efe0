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
//
// BM_RelayDrain measures the outbox relay against the commits that fill the
// outbox: per iteration, a fresh store commits 100,000 messages in batches
// of 500 (ProcessBatch, plus WaitDurable per batch under kBuffered), each
// handler writing one state value and emitting one record
// (Txn::Emit); then an OutboxRelay (idem/kafka/outbox_relay.h) drains them
// to the mock cluster. Reported: commit_per_second (messages committed per
// second of ProcessBatch and WaitDurable) and relay_per_second (entries per
// second of OutboxRelay::Drain: ReadOutbox, produce and wait for the
// brokers' acknowledgements, AckOutbox), and their ratio; the relay keeps up
// when relay_over_commit >= 1. The relay's producer connects, and gets its
// idempotent producer ID, on a first drain of one message, not timed.
//
//   build/bench/idem_kafka_bench --benchmark_filter=RelayDrain
//       --benchmark_counters_tabular=true   (one command line)
//
// BM_Restore measures a changelog restore (ConsumerOptions::changelog_topic,
// docs/scale-out.md): one changelog partition holding 1,000,000 state
// entries (keys "key-<i>", 64-byte values) and their commit's offset
// record, produced to the mock cluster once (zstd-compressed, as the mock
// keeps only 5 MB of batches per partition); per iteration a fresh
// partition-scoped store checks the partition against it, which reads the
// partition to its end and replaces the store's copy, in chunks of 100,000
// records (the path a consumer takes on assignment). Reported:
// entries_per_second (state entries restored per second, reading and
// importing).
//
//   build/bench/idem_kafka_bench --benchmark_filter=Restore
//       --benchmark_counters_tabular=true   (one command line)
//
// BM_RestoreFromStandby measures the same takeover with a warm standby copy
// (ConsumerOptions::standby_partitions): a changelog partition like
// BM_Restore's (its own topic), which a fresh store follows as a standby
// copy (the whole changelog read and imported, not timed); then a tail of
// 1,000 overwritten keys and their commit's offset record is produced (not
// timed), and the check on assignment restores from the copy, reading only
// the tail (timed). Reported: the time per takeover and tail_records (the
// changelog records the takeover read).

#include <algorithm>
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
#include "idem/kafka/outbox_relay.h"
#include "idem/kafka/producer.h"
#include "kafka/changelog_format.h"
#include "kafka/changelog_keeper.h"
#include "util/temp_dir.h"

namespace idem::kafka {
namespace {

constexpr int kRecords = 100000;
constexpr int kPartitions = 4;
constexpr char kTopic[] = "bench";
// Where BM_RelayDrain's handler emits.
constexpr char kOutTopic[] = "bench.out";

// The JSON value of order `i`, the records' and emits' values.
std::string OrderValue(int i) {
  return absl::StrCat("{\"order\":", i, ",\"amount\":", i % 1000,
                      ",\"currency\":\"EUR\"}");
}

// The cluster and its records, made once per process.
MockCluster* Cluster() {
  static MockCluster* cluster = [] {
    auto started = MockCluster::Start(1);
    if (!started.ok() || !(*started)->CreateTopic(kTopic, kPartitions).ok() ||
        !(*started)->CreateTopic(kOutTopic, kPartitions).ok()) {
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
      r.value = OrderValue(i);
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

// A store in a directory of its own, removed with it.
struct FreshStore {
  util::TempDir dir;
  std::unique_ptr<Engine> engine;
};

absl::StatusOr<FreshStore> OpenFreshStore(Durability durability) {
  absl::StatusOr<util::TempDir> dir =
      util::TempDir::Create("idem_kafka_bench_");
  if (!dir.ok()) return dir.status();
  Options options;
  options.durability = durability;
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Open(dir->Sub("store"), options);
  if (!engine.ok()) return engine.status();
  return FreshStore{*std::move(dir), *std::move(engine)};
}

// The benchmarks' first argument: 0 kSync, 1 kBuffered.
Durability ArgDurability(const benchmark::State& state) {
  return state.range(0) == 0 ? Durability::kSync : Durability::kBuffered;
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
    absl::StatusOr<FreshStore> store = OpenFreshStore(ArgDurability(state));
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
    auto consumer = Consumer::Create(store->engine.get(), options);
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

// Commits orders [first, first + count) in batches of `batch`, each handler
// writing one state value and emitting one record; under kBuffered waits
// for each batch to be durable, as a consumer does before committing
// offsets. Returns the wall time taken.
absl::StatusOr<double> CommitEmitting(Engine& engine, Durability durability,
                                      int first, int count, int batch) {
  std::vector<std::string> ids, values;
  for (int i = first; i < first + count; ++i) {
    ids.push_back(absl::StrCat("order-", i));
    values.push_back(OrderValue(i));
  }
  auto handler = [](const Message& m, Txn& txn) {
    txn.Put(absl::StrCat("order/", std::string(m.id)), m.payload);
    txn.Emit(kOutTopic, m.id, m.payload);
    return absl::OkStatus();
  };
  const absl::Time start = absl::Now();
  for (int begin = 0; begin < count; begin += batch) {
    std::vector<Message> messages;
    for (int i = begin; i < std::min(count, begin + batch); ++i) {
      messages.push_back(Message{.id = ids[static_cast<size_t>(i)],
                                 .payload = values[static_cast<size_t>(i)]});
    }
    absl::StatusOr<std::vector<Result>> results =
        engine.ProcessBatch(messages, handler);
    if (!results.ok()) return results.status();
    uint64_t sequence = 0;
    for (const Result& r : *results) {
      if (r.outcome != Outcome::kProcessed) {
        return absl::InternalError("a message was not processed");
      }
      sequence = std::max(sequence, r.sequence);
    }
    if (durability == Durability::kBuffered) {
      if (absl::Status s = engine.WaitDurable(sequence); !s.ok()) return s;
    }
  }
  return absl::ToDoubleSeconds(absl::Now() - start);
}

// Args: durability (0 kSync, 1 kBuffered) and the relay's max_batch.
void BM_RelayDrain(benchmark::State& state) {
  MockCluster* cluster = Cluster();
  if (cluster == nullptr) {
    state.SkipWithError("the mock cluster could not be set up");
    return;
  }
  const Durability durability = ArgDurability(state);
  constexpr int kCommitBatch = 500;
  double committed = 0, commit_seconds = 0, relayed = 0, relay_seconds = 0;
  for (auto _ : state) {
    absl::StatusOr<FreshStore> store = OpenFreshStore(durability);
    if (!store.ok()) {
      state.SkipWithError(store.status().ToString().c_str());
      return;
    }
    Engine& engine = *store->engine;
    OutboxRelayOptions relay_options;
    relay_options.brokers = cluster->bootstrap_servers();
    relay_options.max_batch = static_cast<int>(state.range(1));
    relay_options.kafka_config = {{"log_level", "3"}};
    auto relay = OutboxRelay::Create(&engine, relay_options);
    if (!relay.ok()) {
      state.SkipWithError(relay.status().ToString().c_str());
      return;
    }
    // Connecting and the idempotent producer's ID: not timed.
    absl::StatusOr<double> warm =
        CommitEmitting(engine, durability, kRecords, 1, 1);
    absl::StatusOr<RelayReport> warm_drain =
        warm.ok() ? (*relay)->Drain() : warm.status();
    if (!warm_drain.ok() || warm_drain->published != 1) {
      state.SkipWithError("the first drain failed");
      return;
    }
    absl::StatusOr<double> commit =
        CommitEmitting(engine, durability, 0, kRecords, kCommitBatch);
    if (!commit.ok()) {
      state.SkipWithError(commit.status().ToString().c_str());
      return;
    }
    const absl::Time start = absl::Now();
    absl::StatusOr<RelayReport> drained = (*relay)->Drain();
    const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
    if (!drained.ok() || drained->published != kRecords) {
      state.SkipWithError(drained.ok() ? "the relay published too few"
                                       : drained.status().ToString().c_str());
      return;
    }
    state.SetIterationTime(elapsed);
    committed += kRecords;
    commit_seconds += *commit;
    relayed += static_cast<double>(drained->published);
    relay_seconds += elapsed;
  }
  const double commit_rate =
      commit_seconds > 0 ? committed / commit_seconds : 0;
  const double relay_rate = relay_seconds > 0 ? relayed / relay_seconds : 0;
  state.counters["commit_per_second"] = commit_rate;
  state.counters["relay_per_second"] = relay_rate;
  state.counters["relay_over_commit"] =
      commit_rate > 0 ? relay_rate / commit_rate : 0;
}
BENCHMARK(BM_RelayDrain)
    ->ArgNames({"buffered", "relay_batch"})
    ->Args({0, 500})
    ->Args({1, 500})
    ->Args({0, 5000})
    ->Args({1, 5000})
    ->Iterations(2)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

constexpr int kRestoreEntries = 1000000;
constexpr char kRestoreInput[] = "bench.restore.in";
constexpr char kRestoreChangelog[] = "bench.restore.state";
constexpr char kStandbyChangelog[] = "bench.standby.state";
constexpr int kStandbyTail = 1000;

// librdkafka's mock cluster keeps at most 5 MB of record batches per
// partition, dropping the oldest: compressed (zstd), the million fit.
absl::StatusOr<std::unique_ptr<Producer>> CompressingProducer(
    MockCluster& cluster) {
  return Producer::Create(cluster.bootstrap_servers(),
                          {{"linger.ms", "100"},
                           {"compression.codec", "zstd"},
                           {"batch.num.messages", "100000"},
                           {"batch.size", "16000000"},
                           {"message.max.bytes", "16000000"}});
}

// The changelog `changelog` of input kRestoreInput: kRestoreEntries state
// entries and their commit's offset record, under epoch 7.
bool ProduceRestoreChangelog(MockCluster& cluster,
                             const std::string& changelog) {
  for (const std::string& topic : {changelog, DedupeTopicOf(changelog)}) {
    if (!cluster.CreateTopic(topic, 1).ok()) return false;
  }
  auto producer = CompressingProducer(cluster);
  if (!producer.ok()) return false;
  const std::string mark = EncodeMark({7, kRestoreEntries - 1});
  std::vector<OutgoingRecord> records;
  constexpr int kChunk = 100000;
  for (int i = 0; i <= kRestoreEntries; ++i) {
    OutgoingRecord& r = records.emplace_back();
    r.topic = changelog;
    r.partition = 0;
    r.headers = {{kChangelogMarkHeader, mark}};
    if (i < kRestoreEntries) {
      r.key = StateRecordKey(absl::StrCat("key-", i));
      r.value = std::string(64, static_cast<char>('a' + i % 26));
    } else {
      r.key = OffsetRecordKey(7);
      r.value = absl::StrCat(kRestoreEntries - 1);
    }
    if (records.size() == kChunk || i == kRestoreEntries) {
      if (!(*producer)->Produce(records).ok()) return false;
      records.clear();
    }
  }
  return true;
}

// The changelog of BM_Restore, produced once; false if it could not be.
bool RestoreChangelog(MockCluster& cluster) {
  static const bool ready = [&] {
    return cluster.CreateTopic(kRestoreInput, 1).ok() &&
           ProduceRestoreChangelog(cluster, kRestoreChangelog) &&
           ProduceRestoreChangelog(cluster, kStandbyChangelog);
  }();
  return ready;
}

// A fresh partition-scoped store and a changelog keeper on it, following
// `changelog` (and keeping standby copies of `standby`).
struct RestoreBed {
  util::TempDir dir;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<ConsumerOptions> options;  // the keeper borrows them
  std::unique_ptr<ChangelogKeeper> keeper;
};

absl::StatusOr<RestoreBed> OpenRestoreBed(MockCluster& cluster,
                                          const std::string& changelog,
                                          std::vector<int32_t> standby) {
  absl::StatusOr<util::TempDir> dir =
      util::TempDir::Create("idem_kafka_bench_");
  if (!dir.ok()) return dir.status();
  Options engine_options;
  engine_options.dedupe_scope = DedupeScope::kPartition;
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Open(dir->Sub("store"), engine_options);
  if (!engine.ok()) return engine.status();
  auto options = std::make_unique<ConsumerOptions>();
  options->brokers = cluster.bootstrap_servers();
  options->group_id = "bench.restore";
  options->topics = {kRestoreInput};
  options->changelog_topic = changelog;
  options->standby_partitions = std::move(standby);
  options->kafka_config = {{"log_level", "3"}};
  auto keeper = ChangelogKeeper::Create(engine->get(), *options, {});
  if (!keeper.ok()) return keeper.status();
  return RestoreBed{*std::move(dir), *std::move(engine), std::move(options),
                    *std::move(keeper)};
}

void BM_Restore(benchmark::State& state) {
  MockCluster* cluster = Cluster();
  if (cluster == nullptr || !RestoreChangelog(*cluster)) {
    state.SkipWithError("the mock cluster could not be set up");
    return;
  }
  double restored = 0, seconds = 0;
  for (auto _ : state) {
    absl::StatusOr<RestoreBed> bed =
        OpenRestoreBed(*cluster, kRestoreChangelog, {});
    if (!bed.ok()) {
      state.SkipWithError(bed.status().ToString().c_str());
      return;
    }
    ChangelogKeeper* keeper = bed->keeper.get();
    const absl::Time start = absl::Now();
    absl::StatusOr<RestoreReport> report = keeper->Check(kRestoreInput, 0);
    const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
    if (!report.ok() || report->state_entries != kRestoreEntries) {
      state.SkipWithError(
          report.ok() ? absl::StrCat("restored ", report->state_entries,
                                     " entries of ", kRestoreEntries, " (",
                                     report->records_read, " records read)")
                            .c_str()
                      : report.status().ToString().c_str());
      return;
    }
    state.SetIterationTime(elapsed);
    restored += static_cast<double>(report->state_entries);
    seconds += elapsed;
  }
  state.counters["entries_per_second"] = seconds > 0 ? restored / seconds : 0;
}
BENCHMARK(BM_Restore)
    ->Iterations(2)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

void BM_RestoreFromStandby(benchmark::State& state) {
  MockCluster* cluster = Cluster();
  if (cluster == nullptr || !RestoreChangelog(*cluster)) {
    state.SkipWithError("the mock cluster could not be set up");
    return;
  }
  auto producer = CompressingProducer(*cluster);
  if (!producer.ok()) {
    state.SkipWithError(producer.status().ToString().c_str());
    return;
  }
  int64_t offset = kRestoreEntries - 1;  // the changelog's last commit
  double tail_records = 0;
  for (auto _ : state) {
    absl::StatusOr<RestoreBed> bed =
        OpenRestoreBed(*cluster, kStandbyChangelog, {0});
    if (!bed.ok()) {
      state.SkipWithError(bed.status().ToString().c_str());
      return;
    }
    ChangelogKeeper* keeper = bed->keeper.get();
    // The copy, warmed while another member holds the partition.
    const ChangelogKeeper::StandbyRound warm =
        keeper->FollowStandbys(kRestoreInput, {});
    if (warm.copies != 1) {
      state.SkipWithError(warm.last_error.ToString().c_str());
      return;
    }
    // The owner's next commit: a tail of overwritten keys, then its mark.
    ++offset;
    const std::string mark = EncodeMark({7, offset});
    std::vector<OutgoingRecord> tail;
    for (int i = 0; i <= kStandbyTail; ++i) {
      OutgoingRecord& r = tail.emplace_back();
      r.topic = kStandbyChangelog;
      r.partition = 0;
      r.headers = {{kChangelogMarkHeader, mark}};
      r.key = i < kStandbyTail ? StateRecordKey(absl::StrCat("key-", i))
                               : OffsetRecordKey(7);
      r.value = i < kStandbyTail ? absl::StrCat("tail-", offset)
                                 : absl::StrCat(offset);
    }
    if (absl::Status s = (*producer)->Produce(tail); !s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      return;
    }
    const absl::Time start = absl::Now();
    absl::StatusOr<RestoreReport> report = keeper->Check(kRestoreInput, 0);
    const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
    if (!report.ok() || !report->from_standby ||
        report->offset != std::optional<int64_t>(offset)) {
      state.SkipWithError(report.ok() ? "the takeover did not use the copy"
                                      : report.status().ToString().c_str());
      return;
    }
    state.SetIterationTime(elapsed);
    tail_records += static_cast<double>(report->records_read);
  }
  state.counters["tail_records"] =
      benchmark::Counter(tail_records, benchmark::Counter::kAvgIterations);
}
BENCHMARK(BM_RestoreFromStandby)
    ->Iterations(3)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace idem::kafka

BENCHMARK_MAIN();
