// Changelog mode's topic checks, through the consumer (kafka/
// changelog_topics.h): an existing changelog topic that deletes records is
// refused before anything is processed; a dedupe window raised later
// raises the dedupe topic's retention; an input topic grown past its
// changelog topics stops the consumer naming them, and processes nothing of
// the partitions without changelog. librdkafka's mock cluster has no
// DescribeConfigs: test::FakeTopicConfigs stands in for the brokers'
// configurations (ConsumerHooks::topic_configs), and the consumer on the
// mock itself says it could not check them.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "kafka/changelog_topics.h"
#include "kafka/consumer_hooks.h"
#include "tests/testing/changelog_test_base.h"
#include "tests/testing/fake_topic_configs.h"
#include "tests/testing/kafka_test_util.h"

namespace idem {
namespace {

using ::idem::kafka::RestoreReport;
using ::idem::test::kChangelog;
using ::idem::test::kTopic;
using ::idem::test::MakeStream;
using ::idem::test::Stream;
using ::testing::AllOf;
using ::testing::HasSubstr;

const std::string kDedupeTopic = kafka::DedupeTopicOf(kChangelog);

std::string Millis(absl::Duration d) {
  return absl::StrCat(absl::ToInt64Milliseconds(d));
}

class KafkaTopicCheckTest : public test::ChangelogTestBase {
 protected:
  // The configurations an operator gave the topics: what changelog mode
  // creates them with, for a window of `ttl`.
  void ConfigureTopicsFor(absl::Duration ttl) {
    configs_->Set(kChangelog, "cleanup.policy", "compact");
    configs_->Set(kDedupeTopic, "cleanup.policy", "delete");
    configs_->Set(kDedupeTopic, "retention.ms",
                  Millis(kafka::ChangelogTopics::DedupeTopicRetention(ttl)));
    configs_->Set(kDedupeTopic, "segment.ms", "600000");
  }

  // A member with window `ttl` on the store `store` polls until it handled
  // `records` records or a poll fails; returns the poll's status.
  absl::Status Consume(Engine& store, absl::Duration ttl, int64_t records,
                       kafka::ConsumerHooks hooks,
                       const std::string& changelog = kChangelog) {
    std::vector<RestoreReport> reports;
    kafka::ConsumerOptions options = MemberOptions(&reports);
    options.ttl = ttl;
    options.changelog_topic = changelog;
    auto consumer = kafka::CreateConsumerWithHooks(&store, options, hooks);
    if (!consumer.ok()) return consumer.status();
    absl::Status s = test::PollUntil(
        **consumer, test::ApplyInPartition,
        [&] { return Handled(store) >= records; }, absl::Seconds(30));
    (*consumer)->Close().IgnoreError();
    return s;
  }

  kafka::ConsumerHooks FakeConfigs() {
    kafka::ConsumerHooks hooks;
    hooks.topic_configs = configs_;
    return hooks;
  }

  std::shared_ptr<test::FakeTopicConfigs> configs_ =
      std::make_shared<test::FakeTopicConfigs>();
};

TEST_F(KafkaTopicCheckTest, DeletingChangelogTopicIsRefusedBeforeProcessing) {
  ConfigureTopicsFor(absl::Hours(1));
  configs_->Set(kChangelog, "cleanup.policy", "delete");
  const Stream all = MakeStream("first", 60);
  Produce(all);
  std::unique_ptr<Engine> a = OpenStore("a");
  ASSERT_NE(a, nullptr);
  const absl::Status s =
      Consume(*a, absl::Hours(1), Handled(all), FakeConfigs());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr(kChangelog), HasSubstr("cleanup.policy"),
                    HasSubstr("\"delete\"")));
  EXPECT_EQ(Handled(*a), 0);
  EXPECT_EQ(configs_->Value(kChangelog, "cleanup.policy"), "delete");
}

TEST_F(KafkaTopicCheckTest, RaisedDedupeWindowRaisesTheDedupeTopicRetention) {
  ConfigureTopicsFor(absl::Hours(1));
  Stream all = MakeStream("first", 60);
  Produce(all);
  std::unique_ptr<Engine> a = OpenStore("a");
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(Consume(*a, absl::Hours(1), Handled(all), FakeConfigs()).ok());
  EXPECT_EQ(configs_->replaces(), 0) << "the topics suited the window";

  // The window grows to two days: the dedupe records must be kept longer.
  const Stream more = MakeStream("second", 60);
  Produce(more);
  Append(all, more);
  const absl::Status s =
      Consume(*a, absl::Hours(48), Handled(all), FakeConfigs());
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(configs_->Value(kDedupeTopic, "retention.ms"),
            Millis(absl::Hours(96)));
  EXPECT_EQ(configs_->Value(kDedupeTopic, "segment.ms"), "600000");
  EXPECT_EQ(configs_->replaces(), 1);
  EXPECT_TRUE(
      logger_.Has(LogSeverity::kInfo,
                  absl::StrCat("retention.ms=", Millis(absl::Hours(96)))));
  ExpectExact(*a, all);
}

// The changelog topics were made when the input topic had 2 partitions
// (ConsumerHooks::changelog_topics_input_partitions: the mock cannot add
// partitions to a topic); it has 3 now.
TEST_F(KafkaTopicCheckTest, InputTopicGrownPastItsChangelogStopsTheConsumer) {
  const std::string changelog = "grown-state";
  ASSERT_TRUE(bed_.cluster->CreateTopic(changelog, 2).ok());
  ASSERT_TRUE(
      bed_.cluster->CreateTopic(kafka::DedupeTopicOf(changelog), 2).ok());
  const Stream all = MakeStream("first", 60);
  Produce(all);
  std::unique_ptr<Engine> a = OpenStore("a");
  ASSERT_NE(a, nullptr);
  kafka::ConsumerHooks hooks;  // the mock's own (missing) DescribeConfigs
  hooks.changelog_topics_input_partitions = 2;
  const absl::Status s =
      Consume(*a, absl::Hours(1), Handled(all), hooks, changelog);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(
      s.message(),
      AllOf(HasSubstr(absl::StrCat(kTopic, "/2")), HasSubstr(changelog),
            HasSubstr("have 2 partitions"), HasSubstr("The input topic grew")));
  // Nothing of the partition without changelog was processed.
  absl::StatusOr<std::optional<int64_t>> offset = a->CommittedOffset(kTopic, 2);
  ASSERT_TRUE(offset.ok()) << offset.status();
  EXPECT_FALSE(offset->has_value()) << **offset;
  // The mock cluster has no DescribeConfigs: the consumer said so.
  EXPECT_TRUE(
      logger_.Has(LogSeverity::kWarning, "do not support DescribeConfigs"));
}

}  // namespace
}  // namespace idem
