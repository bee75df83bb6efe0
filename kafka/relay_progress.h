// Where a transactional outbox relay (OutboxRelayOptions::transactional_id)
// keeps its progress: one record per round in the round's own transaction,
// on partition 0 of OutboxRelayOptions::progress_topic, keyed by the
// transactional.id, valued by the last outbox position the round published
// (decimal). A relay restarted after a crash between a transaction's commit
// and its AckOutbox reads the last committed one and acknowledges, without
// publishing them again, the entries up to it.
//
// Pure functions, and one read through a PartitionReader; thread-safe.

#ifndef IDEM_KAFKA_RELAY_PROGRESS_H_
#define IDEM_KAFKA_RELAY_PROGRESS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "idem/kafka/producer.h"
#include "kafka/rdkafka_util.h"

namespace idem::kafka {

// The progress record of a round that published up to `position`.
OutgoingRecord RelayProgressRecord(const std::string& progress_topic,
                                   const std::string& transactional_id,
                                   uint64_t position);

// The last committed progress of `transactional_id` in `progress_topic`
// (read with read_committed); 0 if it has none. kNotFound naming the topic
// if it does not exist; kDataLoss for a progress value that is no position;
// Kafka errors as PartitionReader::Read.
absl::StatusOr<uint64_t> ReadRelayProgress(const std::string& brokers,
                                           const ConfigList& config,
                                           const std::string& progress_topic,
                                           const std::string& transactional_id,
                                           absl::Duration timeout);

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_RELAY_PROGRESS_H_
