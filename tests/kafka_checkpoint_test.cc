// Changelog checkpoints (kafka/changelog_checkpoint.h) against librdkafka's
// mock cluster: a member that closed with its changelog published restarts
// reading only what follows its checkpoint, and a checkpoint never makes a
// copy that another owner has moved past look current.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "idem/partition_state.h"
#include "kafka/changelog_format.h"
#include "kafka/consumer_hooks.h"
#include "kafka/partition_reader.h"
#include "tests/testing/changelog_test_base.h"
#include "tests/testing/kafka_test_util.h"

namespace idem {
namespace {

using ::idem::kafka::RestoreReport;
using ::idem::test::kChangelog;
using ::idem::test::kPartitions;
using ::idem::test::kTopic;
using ::idem::test::MakeStream;
using ::idem::test::Stream;
using ::testing::IsEmpty;
using ::testing::Not;

class KafkaCheckpointTest : public test::ChangelogTestBase {
 protected:
  // Records in all partitions of the changelog topic.
  int64_t ChangelogRecords() {
    auto reader = kafka::PartitionReader::Create(
        bed_.cluster->bootstrap_servers(), {{"log_level", "3"}});
    EXPECT_TRUE(reader.ok()) << reader.status();
    if (!reader.ok()) return 0;
    int64_t records = 0;
    for (int32_t p = 0; p < kPartitions; ++p) {
      absl::StatusOr<kafka::Watermarks> marks =
          (*reader)->GetWatermarks(kChangelog, p, absl::Seconds(10));
      EXPECT_TRUE(marks.ok()) << marks.status();
      if (marks.ok()) records += marks->high - marks->low;
    }
    return records;
  }

  // The checkpoint `engine` keeps of each partition; nullopt where none.
  static std::vector<std::optional<kafka::ChangelogCheckpoint>> Checkpoints(
      Engine& engine) {
    std::vector<std::optional<kafka::ChangelogCheckpoint>> checkpoints;
    for (int32_t p = 0; p < kPartitions; ++p) {
      absl::StatusOr<std::optional<std::string>> stored =
          engine.GetState(PartitionStatePrefix(kTopic, p) +
                          std::string(kafka::kCheckpointStateKey));
      EXPECT_TRUE(stored.ok()) << stored.status();
      checkpoints.push_back(stored.ok() && stored->has_value()
                                ? kafka::DecodeCheckpoint(**stored)
                                : std::nullopt);
    }
    return checkpoints;
  }

  // Member A processes a stream and leaves; B, with a store of its own,
  // restores, processes a second stream and leaves; A returns with its
  // store (and `returning` hooks), processes a third and leaves. Returns
  // A's restore reports of its return; `all` is every stream.
  std::vector<RestoreReport> OwnerInBetween(
      const kafka::ConsumerHooks& returning, Stream& all) {
    all = MakeStream("first", 60);
    Produce(all);
    std::unique_ptr<Engine> a = OpenStore("a");
    std::vector<RestoreReport> reports;
    EXPECT_NE(a, nullptr);
    if (a == nullptr) return {};
    ConsumeUntil(*a, Handled(all), &reports);
    for (const auto& checkpoint : Checkpoints(*a)) {
      EXPECT_TRUE(checkpoint.has_value());  // written at A's close
    }

    Stream second = MakeStream("second", 60);
    Produce(second);
    Append(all, second);
    std::unique_ptr<Engine> b = OpenStore("b");
    EXPECT_NE(b, nullptr);
    if (b == nullptr) return {};
    ConsumeUntil(*b, Handled(all), &reports);

    Stream third = MakeStream("third", 60);
    Produce(third);
    Append(all, third);
    std::vector<RestoreReport> returned;
    ConsumeUntil(*a, Handled(all), &returned, returning);
    ExpectExact(*a, all);
    return returned;
  }
};

// A member consumes about 100,000 changelog records' worth of input and
// closes; restarted on its store, it reads under 1% of its changelog and
// restores nothing, and its totals stay exact.
TEST_F(KafkaCheckpointTest, RestartAfterACloseReadsUnderOnePercent) {
  Stream all = MakeStream("bulk", 34000);
  Produce(all);
  std::unique_ptr<Engine> a = OpenStore("a");
  ASSERT_NE(a, nullptr);
  std::vector<RestoreReport> first;
  ASSERT_NO_FATAL_FAILURE(ConsumeUntil(*a, Handled(all), &first));
  const int64_t changelog_records = ChangelogRecords();
  ASSERT_GE(changelog_records, 100000);
  for (const auto& checkpoint : Checkpoints(*a)) {
    EXPECT_TRUE(checkpoint.has_value());
  }

  Stream more = MakeStream("more", 30);
  Produce(more);
  Append(all, more);
  std::vector<RestoreReport> restart;
  ASSERT_NO_FATAL_FAILURE(ConsumeUntil(*a, Handled(all), &restart));
  ASSERT_EQ(restart.size(), static_cast<size_t>(kPartitions));
  int64_t read = 0;
  for (const RestoreReport& r : restart) {
    EXPECT_FALSE(r.restored) << r.partition;
    read += r.records_read;
  }
  EXPECT_LT(read, changelog_records / 100)
      << read << " of " << changelog_records << " changelog records read";
  ExpectExact(*a, all);
}

// Another owner held the partitions after A's checkpoint: A, back, finds
// B's commits after its checkpoint, restores, and the changelog's marks
// never go back. The broken variant that trusts its checkpoint without
// reading what follows it keeps A's stale copy: A then publishes commits
// behind B's, which the marks show.
TEST_F(KafkaCheckpointTest, CheckpointIsNotTrustedAfterAnotherOwner) {
  Stream all;
  std::vector<RestoreReport> returned = OwnerInBetween({}, all);
  ASSERT_EQ(returned.size(), static_cast<size_t>(kPartitions));
  for (const RestoreReport& r : returned) EXPECT_TRUE(r.restored);
  EXPECT_THAT(MarksGoingBack(), IsEmpty());
}

TEST_F(KafkaCheckpointTest, BrokenVariantCheckpointSkippingItsTailIsCaught) {
  kafka::ConsumerHooks broken;
  broken.changelog_checkpoint_skips_tail = true;
  Stream all;
  std::vector<RestoreReport> returned = OwnerInBetween(broken, all);
  ASSERT_EQ(returned.size(), static_cast<size_t>(kPartitions));
  for (const RestoreReport& r : returned) EXPECT_FALSE(r.restored);
  EXPECT_THAT(MarksGoingBack(), Not(IsEmpty()));
}

// A handler cannot write the checkpoint key: the record fails with
// kFailedPrecondition and is dead-lettered, nothing of it commits.
TEST_F(KafkaCheckpointTest, HandlersCannotWriteTheCheckpointKey) {
  Stream all = MakeStream("m", 3);
  Produce(all);
  std::unique_ptr<Engine> a = OpenStore("a");
  ASSERT_NE(a, nullptr);
  std::vector<RestoreReport> reports;
  kafka::ConsumerOptions options = MemberOptions(&reports);
  std::vector<absl::Status> dead;
  options.dead_letter = [&](const kafka::Record&, const absl::Status& error) {
    dead.push_back(error);
    return absl::OkStatus();
  };
  auto consumer = kafka::Consumer::Create(a.get(), options);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  absl::Status s = test::PollUntil(
      **consumer,
      [](const kafka::Record& record, Txn& txn) {
        txn.Put(PartitionStatePrefix(record.topic, record.partition) +
                    std::string(kafka::kCheckpointStateKey),
                "0 0 0");
        return absl::OkStatus();
      },
      [&] { return dead.size() >= 3; });
  ASSERT_TRUE(s.ok()) << s;
  for (const absl::Status& error : dead) {
    EXPECT_EQ(error.code(), absl::StatusCode::kFailedPrecondition);
  }
  EXPECT_EQ((*consumer)->stats().processed, 0);
  ASSERT_TRUE((*consumer)->Close().ok());
}

}  // namespace
}  // namespace idem
