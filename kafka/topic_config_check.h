// EnsureTopicConfig: what changelog mode needs of an existing topic's
// configuration, checked through TopicConfigs (kafka/topic_admin.h). It
// fixes what only ever keeps more (a retention too short is raised) and
// refuses the rest naming the setting: the changelog topic must be
// compacted, and the dedupe topic must keep its records for the dedupe
// window plus a margin.

#ifndef IDEM_KAFKA_TOPIC_CONFIG_CHECK_H_
#define IDEM_KAFKA_TOPIC_CONFIG_CHECK_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kafka/topic_admin.h"

namespace idem::kafka {

// What changelog mode needs of one of its topics.
struct TopicNeeds {
  std::string topic;
  // cleanup.policy is exactly "compact": a deleting policy would drop keys'
  // last records, which a restore needs.
  bool compacted = false;
  // Records are kept at least this long: retention.ms is at least this (or
  // -1, forever) and retention.bytes is -1, whenever cleanup.policy
  // deletes. Zero: no need.
  absl::Duration min_retention = absl::ZeroDuration();
};

// What EnsureTopicConfig did.
struct TopicConfigReport {
  // False if the brokers do not support DescribeConfigs: nothing was
  // checked.
  bool checked = false;
  // The settings it changed, as "name=value".
  std::vector<std::string> changed;
};

// Checks `needs.topic` through `configs`. A retention.ms too short is raised
// to needs.min_retention (AlterConfigs, the topic's other own settings
// kept). kFailedPrecondition naming the topic, the setting, its value and
// what it must be for a cleanup.policy that does not suit, or a
// retention.bytes that would delete records early; the admin API's error
// otherwise (kUnavailable, kPermissionDenied, ...).
absl::StatusOr<TopicConfigReport> EnsureTopicConfig(TopicConfigs& configs,
                                                    const TopicNeeds& needs);

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_TOPIC_CONFIG_CHECK_H_
