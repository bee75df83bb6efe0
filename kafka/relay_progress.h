// Where a transactional outbox relay (OutboxRelayOptions::transactional_id)
// keeps its progress: one record per round in the round's own transaction,
// on a partition of OutboxRelayOptions::progress_topic of its own (its
// transactional.id's hash modulo the topic's partition count), keyed by the
// transactional.id, valued by the last outbox position the round published
// (decimal). A relay restarted after a crash between a transaction's commit
// and its AckOutbox reads the last committed one and acknowledges, without
// publishing them again, the entries up to it.
//
// A progress read stops at nothing undecided: it waits until every
// transaction open on the partition was committed or aborted
// (PartitionReader). On a topic of several partitions, relays whose
// transactional.ids hash apart do not wait for each other's open
// transactions; on one partition they share it, as every relay did before
// the partition was chosen by hash, so a relay without progress of its own
// there reads partition 0 as well (a progress an earlier version wrote).
//
// Pure functions, and one read through a PartitionReader; thread-safe.

#ifndef IDEM_KAFKA_RELAY_PROGRESS_H_
#define IDEM_KAFKA_RELAY_PROGRESS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "idem/kafka/producer.h"
#include "kafka/partition_reader.h"
#include "kafka/rdkafka_util.h"

namespace idem::kafka {

// The partition of a progress topic of `partitions` partitions (> 0) that
// holds `transactional_id`'s progress: stable across processes and
// versions (XXH64 of the ID).
int32_t RelayProgressPartition(std::string_view transactional_id,
                               int32_t partitions);

// The progress record of a round that published up to `position`, on
// `partition` (RelayProgressPartition).
OutgoingRecord RelayProgressRecord(const std::string& progress_topic,
                                   int32_t partition,
                                   const std::string& transactional_id,
                                   uint64_t position);

// A relay's last committed progress and where it keeps it.
struct RelayProgress {
  uint64_t position = 0;  // 0 if it has none
  int32_t partition = 0;  // RelayProgressPartition of its ID
};

// The last committed progress of `transactional_id` in `progress_topic`
// (read with read_committed, waiting for open transactions there: see the
// file comment). kNotFound naming the topic if it does not exist;
// kDataLoss for a progress value that is no position; Kafka errors as
// PartitionReader::Read. `hooks` are the reader's (tests).
absl::StatusOr<RelayProgress> ReadRelayProgress(
    const std::string& brokers, const ConfigList& config,
    const std::string& progress_topic, const std::string& transactional_id,
    absl::Duration timeout, PartitionReaderHooks hooks = {});

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_RELAY_PROGRESS_H_
