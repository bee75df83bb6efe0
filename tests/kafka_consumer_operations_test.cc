// The Kafka consumer's operator controls: on_revoke and on_lost (as Kafka's
// ConsumerRebalanceListener), lag per partition in ConsumerStats, and
// Pause/Resume per partition. Runs against librdkafka's mock cluster.

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "tests/testing/engine_test_util.h"
#include "tests/testing/kafka_test_util.h"
#include "util/temp_dir.h"

namespace idem::kafka {
namespace {

using ::idem::test::ApplyRecord;
using ::idem::test::KafkaTestBed;
using ::idem::test::kTestSessionTimeoutMs;
using ::idem::test::MakeStream;
using ::idem::test::PollUntil;
using ::idem::test::ProducedStream;
using ::idem::test::StartKafka;
using ::idem::test::TestConsumerOptions;
using ::idem::util::TempDir;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;

constexpr int kOperationsPartitions = 4;

class KafkaConsumerOperationsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartKafka("orders", kOperationsPartitions, bed_));
  }

  // `count` records, round-robin over the partitions, with IDs of `seed`.
  void Produce(int count, uint64_t seed) {
    ProducedStream stream =
        MakeStream(bed_.topic, kOperationsPartitions, count, 0, seed);
    absl::Status s = bed_.producer->Produce(stream.records);
    ASSERT_TRUE(s.ok()) << s;
  }

  std::optional<int64_t> Offset(Engine& engine, int32_t partition) {
    absl::StatusOr<std::optional<int64_t>> offset =
        engine.CommittedOffset(bed_.topic, partition);
    EXPECT_TRUE(offset.ok()) << offset.status();
    return offset.ok() ? *offset : std::nullopt;
  }

  TempDir dir_;
  KafkaTestBed bed_;
};

TEST_F(KafkaConsumerOperationsTest, OnRevokeIsCalledPerPartitionOnClose) {
  ASSERT_NO_FATAL_FAILURE(Produce(40, 1));
  ASSERT_OPEN(engine, dir_.Sub("store"), Options());
  ConsumerOptions options = TestConsumerOptions(bed_, "g");
  std::vector<std::pair<std::string, int32_t>> revoked, lost;
  // Each partition's offset is committed to the engine before on_revoke.
  std::map<int32_t, std::optional<int64_t>> offsets_seen;
  options.on_revoke = [&](const std::string& topic, int32_t partition) {
    revoked.emplace_back(topic, partition);
    offsets_seen[partition] = Offset(*engine, partition);
  };
  options.on_lost = [&](const std::string& topic, int32_t partition) {
    lost.emplace_back(topic, partition);
  };
  absl::StatusOr<std::unique_ptr<Consumer>> consumer =
      Consumer::Create(engine.get(), options);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  ASSERT_TRUE(PollUntil(**consumer, ApplyRecord, [&] {
                return (*consumer)->stats().records == 40;
              }).ok());
  EXPECT_THAT(revoked, IsEmpty());
  ASSERT_TRUE((*consumer)->Close().ok());
  std::set<std::pair<std::string, int32_t>> expected,
      got(revoked.begin(), revoked.end());
  for (int32_t p = 0; p < kOperationsPartitions; ++p)
    expected.emplace(bed_.topic, p);
  EXPECT_EQ(got, expected);
  EXPECT_EQ(revoked.size(), expected.size());  // once each
  EXPECT_THAT(lost, IsEmpty());
  for (int32_t p = 0; p < kOperationsPartitions; ++p) {
    EXPECT_EQ(offsets_seen[p], std::optional<int64_t>(9)) << p;
  }
}

// A member that stops polling for longer than max.poll.interval.ms leaves the
// group; its next poll learns that its assignment is lost.
TEST_F(KafkaConsumerOperationsTest, OnLostIsCalledWhenTheAssignmentIsLost) {
  ASSERT_NO_FATAL_FAILURE(Produce(8, 1));
  ASSERT_OPEN(engine, dir_.Sub("store"), Options());
  ConsumerOptions options = TestConsumerOptions(bed_, "g");
  // The shortest librdkafka accepts: the session's.
  options.kafka_config.emplace_back("max.poll.interval.ms",
                                    absl::StrCat(kTestSessionTimeoutMs));
  int revoked = 0;
  std::set<int32_t> lost;
  options.on_revoke = [&](const std::string&, int32_t) { ++revoked; };
  options.on_lost = [&](const std::string&, int32_t partition) {
    lost.insert(partition);
  };
  absl::StatusOr<std::unique_ptr<Consumer>> consumer =
      Consumer::Create(engine.get(), options);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  ASSERT_TRUE(PollUntil(**consumer, ApplyRecord, [&] {
                return (*consumer)->stats().records == 8;
              }).ok());
  // Past max.poll.interval.ms.
  absl::SleepFor(absl::Milliseconds(kTestSessionTimeoutMs) + absl::Seconds(1));
  ASSERT_TRUE(PollUntil(
                  **consumer, ApplyRecord,
                  [&] { return lost.size() == kOperationsPartitions; },
                  absl::Seconds(20))
                  .ok());
  EXPECT_EQ(revoked, 0);
  EXPECT_TRUE((*consumer)->Close().ok());
}

TEST_F(KafkaConsumerOperationsTest, LagPerPartitionFollowsProcessing) {
  ASSERT_NO_FATAL_FAILURE(Produce(100, 1));  // 25 per partition
  ASSERT_OPEN(engine, dir_.Sub("store"), Options());
  ConsumerOptions options = TestConsumerOptions(bed_, "g");
  options.max_batch = 10;
  absl::StatusOr<std::unique_ptr<Consumer>> consumer =
      Consumer::Create(engine.get(), options);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  // Until the first batch: the fetches that brought it carry watermarks.
  ASSERT_TRUE(PollUntil(**consumer, ApplyRecord, [&] {
                return (*consumer)->stats().records > 0;
              }).ok());
  ConsumerStats stats = (*consumer)->stats();
  ASSERT_EQ(stats.lag.size(), static_cast<size_t>(kOperationsPartitions));
  int64_t behind = 0;
  for (const PartitionLag& lag : stats.lag) {
    EXPECT_EQ(lag.topic, bed_.topic);
    if (lag.high_watermark < 0) {
      EXPECT_EQ(lag.lag, -1);
      continue;
    }
    EXPECT_EQ(lag.high_watermark, 25);
    const std::optional<int64_t> offset = Offset(*engine, lag.partition);
    EXPECT_EQ(lag.next_offset, offset.has_value() ? *offset + 1 : -1);
    EXPECT_EQ(lag.lag, offset.has_value() ? 25 - (*offset + 1) : 25);
    behind += lag.lag;
  }
  EXPECT_GT(behind, 0);

  ASSERT_TRUE(PollUntil(**consumer, ApplyRecord, [&] {
                return (*consumer)->stats().records == 100;
              }).ok());
  stats = (*consumer)->stats();
  for (const PartitionLag& lag : stats.lag) {
    EXPECT_EQ(lag.high_watermark, 25) << lag.partition;
    EXPECT_EQ(lag.next_offset, 25) << lag.partition;
    EXPECT_EQ(lag.lag, 0) << lag.partition;
  }
}

TEST_F(KafkaConsumerOperationsTest, PausedPartitionWaitsUntilResumed) {
  ASSERT_NO_FATAL_FAILURE(Produce(40, 1));  // offsets 0-9 per partition
  ASSERT_OPEN(engine, dir_.Sub("store"), Options());
  absl::StatusOr<std::unique_ptr<Consumer>> consumer =
      Consumer::Create(engine.get(), TestConsumerOptions(bed_, "g"));
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  EXPECT_EQ((*consumer)->Pause(bed_.topic, 0).code(),
            absl::StatusCode::kNotFound);  // not assigned yet
  ASSERT_TRUE(PollUntil(**consumer, ApplyRecord, [&] {
                return (*consumer)->stats().records == 40;
              }).ok());

  ASSERT_TRUE((*consumer)->Pause(bed_.topic, 0).ok());
  ASSERT_TRUE((*consumer)->Pause(bed_.topic, 0).ok());  // again: OK
  ASSERT_NO_FATAL_FAILURE(Produce(40, 2));  // offsets 10-19 per partition
  ASSERT_TRUE(PollUntil(**consumer, ApplyRecord, [&] {
                return (*consumer)->stats().records == 70;
              }).ok());
  // A second of polls more: partition 0 stays where it was.
  EXPECT_EQ(PollUntil(
                **consumer, ApplyRecord, [] { return false; }, absl::Seconds(1))
                .code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ((*consumer)->stats().records, 70);
  EXPECT_EQ(Offset(*engine, 0), 9);
  EXPECT_EQ(Offset(*engine, 1), 19);

  ASSERT_TRUE((*consumer)->Resume(bed_.topic, 0).ok());
  ASSERT_TRUE(PollUntil(**consumer, ApplyRecord, [&] {
                return (*consumer)->stats().records == 80;
              }).ok());
  EXPECT_EQ(Offset(*engine, 0), 19);
  EXPECT_EQ((*consumer)->Resume("other", 0).code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE((*consumer)->Close().ok());
  EXPECT_EQ((*consumer)->Pause(bed_.topic, 0).code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace idem::kafka
