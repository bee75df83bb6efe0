// Small helpers around librdkafka's C API: owning pointers for its handles,
// configuration with error reporting, and conversion of its error codes into
// absl::Status. Thread-safe (no shared state).

#ifndef IDEM_KAFKA_RDKAFKA_UTIL_H_
#define IDEM_KAFKA_RDKAFKA_UTIL_H_

#include <librdkafka/rdkafka.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "idem/logger.h"

namespace idem::kafka {

// librdkafka's reconnect.backoff.max.ms for the adapter's handles (the
// consumer, the relay's producers, partition readers), unless kafka_config
// sets it: librdkafka's default, 10 s, spaces a handle's attempts to reach
// a broker that was down up to 10 s apart, and so delays its return by as
// much; 1 s keeps that within a second for a few attempts a second.
inline constexpr char kReconnectBackoffMaxMs[] = "1000";

struct ConfDeleter {
  void operator()(rd_kafka_conf_t* conf) const { rd_kafka_conf_destroy(conf); }
};
struct HandleDeleter {
  void operator()(rd_kafka_t* rk) const { rd_kafka_destroy(rk); }
};
struct MessageDeleter {
  void operator()(rd_kafka_message_t* m) const { rd_kafka_message_destroy(m); }
};
struct PartitionListDeleter {
  void operator()(rd_kafka_topic_partition_list_t* list) const {
    rd_kafka_topic_partition_list_destroy(list);
  }
};
using ConfPtr = std::unique_ptr<rd_kafka_conf_t, ConfDeleter>;
using HandlePtr = std::unique_ptr<rd_kafka_t, HandleDeleter>;
using MessagePtr = std::unique_ptr<rd_kafka_message_t, MessageDeleter>;
using PartitionListPtr =
    std::unique_ptr<rd_kafka_topic_partition_list_t, PartitionListDeleter>;

using ConfigList = std::vector<std::pair<std::string, std::string>>;

// Sets every property of `config` on `conf`, in order. kInvalidArgument
// naming the property and librdkafka's reason for an unknown property or a
// bad value.
absl::Status SetConfig(rd_kafka_conf_t* conf, const ConfigList& config);

// `d` in whole milliseconds for librdkafka's int timeouts and intervals,
// clamped to [0, 2^30] (about 12 days).
int ToKafkaMillis(absl::Duration d);

// librdkafka's syslog levels (0 emergency ... 7 debug) as idem's: 0-3
// kError, 4 kWarning, 5-6 kInfo, 7 kDebug.
LogSeverity SeverityOfSyslogLevel(int level);

// Sends `line` to `logger` (nothing if null) as a call into user code named
// `owner`: a logger that throws loses the line.
void LogLine(Logger* logger, std::string_view owner, LogSeverity severity,
             std::string_view line);

// Sends the log lines of the handle made from `conf` to `logger` ("librdkafka
// FACILITY: text"), a throwing logger losing the line. Uses `conf`'s opaque:
// for handles that keep no opaque of their own.
void SetLogger(rd_kafka_conf_t* conf, Logger* logger);

// Creates a client handle of `type`, taking `conf` (on success and failure
// alike). kUnavailable with librdkafka's reason on failure.
absl::StatusOr<HandlePtr> NewHandle(rd_kafka_type_t type, ConfPtr conf);

// The status code of a librdkafka error: kOk for RD_KAFKA_RESP_ERR_NO_ERROR,
// kInvalidArgument for unknown topics and partitions and bad arguments,
// kOutOfRange for a record too large, kPermissionDenied for a missing
// authorization (topic, group, cluster, transactional ID, delegation token),
// kAlreadyExists for a topic that exists, kUnimplemented for a request the
// brokers do not support, kDeadlineExceeded for timeouts, kUnavailable for
// the rest.
absl::StatusCode KafkaErrorCode(rd_kafka_resp_err_t err);

// OK for RD_KAFKA_RESP_ERR_NO_ERROR; otherwise a status of KafkaErrorCode(err)
// whose message is `context`, ": " and librdkafka's text of `err`.
absl::Status FromKafkaError(rd_kafka_resp_err_t err, std::string_view context);

// The fatal error `rk` stopped on, as "<error name>: <librdkafka's reason>"
// (e.g. "FENCED_INSTANCE_ID: ..."); empty while it has none.
std::string FatalErrorText(rd_kafka_t* rk);

// The number of partitions of `topic` in the brokers' metadata, asked
// through `rk` (one round trip, up to `timeout`); kNotFound if it does not
// exist, else as FromKafkaError.
absl::StatusOr<int32_t> TopicPartitionCount(rd_kafka_t* rk,
                                            const std::string& topic,
                                            absl::Duration timeout);

// As FromKafkaError for an rd_kafka_error_t, which it destroys. OK for null.
absl::Status FromKafkaErrorObject(rd_kafka_error_t* error,
                                  std::string_view context);

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_RDKAFKA_UTIL_H_
