// CreateTopicIfMissing: makes sure a topic exists with at least a given
// number of partitions, creating it (with topic configuration) through
// Kafka's admin API if it is missing. Thread-safe (a client of its own per
// call).

#ifndef IDEM_KAFKA_TOPIC_ADMIN_H_
#define IDEM_KAFKA_TOPIC_ADMIN_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
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

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_TOPIC_ADMIN_H_
