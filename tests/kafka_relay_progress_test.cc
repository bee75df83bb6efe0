// A transactional relay's progress (kafka/relay_progress.h) lives on a
// partition of the progress topic chosen by its transactional.id, so that a
// restarting relay's read of its progress, which waits until every
// transaction open on that partition is decided, never waits for another
// relay's open transaction on a partition of its own.
//
// librdkafka 2.0.2's mock cluster keeps no last stable offset, so another
// relay's open transaction is emulated through PartitionReaderHooks::
// stable_offset: the brokers' answer for its partition while it is open.

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/kafka/outbox_relay.h"
#include "kafka/partition_reader.h"
#include "kafka/relay_progress.h"
#include "tests/testing/engine_test_util.h"
#include "tests/testing/kafka_test_util.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

using ::idem::kafka::LogRecord;
using ::idem::kafka::OutboxRelay;
using ::idem::kafka::OutboxRelayOptions;
using ::idem::kafka::PartitionReader;
using ::idem::kafka::PartitionReaderHooks;
using ::idem::kafka::ReadRelayProgress;
using ::idem::kafka::RelayProgress;
using ::idem::kafka::RelayProgressPartition;

constexpr char kProgressTopic[] = "progress.shared";
constexpr char kOutputTopic[] = "outputs";
constexpr int kProgressPartitions = 4;
constexpr absl::Duration kReadTimeout = absl::Seconds(2);

// Two transactional.ids whose progress partitions differ among
// `partitions` (the same two if none of 100 candidates does: the tests
// below then fail).
std::pair<std::string, std::string> IdsApart(int32_t partitions) {
  const std::string first = "relay-a";
  for (int i = 0; i < 100; ++i) {
    std::string second = absl::StrCat("relay-b", i);
    if (RelayProgressPartition(second, partitions) !=
        RelayProgressPartition(first, partitions)) {
      return {first, second};
    }
  }
  ADD_FAILURE() << "every ID hashes to one progress partition";
  return {first, first};
}

// Hooks under which a transaction stays open on `partition` (its last
// stable offset held one record before the end; every other partition is
// decided).
PartitionReaderHooks OpenOn(int32_t partition) {
  PartitionReaderHooks hooks;
  hooks.stable_offset = [partition](const std::string&, int32_t p,
                                    int64_t stable, int64_t end) {
    return p == partition && end > 0 ? end - 1 : stable;
  };
  return hooks;
}

class KafkaRelayProgressTest : public ::testing::Test {
 protected:
  void SetUp() override {
    test::StartKafka("unused", 1, bed_);
    ASSERT_NE(bed_.cluster, nullptr);
    ASSERT_TRUE(bed_.cluster->CreateTopic(kOutputTopic, 1).ok());
  }

  // Commits `count` messages to a fresh store, each emitting one record,
  // and drains them through a transactional relay `id` whose progress
  // goes to `progress_topic`.
  void PublishThrough(const std::string& id, const std::string& progress_topic,
                      int count) {
    ASSERT_OPEN(engine, dir_.Sub(id), Options());
    for (int i = 0; i < count; ++i) {
      const std::string message_id = absl::StrCat(id, "-", i);
      Message m;
      m.id = message_id;
      absl::StatusOr<Result> r =
          engine->Process(m, [&](const Message&, Txn& txn) {
            txn.Emit(kOutputTopic, m.id, "v");
            return absl::OkStatus();
          });
      ASSERT_TRUE(r.ok()) << r.status();
    }
    OutboxRelayOptions options;
    options.brokers = bed_.cluster->bootstrap_servers();
    options.kafka_config = {{"log_level", "3"}};
    options.transactional_id = id;
    options.progress_topic = progress_topic;
    auto relay = OutboxRelay::Create(engine.get(), options);
    ASSERT_TRUE(relay.ok()) << relay.status();
    absl::StatusOr<kafka::RelayReport> drained = (*relay)->Drain();
    ASSERT_TRUE(drained.ok()) << drained.status();
    EXPECT_EQ(drained->published, count);
  }

  // The keys of the records on `partition` of `topic`.
  std::vector<std::string> KeysOn(const std::string& topic, int32_t partition) {
    std::vector<std::string> keys;
    auto reader = PartitionReader::Create(bed_.cluster->bootstrap_servers(),
                                          {{"log_level", "3"}});
    EXPECT_TRUE(reader.ok()) << reader.status();
    if (!reader.ok()) return keys;
    absl::Status read = (*reader)->Read(topic, partition, 0, kReadTimeout,
                                        [&](const LogRecord& r) {
                                          keys.emplace_back(r.record.key);
                                          return absl::OkStatus();
                                        });
    EXPECT_TRUE(read.ok()) << read;
    return keys;
  }

  absl::StatusOr<RelayProgress> Progress(const std::string& topic,
                                         const std::string& id,
                                         PartitionReaderHooks hooks = {}) {
    return ReadRelayProgress(bed_.cluster->bootstrap_servers(),
                             {{"log_level", "3"}}, topic, id, kReadTimeout,
                             std::move(hooks));
  }

  util::TempDir dir_;
  test::KafkaTestBed bed_;
};

TEST_F(KafkaRelayProgressTest, EachRelayRecordsItsProgressOnItsOwnPartition) {
  ASSERT_TRUE(
      bed_.cluster->CreateTopic(kProgressTopic, kProgressPartitions).ok());
  const auto [a, b] = IdsApart(kProgressPartitions);
  ASSERT_NO_FATAL_FAILURE(PublishThrough(a, kProgressTopic, 5));
  ASSERT_NO_FATAL_FAILURE(PublishThrough(b, kProgressTopic, 7));
  const int32_t pa = RelayProgressPartition(a, kProgressPartitions);
  const int32_t pb = RelayProgressPartition(b, kProgressPartitions);
  EXPECT_THAT(KeysOn(kProgressTopic, pa), ::testing::Each(a));
  EXPECT_THAT(KeysOn(kProgressTopic, pb), ::testing::Each(b));
  EXPECT_THAT(KeysOn(kProgressTopic, pa), ::testing::Not(::testing::IsEmpty()));
  absl::StatusOr<RelayProgress> progress = Progress(kProgressTopic, b);
  ASSERT_TRUE(progress.ok()) << progress.status();
  EXPECT_EQ(progress->position, 7u);
  EXPECT_EQ(progress->partition, pb);
}

TEST_F(KafkaRelayProgressTest,
       ProgressReadDoesNotWaitForAnotherRelaysOpenTransaction) {
  ASSERT_TRUE(
      bed_.cluster->CreateTopic(kProgressTopic, kProgressPartitions).ok());
  const auto [a, b] = IdsApart(kProgressPartitions);
  ASSERT_NO_FATAL_FAILURE(PublishThrough(a, kProgressTopic, 5));
  ASSERT_NO_FATAL_FAILURE(PublishThrough(b, kProgressTopic, 7));
  // Relay a is in the middle of a transaction that stays open; relay b
  // restarts and reads its progress.
  absl::StatusOr<RelayProgress> progress =
      Progress(kProgressTopic, b,
               OpenOn(RelayProgressPartition(a, kProgressPartitions)));
  ASSERT_TRUE(progress.ok()) << progress.status();
  EXPECT_EQ(progress->position, 7u);
}

// The broken twin: progress kept on one partition for every relay (a topic
// of one partition, as every relay's progress was before) makes relay b's
// read wait for relay a's open transaction, and fail once it waited for
// the read's timeout.
TEST_F(KafkaRelayProgressTest,
       BrokenVariantSharedProgressPartitionWaitsForAnotherRelaysTransaction) {
  ASSERT_TRUE(bed_.cluster->CreateTopic(kProgressTopic, 1).ok());
  const auto [a, b] = IdsApart(kProgressPartitions);
  ASSERT_NO_FATAL_FAILURE(PublishThrough(a, kProgressTopic, 5));
  ASSERT_NO_FATAL_FAILURE(PublishThrough(b, kProgressTopic, 7));
  absl::StatusOr<RelayProgress> progress =
      Progress(kProgressTopic, b, OpenOn(0));
  EXPECT_EQ(progress.status().code(), absl::StatusCode::kDeadlineExceeded)
      << progress.status();
}

TEST_F(KafkaRelayProgressTest,
       ProgressAnEarlierVersionKeptOnPartitionZeroIsRead) {
  ASSERT_TRUE(
      bed_.cluster->CreateTopic(kProgressTopic, kProgressPartitions).ok());
  std::string id = "relay-a";
  for (int i = 0;
       i < 100 && RelayProgressPartition(id, kProgressPartitions) == 0; ++i) {
    id = absl::StrCat("relay-a", i);
  }
  ASSERT_TRUE(
      bed_.producer
          ->Produce({kafka::RelayProgressRecord(kProgressTopic, 0, id, 42)})
          .ok());
  absl::StatusOr<RelayProgress> progress = Progress(kProgressTopic, id);
  ASSERT_TRUE(progress.ok()) << progress.status();
  EXPECT_EQ(progress->position, 42u);
  EXPECT_NE(progress->partition, 0);
}

}  // namespace
}  // namespace idem
