// Kafka's admin API, as changelog mode uses it: CreateTopicIfMissing makes
// sure a topic exists with at least a given number of partitions, creating
// it (with topic configuration) if it is missing; TopicConfigs reads and
// replaces an existing topic's configuration (DescribeConfigs,
// AlterConfigs). Thread-safe (a client of its own per call).

#ifndef IDEM_KAFKA_TOPIC_ADMIN_H_
#define IDEM_KAFKA_TOPIC_ADMIN_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kafka/partition_reader.h"
#include "kafka/rdkafka_util.h"

namespace idem::kafka {

// OK if `topic` exists with >= `partitions` partitions, or was created with
// exactly that many and `topic_config` (name, value), e.g.
// {"cleanup.policy", "compact"}. kFailedPrecondition naming both counts if
// it has fewer; the admin request's error (kUnavailable, ...) if creating it
// failed, naming what to create by hand.
absl::Status CreateTopicIfMissing(PartitionReader& reader,
                                  const std::string& brokers,
                                  const ConfigList& client_config,
                                  const std::string& topic, int32_t partitions,
                                  const ConfigList& topic_config,
                                  absl::Duration timeout);

// One setting of a topic's configuration as the brokers describe it.
struct TopicSetting {
  std::string value;
  // Set on the topic itself (not a broker's or the cluster's default).
  bool set_on_topic = false;
  // A sensitive setting, whose value the brokers do not tell (`value` is
  // empty): it cannot be passed along to AlterConfigs.
  bool hidden = false;
};
// A topic's configuration by setting name.
using TopicSettings = absl::flat_hash_map<std::string, TopicSetting>;

// Reads and replaces topics' configurations: the brokers' admin API
// (AdminTopicConfigs), or a test's stand-in (librdkafka's mock cluster has
// no DescribeConfigs). Implementations are thread-compatible.
class TopicConfigs {
 public:
  virtual ~TopicConfigs() = default;

  // `topic`'s configuration. kUnimplemented if the brokers do not support
  // DescribeConfigs; kInvalidArgument for an unknown topic.
  virtual absl::StatusOr<TopicSettings> Describe(const std::string& topic) = 0;

  // Makes `settings` the topic's own settings, in place of all it had (as
  // Kafka's AlterConfigs does: a setting left out returns to its default,
  // so pass those to keep).
  virtual absl::Status Replace(const std::string& topic,
                               const ConfigList& settings) = 0;
};

// TopicConfigs through the admin API of the brokers at `brokers`, each
// request bounded by `timeout`.
std::unique_ptr<TopicConfigs> AdminTopicConfigs(const std::string& brokers,
                                                const ConfigList& client_config,
                                                absl::Duration timeout);

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_TOPIC_ADMIN_H_
