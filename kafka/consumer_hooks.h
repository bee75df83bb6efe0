// Deliberately broken variants of the Kafka consumer, for tests that must
// show their checks catch a broken guarantee, and stand-ins for what
// librdkafka's mock cluster lacks. Never set outside tests. A plain value
// type.

#ifndef IDEM_KAFKA_CONSUMER_HOOKS_H_
#define IDEM_KAFKA_CONSUMER_HOOKS_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "kafka/partition_reader.h"

namespace idem::kafka {

class TopicConfigs;  // kafka/topic_admin.h

struct ConsumerHooks {
  // On assignment, start from the group's committed offset even when the
  // engine has one (what a consumer does that keeps offsets only in Kafka).
  bool ignore_engine_offsets = false;
  // On revocation, release partitions without committing their offsets to
  // Kafka: a consumer with another engine that takes them over starts from
  // stale offsets.
  bool skip_revoke_commit = false;
  // On revocation, drop the in-flight records instead of finishing them.
  bool drop_in_flight_on_revoke = false;
  // With workers: every record in a lane of its own, so records of one
  // partition (kPartition) or one key (kKey) run in any order.
  bool lane_per_record = false;
  // With workers and Ordering::kKey: each record commits its own offset
  // rather than the partition's low watermark, so a crash can leave the
  // engine's offset above a record of another key that never committed.
  bool store_record_offsets = false;
  // Called inside PollBatch once the first record of a batch is in flight,
  // so a test can make a rebalance arrive mid-collection.
  std::function<void()> after_first_record;
  // Called at the start of each revocation (the rebalance callback), before
  // anything is processed, published or committed there, so a test can
  // inject the brokers' answer to the revocation's own requests. Gets the
  // numbers of the partitions revoked.
  std::function<void(const std::vector<int32_t>& partitions)> before_revoke;
  // Never publish the outbox (after batches and on revocation): as a member
  // killed right after each commit would leave it. Not a broken variant.
  bool skip_relay = false;
  // Changelog mode, broken: publish every changelog entry of the outbox,
  // without the fence that keeps a returning member's stale entries out.
  bool changelog_unfenced = false;
  // Changelog mode, broken: publish changelog entries even when the
  // membership check finds the group no longer counts this member in (a
  // member stalled past max.poll.interval.ms publishes after its
  // successor).
  bool changelog_skip_membership_check = false;
  // Changelog mode, broken: after a revocation's membership check failed
  // and every partition was unfenced (cooperative assignment: some are
  // kept), the same poll goes on taking the kept partitions' records, which
  // meet no fence before their check.
  bool changelog_polls_on_after_unfence = false;
  // Changelog mode with workers, broken: a revocation waits only for the
  // revoked partitions' records, so the kept partitions' records the
  // workers still run meet no fence once its membership check failed.
  bool changelog_revoke_leaves_workers = false;
  // Changelog mode, broken: restores and standby copies let a commit of an
  // epoch that is over complete (ChangelogImageBuilder's epoch rule off).
  bool changelog_restore_ignores_epochs = false;
  // Changelog mode, broken: a member with a checkpoint of the partition
  // (kafka/changelog_checkpoint.h) takes its copy as current without
  // reading the changelog after it, so another owner's commits since go
  // unseen.
  bool changelog_checkpoint_skips_tail = false;
  // Changelog mode, broken: the changelog's dedupe records expire at the
  // clock's time plus the window, not when the engine's records do (which
  // differs once the clock went back: the engine's time does not).
  bool changelog_expiry_from_clock = false;
  // Changelog mode, broken: produce each record's changelog records to
  // Kafka as soon as its handler returns, outside the engine's commit.
  bool changelog_outside_commit = false;
  // Changelog mode, broken: commits emit no timer records ("t/"), so a
  // member that restores the partition has none of its timers.
  bool changelog_drops_timers = false;
  // Changelog mode, broken: a fire's changelog records are held back like
  // a record's when the partition's check found the copy current at their
  // offset, so fires right after a restart never reach the changelog.
  bool changelog_skips_fires = false;
  // Changelog mode, broken: restores and standby copies read a changelog
  // partition whose first records were deleted (retention) as if it were
  // whole, rather than failing with kDataLoss.
  bool changelog_restore_reads_truncated = false;
  // Standby copies, broken: apply the changelog's state and offsets but
  // leave its dedupe records out.
  bool standby_without_dedupe = false;
  // Standby copies, broken: a copy's read ends at the last stable offset,
  // as it should, but the copy then takes the end of the log (its high
  // watermark) as read, as a reader that reads read_committed to the
  // brokers' end of partition and notes the high watermark: the records of
  // a transaction open then are never applied, also once it commits.
  bool standby_takes_log_end = false;
  // Restores and standby copies apply what they read every this many
  // records (0: the default, 100,000), so tests can make a restore take
  // several chunks.
  int64_t restore_chunk_records = 0;
  // Changelog mode: called at each step of a restore, "chunk" (a chunk of
  // the changelog applied, more to come), "imported" (the changelog's copy
  // committed with the new epoch, its mark not yet) and "marked" (the mark
  // committed, not yet published), so a test can kill the process there.
  std::function<void(const char* step)> restore_step;
  // With transactional_output: called at each step of the relay's rounds
  // that publish, "commit" (the round's outputs, progress and offsets
  // produced in its transaction, not committed), "ack" (committed, not
  // acknowledged in the engine) and "acked" (acknowledged), so a test can
  // kill the process there.
  std::function<void(const char* step)> relay_step;
  // With transactional_output, broken: the relay does not read its
  // progress when it starts (OutboxRelayHooks::ignore_progress), so a
  // member killed between a transaction's commit and its acknowledgement
  // publishes that transaction's outputs again.
  bool relay_ignores_progress = false;
  // With transactional_output, broken: a retriable transactional error
  // (REBALANCE_IN_PROGRESS) counts as fenced
  // (OutboxRelayHooks::retriable_errors_fence).
  bool relay_retriable_errors_fence = false;
  // With transactional_output, broken: the relay's transactions carry no
  // group offsets (OutboxRelayHooks::transaction_offsets unset), as a
  // consumer that commits its offsets outside the transaction: the brokers
  // have no generation to check, so a member stalled past
  // max.poll.interval.ms that publishes after its successor (with
  // changelog_skip_membership_check) commits its stale outputs.
  bool relay_offsets_outside_transaction = false;
  // With transactional_output: a relay round after every batch, ignoring
  // ConsumerOptions::transaction_interval (as before it existed).
  bool rounds_every_batch = false;
  // Changelog mode with transactional_output, broken: relay rounds end at
  // max_batch entries (OutboxRelayHooks::round_ends_after unset), so a
  // transaction can carry part of a commit, and a member killed after it
  // restores that commit and publishes its outputs again.
  bool rounds_split_commits = false;
  // Changelog mode with transactional_output, broken: a consumer starting on
  // a store keeps the outbox an earlier run left, so the outputs of commits
  // its checks restore away are published as well as those of their
  // second run.
  bool keep_outbox_on_start = false;
  // Changelog mode, broken: every check and restore runs whole in the
  // rebalance callback (ignoring ConsumerOptions::restore_step_records), so
  // no partition is processed while another is restored.
  bool restore_in_callback = false;
  // Broken: a rewind or restore's seek waits for librdkafka's replies (10 s
  // asked, 10 ms waited by librdkafka 2.0.2, see ConsumerImpl::SeekTo) and
  // stops the consumer for good when they come later.
  bool seek_waits_for_replies = false;

  // Broken: every engine offset the consumer reads (where an assigned
  // partition starts, the offsets it commits to Kafka on revocation and in
  // transactions, lag) comes from shard 0 of a sharded engine, whatever the
  // partition's shard: partitions of other shards look unprocessed.
  bool offsets_of_shard_zero = false;

  // Not a broken variant: lets transactional_output go without
  // changelog_topic (which Consumer::Create refuses), for tests whose every
  // member runs on one store: there a partition's commits never meet
  // another store, and plain mode is exact.
  bool plain_transactional_output = false;

  // Not broken variants: stand-ins for what librdkafka's mock cluster
  // lacks. Changelog mode reads and changes topic configurations through
  // this instead of the brokers' admin API (the mock has no
  // DescribeConfigs), if set.
  std::shared_ptr<TopicConfigs> topic_configs;
  // Changelog mode makes its topics as if the input topic had this many
  // partitions (if > 0), as when they were made before it grew (the mock
  // cannot add partitions to a topic).
  int32_t changelog_topics_input_partitions = 0;
  // Changelog mode: the hooks of the reader of the changelog and dedupe
  // topics (checks, restores, standby copies): the mock keeps no last
  // stable offset, so a test emulates an open transaction through them
  // (and the broken variant that takes the last stable offset for the end).
  PartitionReaderHooks changelog_reader;
};

// Consumer::Create with hooks; Consumer::Create is this with {}.
absl::StatusOr<std::unique_ptr<Consumer>> CreateConsumerWithHooks(
    Engine* engine, const ConsumerOptions& options, const ConsumerHooks& hooks);

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_CONSUMER_HOOKS_H_
