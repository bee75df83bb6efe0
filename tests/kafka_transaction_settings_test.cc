// The transaction settings of transactional output (OutboxRelayOptions::
// transaction_timeout, ConsumerOptions::transaction_timeout) and how a
// round meets the brokers' transactional errors: a retriable or abortable
// one (REBALANCE_IN_PROGRESS from the group coordinator) aborts the round
// and runs it again with the same producer; a fenced producer
// (INVALID_PRODUCER_EPOCH) fails it with kAborted and is created again.
//
// librdkafka 2.0.2's mock cluster checks no group generation and fences no
// producer epoch on its own, so each error is injected
// (MockCluster::FailNextRequests, rd_kafka_mock_push_request_errors) as a
// broker answers it: TxnOffsetCommit refused with REBALANCE_IN_PROGRESS while
// the group rebalances, with INVALID_PRODUCER_EPOCH once a newer producer
// epoch took over. A round sends its offsets before producing its records,
// so a refused round left nothing in the log, which the mock's readers (which
// see aborted records too) can show.

#include <librdkafka/rdkafka.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "idem/kafka/outbox_relay.h"
#include "kafka/consumer_hooks.h"
#include "kafka/outbox_relay_hooks.h"
#include "kafka/transactional_producer.h"
#include "tests/testing/engine_test_util.h"
#include "tests/testing/kafka_test_util.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

using ::idem::kafka::ConsumerOptions;
using ::idem::kafka::GroupOffsets;
using ::idem::kafka::OutboxRelay;
using ::idem::kafka::OutboxRelayHooks;
using ::idem::kafka::OutboxRelayOptions;
using ::idem::kafka::Record;
using ::idem::kafka::RelayReport;
using ::idem::kafka::TransactionalProducer;
using ::idem::test::KafkaTestBed;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::SizeIs;

constexpr int kSettingsPartitions = 3;
constexpr char kSettingsDownstream[] = "ledger-entries";
// Kafka protocol: the API key and error codes injected.
constexpr int16_t kTxnOffsetCommitKey = 28;
constexpr int32_t kRebalanceInProgress = 27;
constexpr int32_t kInvalidProducerEpoch = 47;

class KafkaTransactionSettingsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    test::StartKafka("orders", kSettingsPartitions, bed_);
    ASSERT_NE(bed_.cluster, nullptr);
    ASSERT_TRUE(
        bed_.cluster->CreateTopic(kSettingsDownstream, kSettingsPartitions)
            .ok());
    ASSERT_TRUE(bed_.cluster->CreateTopic("idem.relay.progress", 1).ok());
  }

  // Commits messages "m0".."m<count-1>", each emitting one record.
  static void CommitEmits(Engine& engine, int count) {
    for (int i = 0; i < count; ++i) {
      const std::string id = absl::StrCat("m", i);
      Message m;
      m.id = id;
      absl::StatusOr<Result> r = engine.Process(m, [&](const Message&,
                                                       Txn& txn) {
        txn.Emit(kSettingsDownstream, absl::StrCat("k", i), absl::StrCat(i));
        return absl::OkStatus();
      });
      ASSERT_TRUE(r.ok() && r->outcome == Outcome::kProcessed) << i;
    }
  }

  OutboxRelayOptions RelayOptions(const std::string& id) const {
    OutboxRelayOptions options;
    options.brokers = bed_.cluster->bootstrap_servers();
    options.kafka_config = {{"log_level", "3"}};
    options.transactional_id = id;
    options.max_batch = 10;
    return options;
  }

  // Hooks whose rounds commit offsets of group "stage" (orders/0 at the
  // round's number), as a Consumer's do.
  static OutboxRelayHooks GroupHooks() {
    OutboxRelayHooks hooks;
    hooks.transaction_offsets = [round = 0]() mutable {
      GroupOffsets offsets;
      offsets.group.reset(rd_kafka_consumer_group_metadata_new("stage"));
      offsets.offsets.reset(rd_kafka_topic_partition_list_new(1));
      rd_kafka_topic_partition_list_add(offsets.offsets.get(), "orders", 0)
          ->offset = ++round;
      return absl::StatusOr<GroupOffsets>(std::move(offsets));
    };
    return hooks;
  }

  std::map<std::string, int> IdCounts() {
    return test::MessageIdCounts(bed_.cluster->bootstrap_servers(),
                                 kSettingsDownstream);
  }

  util::TempDir dir_;
  KafkaTestBed bed_;
};

TEST_F(KafkaTransactionSettingsTest,
       TransactionalProducerSetsTheTransactionTimeoutAndDeliveriesWithinIt) {
  const kafka::ConfigList properties = TransactionalProducer::Properties(
      "localhost:9092", {{"log_level", "3"}}, "relay-1",
      OutboxRelayOptions().transaction_timeout);
  EXPECT_THAT(properties, Contains(Pair("transaction.timeout.ms", "10000")));
  EXPECT_THAT(properties, Contains(Pair("delivery.timeout.ms", "10000")));
  EXPECT_THAT(properties, Contains(Pair("transactional.id", "relay-1")));
  // Kafka Streams' default under exactly-once, below librdkafka's 60 s and
  // the group's max.poll.interval.ms (300 s).
  EXPECT_EQ(ConsumerOptions().transaction_timeout, absl::Seconds(10));
  EXPECT_EQ(OutboxRelayOptions().transaction_timeout, absl::Seconds(10));
  // librdkafka accepts what the relay sets, with a timeout of its own.
  ASSERT_OPEN(engine, dir_.Sub("store"), Options());
  OutboxRelayOptions options = RelayOptions("relay-timeout");
  options.transaction_timeout = absl::Seconds(2);
  CommitEmits(*engine, 3);
  auto relay = OutboxRelay::Create(engine.get(), options);
  ASSERT_TRUE(relay.ok()) << relay.status();
  absl::StatusOr<RelayReport> drained = (*relay)->Drain();
  ASSERT_TRUE(drained.ok()) << drained.status();
  EXPECT_EQ(drained->published, 3);
}

TEST_F(KafkaTransactionSettingsTest, TransactionTimeoutOutOfRangeIsRefused) {
  ASSERT_OPEN(engine, dir_.Sub("store"), Options());
  for (absl::Duration bad : {absl::ZeroDuration(), absl::Milliseconds(999),
                             absl::Hours(25), absl::InfiniteDuration()}) {
    OutboxRelayOptions options = RelayOptions("relay-bad");
    options.transaction_timeout = bad;
    absl::Status status = OutboxRelay::Create(engine.get(), options).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(status.message(), HasSubstr("transaction_timeout"));
  }
  OutboxRelayOptions own = RelayOptions("relay-own");
  own.kafka_config.emplace_back("transaction.timeout.ms", "5000");
  absl::Status status = OutboxRelay::Create(engine.get(), own).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("transaction.timeout.ms"));

  // A consumer's, in changelog mode (on an engine that mode accepts).
  ::idem::Options partitioned;
  partitioned.dedupe_scope = DedupeScope::kPartition;
  ASSERT_OPEN(store, dir_.Sub("partitioned"), partitioned);
  auto refusal = [&](const ConsumerOptions& options) {
    absl::Status s = kafka::Consumer::Create(store.get(), options).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    return std::string(s.message());
  };
  ConsumerOptions consumer = test::TestConsumerOptions(bed_, "settings");
  consumer.transactional_output = true;
  consumer.changelog_topic = "orders-state";
  consumer.transaction_timeout = absl::Milliseconds(500);
  EXPECT_THAT(refusal(consumer), HasSubstr("transaction_timeout"));
  // Not below the group's max.poll.interval.ms: librdkafka's default...
  consumer.transaction_timeout = absl::Seconds(300);
  EXPECT_THAT(refusal(consumer), HasSubstr("max.poll.interval.ms (5m)"));
  // ...or kafka_config's.
  consumer.transaction_timeout = absl::Seconds(10);
  consumer.kafka_config.emplace_back("max.poll.interval.ms", "8000");
  EXPECT_THAT(refusal(consumer), HasSubstr("max.poll.interval.ms (8s)"));
  consumer.kafka_config.pop_back();
  consumer.relay_kafka_config.emplace_back("transaction.timeout.ms", "5000");
  EXPECT_THAT(refusal(consumer), HasSubstr("set transaction_timeout"));
  consumer.relay_kafka_config.clear();
  // transaction_interval: > 0 and at most transaction_timeout.
  for (absl::Duration bad : {absl::ZeroDuration(), absl::Milliseconds(-5),
                             absl::Seconds(11), absl::InfiniteDuration()}) {
    consumer.transaction_interval = bad;
    EXPECT_THAT(refusal(consumer), HasSubstr("transaction_interval")) << bad;
  }
}

// Rounds close at ConsumerOptions::transaction_interval or once max_batch
// records were handled since the last one. With an interval of a minute,
// four records' outputs wait in the outbox, and ten more close a round at
// the size bound; the broken twin that runs a round after every batch
// (ConsumerHooks::rounds_every_batch) publishes the four at once. With an
// interval of 300 ms, four records' outputs go out without the size bound.
TEST_F(KafkaTransactionSettingsTest,
       TransactionalRoundsCloseAtTheIntervalOrTheSizeBound) {
  struct Case {
    const char* name;
    absl::Duration interval;
    bool every_batch;
  };
  for (const Case& c : {Case{"minute", absl::Minutes(1), false},
                        Case{"broken variant", absl::Minutes(1), true},
                        Case{"300ms", absl::Milliseconds(300), false}}) {
    SCOPED_TRACE(c.name);
    util::TempDir dir;
    const std::string input = absl::StrCat(
        "interval-", c.interval / absl::Milliseconds(1), "-", c.every_batch);
    ASSERT_TRUE(bed_.cluster->CreateTopic(input, kSettingsPartitions).ok());
    ::idem::Options engine_options;
    engine_options.dedupe_scope = DedupeScope::kPartition;
    ASSERT_OPEN(engine, dir.Sub("store"), engine_options);
    ConsumerOptions options = test::TestConsumerOptions(bed_, input);
    options.topics = {input};
    options.transactional_output = true;
    options.changelog_topic = input + "-state";
    options.max_batch = 10;
    options.transaction_timeout = absl::Minutes(2);
    options.transaction_interval = c.interval;
    kafka::ConsumerHooks hooks;
    hooks.rounds_every_batch = c.every_batch;
    auto consumer =
        kafka::CreateConsumerWithHooks(engine.get(), options, hooks);
    ASSERT_TRUE(consumer.ok()) << consumer.status();
    auto forward = [](const Record& r, Txn& txn) {
      if (absl::Status s = test::ApplyInPartition(r, txn); !s.ok()) return s;
      txn.Emit(kSettingsDownstream, r.key, r.value);
      return absl::OkStatus();
    };
    auto applied = [&] {
      return test::PartitionAppliedCounts(*engine, input, kSettingsPartitions)
          .size();
    };
    auto pending = [&] { return engine->GetStats()->outbox_pending; };
    test::ProducedStream four = test::MakeStream(input, kSettingsPartitions, 4,
                                                 /*duplicate_every=*/0, 8);
    ASSERT_TRUE(bed_.producer->Produce(four.records).ok());
    ASSERT_TRUE(test::PollUntil(**consumer, forward, [&] {
                  return applied() >= 4;
                }).ok());
    if (c.interval == absl::Minutes(1)) {
      for (int i = 0; i < 5; ++i)
        ASSERT_TRUE((*consumer)->PollBatch(forward).ok());
      if (c.every_batch) {
        EXPECT_EQ(pending(), 0u);
      } else {
        EXPECT_GT(pending(), 0u);  // waiting for the interval
      }
      test::ProducedStream ten = test::MakeStream(input, kSettingsPartitions,
                                                  10, /*duplicate_every=*/0, 9);
      ASSERT_TRUE(bed_.producer->Produce(ten.records).ok());
    }
    // The size bound (ten more records) or the interval closes a round.
    EXPECT_TRUE(test::PollUntil(
                    **consumer, forward,
                    [&] { return applied() >= 4 && pending() == 0; },
                    absl::Seconds(30))
                    .ok());
    ASSERT_TRUE((*consumer)->Close().ok());
  }
}

// REBALANCE_IN_PROGRESS for a round's offsets: the round is aborted and run
// again with the same producer, and Drain succeeds. Its broken twin takes
// the error for a fence (kAborted, a new producer), as before.
TEST_F(KafkaTransactionSettingsTest,
       TransactionalRelayRetriesARoundRefusedDuringARebalance) {
  for (bool broken : {false, true}) {
    SCOPED_TRACE(broken ? "broken variant" : "relay");
    util::TempDir dir;
    ASSERT_OPEN(engine, dir.Sub("store"), Options());
    CommitEmits(*engine, 5);
    OutboxRelayHooks hooks = GroupHooks();
    hooks.retriable_errors_fence = broken;
    auto relay = kafka::CreateOutboxRelayWithHooks(
        engine.get(), RelayOptions(absl::StrCat("rebalance-", broken)), hooks);
    ASSERT_TRUE(relay.ok()) << relay.status();
    ASSERT_TRUE(
        bed_.cluster
            ->FailNextRequests(kTxnOffsetCommitKey, {kRebalanceInProgress})
            .ok());
    absl::StatusOr<RelayReport> drained = (*relay)->Drain();
    if (broken) {
      EXPECT_EQ(drained.status().code(), absl::StatusCode::kAborted);
      continue;
    }
    ASSERT_TRUE(drained.ok()) << drained.status();
    EXPECT_EQ(drained->published, 5);
    const kafka::RelayStats stats = (*relay)->stats();
    EXPECT_EQ(stats.retried_rounds, 1);
    EXPECT_EQ(stats.aborted_transactions, 1);
    EXPECT_EQ(stats.producer_restarts, 0);
    EXPECT_EQ(stats.errors, 0);
    // The refused round produced nothing: each output is in the log once.
    std::map<std::string, int> counts = IdCounts();
    EXPECT_THAT(counts, SizeIs(5));
    EXPECT_THAT(test::NotOnce(counts), IsEmpty());
  }
}

// With OutboxRelayHooks::round_ends_after a transactional round ends after
// the last entry that ends a commit: commits of three entries give rounds
// of nine under max_batch 10, and a commit of twelve entries goes whole
// into one round. Its broken twin (no hook) cuts rounds at ten entries,
// through commits.
TEST_F(KafkaTransactionSettingsTest,
       TransactionalRoundsCarryWholeCommitsWhenTheyEndAtCommits) {
  for (bool broken : {false, true}) {
    SCOPED_TRACE(broken ? "broken variant" : "relay");
    util::TempDir dir;
    ASSERT_OPEN(engine, dir.Sub("store"), Options());
    // Commits of 3, 3, 3, 3 and 12 entries; each commit's last is "end".
    for (int commit = 0; commit < 5; ++commit) {
      const std::string id = absl::StrCat("commit", commit);
      Message m;
      m.id = id;
      const int entries = commit == 4 ? 12 : 3;
      ASSERT_TRUE(engine
                      ->Process(m,
                                [&](const Message&, Txn& txn) {
                                  for (int i = 1; i <= entries; ++i) {
                                    txn.Emit(kSettingsDownstream,
                                             i == entries ? "end" : "part",
                                             absl::StrCat(commit, "/", i));
                                  }
                                  return absl::OkStatus();
                                })
                      .ok());
    }
    OutboxRelayHooks hooks;
    if (!broken) {
      hooks.round_ends_after = [](const idem::OutboxEntry& entry) {
        return entry.key == "end";
      };
    }
    std::vector<size_t> rounds;
    hooks.after_round =
        [&](absl::Span<const idem::OutboxEntry* const> published, bool complete,
            bool) {
          if (complete && !published.empty())
            rounds.push_back(published.size());
        };
    auto relay = kafka::CreateOutboxRelayWithHooks(
        engine.get(), RelayOptions(absl::StrCat("commits-", broken)), hooks);
    ASSERT_TRUE(relay.ok()) << relay.status();
    absl::StatusOr<RelayReport> drained = (*relay)->Drain();
    ASSERT_TRUE(drained.ok()) << drained.status();
    EXPECT_EQ(drained->published, 24);
    if (broken) {
      EXPECT_THAT(rounds, ::testing::ElementsAre(10, 10, 4));
    } else {
      EXPECT_THAT(rounds, ::testing::ElementsAre(9, 3, 12));
    }
  }
}

// INVALID_PRODUCER_EPOCH (a newer instance of the transactional.id took
// over) still fails the round as fenced, and the producer is created again.
TEST_F(KafkaTransactionSettingsTest,
       TransactionalRelayFencedByANewerEpochFailsAndStartsAgain) {
  ASSERT_OPEN(engine, dir_.Sub("store"), Options());
  CommitEmits(*engine, 5);
  auto relay = kafka::CreateOutboxRelayWithHooks(
      engine.get(), RelayOptions("epoch"), GroupHooks());
  ASSERT_TRUE(relay.ok()) << relay.status();
  ASSERT_TRUE(
      bed_.cluster
          ->FailNextRequests(kTxnOffsetCommitKey, {kInvalidProducerEpoch})
          .ok());
  absl::StatusOr<RelayReport> fenced = (*relay)->Drain();
  EXPECT_EQ(fenced.status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(fenced.status().message(), HasSubstr("fenced"));
  EXPECT_EQ((*relay)->stats().retried_rounds, 0);
  absl::StatusOr<RelayReport> drained = (*relay)->Drain();
  ASSERT_TRUE(drained.ok()) << drained.status();
  EXPECT_EQ(drained->published, 5);
  EXPECT_EQ((*relay)->stats().producer_restarts, 1);
  EXPECT_THAT(test::NotOnce(IdCounts()), IsEmpty());
}

// A changelog-mode consumer whose round's offsets meet REBALANCE_IN_PROGRESS
// goes on without an error, a lost membership or dropped outputs; its broken
// twin counts it as fenced and drops its pending outputs.
TEST_F(KafkaTransactionSettingsTest,
       TransactionalConsumerRidesOutARebalanceInProgress) {
  for (bool broken : {false, true}) {
    SCOPED_TRACE(broken ? "broken variant" : "consumer");
    util::TempDir dir;
    const std::string changelog = absl::StrCat("orders-state-", broken);
    const std::string input = absl::StrCat("orders-", broken);
    ASSERT_TRUE(bed_.cluster->CreateTopic(input, kSettingsPartitions).ok());
    ::idem::Options engine_options;
    engine_options.dedupe_scope = DedupeScope::kPartition;
    ASSERT_OPEN(engine, dir.Sub("store"), engine_options);
    ConsumerOptions options =
        test::TestConsumerOptions(bed_, absl::StrCat("rebalance-", broken));
    options.topics = {input};
    options.transactional_output = true;
    options.changelog_topic = changelog;
    kafka::ConsumerHooks hooks;
    hooks.relay_retriable_errors_fence = broken;
    auto consumer =
        kafka::CreateConsumerWithHooks(engine.get(), options, hooks);
    ASSERT_TRUE(consumer.ok()) << consumer.status();
    auto forward = [](const Record& r, Txn& txn) {
      if (absl::Status s = test::ApplyInPartition(r, txn); !s.ok()) return s;
      txn.Emit(kSettingsDownstream, r.key, r.value);
      return absl::OkStatus();
    };
    auto applied = [&] {
      return test::PartitionAppliedCounts(*engine, input, kSettingsPartitions)
          .size();
    };
    test::ProducedStream first = test::MakeStream(
        input, kSettingsPartitions, 15, /*duplicate_every=*/0, 4 + broken);
    ASSERT_TRUE(bed_.producer->Produce(first.records).ok());
    ASSERT_TRUE(test::PollUntil(**consumer, forward, [&] {
                  return applied() >= 15;
                }).ok());
    ASSERT_TRUE(
        bed_.cluster
            ->FailNextRequests(kTxnOffsetCommitKey, {kRebalanceInProgress})
            .ok());
    test::ProducedStream second = test::MakeStream(
        input, kSettingsPartitions, 15, /*duplicate_every=*/0, 6 + broken);
    ASSERT_TRUE(bed_.producer->Produce(second.records).ok());
    // Until every record is handled and its outputs published (rounds wait
    // for transaction_interval).
    std::vector<absl::Status> errors;
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while ((applied() < 30 || engine->GetStats()->outbox_pending > 0) &&
           absl::Now() < deadline) {
      absl::StatusOr<kafka::BatchReport> polled =
          (*consumer)->PollBatch(forward);
      if (!polled.ok()) errors.push_back(polled.status());
    }
    const kafka::ConsumerStats stats = (*consumer)->stats();
    ASSERT_TRUE((*consumer)->Close().ok());
    if (broken) {
      EXPECT_THAT(errors, SizeIs(1));
      EXPECT_GE(stats.membership_lost, 1);
      continue;
    }
    EXPECT_THAT(errors, IsEmpty());
    EXPECT_EQ(stats.membership_lost, 0);
    EXPECT_EQ(stats.outbox_dropped, 0);
    EXPECT_EQ(applied(), 30u);
  }
}

}  // namespace
}  // namespace idem
