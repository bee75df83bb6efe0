// idem::kafka::Record and the user code a Consumer calls on it: the handler,
// the ID function and the dead-letter function (idem/kafka/consumer.h).
// Plain value types and function types, below the consumer as idem/message.h
// is below idem/engine.h.

#ifndef IDEM_KAFKA_RECORD_H_
#define IDEM_KAFKA_RECORD_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "idem/txn.h"

namespace idem::kafka {

// One Kafka record as a handler sees it. Its views point into librdkafka's
// message and are valid only during the call that received the Record.
struct Record {
  std::string_view topic;
  int32_t partition = 0;
  int64_t offset = -1;
  std::string_view key;    // empty if the record has no key
  std::string_view value;  // empty if the record has no value
  // Milliseconds since the epoch as the record carries it; -1 if none.
  int64_t timestamp_ms = -1;
  // The record's headers in order (names may repeat; a null value is empty).
  std::vector<std::pair<std::string_view, std::string_view>> headers;
  // The dedupe ID the consumer derived (see ConsumerOptions::id_header);
  // empty while ConsumerOptions::id_function runs.
  std::string_view id;

  // The value of the last header named `name`, or nullopt.
  std::optional<std::string_view> Header(std::string_view name) const;
};

// User code run once per new message ID (see idem::Handler; with
// ConsumerOptions::workers > 1, on several threads at once): return OK to
// commit the Txn's writes.
using Handler = absl::FunctionRef<absl::Status(const Record&, Txn&)>;

// Derives a record's dedupe ID. A non-OK status (or an ID that is empty or
// longer than kMaxIdBytes) sends the record to the dead-letter path.
using IdFunction = std::function<absl::StatusOr<std::string>(const Record&)>;

// Receives a record that was given up on and why. Return OK once the record
// is safely parked; the consumer then moves past it. A non-OK status stops
// the batch (PollBatch returns it) and the record is retried later.
using DeadLetterFunction =
    std::function<absl::Status(const Record&, const absl::Status& error)>;

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_RECORD_H_
