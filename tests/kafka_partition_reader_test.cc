// PartitionReader (kafka/partition_reader.h) reads to the end of the log
// only once the last stable offset has passed it: records of a transaction
// still open there are not yet decided, and a read that took the last
// stable offset for the end would miss whatever that transaction's
// neighbours committed after it (another relay's progress on a shared
// partition, the changelog of a member whose previous owner's transaction
// is open).
//
// librdkafka 2.0.2's mock cluster keeps no last stable offset (it answers
// the high watermark), so an open transaction is emulated through
// PartitionReaderHooks::stable_offset: the brokers' answer while it is open.

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kafka/partition_reader.h"
#include "tests/testing/kafka_test_util.h"

namespace idem {
namespace {

using ::idem::kafka::LogRecord;
using ::idem::kafka::PartitionReader;
using ::idem::kafka::PartitionReaderHooks;
using ::testing::HasSubstr;

constexpr char kReaderTopic[] = "progress";

class KafkaPartitionReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    test::StartKafka(kReaderTopic, 1, bed_);
    ASSERT_NE(bed_.cluster, nullptr);
    std::vector<kafka::OutgoingRecord> records;
    for (int i = 0; i < 5; ++i) {
      kafka::OutgoingRecord record;
      record.topic = kReaderTopic;
      record.partition = 0;
      record.key = absl::StrCat("k", i);
      record.value = absl::StrCat(i);
      records.push_back(record);
    }
    ASSERT_TRUE(bed_.producer->Produce(records).ok());
  }

  // Reads the partition with `hooks`; the records' values, or the error.
  absl::StatusOr<std::vector<std::string>> ReadAll(PartitionReaderHooks hooks,
                                                   absl::Duration timeout) {
    auto reader = PartitionReader::Create(bed_.cluster->bootstrap_servers(),
                                          {{"log_level", "3"}}, hooks);
    if (!reader.ok()) return reader.status();
    std::vector<std::string> values;
    absl::Status read =
        (*reader)->Read(kReaderTopic, 0, 0, timeout, [&](const LogRecord& r) {
          values.emplace_back(r.record.value);
          return absl::OkStatus();
        });
    if (!read.ok()) return read;
    return values;
  }

  // The brokers' answer while a transaction holds the last stable offset
  // two records before the end, until `open_for` has passed.
  static PartitionReaderHooks OpenFor(absl::Duration open_for) {
    PartitionReaderHooks hooks;
    hooks.stable_offset = [until = absl::Now() + open_for](
                              const std::string&, int32_t, int64_t stable,
                              int64_t end) {
      return absl::Now() < until ? end - 2 : stable;
    };
    return hooks;
  }

  test::KafkaTestBed bed_;
};

TEST_F(KafkaPartitionReaderTest,
       ReadWaitsUntilTheLastStableOffsetPassesTheEnd) {
  const absl::Time start = absl::Now();
  absl::StatusOr<std::vector<std::string>> values =
      ReadAll(OpenFor(absl::Milliseconds(500)), absl::Seconds(10));
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_THAT(*values, ::testing::ElementsAre("0", "1", "2", "3", "4"));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(500));
}

// The broken twin takes the last stable offset for the end and misses the
// records after it.
TEST_F(KafkaPartitionReaderTest,
       BrokenVariantReadEndingAtTheLastStableOffsetMissesRecords) {
  PartitionReaderHooks hooks = OpenFor(absl::Seconds(5));
  hooks.stable_offset_is_the_end = true;
  absl::StatusOr<std::vector<std::string>> values =
      ReadAll(hooks, absl::Seconds(10));
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_THAT(*values, ::testing::SizeIs(3));
}

TEST_F(KafkaPartitionReaderTest,
       ReadWhoseTransactionStaysOpenFailsWithADeadlineNamingIt) {
  absl::StatusOr<std::vector<std::string>> values =
      ReadAll(OpenFor(absl::Minutes(5)), absl::Seconds(1));
  EXPECT_EQ(values.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(values.status().message(), HasSubstr("last stable offset"));
  EXPECT_THAT(values.status().message(), HasSubstr("still open"));
}

}  // namespace
}  // namespace idem
