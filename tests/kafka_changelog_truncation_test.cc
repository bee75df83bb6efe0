// A changelog partition whose first records were deleted is reported, never
// restored as if it were whole. librdkafka's mock cluster, like a broker's
// retention, drops a partition's oldest records once it holds more than
// 5 MiB: member A writes more than that into one changelog partition, then
// B, with an empty store, takes the partitions over.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "idem/partition_state.h"
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
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// Messages of the stream, and the padding each writes into its partition's
// state: 2,400 messages over 3 partitions put about 6.4 MiB into each
// changelog partition.
constexpr int kMessages = 2400;
constexpr size_t kPaddingBytes = 8 << 10;

// ApplyInPartition, plus a padding key of the message's own.
absl::Status ApplyPadded(const kafka::Record& record, Txn& txn) {
  if (absl::Status s = test::ApplyInPartition(record, txn); !s.ok()) return s;
  txn.Put(PartitionStatePrefix(record.topic, record.partition) + "pad/" +
              std::string(record.id),
          std::string(kPaddingBytes, 'p'));
  return absl::OkStatus();
}

class KafkaChangelogTruncationTest : public test::ChangelogTestBase {
 protected:
  // A processes the whole stream and leaves, its changelog published.
  void WriteTruncatedChangelog() {
    all_ = MakeStream("first", kMessages);
    Produce(all_);
    a_ = OpenStore("a");
    ASSERT_NE(a_, nullptr);
    std::vector<RestoreReport> reports;
    ASSERT_NO_FATAL_FAILURE(
        ConsumeUntil(*a_, Handled(all_), &reports, {}, ApplyPadded));
    ExpectExact(*a_, all_);
  }

  // The first retained offset of changelog partition `partition`.
  int64_t FirstRetained(int32_t partition) {
    auto reader = kafka::PartitionReader::Create(
        bed_.cluster->bootstrap_servers(), {{"log_level", "3"}});
    EXPECT_TRUE(reader.ok()) << reader.status();
    if (!reader.ok()) return -1;
    absl::StatusOr<kafka::Watermarks> marks =
        (*reader)->GetWatermarks(kChangelog, partition, absl::Seconds(10));
    EXPECT_TRUE(marks.ok()) << marks.status();
    return marks.ok() ? marks->low : -1;
  }

  // B, with an empty store and `hooks`, polls until it handled every record
  // or a poll fails; returns the poll's status.
  absl::Status TakeOver(Engine& b, const kafka::ConsumerHooks& hooks) {
    std::vector<RestoreReport> reports;
    auto consumer =
        kafka::CreateConsumerWithHooks(&b, MemberOptions(&reports), hooks);
    if (!consumer.ok()) return consumer.status();
    absl::Status s = test::PollUntil(
        **consumer, ApplyPadded, [&] { return Handled(b) >= Handled(all_); },
        absl::Seconds(30));
    (*consumer)->Close().IgnoreError();
    return s;
  }

  Stream all_;
  std::unique_ptr<Engine> a_;
};

TEST_F(KafkaChangelogTruncationTest, TruncatedChangelogFailsTheRestore) {
  ASSERT_NO_FATAL_FAILURE(WriteTruncatedChangelog());
  for (int32_t p = 0; p < kPartitions; ++p) {
    ASSERT_GT(FirstRetained(p), 0)
        << "the mock cluster kept all of changelog partition " << p;
  }
  std::unique_ptr<Engine> b = OpenStore("b");
  ASSERT_NE(b, nullptr);
  const absl::Status s = TakeOver(*b, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat(kChangelog, "/")));
  EXPECT_THAT(s.message(), HasSubstr("is truncated"));
  // Nothing was restored or processed from what is left.
  EXPECT_EQ(Handled(*b), 0);
}

// The broken variant reads what is left as if it were the whole log: the
// restore "succeeds", every partition's total (rewritten by each message)
// is there, yet the first messages' effects are gone. This is what the
// check above prevents.
TEST_F(KafkaChangelogTruncationTest,
       BrokenVariantReadingATruncatedChangelogLosesEffects) {
  ASSERT_NO_FATAL_FAILURE(WriteTruncatedChangelog());
  std::unique_ptr<Engine> b = OpenStore("b");
  ASSERT_NE(b, nullptr);
  kafka::ConsumerHooks hooks;
  hooks.changelog_restore_reads_truncated = true;
  const absl::Status s = TakeOver(*b, hooks);
  ASSERT_TRUE(s.ok()) << s;
  ExpectTotals(*b, all_);
  EXPECT_THAT(test::EffectErrors(all_.ids, test::PartitionAppliedCounts(
                                               *b, kTopic, kPartitions)),
              Not(IsEmpty()));
}

}  // namespace
}  // namespace idem
