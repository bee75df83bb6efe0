// idem::kafka::Producer writes records to Kafka and waits for the brokers'
// acknowledgement: the consumer's dead-letter topic uses it, and so do tests
// and the demo to feed a topic. Idempotent production (enable.idempotence)
// is on, so its own retries never add duplicates.
//
// Requires the optional idem::kafka library. A Producer is safe for
// concurrent access from multiple threads without external synchronization.

#ifndef IDEM_KAFKA_PRODUCER_H_
#define IDEM_KAFKA_PRODUCER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "idem/logger.h"

namespace idem::kafka {

// One record to produce. A plain value type that owns its bytes.
struct OutgoingRecord {
  std::string topic;
  // Target partition; -1 lets librdkafka's partitioner choose from the key.
  int32_t partition = -1;
  std::string key;
  std::string value;
  std::vector<std::pair<std::string, std::string>> headers;
  // Produce a null value (a tombstone for log compaction); `value` is then
  // ignored.
  bool tombstone = false;
  // The record's timestamp (CreateTime), milliseconds since the epoch; 0:
  // librdkafka's, the time it is produced.
  int64_t timestamp_ms = 0;
};

class Producer {
 public:
  // Returns kInvalidArgument for empty brokers or a bad property (named) and
  // kUnavailable if librdkafka cannot be set up. `kafka_config` holds further
  // librdkafka properties (name, value), applied in order. `logger`, if set,
  // receives librdkafka's log lines as ConsumerOptions::logger does (from
  // librdkafka's threads); borrowed, it must outlive the Producer. Without
  // one librdkafka prints them to stderr.
  static absl::StatusOr<std::unique_ptr<Producer>> Create(
      const std::string& brokers,
      const std::vector<std::pair<std::string, std::string>>& kafka_config = {},
      Logger* logger = nullptr);

  Producer() = default;
  Producer(const Producer&) = delete;
  Producer& operator=(const Producer&) = delete;
  // Waits up to 10 s for outstanding deliveries, then destroys the handle.
  virtual ~Producer() = default;

  // Produces `records` in order and returns once every one is acknowledged
  // by its partition leader (acks=all), or the first delivery error
  // (kInvalidArgument for an unknown topic or partition or a record too
  // large; kDeadlineExceeded when delivery.timeout.ms, 30 s unless set in
  // kafka_config, passed; kAborted naming the cause when the producer
  // failed for good, as when its idempotent sequence broke: create a new
  // Producer; kUnavailable otherwise). On error some of the
  // records may have been written.
  virtual absl::Status Produce(absl::Span<const OutgoingRecord> records) = 0;

  // As Produce, and sets `*delivered` to the length of the longest prefix of
  // `records` whose every record was acknowledged (records.size() on OK):
  // what an outbox relay may acknowledge. The default, for Producer
  // implementations outside idem, counts nothing delivered on an error.
  virtual absl::Status ProduceCounted(absl::Span<const OutgoingRecord> records,
                                      size_t* delivered) {
    absl::Status status = Produce(records);
    *delivered = status.ok() ? records.size() : 0;
    return status;
  }
};

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_PRODUCER_H_
