// From librdkafka messages to idem: the Record a handler sees, and the
// dedupe ID of a record (ConsumerOptions::id_function, else the id_header,
// else the record's position). Pure functions; thread-safe.

#ifndef IDEM_KAFKA_RECORD_IDS_H_
#define IDEM_KAFKA_RECORD_IDS_H_

#include <librdkafka/rdkafka.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "idem/kafka/consumer_options.h"

namespace idem::kafka {

// A Record viewing `message`'s bytes (valid while `message` lives); id empty.
// REQUIRES: message->err == RD_KAFKA_RESP_ERR_NO_ERROR.
Record RecordFromMessage(const rd_kafka_message_t& message);

// The ID of a record without an ID header: "<topic>/<partition>/<offset>".
std::string PositionId(std::string_view topic, int32_t partition,
                       int64_t offset);

// The ID under which a dead-lettered record's offset is committed. It differs
// from every ID the record itself could have, so the record's own ID is not
// marked seen. Starts with "idem.dead-letter/".
std::string DeadLetterId(std::string_view topic, int32_t partition,
                         int64_t offset);

// The record's dedupe ID per `options`. kInvalidArgument (naming the record)
// if the ID is empty or longer than kMaxIdBytes; id_function's own error,
// prefixed with the record's position, if it fails.
absl::StatusOr<std::string> DeriveId(const Record& record,
                                     const ConsumerOptions& options);

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_RECORD_IDS_H_
