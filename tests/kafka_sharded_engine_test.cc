// The Kafka consumer and the outbox relay on a sharded engine
// (Options::shards > 1), against librdkafka's mock cluster: each assigned
// partition's records commit in the partition's shard (its state, dedupe
// records and offsets there), a restart resumes every partition from its
// shard's offset, a rebalance between two members moves partitions with no
// record applied twice, and every shard's outbox is relayed, each output
// once (with transactional output too, in changelog mode as well, each
// shard's relay under its own transactional.id), and a shard whose round
// fails holds back no other. A changelog restore into sharded stores is in
// tests/kafka_changelog_test.cc. Broken variants caught: a consumer that
// reads every partition's offset from shard 0, and shard relays sharing one
// transactional.id.

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "idem/kafka/outbox_relay.h"
#include "idem/partition_state.h"
#include "kafka/changelog_format.h"
#include "kafka/consumer_hooks.h"
#include "kafka/outbox_relay_hooks.h"
#include "kafka/sharded_outbox_relay.h"
#include "tests/testing/engine_test_util.h"
#include "tests/testing/kafka_test_util.h"
#include "util/temp_dir.h"

namespace idem::kafka {
namespace {

using ::idem::test::AppliedCounts;
using ::idem::test::ApplyRecord;
using ::idem::test::EffectErrors;
using ::idem::test::KafkaTestBed;
using ::idem::test::MakeStream;
using ::idem::test::Merge;
using ::idem::test::PollUntil;
using ::idem::test::ProducedStream;
using ::idem::test::StartKafka;
using ::idem::test::TestConsumerOptions;
using ::idem::test::TotalErrors;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::SizeIs;

// More partitions than shards: a shard holds several.
constexpr int kPartitions = 6;
constexpr char kDownstream[] = "shipments";
constexpr char kProgress[] = "idem.relay.progress";

Options ShardedOptions(int shards) {
  Options options;
  options.shards = shards;
  options.dedupe_scope = DedupeScope::kPartition;
  return options;
}

// The sum of the values of `records`, per partition (ApplyRecord's totals).
std::map<int32_t, int64_t> Totals(const std::vector<OutgoingRecord>& records) {
  std::map<int32_t, int64_t> totals;
  for (const OutgoingRecord& record : records) {
    totals[record.partition] += std::stoll(record.value);
  }
  return totals;
}

// The records of `stream` from `first` (inclusive) to `last` (exclusive).
std::vector<OutgoingRecord> Slice(const ProducedStream& stream, size_t first,
                                  size_t last) {
  return {stream.records.begin() + first, stream.records.begin() + last};
}

// True once `engine` has committed, in total over the partitions, `count`
// records of `topic`.
bool Committed(Engine& engine, const std::string& topic, int64_t count) {
  return test::CommittedRecords(engine, topic, kPartitions) >= count;
}

// Where each partition's state and offset live: "p<partition> ..." for a
// partition whose total or offset is missing in its shard, or present in
// another shard.
std::vector<std::string> PlacementErrors(Engine& engine,
                                         const std::string& topic) {
  std::vector<std::string> errors;
  for (int32_t p = 0; p < kPartitions; ++p) {
    const std::string total = PartitionStatePrefix(topic, p) + "total";
    for (int i = 0; i < engine.shard_count(); ++i) {
      absl::StatusOr<std::optional<std::string>> state =
          engine.shard(i)->GetState(total);
      absl::StatusOr<std::optional<int64_t>> offset =
          engine.shard(i)->CommittedOffset(topic, p);
      const bool own = i == engine.ShardOf(p);
      if (!state.ok() || !offset.ok() || state->has_value() != own ||
          offset->has_value() != own) {
        errors.push_back(absl::StrCat("p", p, " in shard ", i, ": state ",
                                      state.ok() && state->has_value(),
                                      ", offset ",
                                      offset.ok() && offset->has_value()));
      }
    }
  }
  return errors;
}

class KafkaShardedEngineTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartKafka("orders", kPartitions, bed_));
    ASSERT_TRUE(bed_.cluster->CreateTopic(kDownstream, kPartitions).ok());
    ASSERT_TRUE(bed_.cluster->CreateTopic(kProgress, 1).ok());
  }

  int shards() const { return GetParam(); }

  ConsumerOptions TestOptions(const std::string& group) const {
    ConsumerOptions options = TestConsumerOptions(bed_, group);
    options.max_batch = 25;
    return options;
  }

  util::TempDir dir_;
  KafkaTestBed bed_;
};

// Consumes a stream of 240 records over every partition with `options` on
// a store of `shards` shards; checks that each record is applied once, each
// partition's total is exact and its state and offset are in its shard
// only. The consumer's stats afterwards.
ConsumerStats ConsumeIntoShards(KafkaTestBed& bed, util::TempDir& dir,
                                int shards, const ConsumerOptions& options) {
  const ProducedStream stream = MakeStream(bed.topic, kPartitions, 240, 0, 1);
  EXPECT_TRUE(bed.producer->Produce(stream.records).ok());
  auto engine = Engine::Open(dir.Sub("store"), ShardedOptions(shards));
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return {};
  auto consumer = Consumer::Create(engine->get(), options);
  EXPECT_TRUE(consumer.ok()) << consumer.status();
  if (!consumer.ok()) return {};
  absl::Status s = PollUntil(**consumer, ApplyRecord, [&] {
    return Committed(**engine, bed.topic, 240);
  });
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_THAT(EffectErrors(stream.unique_ids, AppliedCounts(**engine)),
              IsEmpty());
  EXPECT_THAT(TotalErrors(**engine, bed.topic, Totals(stream.records)),
              IsEmpty());
  EXPECT_THAT(PlacementErrors(**engine, bed.topic), IsEmpty());
  return (*consumer)->stats();
}

TEST_P(KafkaShardedEngineTest, EachPartitionCommitsInItsShard) {
  const ConsumerStats stats =
      ConsumeIntoShards(bed_, dir_, shards(), TestOptions("g"));
  EXPECT_EQ(stats.processed, 240);
  EXPECT_EQ(stats.duplicates, 0);
  // Each partition's lag reads its offset in its shard.
  ASSERT_THAT(stats.lag, SizeIs(kPartitions));
  for (const PartitionLag& lag : stats.lag) {
    EXPECT_EQ(lag.next_offset, 240 / kPartitions) << lag.partition;
  }
}

TEST_P(KafkaShardedEngineTest, WorkersCommitEachPartitionInItsShard) {
  ConsumerOptions options = TestOptions("g");
  options.workers = 4;
  options.ordering = Ordering::kKey;
  EXPECT_EQ(ConsumeIntoShards(bed_, dir_, shards(), options).processed, 240);
}

// A consumer that commits nothing to Kafka (commit_to_kafka false) processes
// half of the stream and closes; the next one on the same store starts each
// partition after the offset its shard holds, and reads nothing twice.
struct RestartOutcome {
  int64_t second_records = 0;
  int64_t second_duplicates = 0;
  int starts_with_engine_offset = 0;
  std::vector<std::string> effect_errors;
};

RestartOutcome RestartOnTheStore(KafkaTestBed& bed, util::TempDir& dir,
                                 int shards, const ConsumerOptions& base,
                                 const ConsumerHooks& hooks) {
  RestartOutcome out;
  const ProducedStream stream = MakeStream(bed.topic, kPartitions, 240, 0, 3);
  EXPECT_TRUE(bed.producer->Produce(Slice(stream, 0, 120)).ok());
  auto engine = Engine::Open(dir.Sub("store"), ShardedOptions(shards));
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return out;
  ConsumerOptions options = base;
  options.commit_to_kafka = false;
  {
    auto first = CreateConsumerWithHooks(engine->get(), options, hooks);
    EXPECT_TRUE(first.ok()) << first.status();
    if (!first.ok()) return out;
    EXPECT_TRUE(PollUntil(**first, ApplyRecord, [&] {
                  return Committed(**engine, bed.topic, 120);
                }).ok());
    EXPECT_TRUE((*first)->Close().ok());
  }
  EXPECT_TRUE(bed.producer->Produce(Slice(stream, 120, 240)).ok());
  options.on_assign = [&](const PartitionStart& start) {
    if (start.engine_offset.has_value()) ++out.starts_with_engine_offset;
  };
  auto second = CreateConsumerWithHooks(engine->get(), options, hooks);
  EXPECT_TRUE(second.ok()) << second.status();
  if (!second.ok()) return out;
  EXPECT_TRUE(PollUntil(**second, ApplyRecord, [&] {
                return Committed(**engine, bed.topic, 240);
              }).ok());
  out.second_records = (*second)->stats().records;
  out.second_duplicates = (*second)->stats().duplicates;
  out.effect_errors = EffectErrors(stream.unique_ids, AppliedCounts(**engine));
  return out;
}

TEST_P(KafkaShardedEngineTest, RestartResumesEachPartitionFromItsShard) {
  const RestartOutcome out =
      RestartOnTheStore(bed_, dir_, shards(), TestOptions("g"), {});
  EXPECT_THAT(out.effect_errors, IsEmpty());
  EXPECT_EQ(out.starts_with_engine_offset, kPartitions);
  EXPECT_EQ(out.second_records, 120);  // the second half only
  EXPECT_EQ(out.second_duplicates, 0);
}

// Broken variant: offsets read from shard 0 for every partition. The
// partitions of the other shards look unprocessed and are read again from
// their start (the engine catches the duplicates, but the reads show).
TEST_P(KafkaShardedEngineTest, ReadingEveryOffsetFromShardZeroIsCaught) {
  ConsumerHooks broken;
  broken.offsets_of_shard_zero = true;
  const RestartOutcome out =
      RestartOnTheStore(bed_, dir_, shards(), TestOptions("g"), broken);
  EXPECT_LT(out.starts_with_engine_offset, kPartitions);
  EXPECT_GT(out.second_duplicates, 0);
}

// Consumer A (its own sharded store) processes the first half alone;
// consumer B (another sharded store) joins, the group moves partitions to
// B, which starts them at the offsets A committed to Kafka on revocation;
// then the second half is consumed by both. Every record is applied once
// over the two stores, and each partition's total over them is exact.
TEST_P(KafkaShardedEngineTest, RebalanceMovesPartitionsWithoutDuplicates) {
  const ProducedStream stream = MakeStream(bed_.topic, kPartitions, 360, 0, 4);
  ASSERT_TRUE(bed_.producer->Produce(Slice(stream, 0, 180)).ok());
  ASSERT_OPEN(engine_a, dir_.Sub("a"), ShardedOptions(shards()));
  ASSERT_OPEN(engine_b, dir_.Sub("b"), ShardedOptions(shards()));
  ConsumerOptions options = TestOptions("g");
  auto a = Consumer::Create(engine_a.get(), options);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(PollUntil(**a, ApplyRecord, [&] {
                return Committed(*engine_a, bed_.topic, 180);
              }).ok());

  std::atomic<int> b_assigned{0};
  options.on_assign = [&](const PartitionStart&) { ++b_assigned; };
  auto b = Consumer::Create(engine_b.get(), options);
  ASSERT_TRUE(b.ok()) << b.status();
  std::atomic<bool> stop{false};
  auto poll = [&stop](Consumer& consumer) {
    while (!stop.load()) {
      absl::StatusOr<BatchReport> report = consumer.PollBatch(ApplyRecord);
      EXPECT_TRUE(report.ok()) << report.status();
      if (!report.ok()) return;
    }
  };
  std::thread poll_a(poll, std::ref(**a));
  std::thread poll_b(poll, std::ref(**b));
  EXPECT_TRUE(
      test::WaitUntil([&] { return b_assigned.load() > 0; }, absl::Seconds(60)))
      << "B never got a partition";
  EXPECT_TRUE(bed_.producer->Produce(Slice(stream, 180, 360)).ok());
  // Each partition's last offset is in one of the stores.
  EXPECT_TRUE(test::WaitUntil(
      [&] {
        for (int32_t p = 0; p < kPartitions; ++p) {
          bool done = false;
          for (Engine* engine : {engine_a.get(), engine_b.get()}) {
            auto offset = engine->CommittedOffset(bed_.topic, p);
            done |= offset.ok() && offset->has_value() &&
                    **offset == 360 / kPartitions - 1;
          }
          if (!done) return false;
        }
        return true;
      },
      absl::Seconds(60)));
  stop = true;
  poll_a.join();
  poll_b.join();
  EXPECT_GE((*a)->stats().revocations, 1);
  EXPECT_THAT(
      EffectErrors(stream.unique_ids,
                   Merge({AppliedCounts(*engine_a), AppliedCounts(*engine_b)})),
      IsEmpty());
  // A partition's total, summed over the stores, is exact.
  const std::map<int32_t, int64_t> want = Totals(stream.records);
  for (int32_t p = 0; p < kPartitions; ++p) {
    int64_t sum = 0;
    for (Engine* engine : {engine_a.get(), engine_b.get()}) {
      auto got = engine->GetState(
          bed_.topic, p, PartitionStatePrefix(bed_.topic, p) + "total");
      ASSERT_TRUE(got.ok()) << got.status();
      if (got->has_value()) sum += std::stoll(**got);
    }
    EXPECT_EQ(sum, want.at(p)) << "partition " << p;
  }
}

// How RelayEveryShard's consumer publishes.
enum class Output {
  kAtLeastOnce,
  // transactional_output on one store, without a changelog (the test hook
  // ConsumerHooks::plain_transactional_output).
  kTransactionalOneStore,
  kTransactionalChangelog,  // transactional_output in changelog mode
};

// The consumer relays every shard's outbox after its batches: each output
// reaches the downstream topic once, with transactional output too (each
// shard's relay a transactional producer of its own), and in changelog mode
// with the changelog's entries in the same shard relays' transactions.
void RelayEveryShard(KafkaTestBed& bed, util::TempDir& dir, int shards,
                     Output output) {
  const ProducedStream stream = MakeStream(bed.topic, kPartitions, 180, 0, 5);
  ASSERT_TRUE(bed.producer->Produce(stream.records).ok());
  ASSERT_OPEN(engine, dir.Sub("store"), ShardedOptions(shards));
  ConsumerOptions options = TestConsumerOptions(bed, "stage");
  options.relay_outbox = true;
  options.transactional_output = output != Output::kAtLeastOnce;
  ConsumerHooks one_store;  // every member on one store: plain mode is exact
  one_store.plain_transactional_output =
      output == Output::kTransactionalOneStore;
  const bool changelog = output == Output::kTransactionalChangelog;
  // Changelog mode writes through PartitionTxn.
  auto handler = [changelog](const Record& r, Txn& txn) {
    return changelog ? test::ApplyInPartitionAndForward(r, txn, kDownstream)
                     : test::ApplyAndForward(r, txn, kDownstream);
  };
  if (changelog) {
    options.changelog_topic = "orders-state";
    ASSERT_TRUE(bed.cluster->CreateTopic("orders-state", kPartitions).ok());
    ASSERT_TRUE(
        bed.cluster->CreateTopic(DedupeTopicOf("orders-state"), kPartitions)
            .ok());
  }
  auto consumer = CreateConsumerWithHooks(engine.get(), options, one_store);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  absl::Status s = PollUntil(
      **consumer, handler, [&] { return Committed(*engine, bed.topic, 180); });
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_TRUE((*consumer)->Close().ok());  // publishes what is left
  EXPECT_EQ(engine->GetStats()->outbox_pending, 0u);
  const std::map<std::string, int> counts = test::MessageIdCounts(
      bed.cluster->bootstrap_servers(), kDownstream, "read_committed");
  EXPECT_THAT(counts, SizeIs(180));
  EXPECT_THAT(test::NotOnce(counts), IsEmpty());
}

TEST_P(KafkaShardedEngineTest, ConsumerRelaysEveryShardsOutputsOnce) {
  RelayEveryShard(bed_, dir_, shards(), Output::kAtLeastOnce);
}

TEST_P(KafkaShardedEngineTest,
       TransactionalConsumerRelaysEveryShardsOutputsOnce) {
  RelayEveryShard(bed_, dir_, shards(), Output::kTransactionalOneStore);
}

TEST_P(KafkaShardedEngineTest,
       TransactionalChangelogConsumerRelaysEveryShardsOutputsOnce) {
  RelayEveryShard(bed_, dir_, shards(), Output::kTransactionalChangelog);
}

// Commits `count` messages of `partition`, each emitting one record.
void CommitEmits(Engine& engine, int32_t partition, int count) {
  for (int i = 0; i < count; ++i) {
    const std::string id = absl::StrCat("p", partition, "-", i);
    Message m;
    m.id = id;
    m.source = "in";
    m.partition = partition;
    absl::StatusOr<Result> r = engine.Process(m, [&](const Message&, Txn& txn) {
      txn.Emit(kDownstream, id, absl::StrCat(i));
      return absl::OkStatus();
    });
    ASSERT_TRUE(r.ok() && r->outcome == Outcome::kProcessed) << id;
  }
}

// A transactional relay of a sharded engine is stopped after its
// transactions committed and before it acknowledged them (as a crash there
// leaves it); the next relay drains the outbox. Returns how often each
// output reached the downstream topic, and the entries the second relay
// found already published. The shards hold different numbers of entries
// (shard 0 the most, and its progress is recorded first), so one shard's
// progress taken for another's publishes entries again.
struct ProgressRun {
  std::map<std::string, int> counts;
  int expected = 0;
  int64_t already_published = 0;
};

ProgressRun RestartTransactionalRelay(KafkaTestBed& bed, Engine& engine,
                                      const OutboxRelayHooks& hooks) {
  ProgressRun run;
  for (int32_t p = 0; p < engine.shard_count(); ++p) {
    const int count = 3 + 4 * (engine.shard_count() - 1 - p);
    CommitEmits(engine, p, count);
    run.expected += count;
  }
  OutboxRelayOptions options;
  options.brokers = bed.cluster->bootstrap_servers();
  options.kafka_config = {{"log_level", "3"}};
  options.transactional_id = "relay";
  OutboxRelayHooks stop = hooks;
  stop.between_publish_and_ack = [] {
    return absl::CancelledError("stopped after the commit");
  };
  {
    auto relay = CreateOutboxRelayWithHooks(&engine, options, stop);
    EXPECT_TRUE(relay.ok()) << relay.status();
    if (!relay.ok()) return run;
    EXPECT_EQ((*relay)->RelayOnce().status().code(),
              absl::StatusCode::kCancelled);
  }
  auto relay = CreateOutboxRelayWithHooks(&engine, options, hooks);
  EXPECT_TRUE(relay.ok()) << relay.status();
  if (!relay.ok()) return run;
  absl::StatusOr<RelayReport> report = (*relay)->Drain();
  EXPECT_TRUE(report.ok()) << report.status();
  if (report.ok()) run.already_published = report->already_published;
  run.counts = test::MessageIdCounts(bed.cluster->bootstrap_servers(),
                                     kDownstream, "read_committed");
  return run;
}

TEST_P(KafkaShardedEngineTest, TransactionalRelayKeepsEachShardsProgress) {
  ASSERT_OPEN(engine, dir_.Sub("store"), ShardedOptions(shards()));
  const ProgressRun run = RestartTransactionalRelay(bed_, *engine, {});
  EXPECT_EQ(run.already_published, run.expected);
  EXPECT_THAT(run.counts, SizeIs(run.expected));
  EXPECT_THAT(test::NotOnce(run.counts), IsEmpty());
}

TEST_P(KafkaShardedEngineTest, OneTransactionalIdForEveryShardIsCaught) {
  ASSERT_OPEN(engine, dir_.Sub("store"), ShardedOptions(shards()));
  OutboxRelayHooks broken;
  broken.one_transactional_id_for_every_shard = true;
  const ProgressRun run = RestartTransactionalRelay(bed_, *engine, broken);
  EXPECT_THAT(test::NotOnce(run.counts), Not(IsEmpty()));
}

// A shard whose round fails does not hold back the others: each shard's
// relay gets its round, the failed one's entries stay for the next, and the
// error names the shard.
TEST_P(KafkaShardedEngineTest, FailingShardDoesNotHoldBackTheOthers) {
  ASSERT_OPEN(engine, dir_.Sub("store"), ShardedOptions(shards()));
  for (int32_t p = 0; p < shards(); ++p) {
    ASSERT_NO_FATAL_FAILURE(CommitEmits(*engine, p, 4));
  }
  OutboxRelayOptions options;
  options.brokers = bed_.cluster->bootstrap_servers();
  options.kafka_config = {{"log_level", "3"}};
  auto relay = CreateShardedOutboxRelay(engine.get(), options, [](int shard) {
    OutboxRelayHooks hooks;
    if (shard == 0) {
      hooks.between_publish_and_ack = [] {
        return absl::UnavailableError("shard 0 stops before its ack");
      };
    }
    return hooks;
  });
  ASSERT_TRUE(relay.ok()) << relay.status();
  absl::Status s = (*relay)->Drain().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(s.message()), HasSubstr("shard 0"));
  EXPECT_EQ((*relay)->stats().acknowledged, 4 * (shards() - 1));
  for (int i = 0; i < shards(); ++i) {
    absl::StatusOr<std::vector<OutboxEntry>> left =
        engine->shard(i)->ReadOutbox(100);
    ASSERT_TRUE(left.ok()) << left.status();
    EXPECT_THAT(*left, SizeIs(i == 0 ? 4 : 0)) << "shard " << i;
  }
}

// OutboxRelay::Run on a sharded engine drains every shard's outbox until
// Stop.
TEST_P(KafkaShardedEngineTest, RelayRunDrainsEveryShardUntilStopped) {
  ASSERT_OPEN(engine, dir_.Sub("store"), ShardedOptions(shards()));
  for (int32_t p = 0; p < kPartitions; ++p) {
    ASSERT_NO_FATAL_FAILURE(CommitEmits(*engine, p, 5));
  }
  OutboxRelayOptions options;
  options.brokers = bed_.cluster->bootstrap_servers();
  options.kafka_config = {{"log_level", "3"}};
  options.idle_wait = absl::Milliseconds(10);
  auto relay = OutboxRelay::Create(engine.get(), options);
  ASSERT_TRUE(relay.ok()) << relay.status();
  absl::Status ran;
  std::thread run([&] { ran = (*relay)->Run(); });
  EXPECT_TRUE(
      test::WaitUntil([&] { return engine->GetStats()->outbox_pending == 0; },
                      absl::Seconds(30)));
  (*relay)->Stop();
  run.join();
  EXPECT_TRUE(ran.ok()) << ran;
  EXPECT_EQ((*relay)->stats().published, 5 * kPartitions);
  const std::map<std::string, int> counts = test::MessageIdCounts(
      bed_.cluster->bootstrap_servers(), kDownstream, "read_committed");
  EXPECT_THAT(counts, SizeIs(5 * kPartitions));
  EXPECT_THAT(test::NotOnce(counts), IsEmpty());
}

INSTANTIATE_TEST_SUITE_P(Shards, KafkaShardedEngineTest,
                         ::testing::Values(2, 4));

TEST(KafkaShardedEngineOptionsTest, ShardsGetTheirOwnTransactionalIds) {
  EXPECT_EQ(ShardTransactionalId("idem.g.m", 0), "idem.g.m-shard-000");
  EXPECT_EQ(ShardTransactionalId("idem.g.m", 17), "idem.g.m-shard-017");
  EXPECT_NE(ShardTransactionalId("x", 1), ShardTransactionalId("x", 2));
}

}  // namespace
}  // namespace idem::kafka
