// idem::kafka::OutboxRelay publishes an engine's outbox (idem/outbox.h) to
// Kafka: each entry to the topic named by its destination, keyed by its key,
// with the header `message-id` (the header a Consumer reads IDs from) set to
// the entry's message ID, followed by the entry's own headers (except any
// of that name, which the relay's replaces). An entry without a partition
// (OutboxEntry::partition -1) goes where the Java producer's default
// partitioner would put its key: murmur2(key) & 0x7fffffff modulo the
// partition count (librdkafka's "murmur2_random"; entries without a key go
// to a random partition), so keyed outputs co-partition with topics that
// Java producers write; set "partitioner" in kafka_config to change it. It
// produces
// with an idempotent producer (enable.idempotence=true, acks=all), waits for
// the delivery reports, and then acknowledges (Engine::AckOutbox) the
// longest prefix of entries that were all delivered.
//
// Publishing is at-least-once: a relay that stops between publishing and
// acknowledging (a crash, a delivery error) publishes the same entries again,
// with the same message IDs, so a consumer that dedupes by message-id (an
// idem Consumer) applies each exactly once. With transactional_id it is
// exactly-once for readers with isolation.level=read_committed: each round
// is one Kafka transaction that also records the round's last position in
// progress_topic, and a relay restarted after a crash between a
// transaction's commit and its acknowledgement skips what that transaction
// published (docs/outbox.md, "Transactional output"). A Consumer with
// ConsumerOptions::relay_outbox runs one after each batch; run one yourself
// for an engine that no Consumer drains, or see docs/outbox.md for writing a
// relay to another broker.
//
// On an engine with shards (Options::shards > 1) each shard has its own
// outbox, and the relay is one relay per shard, each with its own producer
// (and, with transactional_id, its own transactional.id,
// "<transactional_id>-shard-NNN", and progress record), run one after
// another: one input partition's outputs keep their order, and a failing
// shard does not hold back the others (docs/kafka.md, "Sharded engines").
//
// Requires the optional idem::kafka library. An OutboxRelay is not
// thread-safe: call it from one thread at a time; only Stop may be called
// from any thread. Several relays may drain one engine (each entry is then
// published by each, still under one message ID). The Engine is borrowed and
// must outlive the relay.

#ifndef IDEM_KAFKA_OUTBOX_RELAY_H_
#define IDEM_KAFKA_OUTBOX_RELAY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "idem/engine.h"
#include "idem/logger.h"
#include "idem/outbox.h"

namespace idem::kafka {

struct OutboxRelayOptions {
  // Kafka bootstrap servers ("host:port,..."). Required.
  std::string brokers;
  // Further librdkafka producer properties (name, value), applied in order
  // after the relay's default partitioner=murmur2_random. enable.idempotence
  // and acks are the relay's own (kInvalidArgument).
  std::vector<std::pair<std::string, std::string>> kafka_config;
  // Most entries per round (one ReadOutbox, one produce, one AckOutbox).
  // Must be >= 1. Default: 500.
  int max_batch = 500;
  // The header that carries the entry's message ID. Must not be empty.
  // Default: "message-id".
  std::string id_header = "message-id";
  // How long Run waits before looking again when the outbox is empty. Must
  // be >= 0 and finite. Default: 100 ms.
  absl::Duration idle_wait = absl::Milliseconds(100);
  // If set, an entry for which it returns true is acknowledged without
  // being published (counted as skipped): for entries that must not reach
  // Kafka any more, such as a changelog's entries for a partition another
  // member owns now. Called on the relay's thread. Default: unset.
  std::function<bool(const OutboxEntry&)> skip;
  // Destinations whose entries of a round are all delivered before the
  // round's other entries are produced: a record published to one of them
  // is in Kafka before any later entry of another destination. Default:
  // none (one produce call per round).
  std::vector<std::string> publish_first;
  // Attempts at publishing an entry that the brokers refuse for good (an
  // unknown topic or partition, a record too large, no authorization:
  // kInvalidArgument, kOutOfRange or kPermissionDenied from the producer)
  // before the relay gives up on it and publishes it to dead_letter_topic
  // instead, so that the entries behind it flow. Transient failures (brokers
  // down, timeouts) never count. 0: never give up (an entry the brokers
  // refuse holds back the outbox until the cause is fixed). Must be >= 0;
  // more than 0 needs dead_letter_topic. Attempts are counted by the relay
  // object: a new relay (after a restart) counts from zero. Default: 0.
  int max_attempts = 0;
  // Where given-up entries go: the entry's key, value and headers, under its
  // message ID (id_header), with headers idem.error (why), idem.destination
  // (the topic it was for), idem.destination.partition (if it named one)
  // and idem.attempts. A record too large (kOutOfRange) goes without its
  // value, with the header idem.value.bytes (its size) instead. Default:
  // empty.
  std::string dead_letter_topic;
  // Exactly-once output: the transactional.id of the relay's producer.
  // Must be stable across restarts of this relay and unique to it (two
  // relays with one ID fence each other). Set, every round is a Kafka
  // transaction: a Consumer's group offsets, the entries, then a progress
  // record (progress_topic), then the commit, and only then AckOutbox. A crash
  // before the commit leaves nothing a read_committed reader sees (the brokers
  // abort it when the next instance starts); a crash after it leaves the
  // progress record, which the next instance reads at Create and acknowledges
  // the entries it covers without publishing them
  // (RelayReport::already_published). A round that fails aborts its transaction
  // and returns the error (kAborted when the producer was fenced by a newer
  // instance, or a consumer group refused the round's offsets); the next round
  // creates the producer again and reads the progress again, so a commit whose
  // outcome was unknown is never published twice. A round whose transaction
  // failed before its commit with an error the brokers call retriable or
  // abortable (REBALANCE_IN_PROGRESS, a coordinator moving, a request timing
  // out) is aborted and run again at once with the same producer, up to
  // kRoundRetries times (RelayStats::retried_rounds), before its error is
  // returned as kUnavailable. Empty: the at-least-once relay. Default:
  // empty.
  std::string transactional_id;
  static constexpr int kRoundRetries = 3;
  // With transactional_id: librdkafka's transaction.timeout.ms, how long
  // the brokers keep a transaction of this producer open before they abort
  // it themselves. That bounds how long a relay killed inside a
  // transaction holds back read_committed readers of its partitions (the
  // last stable offset stays before its records until the abort), and how
  // long a round may take. Kafka Streams sets 10 s under exactly-once;
  // librdkafka's own default is 60 s. Deliveries time out with it too
  // (delivery.timeout.ms). Must be in [1 s, 24 h] (kInvalidArgument); the
  // brokers refuse more than their transaction.max.timeout.ms (15 min by
  // default) at Create. kafka_config must not set transaction.timeout.ms.
  // Default: 10 s.
  absl::Duration transaction_timeout = absl::Seconds(10);
  // With transactional_id: the topic where the relay records its progress
  // (key transactional_id, on the partition its hash picks; see
  // kafka/relay_progress.h and docs/outbox.md). It must
  // exist before Create (kNotFound otherwise) and should be compacted
  // (cleanup.policy=compact), since Create reads it from the start; many
  // relays may share it. Default: "idem.relay.progress".
  std::string progress_topic = "idem.relay.progress";
  // Receives the relay's producer's librdkafka log lines (see
  // Producer::Create); borrowed, must outlive the relay. Default: nullptr
  // (stderr).
  Logger* logger = nullptr;
};

// What one RelayOnce or Drain call did.
struct RelayReport {
  int64_t published = 0;     // entries produced and acknowledged by Kafka
  int64_t acknowledged = 0;  // entries removed from the outbox
  int64_t skipped = 0;       // of acknowledged: not published (skip)
  // Of published: entries given up on and published to dead_letter_topic.
  int64_t dead_lettered = 0;
  // The last position acknowledged; 0 if none was.
  uint64_t last_position = 0;
  // Of acknowledged: entries a transaction had published before a crash
  // let this relay acknowledge them (transactional_id), not published again.
  int64_t already_published = 0;
};

// Totals since Create.
struct RelayStats {
  int64_t rounds = 0;
  int64_t published = 0;
  int64_t acknowledged = 0;
  int64_t skipped = 0;
  int64_t dead_lettered = 0;  // see OutboxRelayOptions::max_attempts
  int64_t already_published = 0;
  // Producers created again after one failed for good (librdkafka's fatal
  // errors: a broken idempotent sequence, or, with transactional_id, a
  // fenced instance); the entries it did not deliver were published again.
  int64_t producer_restarts = 0;
  // With transactional_id: transactions committed, and those aborted.
  int64_t transactions = 0;
  int64_t aborted_transactions = 0;
  // With transactional_id: rounds aborted for a retriable error and run
  // again at once (OutboxRelayOptions::kRoundRetries); each also counts in
  // aborted_transactions.
  int64_t retried_rounds = 0;
  int64_t errors = 0;
  std::string last_error;
};

class OutboxRelay {
 public:
  // Creates the relay and its producer. kInvalidArgument for bad options
  // (naming the field or property), kUnavailable if librdkafka cannot be set
  // up. `engine` is borrowed.
  static absl::StatusOr<std::unique_ptr<OutboxRelay>> Create(
      Engine* engine, const OutboxRelayOptions& options);

  OutboxRelay() = default;
  OutboxRelay(const OutboxRelay&) = delete;
  OutboxRelay& operator=(const OutboxRelay&) = delete;
  virtual ~OutboxRelay() = default;

  // One round: reads up to max_batch entries (durable ones: see
  // Engine::ReadOutbox), publishes them and acknowledges the delivered
  // prefix. Zero published when the outbox is empty. On a delivery error
  // acknowledges the prefix delivered before it and returns the error (the
  // rest is published again by the next round); engine errors as
  // ReadOutbox and AckOutbox.
  virtual absl::StatusOr<RelayReport> RelayOnce() = 0;

  // Rounds until a round finds fewer than max_batch entries (the outbox is
  // drained up to what was committed when it started), or an error. While
  // a full round publishes, the next round's entries are read on a thread
  // of the relay's own (Engine::ReadOutboxAfter); a round that fails drops
  // them, and the next reads the outbox again.
  virtual absl::StatusOr<RelayReport> Drain() = 0;

  // Drains, waiting idle_wait whenever the outbox is empty, until Stop is
  // called (OK) or a round fails (its error).
  virtual absl::Status Run() = 0;

  // Makes Run return after its current round. Safe from any thread.
  virtual void Stop() = 0;

  virtual RelayStats stats() const = 0;
};

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_OUTBOX_RELAY_H_
