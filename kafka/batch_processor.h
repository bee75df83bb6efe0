// ProcessRecords runs one polled batch of Kafka records through the retry
// and dead-letter machine the consumers share (retry/retry_rounds.h): it
// derives their IDs, retries failed records (with the records after them in
// the same partition, so each partition's offset only moves past handled
// records), hands records that keep failing to the dead-letter function or
// topic, and waits until the batch is durable. It knows nothing of
// librdkafka, so it is tested on its own. Thread-compatible.

#ifndef IDEM_KAFKA_BATCH_PROCESSOR_H_
#define IDEM_KAFKA_BATCH_PROCESSOR_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "idem/engine.h"
#include "idem/kafka/consumer_options.h"
#include "idem/kafka/consumer_stats.h"
#include "retry/retry_rounds.h"

namespace idem::kafka {

using TopicPartition = std::pair<std::string, int32_t>;

struct ProcessedBatch {
  BatchReport report;
  // Per partition of the batch, the next offset to read (Kafka's committed
  // offset convention): the highest handled offset + 1.
  absl::btree_map<TopicPartition, int64_t> next_offsets;
  // The highest commit sequence of the batch (Result::sequence); 0 if none.
  uint64_t max_sequence = 0;
};

// Adds the record counts of `batch` (records, processed, duplicates,
// dead_lettered, retries, non_retriable) to `sum`.
inline void AddRecordCounts(const BatchReport& batch, BatchReport& sum) {
  sum.records += batch.records;
  retry::AddCounts(batch, sum);
}

// How a consumer's worker runs a group of records
// (ConsumerOptions::workers > 1; kafka/parallel_runner.h).
struct ProcessControls {
  // Checked before each handler call: once it is true (the records'
  // partition was lost), no more handlers run, and ProcessRecords returns
  // kCancelled after committing what already ran.
  const std::atomic<bool>* cancelled = nullptr;
  // If set, the offset each message records in the engine (Message::offset)
  // instead of its record's: the partition's low watermark - 1 under
  // Ordering::kKey (-1: none), as records of one partition commit out of
  // offset order there.
  std::optional<int64_t> stored_offset;
  // Whether to wait until the batch is durable before returning
  // (Engine::WaitDurable). A consumer's workers leave it to the polling
  // thread, which waits once per call for every group (so a group of one
  // record does not wait for a sync of its own).
  bool wait_durable = true;
};

// Processes `records` (Record::id is filled in here) with `handler`, keeping
// each partition's order: once a record fails, the later records of its
// partition wait for it (they are deferred, not failed). A record with an
// unusable ID is dead-lettered at once; a failing one after
// options.max_attempts attempts, options.retry_backoff apart: through
// `dead_letter` if set, otherwise, with options.dead_letter_topic, by
// emitting it to that topic in the commit that moves the offset past it.
// Without either, a record given up on fails the call with kAborted.
// Returns the engine's error, the dead-letter function's error, kAborted,
// kCancelled (controls.cancelled) or kInternal (a dead-letter marker whose
// commit failed); records before the error may be committed (the engine
// deduplicates them when they are processed again). On success every
// record is committed (processed, duplicate or dead-lettered) and, unless
// controls.wait_durable is false, durable.
absl::StatusOr<ProcessedBatch> ProcessRecords(
    Engine& engine, absl::Span<Record> records, const ConsumerOptions& options,
    const DeadLetterFunction& dead_letter, Handler handler,
    const ProcessControls& controls = {});

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_BATCH_PROCESSOR_H_
