// EngineImpl is the Engine behind Engine::Open: the commit path (duplicate
// check, handler, one WriteBatch per call; engine/engine_commit.cc reads top
// to bottom as its steps), reads, durability, recovery from I/O errors,
// stats and maintenance. Thread-safety as documented on idem::Engine.
//
// Concurrency (docs/design.md, "Concurrency"): commits run their handlers in
// parallel. A commit claims its messages' IDs (engine/inflight_ids.h), so a
// second delivery of an ID waits for the first's outcome; its handlers read
// the store (or a queued commit's values), each read noted
// (engine/state_versions.h); then a short
// ordered critical section (order_mu_) validates those reads, assigns outbox
// positions and offsets, builds the WriteBatch and queues it
// (engine/commit_queue.h), whose group commit writes and syncs outside every
// engine lock. A commit whose reads were changed meanwhile runs its handlers
// again (Stats::handler_reruns), taking turns with other reruns (rerun_mu_).
//
// Recovery: after a failed write or sync, RocksDB refuses further writes
// (and some errors are permanent for that DB instance). The engine then
// closes and reopens its store before the next commit, so it is usable again
// once the cause (a full disk, a failing device) is gone. While a reopen
// fails, the store is opened read-only so reads keep answering from the
// committed data. Reopening replays the WAL and syncs; commits the OS lost in
// between would show as a lower recovered sequence, in which case the engine
// stops with kDataLoss rather than reuse sequence numbers it handed out.

#ifndef IDEM_ENGINE_ENGINE_IMPL_H_
#define IDEM_ENGINE_ENGINE_IMPL_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/synchronization/mutex.h"
#include "engine/batch_txn.h"
#include "engine/commit_batch.h"
#include "engine/commit_pass.h"
#include "engine/commit_queue.h"
#include "engine/commit_time_watermark.h"
#include "engine/dedupe_policy.h"
#include "engine/engine_clock.h"
#include "engine/engine_hooks.h"
#include "engine/inflight_ids.h"
#include "engine/latency_histogram.h"
#include "engine/outbox_record.h"
#include "engine/partition_commit.h"
#include "engine/plain_mutex.h"
#include "engine/record.h"
#include "engine/state_versions.h"
#include "engine/store.h"
#include "engine/timer_writes.h"
#include "engine/ttl_filter.h"
#include "engine/wal_syncer.h"
#include "idem/engine.h"
#include "idem/logger.h"

namespace idem {

class EngineImpl : public Engine {
 public:
  EngineImpl(std::string path, const Options& options,
             std::shared_ptr<EngineClock> time, const EngineHooks& hooks,
             std::shared_ptr<TtlFilterFactory> ttl_filter, StoreParts parts,
             std::unique_ptr<Store> store, const OutboxCursor& outbox);
  ~EngineImpl() override;

  // A commit whose handlers lose a conflict this many times runs them again
  // with priority: until it queues, commits that write state wait before
  // they queue (their handlers have run already), and so do writes outside
  // the handler path.
  static constexpr int kRerunsBeforePriority = 3;
  // The bound on a commit's reruns (docs/design.md, "Concurrency"): its
  // pass with priority starts once the writes outside the handler path
  // queued before it have landed, and nothing can invalidate it (unless
  // StateVersions forgets at kMaxKeys versions).
  static constexpr int kMaxReruns = kRerunsBeforePriority;

  absl::StatusOr<Result> Process(const Message& message,
                                 Handler handler) override;
  absl::StatusOr<std::vector<Result>> ProcessBatch(
      absl::Span<const Message> messages, Handler handler) override;
  using Engine::GetState;
  absl::StatusOr<std::optional<std::string>> GetState(
      std::string_view key) override;
  absl::Status ScanState(std::string_view begin, std::string_view end,
                         ScanVisitor visit,
                         const ScanOptions& options = ScanOptions()) override;
  absl::StatusOr<bool> Seen(std::string_view id) override;
  absl::StatusOr<bool> Seen(std::string_view id, std::string_view source,
                            int32_t partition) override;
  absl::Status Forget(std::string_view id) override;
  absl::Status Forget(std::string_view id, std::string_view source,
                      int32_t partition) override;
  absl::StatusOr<std::optional<int64_t>> CommittedOffset(
      std::string_view source, int32_t partition) override;
  absl::Status WaitDurable(uint64_t sequence) override;
  // WaitDurable of the latest commit: a sharded engine's WaitDurable
  // (engine/sharded_engine.h) covers the other shards with it.
  absl::Status WaitLatestDurable();
  absl::StatusOr<std::vector<OutboxEntry>> ReadOutbox(
      size_t max_entries) override;
  absl::StatusOr<std::vector<OutboxEntry>> ReadOutboxAfter(
      uint64_t position, size_t max_entries) override;
  absl::Status AckOutbox(uint64_t position) override;
  absl::StatusOr<Stats> GetStats() override;
  // From the outbox cursor alone: no store access.
  absl::StatusOr<uint64_t> OutboxPending() override {
    const OutboxCursor outbox = CurrentOutboxCursor();
    return outbox.issued - outbox.acked;
  }
  absl::Status CompactExpired() override;
  absl::Status Checkpoint(const std::string& dir) override;
  absl::Status Dump(
      absl::FunctionRef<absl::Status(const DumpEntry&)> visit) override;
  absl::StatusOr<PartitionSnapshot> ExportPartition(std::string_view source,
                                                    int32_t partition) override;
  absl::Status ImportPartition(const PartitionSnapshot& snapshot) override;
  Options options() override;
  absl::Status ImportPartition(const PartitionSnapshot& snapshot,
                               const ImportOptions& options) override;
  absl::Status ApplyPartitionChanges(const PartitionChanges& changes,
                                     const ImportOptions& options) override;
  absl::Status SetCommittedOffset(std::string_view source, int32_t partition,
                                  int64_t offset) override;
  absl::StatusOr<absl::Time> StreamTime(std::string_view source,
                                        int32_t partition) override;
  absl::StatusOr<size_t> FireTimers(std::string_view source, int32_t partition,
                                    TimeDomain domain, absl::Time up_to,
                                    size_t max, TimerHandler handler) override;
  absl::StatusOr<std::optional<TimerFire>> NextTimer(
      std::string_view source, int32_t partition, TimeDomain domain) override;

 private:
  class RerunTurn;
  // Adds the timer side of `commit` to `batch`: for a replace, the
  // partition's timers, stream time and dead-lettered timers deleted and
  // the commit's written; otherwise the commit's timer changes, each
  // replacing the key's timer; the commit's stream time if later than
  // `stored`.
  absl::Status BuildPartitionTimers(const PartitionCommit& commit,
                                    const Store& store, int64_t stored,
                                    rocksdb::WriteBatch& batch) const;
  // Reads the partition's stream time and timers through `read` into
  // `snapshot`.
  absl::Status ExportTimers(const Store& store,
                            const rocksdb::ReadOptions& read,
                            PartitionSnapshot& snapshot) const;
  // Writes `commit` under the commit lock (engine/engine_partition_commit.cc,
  // whose top draws its steps): returns the sequence number to make durable.
  absl::StatusOr<uint64_t> CommitToPartition(const PartitionCommit& commit,
                                             const ImportOptions& options)
      ABSL_LOCKS_EXCLUDED(commit_mu_, store_mu_);
  // Whether the commit's own record (`plan.own_key`) is live in `store`: a
  // repeat of the commit.
  absl::StatusOr<bool> CommittedBefore(Store& store, const PartitionPlan& plan)
      ABSL_SHARED_LOCKS_REQUIRED(store_mu_);
  // CommitToPartition's steps. PlanPartitionCommit also marks the store
  // formats the commit needs and creates the buckets it places records in.
  absl::StatusOr<PartitionPlan> PlanPartitionCommit(
      const PartitionCommit& commit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(commit_mu_)
      ABSL_LOCKS_EXCLUDED(store_mu_);
  // kFailedPrecondition if `store` cannot take `commit` (records into a
  // store-scoped store, an offset behind the stored one without
  // allow_rewind); else the stored offset.
  absl::StatusOr<std::optional<int64_t>> CheckPartitionCommit(
      const Store& store, const PartitionCommit& commit,
      const ImportOptions& options) const;
  // Add to `batch`: the partition's state (for a replace, the old state and
  // records deleted first); its live records and the commit's own; its
  // offset (deleted by a replace without one, `current` being stored).
  absl::Status BuildPartitionState(const PartitionCommit& commit,
                                   const Store& store,
                                   rocksdb::WriteBatch& batch) const;
  absl::Status BuildPartitionRecords(const PartitionCommit& commit,
                                     const PartitionPlan& plan,
                                     const Store& store,
                                     rocksdb::WriteBatch& batch) const;
  absl::Status BuildPartitionOffset(const PartitionCommit& commit,
                                    const std::optional<int64_t>& current,
                                    const Store& store,
                                    rocksdb::WriteBatch& batch) const;
  // SetCommittedOffset's write, under the commit lock: returns the sequence
  // number to make durable.
  absl::StatusOr<uint64_t> CommitOffset(std::string_view source,
                                        int32_t partition, int64_t offset)
      ABSL_LOCKS_EXCLUDED(commit_mu_, store_mu_);

  // The commit path of ProcessBatch (engine/engine_commit.cc, whose top
  // draws its steps), after validation, at `now_micros` (the engine time
  // read under the store lock), each message's record placed by
  // `placements` (PlaceRecords, engine/commit_batch.h): claims the IDs,
  // reads the live records and stored offsets (ReadStored), runs the
  // handlers (RunHandlers), then validates, builds, queues and writes the
  // commit (WriteCommit; the handlers run again if a read went stale) and
  // publishes its outcomes. If the handlers merged into a store of a format
  // older than merges (or timers and stream times) need, or wrote values
  // that expire into one older than format 6, commits nothing and sets
  // `needs_format` to the format needed (FormatNeeded; the caller marks the
  // store and calls again).
  absl::StatusOr<std::vector<Result>> CommitBatch(
      Store& store, absl::Span<const Message> messages,
      absl::Span<const RecordPlacement> placements, Handler handler,
      int64_t now_micros, int& needs_format)
      ABSL_SHARED_LOCKS_REQUIRED(store_mu_) ABSL_LOCKS_EXCLUDED(order_mu_);

  // Marks the store as of format `version` (kMergeFormatVersion,
  // kTimerFormatVersion, or kStateTtlFormatVersion through
  // MarkStateTtlFormat), under the store lock taken exclusively.
  absl::Status MarkFormat(int version) ABSL_EXCLUSIVE_LOCKS_REQUIRED(commit_mu_)
      ABSL_LOCKS_EXCLUDED(store_mu_);

  // How the state reads of a call judge expiry in `store` at `now_micros`
  // (no check under EngineHooks::skip_state_expiry_check).
  StateReadTime StateReadTimeAt(const Store& store, int64_t now_micros) const;
  // What a handler's Txn in `store` judges expiry by and stamps its writes
  // with, at the commit's engine time `now_micros` (a message's handler and
  // a timer's alike): StateReadTimeAt, and Options::state_ttl.
  BatchTxn::StateTime HandlerStateTime(const Store& store,
                                       int64_t now_micros) const;
  // The engine time of a commit (a message batch's, or a timer round's)
  // in `store`: in a store whose state expires (format 6), read and
  // registered by `commit_time` as one step, until it ends with the
  // commit's write (engine/commit_time_watermark.h); else just read.
  absl::StatusOr<int64_t> ReadCommitTime(
      const Store& store, CommitTimeWatermark::InFlight& commit_time);
  // As StateReadTimeAt at the engine's time now, read only for a store of
  // format 6; the clock's error if it cannot be read.
  absl::StatusOr<StateReadTime> StateReadTimeNow(const Store& store);

  // A commit from its queueing to its landing. Whatever ends the commit
  // path, a return or an exception (an allocation failing), its destructor
  // waits for the queued writer (the queue points to it, and the writers
  // behind it wait for it) and then publishes the pended state writes (a
  // read of a key they merge into waits for that), so nothing is left in
  // flight. A commit ended by an exception may have landed: its caller
  // learns no outcome, as with kUnknown, and a redelivery is a duplicate.
  // Not thread-safe: one commit's.
  class InFlightCommit {
   public:
    InFlightCommit(CommitQueue* queue, StateVersions* versions, rocksdb::DB* db,
                   CommitQueue::Writer* writer)
        : queue_(queue), versions_(versions), db_(db), writer_(writer) {}
    InFlightCommit(const InFlightCommit&) = delete;
    InFlightCommit& operator=(const InFlightCommit&) = delete;
    ~InFlightCommit();

    // In the ordered critical section: registers `writes` (which must
    // outlive this) as in flight and closes the validated pass `reads`,
    // then queues the writer.
    void Pend(const StateLayer& writes, StateReads& reads);
    void Queue();
    // Waits for the queued writer's write (once): its status.
    rocksdb::Status Wait();
    // Publishes the pended writes (once).
    void Publish();

   private:
    CommitQueue* const queue_;
    StateVersions* const versions_;
    rocksdb::DB* const db_;
    CommitQueue::Writer* const writer_;
    const StateLayer* writes_ = nullptr;
    uint64_t version_ = 0;
    bool queued_ = false;
    bool waited_ = false;
  };

  // The timer side of a commit for QueueCommit: its writes (built into the
  // batch, the stream times advanced), the reads of timer index entries its
  // handlers made (validated), and the version its index writes were
  // registered at (set by QueueCommit, for timer_versions_.Publish).
  struct TimerCommit {
    TimerWrites& writes;
    const StateReads& reads;
    rocksdb::ColumnFamilyHandle* family;
    uint64_t version = 0;
  };

  // What QueueCommit did.
  enum class Queued {
    kStale,    // a read of `reads` may be stale: run the handlers again
    kYield,    // another commit's handlers run with priority: wait for its
               // turn to end (RerunTurn::AwaitPriority), then queue again
               // (QueueCommit does)
    kNothing,  // the commit writes nothing: nothing queued
    kBarrier,  // it writes nothing, but its handlers read values of
               // commits in flight: its empty writer is queued behind
               // them, wait for it
    kQueued,   // `writer` is queued: wait for it
  };
  // The ordered critical section of a commit (QueueInOrder), taken again
  // while it must yield (kYield: another commit's handlers run with
  // priority; `rerun_turn` waits for its turn to end), so it never returns
  // kYield. A commit without priority (RerunTurn::priority) that writes
  // state yields while another has it.
  absl::StatusOr<Queued> QueueCommit(
      CommitBuilder& commit, StateReads& reads, const StoredOffsets& stored,
      rocksdb::WriteBatch& batch, rocksdb::WriteBatch& records,
      InFlightCommit& in_flight, RerunTurn& rerun_turn,
      TimerCommit* timers = nullptr) ABSL_LOCKS_EXCLUDED(order_mu_);
  // The ordered critical section of a commit, in three steps under
  // order_mu_: validates `reads` (ValidateReads), builds `commit` into
  // `batch` (BuildBatch; `records` gets the dedupe records; it is `batch`
  // except for the split_commit hook) at the next outbox positions and with
  // each partition's offset only if above the latest one queued or stored
  // (LatestOffsets; `stored`: read before the handlers), then registers its
  // state writes as in flight and queues its writer (Enqueue, both through
  // `in_flight`). With `timers`, also validates its reads and event-time
  // timers (engine/timer_writes.h), builds its writes and registers its
  // index writes (TimerCommit::version). Fails only as CommitBuilder::Build.
  absl::StatusOr<Queued> QueueInOrder(CommitBuilder& commit, StateReads& reads,
                                      const StoredOffsets& stored,
                                      rocksdb::WriteBatch& batch,
                                      rocksdb::WriteBatch& records,
                                      InFlightCommit& in_flight, bool priority,
                                      TimerCommit* timers)
      ABSL_LOCKS_EXCLUDED(order_mu_);
  // kYield or kStale if the commit may not queue now, nullopt if it may.
  std::optional<Queued> ValidateReads(const CommitBuilder& commit,
                                      const StateReads& reads, bool priority,
                                      const TimerCommit* timers)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(order_mu_);
  // Per offset key `commit` writes, the offset to compare with: the latest
  // queued, else the stored one.
  StoredOffsets LatestOffsets(const CommitBuilder& commit,
                              const StoredOffsets& stored)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(order_mu_);
  absl::Status BuildBatch(CommitBuilder& commit, const StoredOffsets& latest,
                          const OutboxCursor& outbox,
                          rocksdb::WriteBatch& batch,
                          rocksdb::WriteBatch& records, TimerCommit* timers)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(order_mu_);
  // The offsets and outbox positions `commit` takes become the latest
  // queued; its writes are registered as in flight and its writer queued.
  void Enqueue(const CommitBuilder& commit, StateReads& reads,
               const StoredOffsets& latest, const OutboxCursor& outbox,
               InFlightCommit& in_flight, TimerCommit* timers)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(order_mu_);
  // Waits for the write of a commit that QueueCommit `queued` (a barrier's
  // wait, a write's and then TimersLanded; nothing for kNothing): OK or the
  // write's error (AwaitWrite).
  absl::Status WriteQueued(Store& store, Queued queued,
                           InFlightCommit& in_flight,
                           rocksdb::WriteBatch& batch, uint64_t failed_syncs,
                           const TimerCommit& timers)
      ABSL_SHARED_LOCKS_REQUIRED(store_mu_) ABSL_LOCKS_EXCLUDED(order_mu_);

  // After the write of a commit with `timers` landed (or failed): publishes
  // its index writes and lowers the cursors below the timers it put.
  void TimersLanded(const TimerCommit& timers, bool landed);

  // Loads the stream times of the partitions whose messages carry an event
  // time (so the ordered critical section finds them loaded).
  absl::Status LoadStreamTimes(Store& store, absl::Span<const Message> messages)
      ABSL_SHARED_LOCKS_REQUIRED(store_mu_);

  // The partition key and event time (µs) a committed `message` advances
  // its stream time to: nullopt for a message without a source or event
  // time, or with one beyond kMaxEventTimeAhead past `now_micros`.
  static std::optional<int64_t> StreamAdvance(const Message& message,
                                              int64_t now_micros);
  // Whether a message of `messages` would advance its stream time.
  static bool CarriesStreamTime(absl::Span<const Message> messages,
                                int64_t now_micros);

  // What one round of FireTimers did: how many timers fired (committed),
  // the last queue key it fired, and a transient handler failure that
  // stopped it.
  struct FireRound {
    size_t fired = 0;
    absl::Status failure;
    // Set when the handlers' state writes need a newer store format:
    // nothing was written; the caller marks the store and runs the round
    // again (its handlers run again, as a message's do).
    int needs_format = 0;
  };
  // Fires up to `max` due timers of the queue starting at `queue_start`
  // (partition key `partition_key`, the fire's `fire` fields set but its
  // key, time and payload) due at or before `limit_micros`, in one commit
  // at engine time `now_micros` (what the handlers' reads judge expiry by
  // and their writes expire from, as a message commit's).
  absl::StatusOr<FireRound> FireRoundLocked(Store& store,
                                            const TimerFire& partition,
                                            const std::string& partition_key,
                                            int64_t limit_micros, size_t max,
                                            int64_t now_micros,
                                            TimerHandler handler)
      ABSL_SHARED_LOCKS_REQUIRED(store_mu_);

  // One round's run of its due timers' handlers (FireOne): what it reads
  // (the partition's index entries in flight, `in_flight`, read at its
  // start) and where it puts what they do.
  struct FirePass {
    Store& store;
    const TimerFire& partition;
    const std::string& partition_key;
    TimerHandler handler;
    const StateVersions::RangeRead& in_flight;
    StateReads& timer_reads;
    CommitBuilder& commit;
    StateReads& reads;
    TimerWrites& timers;
    TimerWrites& split;  // EngineHooks::fire_outside_commit's deletions
    int64_t now_micros;  // the round's engine time
    FireRound round = {};
    uint64_t dead = 0;      // dead-lettered (a PermanentError)
    uint64_t handlers = 0;  // handlers run
  };
  // Writes the commit of `pass` (and, under EngineHooks::fire_outside_commit,
  // its deletions apart first): true once written, false if a read went
  // stale (nothing queued: the handlers run again).
  absl::StatusOr<bool> CommitFireRound(FirePass& pass, RerunTurn& rerun_turn)
      ABSL_SHARED_LOCKS_REQUIRED(store_mu_) ABSL_LOCKS_EXCLUDED(order_mu_);
  // Runs the handler of the due timer `fire` (queue key `queue_key`) into
  // `pass`, unless an earlier fire of the round or a commit in flight moved
  // or cancelled it: true to go on, false after a transient failure
  // (FireRound::failure), which ends the round.
  absl::StatusOr<bool> FireOne(FirePass& pass, TimerFire& fire,
                               const std::string& queue_key)
      ABSL_SHARED_LOCKS_REQUIRED(store_mu_);

  // Holds rerun_mu_ from Take until Release or its end: the turn of a
  // commit whose handlers run again; with TakePriority, the turn holds
  // priority too (priority_ under order_mu_), which Release gives up.
  class RerunTurn {
   public:
    explicit RerunTurn(EngineImpl* engine) : engine_(engine) {}
    RerunTurn(const RerunTurn&) = delete;
    RerunTurn& operator=(const RerunTurn&) = delete;
    ~RerunTurn() { Release(); }
    void Take() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      if (!held_) engine_->rerun_mu_.Lock();
      held_ = true;
    }
    // REQUIRES: taken.
    void TakePriority();
    bool priority() const { return priority_; }
    void Release() ABSL_NO_THREAD_SAFETY_ANALYSIS;
    // Waits until the commit with priority has queued (QueueCommit said
    // kYield). REQUIRES: not taken (the commit with priority holds
    // rerun_mu_).
    void AwaitPriority() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      engine_->rerun_mu_.Lock();
      engine_->rerun_mu_.Unlock();
    }

   private:
    EngineImpl* const engine_;
    bool held_ = false;
    bool priority_ = false;
  };

  // Waits for the write of `in_flight` (holding `batch`) to land, then
  // publishes its state writes: OK, or the write's error as Landed gives it
  // (`failed_syncs`: the WAL's failed syncs counted before the commit was
  // queued). An empty `batch` (a barrier) only waits.
  absl::Status AwaitWrite(Store& store, InFlightCommit& in_flight,
                          rocksdb::WriteBatch& batch, uint64_t failed_syncs)
      ABSL_SHARED_LOCKS_REQUIRED(store_mu_) ABSL_LOCKS_EXCLUDED(order_mu_);

  // Where a Seen or Forget looks: the message's source and partition, for a
  // partition-scoped store.
  struct SourcePartition {
    std::string_view source;
    int32_t partition = 0;
  };

  // Seen and Forget, with or without a source and partition.
  absl::StatusOr<bool> SeenAt(std::string_view id,
                              std::optional<SourcePartition> where);
  absl::Status ForgetAt(std::string_view id,
                        std::optional<SourcePartition> where);

  // The record key of `id` (at `where`) in `store`: kInvalidArgument for a
  // bad id, source or partition; kFailedPrecondition for a partition-scoped
  // store without `where`.
  absl::StatusOr<RecordKey> CheckedRecordKey(
      const Store& store, std::string_view id,
      std::optional<SourcePartition> where) const;

  // Counts the outcomes (and `emitted` outbox entries) of a landed commit
  // and sets the outcomes' sequence: `own_sequence`, its write's last
  // record's, or the store's latest if 0 (it wrote nothing of its own).
  void CountOutcomes(Store& store, std::vector<Result>& results,
                     const DuplicateAges& ages, uint64_t emitted,
                     uint64_t own_sequence);

  // CommitBatch's steps (engine/engine_commit.cc). ReadStored fills `in`'s
  // stored records, offsets and fingerprints.
  absl::Status ReadStored(Store& store, CommitInput& in)
      ABSL_SHARED_LOCKS_REQUIRED(store_mu_);
  // Runs the handlers of `in` into `run` (HandleMessages): the outcomes.
  absl::StatusOr<std::vector<Result>> RunHandlers(Store& store,
                                                  const CommitInput& in,
                                                  HandlerRun& run)
      ABSL_SHARED_LOCKS_REQUIRED(store_mu_);
  // The store format what `run` wrote needs, if `store` is older; else 0.
  int FormatNeeded(const Store& store, const HandlerRun& run) const;
  // The store format the state writes `state` holds need (values that
  // expire, merge operands), if `store` is older; else 0.
  static int StateFormatNeeded(const Store& store, const BatchOverlay& state);
  // Validates, builds and queues `run` (QueueCommit), then waits for its
  // write (WriteQueued) and, with the split_commit hook, writes its records
  // apart: true once written, false if a read went stale (nothing queued:
  // the handlers run again).
  absl::StatusOr<bool> WriteCommit(Store& store, const CommitInput& in,
                                   HandlerRun& run, RerunTurn& rerun_turn)
      ABSL_SHARED_LOCKS_REQUIRED(store_mu_) ABSL_LOCKS_EXCLUDED(order_mu_);

  // The duplicate check and handler of each message in order
  // (engine/engine_handle.cc). A success adds its state writes and dedupe
  // record to `pass.commit`, a permanent failure its failed record, a
  // refreshed duplicate its moved record; every message adds its outcome.
  // Fails only on a storage error a handler's read met, or a bucket
  // MaintainBuckets should have created (kInternal).
  absl::StatusOr<std::vector<Result>> HandleMessages(HandlePass& pass)
      ABSL_SHARED_LOCKS_REQUIRED(store_mu_);

  // HandleMessages' steps for message `i`. A repeat of an ID that message
  // `first` of the same batch committed gets `first_result`'s outcome.
  Result RepeatInBatch(const HandlePass& pass, size_t i, size_t first,
                       const Result& first_result) const;
  // A redelivery of an ID with a live stored record; under
  // refresh_on_duplicate it may move the record to a later expiry.
  absl::StatusOr<Result> Redelivered(HandlePass& pass, size_t i,
                                     const LiveRecord& live)
      ABSL_SHARED_LOCKS_REQUIRED(store_mu_);
  // Adds the moved record of a duplicate whose placement expires later than
  // `live` does.
  absl::Status RefreshRecord(HandlePass& pass, size_t i, const LiveRecord& live,
                             int64_t first_micros)
      ABSL_SHARED_LOCKS_REQUIRED(store_mu_);
  // Runs the handler of a first delivery and adds its writes and record.
  absl::StatusOr<Result> RunHandler(HandlePass& pass, size_t i)
      ABSL_SHARED_LOCKS_REQUIRED(store_mu_);
  // kConflict if message `i`'s fingerprint is known, differs from the first
  // delivery's `first_print`, and conflicts are detected; else kDuplicate.
  Outcome RedeliveryOutcome(const HandlePass& pass, size_t i,
                            std::optional<uint64_t> first_print) const;

  // The family `placement` puts a record in (kInternal if its bucket is
  // missing).
  absl::StatusOr<rocksdb::ColumnFamilyHandle*> FamilyFor(
      const Store& store, const RecordPlacement& placement) const
      ABSL_SHARED_LOCKS_REQUIRED(store_mu_);

  // Expiry buckets (engine/expiry_buckets.h): whether a bucket has ended or
  // one that `placements` need is missing, so that MaintainBuckets has work.
  bool BucketsChange(const Store& store,
                     absl::Span<const RecordPlacement> placements,
                     int64_t now_micros) const
      ABSL_SHARED_LOCKS_REQUIRED(store_mu_);

  // Drops the buckets that have ended and creates those `placements` need,
  // under the store lock taken exclusively (ProcessBatch calls it only when
  // BucketsChange).
  absl::Status MaintainBuckets(absl::Span<const RecordPlacement> placements,
                               int64_t now_micros)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(commit_mu_) ABSL_LOCKS_EXCLUDED(store_mu_);

  // Buckets ending at or before this instant are dropped: `now_micros`
  // (earlier under EngineHooks::drop_buckets_at_start).
  int64_t BucketDropHorizon(int64_t now_micros) const;

  // Drops the buckets that have ended.
  absl::Status DropEndedBuckets(Store& store, int64_t now_micros)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(store_mu_);

  // For each key, the stored result if a live record exists in a dedupe
  // family live at `now_micros` (LookupLive, engine/commit_batch.h).
  absl::StatusOr<LiveLookup> LookupLiveRecords(Store& store,
                                               absl::Span<const RecordKey> keys,
                                               int64_t now_micros)
      ABSL_SHARED_LOCKS_REQUIRED(store_mu_);

  // Writes `batch` with the configured durability, through the commit queue
  // (the calls outside the handler path: Forget, imports, offsets). Offsets
  // it writes become the latest queued; if it writes state, every handler
  // read in flight counts as stale. A failure marks the store for reopening.
  absl::Status Write(Store& store, rocksdb::WriteBatch* batch)
      ABSL_SHARED_LOCKS_REQUIRED(store_mu_) ABSL_LOCKS_EXCLUDED(order_mu_);

  // After the write of `batch` returned `s`: OK and the counters of a
  // landed write, or an error with the store marked for reopening: kUnknown
  // if a WAL sync failed since `failed_syncs` was counted (before the write
  // was queued: its group may have reached the log, which a reopen would
  // replay), otherwise the converted RocksDB error (nothing committed).
  absl::Status Landed(Store& store, const rocksdb::Status& s,
                      const rocksdb::WriteBatch& batch, uint64_t failed_syncs);

  // Records the offsets `batch` puts or deletes as the latest queued
  // (deleted: none, -1); whether it writes to the state family.
  bool NoteQueuedWrites(const Store& store, const rocksdb::WriteBatch& batch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(order_mu_);

  // Whether one of this engine's handlers is running anywhere on the calling
  // thread's stack (also further up, when that handler called another engine
  // whose handler called back into this one).
  bool InsideOwnHandler() const;

  // kFailedPrecondition if called from inside one of this engine's handlers,
  // at any depth (the call could wait for the commit the handler is part of:
  // its shared hold of store_mu_, its claimed IDs or its queued write).
  absl::Status RejectInsideHandler(const char* call) const;

  // kFailedPrecondition for a call that writes, on a read-only engine.
  absl::Status RejectIfReadOnly(const char* call) const;

  // For calls that need a writable store but no commit (WaitDurable,
  // CompactExpired, Checkpoint): rejects calls from inside a handler, then
  // reopens the store if an earlier failure asked for it.
  absl::Status PrepareOutsideCommit(const char* call)
      ABSL_LOCKS_EXCLUDED(commit_mu_, store_mu_);

  // ReadOutbox and ReadOutboxAfter (named `call` in errors): the durable
  // entries above max(`position`, the acknowledged prefix).
  absl::StatusOr<std::vector<OutboxEntry>> ReadOutboxFrom(const char* call,
                                                          uint64_t position,
                                                          size_t max_entries);

  // Holds store_mu_ shared for one read call, except from inside one of this
  // engine's handlers, whose commit already holds it (absl::Mutex is not
  // re-entrant). To the thread-safety analysis it always holds the lock,
  // which is true of the thread either way.
  class ABSL_SCOPED_LOCKABLE ReadLock {
   public:
    explicit ReadLock(EngineImpl* engine)
        ABSL_SHARED_LOCK_FUNCTION(engine->store_mu_);
    ReadLock(const ReadLock&) = delete;
    ReadLock& operator=(const ReadLock&) = delete;
    ~ReadLock() ABSL_UNLOCK_FUNCTION();

   private:
    EngineImpl* const engine_;
    const bool locked_;
  };

  // Holds commit_mu_ (recovery, bucket changes, the writes outside the
  // handler path) for its scope.
  class ABSL_SCOPED_LOCKABLE CommitLock {
   public:
    explicit CommitLock(EngineImpl* engine)
        ABSL_EXCLUSIVE_LOCK_FUNCTION(engine->commit_mu_)
        : engine_(engine) {
      engine_->commit_mu_.Lock();
    }
    CommitLock(const CommitLock&) = delete;
    CommitLock& operator=(const CommitLock&) = delete;
    ~CommitLock() ABSL_UNLOCK_FUNCTION() { engine_->commit_mu_.Unlock(); }

   private:
    EngineImpl* const engine_;
  };

  // One of the engine's own events (a reopen, bucket drops), prefixed
  // "idem: ", to Options::logger; without one, appended to the store's LOG
  // file (read-only engines: nowhere). Best effort: never fails.
  void LogEvent(LogSeverity severity, std::string_view message) const;

  // Reopens the store if an earlier failure asked for it, and only then
  // clears the commit queue's failure (CommitQueue::Reset), with store_mu_
  // held exclusively. That is the invariant that makes a dirty read after a
  // failed write impossible: every commit holds store_mu_ shared from its
  // handlers' first read until its write (or barrier) has landed or
  // failed, so none is in flight at the Reset, and each that read a value
  // of the failed write (in flight, StateVersions) was queued behind it
  // and failed with it (EngineCommitTest.
  // ReopenAfterAFailedWriteLetsNoDirtyReadOut).
  absl::Status RecoverIfNeeded() ABSL_EXCLUSIVE_LOCKS_REQUIRED(commit_mu_)
      ABSL_LOCKS_EXCLUDED(store_mu_);

  // Makes every commit up to `sequence` durable (under kBuffered; a no-op
  // under kSync or read-only). A failure marks the store for reopening.
  absl::Status MakeDurable(Store& store, uint64_t sequence)
      ABSL_SHARED_LOCKS_REQUIRED(store_mu_);

  // The outbox cursor as the commits so far left it. acked is read first:
  // both only grow, so the pair read is never acked > issued.
  OutboxCursor CurrentOutboxCursor() const {
    const uint64_t acked = outbox_acked_.load();
    return OutboxCursor{outbox_issued_.load(), acked};
  }

  // The open store, or kUnavailable/kDataLoss if recovery has not succeeded.
  absl::StatusOr<Store*> CurrentStore() ABSL_SHARED_LOCKS_REQUIRED(store_mu_);

  // Constant after construction.
  const std::string path_;
  const Options options_;
  // Every read of time goes through it; shared with the TTL filter.
  const std::shared_ptr<EngineClock> clock_;
  const EngineHooks hooks_;
  const std::shared_ptr<TtlFilterFactory> ttl_filter_;
  const StoreParts parts_;
  WalSyncer syncer_;

  // Lock order: commit_mu_, then store_mu_, then rerun_mu_, then order_mu_,
  // then the locks of inflight_, versions_, queue_ and the syncer (none of
  // them is held while a handler runs or through a sync, except rerun_mu_
  // by a handler that runs again; see engine/wal_syncer.h).
  // One recovery, bucket change or write outside the handler path (Forget,
  // AckOutbox, imports, offsets) at a time; commits of ProcessBatch take it
  // only to recover or change buckets.
  PlainMutex commit_mu_ ABSL_ACQUIRED_BEFORE(store_mu_);
  // Shared by every use of store_ (a commit holds it from its lookups until
  // its write landed); exclusive to replace it or change its buckets.
  absl::Mutex store_mu_ ABSL_ACQUIRED_BEFORE(rerun_mu_);
  // Handlers that run again after a stale read take turns under it, so a
  // hot key's losers do not keep invalidating each other. Guards nothing.
  absl::Mutex rerun_mu_ ABSL_ACQUIRED_BEFORE(order_mu_);
  // The ordered critical section: validation, outbox positions, offsets,
  // queueing. Held for microseconds, never while a handler runs or a write
  // is in progress. A PlainMutex: taken on every commit, it skips Debian's
  // Abseil lock-cycle checks (engine/plain_mutex.h).
  PlainMutex order_mu_;
  // The latest offset queued per offset key (engine/record.h), -1 for one
  // deleted: newer than any stored offset a commit read before it queued.
  // Cleared when the store is reopened.
  absl::flat_hash_map<std::string, int64_t> queued_offsets_
      ABSL_GUARDED_BY(order_mu_);
  // Whether a commit's handlers run with priority (RerunTurn::TakePriority).
  bool priority_ ABSL_GUARDED_BY(order_mu_) = false;
  // IDs in flight, the versions of state keys, and the group commit.
  InflightIds inflight_;
  StateVersions versions_;
  // The engine times of the commits in flight in a store of format 6:
  // CompactExpired's removal horizon (engine/commit_time_watermark.h).
  CommitTimeWatermark watermark_;
  // Timers (engine/timer_writes.h): the versions of their index entries,
  // each partition's stream time as queued, and the fire cursors.
  StateVersions timer_versions_;
  StreamTimes stream_times_;
  TimerCursors timer_cursors_;
  // Its failure is cleared only by RecoverIfNeeded, under store_mu_ held
  // exclusively.
  CommitQueue queue_;
  std::unique_ptr<Store> store_ ABSL_GUARDED_BY(store_mu_);
  // Set by a failed write or sync; cleared by a successful reopen.
  std::atomic<bool> needs_reopen_{false};
  // Why the store is closed, while it is.
  absl::Status store_error_ ABSL_GUARDED_BY(store_mu_);
  // Set when a reopen found commits missing; permanent for this engine.
  bool commits_lost_ ABSL_GUARDED_BY(store_mu_) = false;
  // The highest sequence a commit has returned; a reopened store must reach
  // it, or commits were lost.
  std::atomic<uint64_t> issued_sequence_{0};
  // The outbox cursor (engine/outbox_record.h) as of the last commit or
  // acknowledgement queued; written only under order_mu_, reloaded from the
  // store when it is reopened.
  std::atomic<uint64_t> outbox_issued_{0};
  std::atomic<uint64_t> outbox_acked_{0};

  // The durations of the commits' writes (queueing, group write, sync)
  // since Open, in microseconds (Stats::commit_durations). Taken once a
  // commit: a PlainMutex (engine/plain_mutex.h).
  PlainMutex durations_mu_;
  LatencyHistogram commit_micros_ ABSL_GUARDED_BY(durations_mu_);
  // Counters since Open.
  std::atomic<uint64_t> processed_{0};
  std::atomic<uint64_t> duplicates_{0};
  std::atomic<uint64_t> failed_{0};
  std::atomic<uint64_t> conflicts_{0};
  std::atomic<uint64_t> handler_reruns_{0};
  std::atomic<uint64_t> late_duplicates_{0};
  RedeliveryAges redelivery_ages_;
  std::atomic<uint64_t> user_bytes_{0};
  std::atomic<uint64_t> outbox_emitted_{0};
  std::atomic<uint64_t> outbox_acknowledged_{0};
  std::atomic<uint64_t> timers_fired_{0};
  std::atomic<uint64_t> timers_dead_lettered_{0};
  std::atomic<uint64_t> timer_failures_{0};
  std::atomic<uint64_t> buckets_dropped_{0};
  std::atomic<uint64_t> bucket_records_dropped_{0};
};

}  // namespace idem

#endif  // IDEM_ENGINE_ENGINE_IMPL_H_
