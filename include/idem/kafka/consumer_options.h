// idem::kafka::ConsumerOptions, what a Consumer is created with
// (idem/kafka/consumer.h), and the reports its callbacks receive for each
// assigned partition: PartitionStart and, in changelog mode, RestoreReport.
// Plain value types.

#ifndef IDEM_KAFKA_CONSUMER_OPTIONS_H_
#define IDEM_KAFKA_CONSUMER_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "idem/kafka/record.h"
#include "idem/logger.h"
#include "idem/timers.h"
#include "idem/txn.h"

namespace idem::kafka {

// Which records of a Consumer with ConsumerOptions::workers > 1 may run at
// the same time.
enum class Ordering {
  // A partition's records run one after another, in offset order;
  // different partitions run in parallel.
  kPartition,
  // Records with the same Kafka key (the same bytes; a record without a key
  // counts as the empty key) of one partition run one after another, in
  // offset order; different keys run in parallel, also within a partition.
  kKey,
};

// What the consumer decided for one assigned partition.
struct PartitionStart {
  std::string topic;
  int32_t partition = 0;
  // The engine's committed offset, and the group's committed offset as the
  // next offset to read (Kafka's convention), when known; the group's is
  // only looked up when ConsumerOptions::check_group_offsets is set.
  std::optional<int64_t> engine_offset;
  std::optional<int64_t> group_next_offset;
  // The first offset the consumer will read: engine_offset + 1, or -1 when
  // it defers to the group's committed offset / auto.offset.reset.
  int64_t start_offset = -1;
};

// What the consumer did for one assigned partition in changelog mode
// (ConsumerOptions::changelog_topic) before processing it.
struct RestoreReport {
  std::string topic;
  int32_t partition = 0;
  // Whether the engine's copy was replaced: false when it was the
  // changelog's last complete commit already.
  bool restored = false;
  // Restored from a warm standby copy (ConsumerOptions::standby_partitions):
  // only the changelog's tail was read, and the counts below are the
  // tail's.
  bool from_standby = false;
  // The partition's committed offset afterwards (the changelog's); nullopt
  // if nothing was processed yet: the partition is read from its start.
  std::optional<int64_t> offset;
  // Records read from both changelog topics (a member with a checkpoint of
  // the partition reads from there: docs/scale-out.md, "Restarts"), and
  // their keys' and values' bytes; what was restored: state entries written (a
  // restore applies the changelog in chunks of 100,000 records, and a key
  // written in several counts in each), live dedupe records, and state keys set
  // back because a previous owner left a commit half-published.
  int64_t records_read = 0;
  int64_t bytes_read = 0;
  int64_t state_entries = 0;
  int64_t dedupe_records = 0;
  int64_t orphans = 0;
  // The member's epoch of the partition (drawn anew on every restore).
  int64_t epoch = 0;
  absl::Duration duration;
};

struct ConsumerOptions {
  // ---- Where from ----

  // Kafka bootstrap servers ("host:port,..."). Required.
  std::string brokers;
  // Consumer group. Required.
  std::string group_id;
  // Topics to subscribe to. Required, non-empty.
  std::vector<std::string> topics;
  // How long a subscribed topic may stay unknown to the brokers. Topics are
  // often created just after their consumers start, so the consumer waits:
  // from librdkafka's first report that the topic does not exist (counted
  // in ConsumerStats::kafka_errors, named in last_kafka_error), until a
  // partition of it is assigned or this long has passed. Then, if the
  // brokers' metadata still lacks the topic, PollBatch and Run return
  // kNotFound naming it, and the consumer is unusable; if the topic exists
  // by then, the wait ends and the consumer goes on (librdkafka assigns its
  // partitions at its next metadata refresh, topic.metadata.refresh.
  // interval.ms). Longer rides out slower provisioning; shorter reports a
  // misspelt topic sooner. absl::InfiniteDuration() waits for good. Must
  // be > 0. Default: 60 s.
  absl::Duration unknown_topic_timeout = absl::Seconds(60);
  // Further librdkafka configuration properties (name, value), applied in
  // order, e.g. {"auto.offset.reset", "earliest"} or security settings.
  // Properties the consumer owns are rejected with kInvalidArgument:
  // bootstrap.servers, group.id, enable.auto.commit,
  // enable.auto.offset.store. Default: auto.offset.reset=earliest.
  std::vector<std::pair<std::string, std::string>> kafka_config;

  // ---- Message IDs ----

  // Header holding the message ID. A record without it (and without
  // id_function) is deduplicated by its position "topic/partition/offset",
  // which suppresses redeliveries but not producer duplicates.
  // Default: "message-id".
  std::string id_header = "message-id";
  // If set, derives every record's ID instead of id_header. Default: unset.
  IdFunction id_function;
  // Dedupe window of each record; zero: the engine's Options::dedupe_window.
  absl::Duration ttl = absl::ZeroDuration();

  // ---- Batches ----

  // Most records per ProcessBatch call. Must be >= 1. Default: 500.
  int max_batch = 500;
  // How long a poll waits for the first record of a batch; the rest of the
  // batch is what is already fetched. Must be >= 0. Default: 100 ms.
  absl::Duration poll_timeout = absl::Milliseconds(100);

  // ---- Parallel handlers ----

  // Threads that run handlers. 1 (the default): everything runs on the
  // thread that calls PollBatch, one record at a time. More: handlers run
  // concurrently on this many threads of the consumer's, so the handler, the
  // id_function and the dead-letter function must be thread-safe; the engine
  // keeps its guarantees under concurrent handlers (idem/engine.h: each ID
  // has one effect, state reads and writes are serializable, and a handler
  // may run more than once: Stats::handler_reruns). A PollBatch call then
  // keeps polling while the workers run, until it has taken 2 * max_batch *
  // workers records or nothing more arrives (under kPartition pausing, in
  // librdkafka, a partition with 2 * max_batch records waiting until half
  // are handled), and returns once every record it took is handled. The
  // broker's committed offset and the engine's stored offset of a partition
  // advance only to its low watermark: every record below it has committed.
  // Records above it that committed before a crash are read again and caught as
  // duplicates. Must be in [1, kMaxWorkers].
  int workers = 1;
  static constexpr int kMaxWorkers = 1024;
  // With workers > 1: which records may run at the same time. With kKey
  // the records of one key go to one worker at a time, in offset order; the
  // engine's offset of a partition is committed at the watermark the
  // partition had when a record's group of records began, and brought to
  // the watermark at the end of each PollBatch. kKey cannot be combined
  // with changelog_topic (kInvalidArgument): a changelog's marks say that
  // everything up to an offset is in the changelog, which concurrent keys of
  // one partition do not keep. Default: kPartition.
  Ordering ordering = Ordering::kPartition;

  // ---- Failures ----

  // Attempts of a failing record (handler error or unusable ID) before it
  // goes to the dead-letter path. Must be >= 1. Default: 3.
  int max_attempts = 3;
  // A handler error with one of these codes is not retried: the record goes
  // to the dead-letter path at once, as retrying the same input cannot
  // repair it. Default: the codes Abseil documents as not fixed by retrying
  // (absl/status/status.h): kInvalidArgument, kFailedPrecondition,
  // kOutOfRange, kUnimplemented, kPermissionDenied. Every other code is
  // retried up to max_attempts, unless the handler marked the error with
  // idem::PermanentError (idem/message.h): that goes at once too. A record
  // whose ID the engine reports as kConflict (Options::detect_conflicts) is
  // dead-lettered as well, with a kAlreadyExists error ("conflict: ...").
  std::vector<absl::StatusCode> non_retriable_codes = {
      absl::StatusCode::kInvalidArgument, absl::StatusCode::kFailedPrecondition,
      absl::StatusCode::kOutOfRange, absl::StatusCode::kUnimplemented,
      absl::StatusCode::kPermissionDenied};
  // Pause between attempts. Must be >= 0. Default: 100 ms.
  absl::Duration retry_backoff = absl::Milliseconds(100);
  // Where given-up records go. A record with an unusable ID is given up on
  // at once; retrying cannot repair it. If `dead_letter` is set, it is called
  // for each (at-least-once: a crash right after it may repeat it).
  // Otherwise, if dead_letter_topic is set, the record (key, value, headers,
  // plus headers idem.error, idem.source.topic, idem.source.partition,
  // idem.source.offset, idem.reason (id, attempts, non_retriable, permanent
  // or conflict) and, if it had one, its ID as idem.source.id; its
  // message-id header becomes the dead letter's own) is emitted to that topic
  // through the engine's outbox, in the same commit that moves the partition's
  // offset past it: a crash can neither lose nor skip a dead letter, and the
  // relay (relay_outbox) publishes it under a stable message-id. If neither is
  // set, a given-up record stops the consumer: PollBatch returns kAborted
  // naming it, and the partition is retried from that record on the next
  // call (nothing is skipped silently). A dead-lettered record's offset is
  // committed, but its ID is not marked seen: a corrected redelivery with
  // the same ID runs. dead_letter_topic: at most kMaxSourceBytes bytes.
  DeadLetterFunction dead_letter;
  std::string dead_letter_topic;

  // ---- Output ----
  // After each batch (and each poll that found none), publish the engine's
  // outbox (Txn::Emit, and the dead letters above) with an OutboxRelay on
  // `brokers` (idem/kafka/outbox_relay.h), until it is drained; a publishing
  // error is returned by PollBatch (the batch itself stays committed) and
  // the entries are published again by the next call. Turn it off when
  // another relay drains the engine, e.g. when several consumers share one
  // engine (each would publish every entry; harmless, but twice the
  // traffic). Default: true.
  bool relay_outbox = true;
  // librdkafka properties for the relay's producer, applied after
  // kafka_config (which the relay uses too, e.g. for security settings);
  // enable.idempotence and acks are the relay's own. Default: none.
  std::vector<std::pair<std::string, std::string>> relay_kafka_config;
  // The relay's OutboxRelayOptions::max_attempts: attempts at an outbox
  // entry the brokers refuse for good (unknown topic, too large, not
  // authorized) before it goes to dead_letter_topic instead, so the entries
  // behind it flow (ConsumerStats::outbox_dead_lettered). 0: never give up.
  // More than 0 needs dead_letter_topic. Default: 0.
  int outbox_max_attempts = 0;
  // Backpressure: when the engine's outbox holds more than this many
  // entries not yet published (Stats::outbox_pending, read before each
  // poll), the consumer pauses its input (every assigned partition, in
  // librdkafka) and only publishes until the outbox holds at most this
  // many, then resumes (ConsumerStats::backpressure_pauses). So a slow or
  // unreachable destination bounds the outbox instead of letting it grow
  // without end. 0: unbounded. Must be >= 0. Default: 0.
  int64_t max_outbox_pending = 0;
  // Exactly-once output for readers with isolation.level=read_committed
  // (docs/outbox.md, "Transactional output"): the relay publishes each round
  // in a Kafka transaction (OutboxRelayOptions::transactional_id) that also
  // records its progress in relay_progress_topic and commits the engine's
  // offsets of the held partitions under this member's group generation
  // (KIP-447), so the brokers refuse a round of a member that is no longer
  // in the group. The transactional.id is "idem.<group_id>.<member>", where
  // <member> is a random ID the store keeps (so a restarted member fences
  // its previous instance). In changelog mode a member that finds itself
  // fenced, or whose round failed, drops its unpublished outbox entries
  // (outputs with the changelog entries of the same commits;
  // ConsumerStats::outbox_dropped) and checks its partitions against the
  // changelog again, so whoever owns them processes those records again and
  // publishes their outputs once. Needs relay_outbox and changelog_topic
  // (kInvalidArgument otherwise): without a changelog a member's store
  // keeps commits that the group may give to another member's store (a
  // member stalled past max.poll.interval.ms, a partition that moves away
  // and back), which processes those records again, and nothing could undo
  // the first store's outputs. Default: false (at-least-once output with
  // stable message IDs).
  bool transactional_output = false;
  // With transactional_output: the relay's OutboxRelayOptions::
  // progress_topic, which must exist. Default: "idem.relay.progress".
  std::string relay_progress_topic = "idem.relay.progress";
  // With transactional_output: librdkafka's transaction.timeout.ms for the
  // relay's producer (OutboxRelayOptions::transaction_timeout): the brokers
  // abort a transaction left open this long, e.g. by a member killed inside
  // one, so read_committed readers of its partitions (and the member's
  // successor) wait at most this long for its outcome. As in Kafka Streams
  // (10 s under exactly-once), it stays below the group's
  // max.poll.interval.ms (librdkafka's default 300 s, or kafka_config's),
  // so a member's transaction is settled before the group gives its
  // partitions away for a stall. Must be in [1 s, max.poll.interval.ms)
  // (kInvalidArgument); kafka_config and relay_kafka_config must not set
  // transaction.timeout.ms. Default: 10 s.
  absl::Duration transaction_timeout = absl::Seconds(10);
  // With transactional_output: how often a relay round (one Kafka
  // transaction) closes, as Kafka Streams' commit.interval.ms (100 ms under
  // exactly-once). After a batch the consumer publishes its outbox only
  // once this long has passed since its last round began, or once
  // max_batch records were handled since then (the size bound), whichever
  // comes first; an orderly revocation and Close publish at once. Longer
  // spreads a transaction's fixed round trips over more records (more
  // throughput); shorter makes outputs visible to read_committed readers
  // sooner (they wait up to about this long plus poll_timeout). Must be
  // > 0 and at most transaction_timeout (kInvalidArgument). Default:
  // 100 ms.
  absl::Duration transaction_interval = absl::Milliseconds(100);

  // ---- State that follows its partitions (docs/scale-out.md) ----

  // If set, the changelog: every commit's changes of input partition p (the
  // writes made through PartitionTxn(topic, p), idem/partition_state.h;
  // the record's dedupe record; its offset) are emitted to partition p of
  // this topic (log-compacted) and of `<changelog_topic>.dedupe`
  // (time-retained), through the outbox in the same commit. On assignment
  // the consumer restores a partition whose engine copy is not the
  // changelog's last complete commit (behind, ahead, or absent), before
  // processing it, and starts it at the changelog's offset + 1. Requires:
  // exactly one input topic, relay_outbox, an engine with
  // DedupeScope::kPartition, and that no other consumer or relay uses the
  // engine for these partitions. A handler write outside PartitionTxn(topic,
  // p) fails the record with kFailedPrecondition (dead-lettered at once:
  // see non_retriable_codes). Missing topics are created with the input's
  // partition count; an existing one with fewer partitions is refused. At
  // most kMaxSourceBytes - 7 bytes. Default: empty (no changelog).
  std::string changelog_topic;
  // Called once per assigned partition in changelog mode, after it was
  // checked (and restored if needed), before its records are fetched.
  // Default: unset.
  std::function<void(const RestoreReport&)> on_restore;
  // Changelog mode: about the most changelog records a partition's check
  // (and restore) reads at a time, as Kafka Streams restores between polls.
  // The rebalance callback takes one step per assigned partition; a
  // partition whose check needs more is paused, and its check goes on in
  // steps of this size, one per PollBatch, while the other partitions are
  // processed. Once it is current it is resumed from the changelog's
  // offset + 1, and on_restore and on_assign are called then. So
  // max.poll.interval.ms must exceed a few steps per partition, not the
  // longest restore. The checkpoint's tail (a checked partition's records
  // since its checkpoint) is read in the first step whatever its size. At
  // least 1. Default: 10,000.
  int64_t restore_step_records = 10000;
  // Changelog mode: input partitions to keep warm as standby copies while
  // other members hold them, as Kafka Streams' standby replicas. Every
  // standby_interval (between batches, on the polling thread) the consumer
  // reads what each one's changelog gained and applies the commits that
  // completed to the engine's copy of the partition, so that when the
  // partition is assigned here its restore reads only the changelog's tail
  // (RestoreReport::from_standby). A partition this member holds is not
  // followed; one listed that the input topic lacks counts a
  // standby_errors each round. A copy's first round reads the whole
  // changelog (after a restart too: positions are kept in memory). Keeping
  // a copy costs its share of the store and the changelog's read traffic;
  // listing every partition keeps warm whatever this member does not hold.
  // Requires changelog_topic, and an engine no other member of the group
  // uses (a copy would overwrite that member's partitions). Default: none.
  std::vector<int32_t> standby_partitions;
  absl::Duration standby_interval = absl::Seconds(1);

  // ---- Observation ----

  // Called on every assignment, once per partition, before fetching starts
  // (in changelog mode, once its check is done: for a partition restored
  // between polls, then; see restore_step_records). Default: unset.
  std::function<void(const PartitionStart&)> on_assign;
  // Called once per partition when it is revoked in an orderly rebalance (or
  // by Close), after its in-flight records were processed and its engine
  // offset committed to Kafka, before it is released: as Kafka's
  // ConsumerRebalanceListener.onPartitionsRevoked. Default: unset.
  std::function<void(const std::string& topic, int32_t partition)> on_revoke;
  // Called instead of on_revoke when the assignment was lost (the session
  // timed out, or the member was fenced; also by Close of a member the
  // group no longer counts): another member may own the
  // partition already, so its in-flight records were dropped unprocessed
  // and nothing was committed to Kafka for it, as
  // ConsumerRebalanceListener.onPartitionsLost. Default: unset.
  std::function<void(const std::string& topic, int32_t partition)> on_lost;
  // Also look up the group's committed offsets on assignment (one blocking
  // round trip to the group coordinator) to fill
  // PartitionStart::group_next_offset. Default: false.
  bool check_group_offsets = false;
  // Commit processed offsets to Kafka after each batch. Default: true.
  bool commit_to_kafka = true;

  // ---- Timers ----

  // Fires the durable timers the handlers set (Txn::SetTimer; idem/timers.h)
  // on the assigned partitions: the event-time ones due after each
  // PollBatch that advanced a partition's stream time (the records' Kafka
  // timestamps are their Message::event_time), the processing-time ones on
  // every PollBatch, so that they fire on idle partitions too; up to
  // max_batch per partition and domain per call, on the thread that calls
  // PollBatch, before the outbox is published (the fires' emits go with the
  // batch's). A fire's transient failure is counted
  // (ConsumerStats::timer_failures) and the timer fires again on a later
  // call. With changelog_topic, a fire's state changes and the timer's
  // deletion reach the changelog in its commit, as a record's do
  // (docs/scale-out.md, "The changelog"). Default: unset (no timers fired).
  std::function<absl::Status(const TimerFire&, Txn&)> timer_handler;

  // ---- Logs and statistics ----

  // Receives the librdkafka log lines of the consumer and of its outbox
  // relay's producer ("librdkafka FACILITY: text"; syslog levels 0-3 as
  // kError, 4 kWarning, 5-6 kInfo, 7 kDebug; kafka_config's log_level and
  // debug choose which), from librdkafka's threads (see idem/logger.h), and,
  // in changelog mode, a kInfo line ("idem: restored ...") for each
  // partition restored. Borrowed; must outlive
  // the Consumer. nullptr: librdkafka prints them to stderr. Default: nullptr.
  Logger* logger = nullptr;
  // Receives librdkafka's statistics, one JSON object (librdkafka's
  // STATISTICS.md), every statistics_interval, on the thread that calls
  // PollBatch; the view is valid during the call only. An exception it
  // throws counts as a Kafka error (ConsumerStats::kafka_errors). Default:
  // unset (no statistics).
  std::function<void(std::string_view json)> on_statistics;
  // How often on_statistics is called (librdkafka's statistics.interval.ms,
  // set only with on_statistics). Must be >= 1 ms and finite.
  // Default: 5 s.
  absl::Duration statistics_interval = absl::Seconds(5);
};

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_CONSUMER_OPTIONS_H_
