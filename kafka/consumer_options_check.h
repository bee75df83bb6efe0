// The checks of ConsumerOptions that Consumer::Create makes before it
// touches librdkafka.

#ifndef IDEM_KAFKA_CONSUMER_OPTIONS_CHECK_H_
#define IDEM_KAFKA_CONSUMER_OPTIONS_CHECK_H_

#include "absl/status/status.h"
#include "idem/kafka/consumer_options.h"

namespace idem::kafka {

// kInvalidArgument naming the field (or the kafka_config property) for
// options a Consumer cannot run with; OK otherwise.
// `plain_transactional_output` (ConsumerHooks) lets transactional_output
// go without changelog_topic.
absl::Status ValidateConsumerOptions(const ConsumerOptions& options,
                                     bool plain_transactional_output = false);

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_CONSUMER_OPTIONS_CHECK_H_
