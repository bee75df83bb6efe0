// ConsumerImpl, the Consumer (idem/kafka/consumer.h) behind
// Consumer::Create, declared here so that its jobs live in files of their
// own: the poll loop (consumer.cc), parallel workers (consumer_workers.cc),
// rebalances and restores (consumer_rebalance.cc), publishing the outbox
// (consumer_relay.cc), the errors of its input (consumer_input_errors.cc),
// durable timers (consumer_timers.cc); the option checks are in
// consumer_options_check.h.
//
// Polling, rebalance, error and commit callbacks run on the caller's
// thread: they are served by rd_kafka_consumer_poll
// (rd_kafka_poll_set_consumer). With one worker (the default) records are
// processed there too, so a revocation can only arrive while a batch is
// being collected; with more, a ParallelRunner (kafka/parallel_runner.h)
// processes them on its threads while the caller's thread polls, and a
// revocation waits for (or cancels) the revoked partitions' records. The log
// callback (OnLog) runs on librdkafka's own threads and touches only the
// logger, which is constant.

#ifndef IDEM_KAFKA_CONSUMER_IMPL_H_
#define IDEM_KAFKA_CONSUMER_IMPL_H_

#include <librdkafka/rdkafka.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/btree_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "idem/kafka/outbox_relay.h"
#include "idem/logger.h"
#include "idem/timer_pump.h"
#include "kafka/batch_processor.h"
#include "kafka/changelog_keeper.h"
#include "kafka/consumer_hooks.h"
#include "kafka/parallel_runner.h"
#include "kafka/rdkafka_util.h"
#include "kafka/sharded_outbox_relay.h"
#include "kafka/transactional_producer.h"

namespace idem::kafka {

class ConsumerImpl final : public Consumer {
 public:
  ConsumerImpl(Engine* engine, const ConsumerOptions& options,
               const ConsumerHooks& hooks)
      : engine_(engine), options_(options), hooks_(hooks) {}

  ~ConsumerImpl() override {
    // Leaving the group releases the partitions at once; its error has
    // nowhere to go from a destructor.
    Close().IgnoreError();
  }

  absl::Status Init(std::unique_ptr<OutboxRelay> relay,
                    std::unique_ptr<ChangelogKeeper> changelog);

  // The relay of relay_outbox, for `changelog` (null without a
  // changelog_topic), transactional with transactional_output.
  // kInvalidArgument and Kafka errors as OutboxRelay::Create, named as the
  // relay's.
  absl::StatusOr<std::unique_ptr<OutboxRelay>> CreateRelay(
      ChangelogKeeper* changelog);

  // With shards (Options::shards > 1): the hooks of each shard's relay,
  // `hooks` with transactions that carry that shard's offsets.
  ShardRelayHooks ShardHooks(const OutboxRelayHooks& hooks);

  absl::StatusOr<BatchReport> PollBatch(Handler handler) override;

  absl::Status Run(Handler handler) override;

  void Stop() override { stop_.store(true, std::memory_order_release); }

  absl::Status Close() override;
  // Close for a member the group no longer counts (expelled_): releases
  // its partitions as lost and destroys the handle without librdkafka's
  // close.
  void CloseExpelled();

  std::vector<std::pair<std::string, int32_t>> Assignment() const override {
    return {assignment_.begin(), assignment_.end()};
  }

  const ConsumerOptions& options() const { return options_; }

  ConsumerStats stats() const override;

  absl::Status Pause(const std::string& topic, int32_t partition) override {
    return PauseOrResume(topic, partition, /*pause=*/true);
  }

  absl::Status Resume(const std::string& topic, int32_t partition) override {
    return PauseOrResume(topic, partition, /*pause=*/false);
  }

 private:
  // One call on the polling thread alone: waits for the first record, takes
  // what is already fetched, up to max_batch, and processes it.
  absl::Status PollAndProcess();

  // One call with workers (ConsumerOptions::workers): takes records while
  // the workers run them, waits until every one is handled, then commits
  // the partitions' watermarks (or reads them again from the first record
  // not handled).
  absl::Status PollWithWorkers();

  // Hands records to the workers until 2 * max_batch * workers were taken
  // (as many as `workers` partitions hold before they are paused), or none
  // arrives while they are idle. Under Ordering::kPartition, a
  // partition with 2 * max_batch records waiting (a full group queued
  // behind the one its lane runs) is paused (librdkafka then drops what it
  // fetched of it, and fetches it again from the last record taken) until
  // half of them are handled, so that one busy partition does not hold back
  // the others queued behind it. Under kKey a partition's records spread over
  // many lanes, so none is paused: fetching again after a pause costs more than
  // it saves there.
  absl::Status TakeRecords(absl::btree_set<TopicPartition>& paused);

  // Resumes the partitions TakeRecords paused that have fewer than
  // max_batch records waiting.
  void ResumeDrained(absl::btree_set<TopicPartition>& paused);

  // On a worker: one group of a lane's records (kafka/parallel_runner.h).
  absl::StatusOr<ProcessedBatch> RunGroup(const ParallelRunner::Group& group);

  // After the workers are idle: counts what they did, brings the engine's
  // offsets to the watermarks (Ordering::kKey) and commits them to Kafka,
  // and reads partitions with records not handled again from the first.
  absl::Status FinishWorkerRun();

  // Ordering::kKey: a partition's records commit with the watermark their
  // group began at (ProcessControls::stored_offset), so once all of them are
  // handled the engine's offset is set to the last. REQUIRES: none of the
  // partition's records is being handled.
  absl::Status CatchUpEngineOffset(const TopicPartition& partition,
                                   int64_t next);

  // Polls librdkafka once, waiting up to `wait`; serves its callbacks.
  MessagePtr Poll(absl::Duration wait);

  // Backpressure, with the input paused: one Poll (up to poll_timeout) to
  // serve librdkafka's callbacks. A record that arrives anyway is read
  // again later; an error is OnMessageError's.
  absl::Status PollPaused();

  // ConsumerOptions::timer_handler: fires the due timers of each assigned
  // partition not being restored (kafka/consumer_timers.cc). A failed fire
  // is counted (ConsumerStats::timer_failures).
  void FireDueTimers();

  // Brings the standby copies up to date when their interval is due. A
  // copy's error is counted, and does not stop processing.
  void FollowStandbys();

  // Changelog mode, after publishing failed (RelayOutbox): checks every held
  // partition against its changelog again, restoring it where the changelog
  // lacks part of what the engine holds, and reads each again from the
  // offset after its changelog's last complete commit. kUnavailable while
  // the changelog cannot be read; the next call tries again.
  absl::Status RecheckPartitions();

  // Whether Run retries after PollBatch failed with `status`: a cause that
  // can pass (brokers or the store unavailable, a timeout, a full disk, a
  // failed sync).
  static bool RetriableInRun(const absl::Status& status);

  // Sleeps `duration`, or less once Stop is called.
  void SleepUnlessStopped(absl::Duration duration);

  // The consumer's own pause of a partition with enough records waiting
  // (TakeRecords); an error is counted.
  void PauseOrResume(const TopicPartition& partition, bool pause);

  absl::Status PauseOrResume(const std::string& topic, int32_t partition,
                             bool pause);

  // Pauses (or resumes) fetching one partition in librdkafka; its error, or
  // the partition's own.
  absl::Status SetPaused(const std::string& topic, int32_t partition,
                         bool pause);

  static ConsumerImpl* Self(void* opaque) {
    return static_cast<ConsumerImpl*>(opaque);
  }

  static void OnRebalance(rd_kafka_t*, rd_kafka_resp_err_t err,
                          rd_kafka_topic_partition_list_t* partitions,
                          void* opaque);

  static void OnCommit(rd_kafka_t*, rd_kafka_resp_err_t err,
                       rd_kafka_topic_partition_list_t*, void* opaque) {
    Self(opaque)->NoteCommit(err);
  }

  static void OnError(rd_kafka_t* rk, int err, const char* reason,
                      void* opaque);

  // From librdkafka's threads: only the constant logger is touched.
  static void OnLog(const rd_kafka_t* rk, int level, const char* facility,
                    const char* text);

  // Served by rd_kafka_consumer_poll, on the polling thread.
  static int OnStatistics(rd_kafka_t*, char* json, size_t length, void* opaque);

  void NoteError(const absl::Status& status) {
    ++stats_.kafka_errors;
    stats_.last_kafka_error = status.ToString();
  }

  // A line to ConsumerOptions::logger, if set.
  void Log(LogSeverity severity, std::string_view line) const {
    LogLine(options_.logger, "ConsumerOptions::logger", severity, line);
  }

  // Stops the consumer for good with `status` (failed_), logged as an
  // error, unless it stopped already: the first cause stays.
  void Fail(absl::Status status);

  // kAborted for librdkafka's fatal error (e.g. a static member fenced by
  // another with its group.instance.id), naming its cause, or `reason` if
  // librdkafka has none.
  absl::Status FatalError(std::string_view reason);

  // An error librdkafka delivered in place of a record. A partition's end
  // is none; a missing authorization (kPermissionDenied naming the group,
  // and the topic and partition where librdkafka tells them) and a fatal
  // error (kAborted) stop the consumer for good and are returned. The rest
  // are noted (NoteError) and OK is returned, as librdkafka recovers from
  // them by itself; an unknown subscribed topic also starts its wait
  // (NoteUnknownTopic).
  absl::Status OnMessageError(const rd_kafka_message_t& message);

  // librdkafka reported `topic` unknown: a subscribed topic's wait
  // (ConsumerOptions::unknown_topic_timeout) starts, unless it goes on.
  void NoteUnknownTopic(const std::string& topic);

  // At the start of PollBatch: asks the brokers about each topic whose wait
  // is over (one round trip each). One that exists by now ends its wait;
  // one that does not stops the consumer for good (kNotFound, as does
  // kPermissionDenied); a failed look-up is noted and made again at the
  // next call.
  absl::Status CheckUnknownTopics();

  absl::Status UnknownTopicError(const std::string& topic,
                                 absl::Duration unknown_for) const;

  // Starts each assigned partition at the engine's offset + 1. In changelog
  // mode each is checked first (StepCheck); one whose check needs more
  // steps, or failed for a cause that can pass, is paused and its check
  // goes on between polls (StepRestores).
  void Assign(rd_kafka_topic_partition_list_t* partitions);

  // With check_group_offsets: the group's committed offsets of
  // `partitions` (one round trip); null otherwise, or on an error.
  PartitionListPtr GroupCommittedOffsets(
      const rd_kafka_topic_partition_list_t* partitions);

  // Where a partition starts, from start.engine_offset (and sets
  // start.start_offset): the offset after the engine's, the beginning in
  // changelog mode, or the group's offset.
  int64_t StartOffset(PartitionStart& start) const;

  void NotifyAssign(const PartitionStart& start);

  // Changelog mode, at the start of PollBatch: one step of each check under
  // way; a partition whose check is done is read from its start offset
  // and resumed (unless the application paused it meanwhile), and
  // on_assign is called. A step's error is returned (and, unless it can
  // pass, stops the consumer for good); the check begins again next call.
  absl::Status StepRestores();

  // Whether `message` is of a partition whose check goes on: it is not
  // processed, and is read again once the partition is current.
  bool OfRestoringPartition(const rd_kafka_message_t& message) const {
    return !restoring_.empty() &&
           restoring_.contains(
               {rd_kafka_topic_name(message.rkt), message.partition});
  }

  // Finishes the in-flight batch (with workers: SettleWorkers; the records
  // of lost partitions are dropped), publishes the outbox in changelog mode
  // or with transactional_output (the next owner restores or reads from
  // it), commits the revoked partitions' offsets to Kafka synchronously
  // (not for lost partitions, a member out of the group, or a close in
  // changelog mode), then releases them.
  void Revoke(rd_kafka_topic_partition_list_t* partitions);

  // Revoke with workers: waits until the revoked partitions' records taken
  // so far are handled (at most 2 * max_batch * workers in one call) and
  // brings their engine offsets to the watermark; for lost ones (or when
  // closing), drops those not started and waits only for the groups
  // running. Nothing of them commits afterwards. In changelog mode (not
  // lost) it waits for every record taken, of kept partitions too: the
  // membership check that follows may unfence them all.
  void SettleWorkers(const rd_kafka_topic_partition_list_t* partitions,
                     bool lost);

  // After a revocation published the outbox, in changelog mode: writes
  // each partition's checkpoint (ChangelogKeeper::Checkpoint).
  void CheckpointChangelogs(const rd_kafka_topic_partition_list_t* partitions);

  // Revoke's last step, and CloseExpelled's: forgets the partitions (the
  // changelog's fences too) and calls on_revoke, or on_lost when `lost`.
  void Release(const rd_kafka_topic_partition_list_t* partitions, bool lost);

  void Unassign(rd_kafka_topic_partition_list_t* partitions);

  // Null (no protocol) once the member has left the group, as after
  // max.poll.interval.ms passed.
  // Changelog mode: a revocation (with cooperative assignment, partial)
  // found this member may be out of the group and unfenced every partition
  // (Unfence), so nothing of the partitions it keeps may be processed
  // before RecheckPartitions, at the start of the next PollBatch.
  bool UnfencedByRevocation() const {
    return recheck_ && !hooks_.changelog_polls_on_after_unfence;
  }
  bool Cooperative() const {
    const char* protocol = rd_kafka_rebalance_protocol(rk_.get());
    return protocol != nullptr && std::strcmp(protocol, "COOPERATIVE") == 0;
  }

  // Commits, for each of `partitions`, the engine's offset + 1 to Kafka and
  // waits for the answer. Errors are counted: Kafka's offsets are advisory.
  // The store's offset rather than the last batch's next_offsets: it is
  // what all the partition's batches committed and, under Ordering::kKey
  // (keys commit out of offset order), the offset below which every record
  // is committed, so the next owner starts where nothing is skipped.
  void CommitEngineOffsets(const rd_kafka_topic_partition_list_t* partitions);

  void NoteCommit(rd_kafka_resp_err_t err);

  // Processes the in-flight records and commits their offsets to Kafka.
  absl::Status ProcessInFlight();

  // Changelog mode: marks each partition of a batch handled up to its last
  // offset (ChangelogKeeper::MarkHandled). Safe on the workers.
  absl::Status MarkHandled(
      const absl::btree_map<TopicPartition, int64_t>& next_offsets);

  // Adds a processed batch to the call's report and the totals.
  void Count(const BatchReport& done);

  // Commits `next` (next offset per partition) to Kafka asynchronously; the
  // answer comes to OnCommit.
  void CommitToKafka(const absl::btree_map<TopicPartition, int64_t>& next);

  // Drops in-flight records of `partitions` (all of them for nullptr).
  void DropInFlight(const rd_kafka_topic_partition_list_t* partitions);

  // After a failed batch: the next poll re-reads each still-assigned
  // partition of the in-flight records from its first in-flight offset.
  void Rewind();

  // Makes the next poll read each partition of `first` from its offset.
  void SeekTo(const absl::btree_map<TopicPartition, int64_t>& first);

  absl::Status FailFromCallback();

  // Changelog mode: one step of the partition's check (ChangelogKeeper::
  // CheckStep, restore_step_records at a time; the whole check if
  // `whole`), timed; once the check is done, its report, counted
  // (NoteCheck).
  absl::StatusOr<std::optional<RestoreReport>> StepCheck(
      const std::string& topic, int32_t partition, bool whole = false);

  // A check done: the stats, the logger's line for a restore, on_restore.
  void NoteCheck(const RestoreReport& report);

  // Publishes what the engine's outbox holds (ConsumerOptions::relay_outbox):
  // the handlers' emits and the dead letters, committed with their records.
  // The batch is committed either way; an error is returned so the caller
  // sees it, and the next call publishes the rest again.
  absl::Status RelayOutbox(BatchReport& report);

  // Whether a batch is to be followed by RelayOutbox: always, but with
  // transactional_output only once transaction_interval has passed since
  // the last round began, or max_batch records were handled since then.
  bool RoundDue() const;

  // Changelog mode: whether this member still holds its partitions as the
  // group coordinator sees it. librdkafka's own view first (a member that
  // stalled past max.poll.interval.ms has left), then the coordinator's: a
  // synchronous commit of the engine's offsets, which the coordinator
  // refuses under a generation or member ID that is no longer the group's.
  // False when either says the member is out (ConsumerStats::
  // membership_lost); a failure of another kind is not taken as an answer.
  bool MembershipHolds();

  // transactional_output: what each relay transaction commits with its
  // records, the engine's offsets of the held partitions under this
  // member's group metadata. With shards, shard `shard`'s relay commits
  // those of the held partitions of that shard only (Engine::ShardOf),
  // whose outputs its transactions carry; -1: every held partition.
  absl::StatusOr<GroupOffsets> TransactionOffsets(int shard);

  // The engine's offset of `partition` (Engine::CommittedOffset, which
  // reads it in the partition's shard): what every start offset, commit to
  // Kafka and lag figure is taken from.
  absl::StatusOr<std::optional<int64_t>> EngineOffset(const std::string& topic,
                                                      int32_t partition) const;

  // Changelog mode, after this member found it may no longer own its
  // partitions, or a publication failed: none of its changelog entries is
  // published (every partition is checked against its changelog again
  // before it is processed, and restored where the changelog lacks
  // commits, which are then processed again), and with
  // transactional_output neither is any other outbox entry still
  // unpublished, since those commits' outputs are published when they are
  // processed again (ConsumerStats::outbox_dropped).
  void Unfence();
  // Acknowledges every outbox entry unpublished (ConsumerStats::
  // outbox_dropped).
  void DropOutbox();

  // Backpressure (ConsumerOptions::max_outbox_pending): whether the outbox
  // holds more entries than allowed; pausing every assigned partition, and
  // resuming those it paused.
  bool OutboxFull();
  void PauseInput();
  void ResumeInput();

  // ---- Constant after construction ----
  Engine* const engine_;
  const ConsumerOptions options_;
  const ConsumerHooks hooks_;
  std::unique_ptr<OutboxRelay> relay_;  // null without relay_outbox
  // Null without a changelog_topic. Used from the polling thread (the
  // relay's skip calls it there too), and by the workers through Handle and
  // MarkHandled, which it guards.
  std::unique_ptr<ChangelogKeeper> changelog_;
  DeadLetterFunction dead_letter_;

  // ---- Used from the polling thread only ----
  HandlePtr rk_;
  // Null with one worker. Idle and empty between PollBatch calls, and
  // destroyed before rk_ (its threads joined).
  std::unique_ptr<ParallelRunner> runner_;
  std::vector<MessagePtr> in_flight_;  // polled, not yet processed
  // During PollBatch; read by the workers too, while they run.
  const Handler* handler_ = nullptr;
  BatchReport* report_ = nullptr;  // during PollBatch
  absl::Status callback_error_;    // raised inside a callback
  absl::Status failed_;            // permanent: the consumer is unusable
  // Subscribed topics librdkafka reported unknown, each with when it first
  // did; until a partition of it is assigned, or its wait ends
  // (CheckUnknownTopics).
  absl::btree_map<std::string, absl::Time> unknown_since_;
  // Changelog mode: publishing failed, and the held partitions must be
  // checked against the changelog again before any is processed.
  bool recheck_ = false;
  // Changelog mode: the last MembershipHolds found this member out of the
  // group; until an assignment or a membership check says otherwise, its
  // revocations commit and publish nothing.
  bool out_of_group_ = false;
  // The group refused this member as unknown, of an old generation or
  // fenced (MembershipHolds), or librdkafka reported its assignment lost;
  // until the next assignment. Close then skips librdkafka's close.
  bool expelled_ = false;
  bool closing_ = false;  // Close has begun
  // Partitions PauseInput paused (backpressure), resumed by ResumeInput.
  std::set<TopicPartition> backpressured_;
  std::set<TopicPartition> assignment_;
  // Changelog mode: assigned partitions whose check goes on between polls,
  // paused until it is done (StepRestores): where each starts, and whether
  // the application paused it meanwhile (Pause), so it stays paused.
  struct Restoring {
    PartitionStart start;
    bool paused_by_application = false;
  };
  absl::btree_map<TopicPartition, Restoring> restoring_;
  ConsumerStats stats_;
  // Null without timer_handler.
  std::unique_ptr<TimerPump> timer_pump_;
  // transactional_output: when the last relay round began, and
  // stats_.records then (RoundDue).
  absl::Time round_began_ = absl::Now();
  int64_t records_at_round_ = 0;

  // ---- Any thread ----
  std::atomic<bool> stop_{false};
};

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_CONSUMER_IMPL_H_
