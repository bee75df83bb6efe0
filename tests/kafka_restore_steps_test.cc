// Restores between polls (ConsumerOptions::restore_step_records) against
// librdkafka's mock cluster: a member that takes over a partition with a
// changelog of 25,000 records restores it in steps of 1,000 while its other
// partitions are processed, within one rebalance, and ends with exact
// state; the broken variant that restores in the rebalance callback
// processes nothing meanwhile. (librdkafka 2.0.2's mock keeps at most 5 MiB
// of a partition, about 30,000 changelog records, and drops the oldest
// beyond: a larger changelog would be truncated, which a restore refuses.)

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "idem/logger.h"
#include "idem/partition_state.h"
#include "kafka/consumer_hooks.h"
#include "kafka/partition_reader.h"
#include "tests/testing/changelog_test_base.h"
#include "tests/testing/kafka_test_util.h"

namespace idem {
namespace {

using ::idem::kafka::RestoreReport;
using ::idem::test::AddMessage;
using ::idem::test::kChangelog;
using ::idem::test::kPartitions;
using ::idem::test::kTopic;
using ::idem::test::Stream;

// Partition 0's records each write this many keys besides their total,
// so its changelog grows by that many records per record.
constexpr int kBulkWrites = 100;
constexpr int kBulkKeys = 5000;
constexpr int kBulkRecords = 250;  // 25,000 changelog records
constexpr int64_t kStepRecords = 1000;

// ApplyInPartition, and on partition 0 kBulkWrites keys "bulk/<n>" set to
// the record's ID.
absl::Status ApplyWithBulk(const kafka::Record& record, Txn& txn) {
  if (absl::Status s = test::ApplyInPartition(record, txn); !s.ok()) return s;
  if (record.partition != 0) return absl::OkStatus();
  PartitionTxn partition(txn, record.topic, record.partition);
  for (int i = 0; i < kBulkWrites; ++i) {
    const int64_t key = (record.offset * kBulkWrites + i) % kBulkKeys;
    partition.Put(absl::StrCat("bulk/", key), record.id);
  }
  return absl::OkStatus();
}

// `hooks` with partition 0's restore paced: it applies what it read every
// kStepRecords and pauses kChunkPause after each such chunk, so it lasts
// seconds, longer than the first fetch of partitions 1 and 2 takes however
// loaded the machine is (unpaced, a loaded run restored all of it before
// that fetch returned, and nothing could flow meanwhile).
constexpr absl::Duration kChunkPause = absl::Milliseconds(100);
kafka::ConsumerHooks PacedRestore(kafka::ConsumerHooks hooks = {}) {
  hooks.restore_chunk_records = kStepRecords;
  hooks.restore_step = [](const char* step) {
    if (std::string_view(step) == "chunk") absl::SleepFor(kChunkPause);
  };
  return hooks;
}

// `count` messages "<prefix>-<i>" on `partition`, each 10th followed by a
// producer duplicate.
void AddMessages(Stream& stream, const std::string& prefix, int32_t partition,
                 int count) {
  for (int i = 0; i < count; ++i) {
    const std::string id = absl::StrCat(prefix, "-", partition, "-", i);
    AddMessage(stream, id, partition, 1 + i % 7, false);
    if (i % 10 == 9) AddMessage(stream, id, partition, 1 + i % 7, true);
  }
}

class KafkaRestoreStepsTest : public test::ChangelogTestBase {
 protected:
  // What member B saw while it took over from A.
  struct Takeover {
    RestoreReport partition0;
    absl::Status polled;  // PollUntil's status
    // Records of partitions 1 and 2 B handled before partition 0's restore
    // was done.
    int64_t handled_during_restore = 0;
    kafka::ConsumerStats stats;
  };

  // Member A builds partition 0's changelog of over 25,000 records and
  // leaves; then `flowing` records on every partition follow (none on
  // partition 0 unless `flowing0`). Returns A's store; `all` is everything
  // produced.
  std::unique_ptr<Engine> BuildLargeChangelog(Stream& all, int flowing0 = 0) {
    AddMessages(all, "bulk", 0, kBulkRecords);
    AddMessages(all, "small", 1, 50);
    AddMessages(all, "small", 2, 50);
    Produce(all);
    std::unique_ptr<Engine> a = OpenStore("a");
    EXPECT_NE(a, nullptr);
    if (a == nullptr) return nullptr;
    std::vector<RestoreReport> ignored;
    ConsumeUntil(*a, Handled(all), &ignored, {}, ApplyWithBulk);
    absl::StatusOr<kafka::Watermarks> marks = ChangelogMarks(0);
    EXPECT_TRUE(marks.ok()) << marks.status();
    if (marks.ok()) {
      EXPECT_EQ(marks->low, 0);  // all of it kept
      EXPECT_GE(marks->high, kBulkRecords * kBulkWrites);
    }
    Stream flowing;
    AddMessages(flowing, "flowing", 0, flowing0);
    AddMessages(flowing, "flowing", 1, 1000);
    AddMessages(flowing, "flowing", 2, 1000);
    Produce(flowing);
    Append(all, flowing);
    return a;
  }

  // B's options: max.poll.interval.ms=10000, restores in steps of 1,000.
  kafka::ConsumerOptions TakerOptions() {
    kafka::ConsumerOptions options = MemberOptions(&reports_);
    options.kafka_config.push_back({"max.poll.interval.ms", "10000"});
    options.restore_step_records = kStepRecords;
    return options;
  }

  // BuildLargeChangelog, then member B, with an empty store and `hooks`,
  // takes every partition over and handles everything (unless
  // `expect_success` is false: then it stops at the first failed poll).
  // `logger`, if set, is B's.
  Takeover TakeOver(const kafka::ConsumerHooks& hooks, Logger* logger = nullptr,
                    bool expect_success = true) {
    Takeover takeover;
    Stream all;
    std::unique_ptr<Engine> a = BuildLargeChangelog(all);
    std::unique_ptr<Engine> b = OpenStore("b");
    EXPECT_NE(b, nullptr);
    if (a == nullptr || b == nullptr) return takeover;
    kafka::ConsumerOptions options = TakerOptions();
    if (logger != nullptr) {
      options.logger = logger;
      // librdkafka's debug lines of topics, among them a broker thread's
      // as it serves a seek.
      options.kafka_config.push_back({"debug", "topic"});
      options.kafka_config.push_back({"log_level", "7"});
    }
    // The handler may run on the workers.
    std::atomic<bool> restored0{false};
    std::atomic<int64_t> handled_during_restore{0};
    options.on_restore = [&](const RestoreReport& report) {
      if (report.partition == 0) {
        takeover.partition0 = report;
        restored0 = true;
      }
    };
    auto handler = [&](const kafka::Record& record, Txn& txn) {
      if (record.partition != 0 && !restored0) ++handled_during_restore;
      return ApplyWithBulk(record, txn);
    };
    auto consumer = kafka::CreateConsumerWithHooks(b.get(), options, hooks);
    EXPECT_TRUE(consumer.ok()) << consumer.status();
    if (!consumer.ok()) return takeover;
    takeover.polled = test::PollUntil(
        **consumer, handler, [&] { return Handled(*b) >= Handled(all); },
        absl::Seconds(120));
    if (!expect_success) return takeover;
    EXPECT_TRUE(takeover.polled.ok()) << takeover.polled;
    takeover.stats = (*consumer)->stats();
    takeover.handled_during_restore = handled_during_restore;
    EXPECT_TRUE((*consumer)->Close().ok());
    EXPECT_TRUE(restored0);
    ExpectExact(*b, all);
    EXPECT_EQ(BulkKeys(*b), BulkKeys(*a));
    return takeover;
  }

  absl::StatusOr<kafka::Watermarks> ChangelogMarks(int32_t partition) {
    auto reader = kafka::PartitionReader::Create(
        bed_.cluster->bootstrap_servers(), {{"log_level", "3"}});
    if (!reader.ok()) return reader.status();
    return (*reader)->GetWatermarks(kChangelog, partition, absl::Seconds(10));
  }

  // Partition 0's "bulk/" keys and values.
  static std::map<std::string, std::string> BulkKeys(Engine& engine) {
    std::map<std::string, std::string> keys;
    absl::StatusOr<PartitionSnapshot> snapshot =
        engine.ExportPartition(kTopic, 0);
    EXPECT_TRUE(snapshot.ok()) << snapshot.status();
    if (!snapshot.ok()) return keys;
    for (const auto& [key, value] : snapshot->entries) {
      if (key.starts_with("bulk/")) keys[key] = value;
    }
    EXPECT_EQ(keys.size(), static_cast<size_t>(kBulkKeys));
    return keys;
  }

  std::vector<RestoreReport> reports_;
};

// B restores partition 0 (over 25,000 changelog records) in steps of
// 1,000 between polls; partitions 1 and 2 are checked at once and their
// records handled meanwhile; one assignment, no other rebalance.
TEST_F(KafkaRestoreStepsTest, RestoreOfALargePartitionLetsTheOthersFlow) {
  const Takeover takeover = TakeOver(PacedRestore());
  RecordProperty("restore_steps", takeover.stats.restore_steps);
  RecordProperty("handled_during_restore", takeover.handled_during_restore);
  RecordProperty("restore_ms",
                 absl::ToInt64Milliseconds(takeover.partition0.duration));
  EXPECT_TRUE(takeover.partition0.restored);
  EXPECT_GE(takeover.partition0.records_read, kBulkRecords * kBulkWrites);
  EXPECT_GT(takeover.handled_during_restore, 0);
  EXPECT_GE(takeover.stats.restore_steps, 20);
  EXPECT_EQ(takeover.stats.partitions_restoring, 0);
  EXPECT_EQ(takeover.stats.assignments, 1);
  EXPECT_EQ(takeover.stats.revocations, 0);
}

// The same with workers: records of the partitions checked at once run on
// the workers while partition 0 is restored between polls.
TEST_F(KafkaRestoreStepsTest, RestoreWithWorkersLetsTheOthersFlow) {
  workers_ = 4;
  const Takeover takeover = TakeOver(PacedRestore());
  EXPECT_TRUE(takeover.partition0.restored);
  EXPECT_GT(takeover.handled_during_restore, 0);
  EXPECT_GE(takeover.stats.restore_steps, 20);
  EXPECT_EQ(takeover.stats.assignments, 1);
}

// The broken variant restores in the rebalance callback: nothing of
// partitions 1 and 2 is handled until partition 0 is restored, which the
// check above catches.
TEST_F(KafkaRestoreStepsTest,
       BrokenVariantRestoreInTheCallbackBlocksTheOthers) {
  const Takeover takeover =
      TakeOver(PacedRestore({.restore_in_callback = true}));
  EXPECT_TRUE(takeover.partition0.restored);
  EXPECT_EQ(takeover.handled_during_restore, 0);
  EXPECT_EQ(takeover.stats.restore_steps, 0);
}

// A logger that holds each line in which a librdkafka broker thread serves
// a seek ("Seek <topic> [<partition>] to offset <o> in state <s>", a debug
// line of the "topic" context; librdkafka calls the log callback on the
// thread that logs) for 50 ms: a broker thread busy for longer than
// librdkafka 2.0.2 waits for a seek's reply (10 ms for 10 s asked), as on a
// loaded machine or while it reconnects after an outage.
class SlowSeekLogger : public Logger {
 public:
  void Log(LogSeverity, std::string_view line) override {
    if (line.find("Seek ") != std::string_view::npos &&
        line.find(" in state ") != std::string_view::npos) {
      seeks_served_.fetch_add(1);
      absl::SleepFor(absl::Milliseconds(50));
    }
  }
  int seeks_served() const { return seeks_served_.load(); }

 private:
  std::atomic<int> seeks_served_{0};
};

// The restore's seek (to the start of the partition's records once it is
// restored) is served slowly by librdkafka: the member goes on, and ends
// with exact state.
TEST_F(KafkaRestoreStepsTest,
       SeekServedSlowlyByLibrdkafkaDoesNotStopTheMember) {
  SlowSeekLogger logger;
  const Takeover takeover = TakeOver({}, &logger);
  EXPECT_TRUE(takeover.partition0.restored);
  EXPECT_GE(logger.seeks_served(), 1) << "no seek was held: nothing tested";
}

// The broken twin waits for the seek's reply, as the consumer did before,
// and stops for good when it comes after librdkafka's wait.
TEST_F(KafkaRestoreStepsTest,
       BrokenVariantSeekWaitingForTheReplyStopsTheMember) {
  SlowSeekLogger logger;
  const Takeover takeover = TakeOver({.seek_waits_for_replies = true}, &logger,
                                     /*expect_success=*/false);
  EXPECT_EQ(takeover.polled.code(), absl::StatusCode::kDeadlineExceeded)
      << takeover.polled;
  EXPECT_THAT(takeover.polled.message(), ::testing::HasSubstr("rewinding"));
}

// Pause of a partition whose restore goes on: it stays paused once restored
// (none of its new records is handled, the others' are) until Resume.
TEST_F(KafkaRestoreStepsTest, RestorePausedByTheApplicationStaysPaused) {
  Stream all;
  std::unique_ptr<Engine> a = BuildLargeChangelog(all, /*flowing0=*/100);
  std::unique_ptr<Engine> b = OpenStore("b");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  auto consumer = kafka::Consumer::Create(b.get(), TakerOptions());
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  int64_t handled0 = 0;
  auto handler = [&](const kafka::Record& record, Txn& txn) {
    if (record.partition == 0) ++handled0;
    return ApplyWithBulk(record, txn);
  };
  // The first poll assigns; partition 0's restore has just begun.
  ASSERT_TRUE(test::PollUntil(**consumer, handler, [&] {
                return (*consumer)->stats().partitions_restoring == 1;
              }).ok());
  ASSERT_TRUE((*consumer)->Pause(kTopic, 0).ok());
  const int64_t before = handled0;
  ASSERT_TRUE(test::PollUntil(
                  **consumer, handler,
                  [&] {
                    return (*consumer)->stats().partitions_restoring == 0 &&
                           Handled(*b) >= Handled(all) - 110;
                  },
                  absl::Seconds(120))
                  .ok());
  for (int i = 0; i < 20; ++i)
    ASSERT_TRUE((*consumer)->PollBatch(handler).ok());
  EXPECT_EQ(handled0, before);  // restored, and still paused
  ASSERT_TRUE((*consumer)->Resume(kTopic, 0).ok());
  ASSERT_TRUE(test::PollUntil(**consumer, handler, [&] {
                return Handled(*b) >= Handled(all);
              }).ok());
  EXPECT_GT(handled0, before);
  ASSERT_TRUE((*consumer)->Close().ok());
  ExpectExact(*b, all);  // A never saw partition 0's new records
}

// A member that closes halfway through a restore (its store holding part of
// the changelog's copy, without an epoch) commits nothing of it; back on the
// same store, it restores the partition again and its state is exact.
TEST_F(KafkaRestoreStepsTest, RestoreCutShortByACloseIsDoneAgain) {
  Stream all;
  std::unique_ptr<Engine> a = BuildLargeChangelog(all);
  std::unique_ptr<Engine> b = OpenStore("b");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  kafka::ConsumerOptions options = TakerOptions();
  {
    kafka::ConsumerHooks hooks;
    hooks.restore_chunk_records = 2500;  // part of the copy in the store
    auto consumer = kafka::CreateConsumerWithHooks(b.get(), options, hooks);
    ASSERT_TRUE(consumer.ok()) << consumer.status();
    ASSERT_TRUE(test::PollUntil(**consumer, test::ApplyInPartition, [&] {
                  return (*consumer)->stats().restore_steps >= 5;
                }).ok());
    EXPECT_EQ((*consumer)->stats().partitions_restoring, 1);
    ASSERT_TRUE((*consumer)->Close().ok());
  }
  std::vector<RestoreReport> restored;
  options.on_restore = [&](const RestoreReport& report) {
    restored.push_back(report);
  };
  auto consumer = kafka::Consumer::Create(b.get(), options);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  ASSERT_TRUE(test::PollUntil(
                  **consumer, ApplyWithBulk,
                  [&] { return Handled(*b) >= Handled(all); },
                  absl::Seconds(120))
                  .ok());
  ASSERT_TRUE((*consumer)->Close().ok());
  bool restored0 = false;
  for (const RestoreReport& r : restored) {
    if (r.partition == 0) restored0 = r.restored;
  }
  EXPECT_TRUE(restored0);
  ExpectExact(*b, all);
  EXPECT_EQ(BulkKeys(*b), BulkKeys(*a));
}

TEST_F(KafkaRestoreStepsTest, RestoreStepRecordsIsChecked) {
  std::unique_ptr<Engine> engine = OpenStore("s");
  ASSERT_NE(engine, nullptr);
  for (int64_t bad : {int64_t{0}, int64_t{-1}}) {
    kafka::ConsumerOptions options = TakerOptions();
    options.restore_step_records = bad;
    absl::Status s = kafka::Consumer::Create(engine.get(), options).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), ::testing::HasSubstr("restore_step_records"));
  }
}

}  // namespace
}  // namespace idem
