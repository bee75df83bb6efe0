// Producer and MockCluster: argument checks and delivery errors.

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/kafka/mock_cluster.h"
#include "idem/kafka/producer.h"

namespace idem::kafka {
namespace {

using ::testing::HasSubstr;

TEST(MockClusterTest, RejectsBadArguments) {
  EXPECT_EQ(MockCluster::Start(0).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto cluster = MockCluster::Start(1);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_THAT((*cluster)->bootstrap_servers(), HasSubstr(":"));
  EXPECT_EQ((*cluster)->CreateTopic("", 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*cluster)->CreateTopic("t", 0).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE((*cluster)->CreateTopic("t", 2).ok());
  EXPECT_FALSE((*cluster)->CreateTopic("t", 2).ok());
}

TEST(ProducerTest, RejectsBadConfiguration) {
  EXPECT_EQ(Producer::Create("").status().code(),
            absl::StatusCode::kInvalidArgument);
  auto bad = Producer::Create("localhost:9", {{"no.such.property", "1"}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("no.such.property"));
}

TEST(ProducerTest, ReportsAMissingPartition) {
  auto cluster = MockCluster::Start(1);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE((*cluster)->CreateTopic("t", 1).ok());
  auto producer = Producer::Create((*cluster)->bootstrap_servers(),
                                   {{"delivery.timeout.ms", "5000"}});
  ASSERT_TRUE(producer.ok()) << producer.status();
  OutgoingRecord good{.topic = "t", .partition = 0, .key = "k", .value = "v"};
  EXPECT_TRUE((*producer)->Produce({&good, 1}).ok());
  OutgoingRecord missing = good;
  missing.partition = 7;
  absl::Status s = (*producer)->Produce({&missing, 1});
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(s.message(), HasSubstr("producing to t"));
}

}  // namespace
}  // namespace idem::kafka
