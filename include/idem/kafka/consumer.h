// idem::kafka::Consumer is a Kafka consumer with exactly-once effects: it
// wraps librdkafka's high-level (consumer-group) consumer and feeds every
// polled batch to Engine::ProcessBatch, so each record's dedupe record, the
// handler's state writes and the record's offset commit in one write.
//
// - On partition assignment it starts each partition at the engine's
//   CommittedOffset(topic, partition) + 1; only when the engine has no offset
//   does it fall back to the group's committed offset (then
//   `auto.offset.reset`). After a crash the consumer therefore resumes exactly
//   where its state is, whatever Kafka's committed offsets say.
// - After a batch is committed (and, under Durability::kBuffered, durable) it
//   commits the offsets to Kafka too, asynchronously. Those are for lag
//   monitoring and for handing a partition to a consumer with another engine;
//   correctness on one engine does not depend on them.
// - On revocation it finishes the in-flight records of the revoked
//   partitions (with workers, it waits for them: at most 2 * max_batch *
//   workers records are taken in one call) and commits their offsets
//   to Kafka synchronously before releasing them; nothing of a revoked
//   partition commits after that. A lost partition's running handlers are
//   let finish (records not yet started are dropped), and nothing is
//   committed to Kafka for it.
// - A record whose handler keeps failing (or whose ID is unusable) is passed
//   to the dead-letter path after ConsumerOptions::max_attempts, so one poison
//   record cannot stall its partition; see ConsumerOptions::dead_letter.
// - After each batch it publishes what the handlers emitted (Txn::Emit,
//   committed with their records) and the dead letters, through an
//   OutboxRelay (idem/kafka/outbox_relay.h); see ConsumerOptions::relay_outbox.
//
// - With ConsumerOptions::workers > 1, handlers run on that many threads:
//   partitions in parallel (Ordering::kPartition), or, with Ordering::kKey,
//   records of different Kafka keys in parallel even within one partition.
//   Offsets advance only to each partition's low watermark (every record
//   below it has committed); see ConsumerOptions::workers.
//
// Requires the optional idem::kafka library (built when librdkafka is found).
// A Consumer is not thread-safe: call it from one thread at a time (rebalance
// handling runs inside PollBatch, on the calling thread); only Stop may be
// called from any thread at any time. Handlers, the ID function and the
// dead-letter function run on the calling thread when workers is 1, and on
// the consumer's worker threads, concurrently, when it is more. The Engine is
// borrowed and must outlive the Consumer; other threads may use the engine
// meanwhile (several consumers may share one engine).

#ifndef IDEM_KAFKA_CONSUMER_H_
#define IDEM_KAFKA_CONSUMER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "idem/engine.h"
#include "idem/kafka/consumer_options.h"
#include "idem/kafka/consumer_stats.h"
#include "idem/kafka/record.h"
#include "idem/logger.h"
#include "idem/txn.h"

namespace idem::kafka {

class Consumer {
 public:
  // Creates the consumer and subscribes to options.topics; joining the group
  // happens during the first polls. Returns kInvalidArgument for bad options
  // (naming the field or property) and kUnavailable if librdkafka cannot be
  // set up. `engine` is borrowed.
  static absl::StatusOr<std::unique_ptr<Consumer>> Create(
      Engine* engine, const ConsumerOptions& options);

  Consumer() = default;
  Consumer(const Consumer&) = delete;
  Consumer& operator=(const Consumer&) = delete;
  // Closes the consumer (see Close) if it was not closed.
  virtual ~Consumer() = default;

  // Polls up to max_batch records (waiting at most poll_timeout for the
  // first), processes them with `handler` through Engine::ProcessBatch,
  // retries and dead-letters failures, then commits the offsets to Kafka.
  // Rebalances are handled inside the call. Returns what it did; zero
  // records when nothing arrived. On a storage error, a dead-letter failure
  // or a Kafka fatal error, returns it; the partitions of the batch are
  // rewound to the engine's offsets, so the next call retries them. Brokers
  // that are down or unreachable make it return kUnavailable at worst (the
  // outbox could not be published: the batch stays committed, and the next
  // call publishes it; in changelog mode the next call first checks every
  // held partition against its changelog again), never a permanent error;
  // librdkafka reconnects by itself. Causes that cannot pass make the
  // consumer unusable: that call and every later one return the same
  // status, naming the cause: kPermissionDenied when the brokers refuse
  // this consumer access to its group, a topic or the cluster (naming the
  // group, and the topic and partition where known); kNotFound when a
  // subscribed topic stayed unknown for longer than
  // ConsumerOptions::unknown_topic_timeout; kAborted for librdkafka's fatal
  // error (e.g. FENCED_INSTANCE_ID: a static member fenced by another with
  // its group.instance.id). Close it and, once the cause is fixed, create a
  // new one.
  virtual absl::StatusOr<BatchReport> PollBatch(Handler handler) = 0;

  // Calls PollBatch until Stop is called; returns OK after Stop. An error
  // with a cause that can pass (kUnavailable: brokers down or unreachable,
  // or the store; kDeadlineExceeded; kResourceExhausted: a full disk;
  // kUnknown: a failed sync) is counted (ConsumerStats::run_retries) and
  // retried after a pause of 100 ms, doubled after each further failure up
  // to 1 s, and reset by a success; any other error, or one that made the
  // consumer unusable, is returned. Does not close the consumer.
  virtual absl::Status Run(Handler handler) = 0;

  // Makes Run return after its current batch. Safe from any thread and from
  // signal handlers (it sets an atomic flag).
  virtual void Stop() = 0;

  // Commits offsets, leaves the group (so its partitions are reassigned at
  // once) and destroys the librdkafka handle. Idempotent. A member the group
  // no longer counts (its assignment lost, or its commits refused as from
  // an unknown member or an old generation) commits nothing and does not
  // leave: its partitions are released as lost (on_lost).
  virtual absl::Status Close() = 0;

  // The partitions currently assigned to this consumer, sorted.
  virtual std::vector<std::pair<std::string, int32_t>> Assignment() const = 0;

  // Stops fetching (topic, partition): until Resume, PollBatch returns none
  // of its records (records already fetched are dropped and fetched again
  // after Resume, from where processing stopped). Nothing else changes: the
  // partition stays assigned and its offset stays where it is. A rebalance
  // that assigns the partition again starts it unpaused. Pausing a paused
  // partition is OK. kNotFound if the partition is not assigned to this
  // consumer. Call from the thread that calls PollBatch.
  virtual absl::Status Pause(const std::string& topic, int32_t partition) = 0;
  // Fetches (topic, partition) again. Resuming an unpaused partition is OK.
  // kNotFound if it is not assigned to this consumer.
  virtual absl::Status Resume(const std::string& topic, int32_t partition) = 0;

  virtual ConsumerStats stats() const = 0;
};

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_CONSUMER_H_
