// ChangelogTopics: changelog mode's two topics (ConsumerOptions::
// changelog_topic and its dedupe topic), made ready before the first
// check of a partition: created if missing with one partition per input
// partition (kafka/topic_admin.h), their configuration checked and, where
// that only keeps more, fixed (kafka/topic_config_check.h); and each input
// partition checked to have its changelog partitions, so that an input
// topic grown after its changelog topics were made stops the consumer with
// a clear error rather than leave a partition without changelog.
// Thread-compatible (the consumer's polling thread).

#ifndef IDEM_KAFKA_CHANGELOG_TOPICS_H_
#define IDEM_KAFKA_CHANGELOG_TOPICS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "idem/kafka/consumer_options.h"
#include "kafka/changelog_txn.h"
#include "kafka/partition_reader.h"
#include "kafka/topic_admin.h"

namespace idem::kafka {

class ChangelogTopics {
 public:
  // `options`, `target` and `reader` are borrowed for the object's life.
  // `ttl`: the dedupe window the dedupe topic must keep records for (plus
  // a margin: DedupeTopicRetention). `configs`: how topic configurations
  // are read and changed.
  ChangelogTopics(const ConsumerOptions& options, const ChangelogTarget& target,
                  absl::Duration ttl, PartitionReader* reader,
                  std::shared_ptr<TopicConfigs> configs);

  // The dedupe topic's retention for records of window `ttl`: the window
  // plus the longest a partition may wait for its next owner
  // (max(ttl, 1 h)).
  static absl::Duration DedupeTopicRetention(absl::Duration ttl);

  // OK once both topics exist with at least as many partitions as
  // `input_topic` and their configuration suits; the first successful call
  // does the work, later ones return at once. The errors of
  // CreateTopicIfMissing and EnsureTopicConfig.
  absl::Status Prepare(const std::string& input_topic);

  // OK if both topics have partition `partition` (of `input_topic`),
  // asking the brokers again if the count Prepare found is too small (an
  // operator may have grown them since). kFailedPrecondition naming both
  // topics, their partition count and docs/operations.md's runbook if not.
  // REQUIRES: Prepare succeeded.
  absl::Status Covers(const std::string& input_topic, int32_t partition);

  // Tests only: Prepare takes the input topic to have this many partitions
  // (if > 0), as when it ran before the input topic grew (librdkafka's mock
  // cluster cannot add partitions to a topic).
  void set_input_partitions_for_test(int32_t partitions) {
    input_partitions_for_test_ = partitions;
  }

 private:
  // The smaller partition count of the two topics.
  absl::StatusOr<int32_t> ChangelogPartitions();
  absl::Status EnsureConfig(const std::string& topic, bool compacted,
                            absl::Duration min_retention);
  void Log(LogSeverity severity, const std::string& line);

  const ConsumerOptions& options_;
  const ChangelogTarget& target_;
  const absl::Duration ttl_;
  PartitionReader* const reader_;
  const std::shared_ptr<TopicConfigs> configs_;
  bool ready_ = false;
  int32_t partitions_ = 0;  // of the changelog topics, as last asked
  int32_t input_partitions_for_test_ = 0;
};

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_CHANGELOG_TOPICS_H_
