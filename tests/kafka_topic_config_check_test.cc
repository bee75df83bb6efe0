// EnsureTopicConfig (kafka/topic_config_check.h) against FakeTopicConfigs:
// a compacted changelog topic is accepted and a deleting one refused naming
// the setting; a dedupe topic's retention too short for the window is
// raised with the topic's other own settings kept, a longer or unbounded
// one is left alone, and one bounded by size is refused; brokers without
// DescribeConfigs leave the topic unchecked.

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kafka/topic_config_check.h"
#include "tests/testing/fake_topic_configs.h"

namespace idem::kafka {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kCheckedChangelog[] = "orders-state";
constexpr char kDedupe[] = "orders-state.dedupe";

TopicNeeds ChangelogNeeds() {
  return {kCheckedChangelog, /*compacted=*/true, {}};
}
TopicNeeds DedupeNeeds(absl::Duration retention) {
  return {kDedupe, /*compacted=*/false, retention};
}

TEST(TopicCheckRulesTest, CompactedChangelogTopicIsAccepted) {
  test::FakeTopicConfigs configs;
  configs.Set(kCheckedChangelog, "cleanup.policy", "compact");
  absl::StatusOr<TopicConfigReport> report =
      EnsureTopicConfig(configs, ChangelogNeeds());
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->checked);
  EXPECT_THAT(report->changed, IsEmpty());
  EXPECT_EQ(configs.replaces(), 0);
}

TEST(TopicCheckRulesTest, DeletingChangelogTopicIsRefusedNamingTheSetting) {
  for (const char* policy : {"delete", "compact,delete", "delete, compact"}) {
    test::FakeTopicConfigs configs;
    configs.Set(kCheckedChangelog, "cleanup.policy", policy);
    absl::StatusOr<TopicConfigReport> report =
        EnsureTopicConfig(configs, ChangelogNeeds());
    EXPECT_EQ(report.status().code(), absl::StatusCode::kFailedPrecondition)
        << policy << ": " << report.status();
    EXPECT_THAT(report.status().message(),
                AllOf(HasSubstr(kCheckedChangelog), HasSubstr("cleanup.policy"),
                      HasSubstr(policy), HasSubstr("\"compact\"")));
    EXPECT_EQ(configs.replaces(), 0) << "the policy is never changed";
  }
  // The brokers' default policy (delete) counts as the topic's.
  test::FakeTopicConfigs defaults;
  EXPECT_EQ(EnsureTopicConfig(defaults, ChangelogNeeds()).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(TopicCheckRulesTest, ShortDedupeRetentionIsRaisedKeepingOtherSettings) {
  test::FakeTopicConfigs configs;
  configs.Set(kDedupe, "retention.ms", "7200000");  // 2 h
  configs.Set(kDedupe, "segment.ms", "600000");
  absl::StatusOr<TopicConfigReport> report =
      EnsureTopicConfig(configs, DedupeNeeds(absl::Hours(96)));
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(report->changed, ElementsAre("retention.ms=345600000"));
  EXPECT_EQ(configs.Value(kDedupe, "retention.ms"), "345600000");
  // AlterConfigs replaces the topic's own settings: the others were passed.
  EXPECT_EQ(configs.Value(kDedupe, "segment.ms"), "600000");
  EXPECT_EQ(configs.replaces(), 1);
  // Checked again, it suits.
  report = EnsureTopicConfig(configs, DedupeNeeds(absl::Hours(96)));
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(report->changed, IsEmpty());
  EXPECT_EQ(configs.replaces(), 1);
}

TEST(TopicCheckRulesTest, RaiseThatWouldLoseASensitiveSettingIsRefused) {
  test::FakeTopicConfigs configs;
  configs.Set(kDedupe, "retention.ms", "7200000");
  configs.Set(kDedupe, "secret.setting", "s3cr3t");
  configs.Hide(kDedupe, "secret.setting");
  absl::StatusOr<TopicConfigReport> report =
      EnsureTopicConfig(configs, DedupeNeeds(absl::Hours(96)));
  EXPECT_EQ(report.status().code(), absl::StatusCode::kFailedPrecondition)
      << report.status();
  EXPECT_THAT(report.status().message(),
              AllOf(HasSubstr("secret.setting"), HasSubstr("345600000")));
  EXPECT_EQ(configs.replaces(), 0);
}

TEST(TopicCheckRulesTest, LongerOrUnboundedRetentionIsLeftAlone) {
  for (const char* ms : {"345600000", "999999999999", "-1"}) {
    test::FakeTopicConfigs configs;
    configs.Set(kDedupe, "retention.ms", ms);
    absl::StatusOr<TopicConfigReport> report =
        EnsureTopicConfig(configs, DedupeNeeds(absl::Hours(96)));
    ASSERT_TRUE(report.ok()) << ms << ": " << report.status();
    EXPECT_THAT(report->changed, IsEmpty()) << ms;
    EXPECT_EQ(configs.Value(kDedupe, "retention.ms"), ms);
  }
  // A compacted dedupe topic deletes nothing: retention does not apply.
  test::FakeTopicConfigs compacted;
  compacted.Set(kDedupe, "cleanup.policy", "compact");
  compacted.Set(kDedupe, "retention.ms", "1000");
  ASSERT_TRUE(EnsureTopicConfig(compacted, DedupeNeeds(absl::Hours(96))).ok());
  EXPECT_EQ(compacted.replaces(), 0);
}

TEST(TopicCheckRulesTest, DedupeRetentionBySizeIsRefused) {
  test::FakeTopicConfigs configs;
  configs.Set(kDedupe, "retention.ms", "-1");
  configs.Set(kDedupe, "retention.bytes", "1073741824");
  absl::StatusOr<TopicConfigReport> report =
      EnsureTopicConfig(configs, DedupeNeeds(absl::Hours(2)));
  EXPECT_EQ(report.status().code(), absl::StatusCode::kFailedPrecondition)
      << report.status();
  EXPECT_THAT(report.status().message(),
              AllOf(HasSubstr(kDedupe), HasSubstr("retention.bytes"),
                    HasSubstr("1073741824")));
}

TEST(TopicCheckRulesTest, BrokersWithoutDescribeConfigsLeaveTheTopicUnchecked) {
  test::FakeTopicConfigs configs;
  configs.FailWith(absl::UnimplementedError("DescribeConfigs not supported"));
  absl::StatusOr<TopicConfigReport> report =
      EnsureTopicConfig(configs, ChangelogNeeds());
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->checked);
  // Any other failure is the check's.
  configs.FailWith(absl::PermissionDeniedError("DESCRIBE_CONFIGS denied"));
  EXPECT_EQ(EnsureTopicConfig(configs, ChangelogNeeds()).status().code(),
            absl::StatusCode::kPermissionDenied);
}

TEST(TopicCheckRulesTest, FailedRaiseNamesWhatItTried) {
  // Describe succeeds, Replace is refused.
  class DenyReplace : public test::FakeTopicConfigs {
   public:
    absl::Status Replace(const std::string&, const ConfigList&) override {
      return absl::PermissionDeniedError("ALTER_CONFIGS denied");
    }
  } deny;
  deny.Set(kDedupe, "retention.ms", "1000");
  absl::StatusOr<TopicConfigReport> report =
      EnsureTopicConfig(deny, DedupeNeeds(absl::Hours(2)));
  EXPECT_EQ(report.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(report.status().message(),
              AllOf(HasSubstr("retention.ms"), HasSubstr("7200000")));
}

}  // namespace
}  // namespace idem::kafka
