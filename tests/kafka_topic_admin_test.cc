// CreateTopicIfMissing and TopicConfigs' admin requests (kafka/
// topic_admin.h), which changelog mode uses for its topics, against
// librdkafka's mock cluster: an existing topic with enough partitions is
// accepted, one with fewer is refused naming both counts, and a
// configuration request is refused at once as unsupported. The creation
// itself is not exercised: the mock cluster has no admin API, and it
// creates a missing topic (with 4 partitions) as soon as a client asks for
// its metadata.

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kafka/partition_reader.h"
#include "kafka/topic_admin.h"
#include "tests/testing/kafka_test_util.h"

namespace idem::kafka {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

class KafkaTopicAdminTest : public ::testing::Test {
 protected:
  void SetUp() override {
    test::StartKafka("input", 3, bed_);
    ASSERT_NE(bed_.cluster, nullptr);
    auto reader = PartitionReader::Create(bed_.cluster->bootstrap_servers(),
                                          {{"log_level", "0"}});
    ASSERT_TRUE(reader.ok()) << reader.status();
    reader_ = *std::move(reader);
  }

  absl::Status Ensure(const std::string& topic, int32_t partitions) {
    return CreateTopicIfMissing(
        *reader_, bed_.cluster->bootstrap_servers(), {{"log_level", "0"}},
        topic, partitions, {{"cleanup.policy", "compact"}}, absl::Seconds(5));
  }

  test::KafkaTestBed bed_;
  std::unique_ptr<PartitionReader> reader_;
};

TEST_F(KafkaTopicAdminTest, ChangelogTopicWithEnoughPartitionsIsKept) {
  ASSERT_TRUE(bed_.cluster->CreateTopic("state", 4).ok());
  EXPECT_TRUE(Ensure("state", 3).ok());
  EXPECT_TRUE(Ensure("state", 4).ok());
}

TEST_F(KafkaTopicAdminTest, ChangelogTopicWithFewerPartitionsIsRefused) {
  ASSERT_TRUE(bed_.cluster->CreateTopic("state", 2).ok());
  absl::Status s = Ensure("state", 3);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr("state"), HasSubstr("2"), HasSubstr("3")));
}

// The mock cluster does not support DescribeConfigs: the request, sent to a
// broker rather than to the (missing) controller, is refused at once as
// unsupported, which changelog mode takes as "not checked".
TEST_F(KafkaTopicAdminTest, TopicCheckMeetsBrokersWithoutDescribeConfigs) {
  ASSERT_TRUE(bed_.cluster->CreateTopic("state", 4).ok());
  std::unique_ptr<TopicConfigs> configs =
      AdminTopicConfigs(bed_.cluster->bootstrap_servers(), {{"log_level", "0"}},
                        absl::Seconds(20));
  const absl::Time start = absl::Now();
  absl::StatusOr<TopicSettings> settings = configs->Describe("state");
  EXPECT_EQ(settings.status().code(), absl::StatusCode::kUnimplemented)
      << settings.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(10)) << "it timed out";
  EXPECT_EQ(configs->Replace("state", {{"retention.ms", "1"}}).code(),
            absl::StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace idem::kafka
