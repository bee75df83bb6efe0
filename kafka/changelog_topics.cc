#include "kafka/changelog_topics.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kafka/topic_config_check.h"

namespace idem::kafka {
namespace {

// How long a topic request may take.
constexpr absl::Duration kTopicTimeout = absl::Seconds(60);

}  // namespace

ChangelogTopics::ChangelogTopics(const ConsumerOptions& options,
                                 const ChangelogTarget& target,
                                 absl::Duration ttl, PartitionReader* reader,
                                 std::shared_ptr<TopicConfigs> configs)
    : options_(options),
      target_(target),
      ttl_(ttl),
      reader_(reader),
      configs_(std::move(configs)) {}

absl::Duration ChangelogTopics::DedupeTopicRetention(absl::Duration ttl) {
  return ttl + std::max(ttl, absl::Hours(1));
}

absl::Status ChangelogTopics::Prepare(const std::string& input_topic) {
  if (ready_) return absl::OkStatus();
  absl::StatusOr<int32_t> partitions =
      reader_->PartitionCount(input_topic, kTopicTimeout);
  if (!partitions.ok()) return partitions.status();
  if (input_partitions_for_test_ > 0) *partitions = input_partitions_for_test_;
  const absl::Duration retention = DedupeTopicRetention(ttl_);
  const struct {
    const std::string& name;
    ConfigList config;
  } topics[] = {
      {target_.changelog_topic, {{"cleanup.policy", "compact"}}},
      {target_.dedupe_topic,
       {{"cleanup.policy", "delete"},
        {"retention.ms", absl::StrCat(absl::ToInt64Milliseconds(retention))}}},
  };
  for (const auto& [name, config] : topics) {
    if (absl::Status s = CreateTopicIfMissing(
            *reader_, options_.brokers, options_.kafka_config, name,
            *partitions, config, kTopicTimeout);
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = EnsureConfig(target_.changelog_topic,
                                    /*compacted=*/true, absl::ZeroDuration());
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          EnsureConfig(target_.dedupe_topic, /*compacted=*/false, retention);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<int32_t> changelog_partitions = ChangelogPartitions();
  if (!changelog_partitions.ok()) return changelog_partitions.status();
  partitions_ = *changelog_partitions;
  ready_ = true;
  return absl::OkStatus();
}

absl::Status ChangelogTopics::Covers(const std::string& input_topic,
                                     int32_t partition) {
  if (partition < partitions_) return absl::OkStatus();
  absl::StatusOr<int32_t> now = ChangelogPartitions();
  if (!now.ok()) return now.status();
  partitions_ = *now;
  if (partition < partitions_) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "changelog mode: input partition ", input_topic, "/", partition,
      " has no changelog partition: ", target_.changelog_topic, " and ",
      target_.dedupe_topic, " have ", partitions_,
      " partitions (the input topic grew after they were made); add "
      "partitions to both to match the input topic, then start the "
      "consumers again (docs/operations.md, \"The input topic grew\")"));
}

absl::StatusOr<int32_t> ChangelogTopics::ChangelogPartitions() {
  absl::StatusOr<int32_t> changelog =
      reader_->PartitionCount(target_.changelog_topic, kTopicTimeout);
  if (!changelog.ok()) return changelog.status();
  absl::StatusOr<int32_t> dedupe =
      reader_->PartitionCount(target_.dedupe_topic, kTopicTimeout);
  if (!dedupe.ok()) return dedupe.status();
  return std::min(*changelog, *dedupe);
}

absl::Status ChangelogTopics::EnsureConfig(const std::string& topic,
                                           bool compacted,
                                           absl::Duration min_retention) {
  absl::StatusOr<TopicConfigReport> report =
      EnsureTopicConfig(*configs_, {topic, compacted, min_retention});
  if (!report.ok()) return report.status();
  if (!report->checked) {
    Log(LogSeverity::kWarning,
        absl::StrCat("idem: the brokers do not support DescribeConfigs: "
                     "topic ",
                     topic, "'s configuration is not checked"));
  } else if (!report->changed.empty()) {
    Log(LogSeverity::kInfo,
        absl::StrCat("idem: topic ", topic, ": set ",
                     absl::StrJoin(report->changed, ", "),
                     " (the dedupe window and its margin)"));
  }
  return absl::OkStatus();
}

void ChangelogTopics::Log(LogSeverity severity, const std::string& line) {
  LogLine(options_.logger, "ConsumerOptions::logger", severity, line);
}

}  // namespace idem::kafka
