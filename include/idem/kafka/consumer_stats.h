// What a Consumer reports (idem/kafka/consumer.h): BatchReport for one
// PollBatch call, ConsumerStats and its PartitionLag since Create. Plain
// value types.

#ifndef IDEM_KAFKA_CONSUMER_STATS_H_
#define IDEM_KAFKA_CONSUMER_STATS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"

namespace idem::kafka {

// What one PollBatch call did.
struct BatchReport {
  int64_t records = 0;        // records polled and handled
  int64_t processed = 0;      // handler ran and committed
  int64_t duplicates = 0;     // suppressed: the ID was seen
  int64_t dead_lettered = 0;  // given up on and passed to the dead-letter path
  int64_t retries = 0;        // extra attempts of failed records
  int64_t non_retriable = 0;  // of dead_lettered: non_retriable_codes or
                              // idem::PermanentError
  int64_t outbox_published = 0;  // outbox entries the relay published
  bool rebalanced = false;       // an assignment or revocation happened
};

// How far one assigned partition is behind the head of its log.
struct PartitionLag {
  std::string topic;
  int32_t partition = 0;
  // The log's end (the offset the next produced record gets), as of the
  // last fetch response; -1 until one arrived.
  int64_t high_watermark = -1;
  // The next offset the engine would process: its committed offset + 1;
  // -1 if it has none for the partition.
  int64_t next_offset = -1;
  // high_watermark - next_offset (at least 0) when both are known; -1 if
  // the watermark is unknown; high_watermark if the engine has no offset
  // (an upper bound).
  int64_t lag = -1;
};

// Totals since Create.
struct ConsumerStats {
  int64_t records = 0;
  int64_t processed = 0;
  int64_t duplicates = 0;
  int64_t dead_lettered = 0;
  int64_t retries = 0;
  int64_t outbox_published = 0;
  int64_t batches = 0;
  int64_t assignments = 0;
  int64_t revocations = 0;
  int64_t kafka_commit_errors = 0;
  // Errors librdkafka reported and recovers from by itself (broker down,
  // unknown topic...), and the last one's text.
  int64_t kafka_errors = 0;
  std::string last_kafka_error;
  // Wall time spent processing batches (Engine calls, and also retry
  // backoff and dead-lettering) versus in librdkafka (polling, joining the
  // group, committing).
  absl::Duration engine_time;
  absl::Duration kafka_time;
  // Per assigned partition, sorted, as of the stats() call.
  std::vector<PartitionLag> lag;
  // Records dead-lettered at once for a handler error with a non-retriable
  // code (ConsumerOptions::non_retriable_codes) or an idem::PermanentError;
  // also in dead_lettered.
  int64_t non_retriable = 0;
  // Changelog mode: partitions checked on assignment, those restored, the
  // changelog records read and the state entries and dedupe records
  // restored, and the time spent.
  int64_t restore_checks = 0;
  int64_t restores = 0;
  int64_t restore_records_read = 0;
  int64_t restored_records = 0;
  absl::Duration restore_time;
  // Changelog mode: steps of checks that went on between polls
  // (ConsumerOptions::restore_step_records), and the partitions whose check
  // is under way, paused, as of the stats() call.
  int64_t restore_steps = 0;
  int64_t partitions_restoring = 0;
  // Standby copies (ConsumerOptions::standby_partitions): rounds that
  // brought a copy up to its changelog's end, changelog records read by
  // them, and rounds that failed (also in kafka_errors and
  // last_kafka_error).
  int64_t standby_updates = 0;
  int64_t standby_records_read = 0;
  int64_t standby_errors = 0;
  // PollBatch errors that Run rode out (retried after a pause), also in
  // kafka_errors and last_kafka_error.
  int64_t run_retries = 0;
  // Outbox entries the relay gave up on and published to
  // dead_letter_topic (outbox_max_attempts), of outbox_published.
  int64_t outbox_dead_lettered = 0;
  // Times the input was paused because the outbox held more than
  // max_outbox_pending entries.
  int64_t backpressure_pauses = 0;
  // Changelog mode: relay rounds at which this member found it was no
  // longer in the group as its coordinator sees it (it stalled past
  // max.poll.interval.ms, or the group moved on without it), so it dropped
  // its changelog entries unpublished (docs/scale-out.md, "Zombies").
  int64_t membership_lost = 0;
  // transactional_output in changelog mode: outbox entries dropped
  // unpublished because this member was fenced or a round failed (see
  // transactional_output).
  int64_t outbox_dropped = 0;
  // ConsumerOptions::timer_handler: timers fired, fires that failed
  // transiently (the timer stays), and the largest lag of a fired timer in
  // the last call that fired one (its domain's time when it fired minus its
  // fire_at).
  int64_t timers_fired = 0;
  int64_t timer_failures = 0;
  absl::Duration timer_lag;
};

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_CONSUMER_STATS_H_
