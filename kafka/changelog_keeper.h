// ChangelogKeeper is a Consumer's changelog mode
// (ConsumerOptions::changelog_topic; docs/scale-out.md): it checks and
// restores each partition on assignment (in bounded steps, CheckStep, that
// the consumer takes between polls), wraps the handler so every commit
// emits its changelog records (ChangelogTxn), and decides which outbox
// entries the relay may publish.
//
// Fencing. Each member keeps an epoch per partition in the partition's
// state (kEpochStateKey), and every changelog record carries the epoch and
// offset of the commit that wrote it. On assignment the keeper reads the
// changelog; if its last complete commit is not exactly the engine's (same
// offset, same epoch, nothing half-published after it), it replaces the
// engine's copy with the changelog's and takes a new epoch (a random one,
// so no two restores share it), publishing a mark ("o/<epoch>") that also
// sets back keys a half-published commit left.
// The relay publishes a partition's changelog entries only while this
// member holds the partition and only for the epoch it checked, and never
// entries it has published before: so a member that returns with entries it
// never published cannot append them after another owner's.
//
// Checkpoints (kafka/changelog_checkpoint.h). A member's checkpoint of a
// partition lets its check read the changelog from there rather than from
// the start; it is written after a check found the copy current, and at a
// revocation or close when the relay's reports account for every record
// since.
//
// Thread-compatible, except that Handle, MarkHandled and Skip may run on
// several threads at once (the consumer's workers, each on partitions of its
// own) beside the polling thread's calls: the fences are guarded by a
// mutex.

#ifndef IDEM_KAFKA_CHANGELOG_KEEPER_H_
#define IDEM_KAFKA_CHANGELOG_KEEPER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/container/btree_map.h"
#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "idem/engine.h"
#include "idem/kafka/consumer_options.h"
#include "idem/kafka/producer.h"
#include "idem/outbox.h"
#include "idem/timers.h"
#include "kafka/changelog_checkpoint.h"
#include "kafka/changelog_standby.h"
#include "kafka/changelog_topics.h"
#include "kafka/changelog_txn.h"
#include "kafka/consumer_hooks.h"
#include "kafka/partition_reader.h"

namespace idem::kafka {

class ChangelogKeeper {
 public:
  // kInvalidArgument unless `options` suit changelog mode (one input topic,
  // relay_outbox, a topic name that fits) and `engine` is writable and
  // partition-scoped (kFailedPrecondition otherwise).
  // `hooks`: the consumer's test seams (kafka/consumer_hooks.h).
  static absl::StatusOr<std::unique_ptr<ChangelogKeeper>> Create(
      Engine* engine, const ConsumerOptions& options,
      const ConsumerHooks& hooks);

  const std::string& changelog_topic() const { return target_.changelog_topic; }
  const std::string& dedupe_topic() const { return target_.dedupe_topic; }

  // Checks (topic, partition) against its changelog and restores it if
  // needed; afterwards the engine's offset is where to start. Creates the
  // changelog topics first if they are missing. REQUIRES: the partition is
  // not being processed (call before fetching it).
  absl::StatusOr<RestoreReport> Check(const std::string& topic,
                                      int32_t partition);

  // Check in bounded steps, for restores between polls: begins the check
  // of (topic, partition) unless one is under way, and goes on with it
  // until about `limit` changelog records were read in this call (0: no
  // limit). The report once the check is done (as Check's); nullopt while
  // it has more to read. Between steps the engine may hold part of the
  // restored copy without an epoch, which a crash leaves to be restored
  // again. On an error the check under way is dropped and the next call
  // begins it again. REQUIRES: as Check, until it is done.
  absl::StatusOr<std::optional<RestoreReport>> CheckStep(
      const std::string& topic, int32_t partition, int64_t limit);

  // What one round of standby copies did (FollowStandbys).
  struct StandbyRound {
    int copies = 0;  // copies brought up to their changelog's end
    int64_t records_read = 0;
    int errors = 0;
    absl::Status last_error;
  };
  // Every ConsumerOptions::standby_interval: brings the standby copy of
  // each of ConsumerOptions::standby_partitions that `held` does not hold
  // up to its changelog's end (kafka/changelog_standby.h). Between rounds,
  // returns an empty round at once. A copy's error drops that copy only.
  StandbyRound FollowStandbys(const std::string& topic,
                              const absl::btree_set<int32_t>& held);

  // The partition left this member: its entries are no longer published.
  void Release(int32_t partition) {
    pending_.erase(partition);
    checkpoints_.Forget(partition);
    absl::MutexLock lock(&fences_mu_);
    fences_.erase(partition);
  }
  void ReleaseAll();

  // Once the relay published everything (a revocation, a close): writes
  // the partition's checkpoint if every record of its changelog since the
  // last verified point is this member's (kafka/changelog_checkpoint.h);
  // nothing otherwise. Errors of the engine or the brokers.
  absl::Status Checkpoint(const std::string& topic, int32_t partition);

  // The relay's report of each round (OutboxRelayHooks::after_round).
  void NotePublished(absl::Span<const OutboxEntry* const> published,
                     bool complete, bool transaction) {
    checkpoints_.NotePublished(published, complete, transaction);
  }

  // For OutboxRelayOptions::skip: true for a changelog entry this member
  // must not publish (see the file comment).
  bool Skip(const OutboxEntry& entry) const;

  // For OutboxRelayHooks::round_ends_after: whether `entry` is a commit's
  // mark (its "o/" record, written last in each commit).
  bool EndsCommit(const OutboxEntry& entry) const;

  // Runs `handler` on `record` through a ChangelogTxn and emits the
  // commit's changelog records. kAborted if the partition was not checked.
  absl::Status Handle(const Record& record, Txn& txn, Handler handler);

  // Runs the timer handler `handler` on `fire` through a ChangelogTxn
  // (ChangelogTxn::ForFire) and emits the fire's changelog records: its
  // state changes, the timer's tombstone and a mark at the partition's
  // committed offset, committed with the timer's deletion.
  // kAborted if the partition was not checked.
  using TimerHandler = std::function<absl::Status(const TimerFire&, Txn&)>;
  absl::Status HandleFire(const TimerFire& fire, Txn& txn,
                          const TimerHandler& handler);

  // After a batch committed: if the partition's committed offset is now
  // `offset` but its last changelog mark is older (the batch ended with
  // records that emit nothing: duplicates, dead letters), commits a mark
  // with that offset, so the changelog's last complete commit is the
  // engine's again.
  absl::Status MarkHandled(const std::string& topic, int32_t partition,
                           int64_t offset);

 private:
  struct Fence {
    int64_t epoch = 0;
    // Entries of this epoch up to this offset were published before.
    int64_t published_up_to = -1;
    // The offset of the last mark committed ("o/<epoch>"), -1 for none.
    int64_t marked = -1;
  };

  // Keys a half-published commit left, each with the value to set it back
  // to (nullopt: deleted); the same for timers.
  struct SetBack {
    absl::btree_map<std::string, std::optional<std::string>> state;
    absl::btree_map<std::string, std::optional<ChangelogTimer>> timers;
  };
  // Fills `timers` with the engine's timer of each key of `keys` (nullopt
  // for a key without one).
  absl::Status SetTimersBack(
      const std::string& topic, int32_t partition,
      const absl::btree_set<std::string>& keys,
      absl::btree_map<std::string, std::optional<ChangelogTimer>>& timers);

  // Commits a mark of (topic, partition) at `offset` (-1: none) under
  // `epoch`, after setting the keys of `set_back` back.
  absl::Status CommitMark(const std::string& topic, int32_t partition,
                          int64_t epoch, int64_t offset,
                          const SetBack& set_back);

  // The engine's copy of a partition when its check began, before a
  // restore's chunks replace it.
  struct EngineCopy {
    std::optional<int64_t> offset;
    std::optional<int64_t> epoch;
  };
  // A copy's counters (StandbyCopy) when a check took it over.
  struct CopyCounts {
    int64_t records_read = 0;
    int64_t bytes_read = 0;
    int64_t writes_applied = 0;
    int64_t records_applied = 0;
    static CopyCounts Of(const StandbyCopy& copy) {
      return {copy.records_read, copy.bytes_read, copy.writes_applied,
              copy.records_applied};
    }
  };
  // A check under way (CheckStep), in phases: kBegin (the checkpoint's
  // shortcut), kEnds (this member's own copy: is it the changelog's last
  // commit? its marks and keys read in steps), kRestore (a copy read in
  // steps, then made the engine's).
  struct PendingCheck {
    enum class Phase { kBegin, kEnds, kRestore };
    Phase phase = Phase::kBegin;
    absl::Time start;
    RestoreReport report;  // what the phases read so far
    EngineCopy before;
    ChangelogImageBuilder ends{/*keep_state=*/false};  // kEnds
    int64_t ends_next = 0;
    std::unique_ptr<StandbyCopy> copy;  // kRestore
    bool from_standby = false;
    CopyCounts copy_before;
  };

  // One step of `check`, reading at most `budget` records (less what it
  // read): true once the check is done (check.report complete).
  absl::StatusOr<bool> AdvanceCheck(const std::string& topic, int32_t partition,
                                    PendingCheck& check, int64_t& budget);
  // kBegin: creates the topics (first time), takes the standby copy, tries
  // the checkpoint; true if that found the copy current.
  absl::StatusOr<bool> BeginCheck(const std::string& topic, int32_t partition,
                                  PendingCheck& check);
  // kEnds: true (fenced, checkpoint written) once the changelog was read to
  // its end and its last complete commit is the engine's; otherwise on to
  // kRestore with a cold copy.
  absl::StatusOr<bool> ReadEnds(const std::string& topic, int32_t partition,
                                PendingCheck& check, int64_t& budget);
  // kRestore's end, once check.copy was read to the changelog's end: reads
  // what came since, makes the copy the engine's under a new epoch.
  absl::StatusOr<RestoreReport> Restore(const std::string& topic,
                                        int32_t partition, PendingCheck& check);
  // The end of a restore, once the engine holds the changelog's copy under
  // `epoch`: commits the epoch's mark at `offset`, setting the keys of
  // `set_back` back, fences the partition, and completes `report`.
  absl::StatusOr<RestoreReport> FinishRestore(const std::string& topic,
                                              int32_t partition, int64_t epoch,
                                              std::optional<int64_t> offset,
                                              const SetBack& set_back,
                                              RestoreReport report,
                                              absl::Time start);
  // Check's first try, with a checkpoint of this member's `epoch`: reads
  // the changelog from the checkpoint on. True (the partition fenced and
  // the checkpoint moved to the end read) if what follows is nothing but
  // this epoch's complete commits up to `offset`, the engine's; false if
  // there is no such checkpoint, or the changelog from its start must be
  // read. Adds what it read to `report`.
  absl::StatusOr<bool> CurrentFromCheckpoint(const std::string& topic,
                                             int32_t partition, int64_t epoch,
                                             std::optional<int64_t> offset,
                                             RestoreReport& report);
  // The checkpoint kept for (topic, partition); nullopt if none (or a
  // damaged one: it is only a shortcut).
  absl::StatusOr<std::optional<ChangelogCheckpoint>> ReadCheckpoint(
      const std::string& topic, int32_t partition);
  absl::Status WriteCheckpoint(const std::string& topic, int32_t partition,
                               const ChangelogCheckpoint& checkpoint);
  // A new epoch for a restore: neither this member's old one nor the
  // changelog's last.
  int64_t NewEpoch(std::optional<int64_t> mine,
                   std::optional<int64_t> changelogs);

  ChangelogKeeper(Engine* engine, const ConsumerOptions& options,
                  const ConsumerHooks& hooks,
                  std::unique_ptr<PartitionReader> reader,
                  std::unique_ptr<Producer> direct,
                  std::shared_ptr<TopicConfigs> topic_configs);
  absl::StatusOr<std::optional<int64_t>> ReadEpoch(const std::string& topic,
                                                   int32_t partition);
  absl::Status ProduceOutsideCommit(ChangelogTxn& changelog);

  Engine* const engine_;
  const ConsumerOptions& options_;  // the consumer's, which outlives this
  const ConsumerHooks hooks_;
  const std::unique_ptr<PartitionReader> reader_;
  // ConsumerHooks::changelog_outside_commit only.
  const std::unique_ptr<Producer> direct_;
  ChangelogTarget target_;
  absl::Duration ttl_;
  Clock* clock_;
  ChangelogTopics topics_;
  mutable absl::Mutex fences_mu_;
  absl::flat_hash_map<int32_t, Fence> fences_ ABSL_GUARDED_BY(fences_mu_);
  absl::BitGen bitgen_;
  StandbyCopies standby_;
  CheckpointTracker checkpoints_;
  absl::flat_hash_map<int32_t, std::unique_ptr<PendingCheck>> pending_;
  absl::Time last_standby_round_ = absl::InfinitePast();
};

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_CHANGELOG_KEEPER_H_
