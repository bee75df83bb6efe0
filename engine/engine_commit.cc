// EngineImpl's commit path (docs/design.md, "The commit path"), top to
// bottom as its steps:
//
//   ProcessBatch   validates the messages, places their records and readies
//                  the store (its format, its expiry buckets), then
//   CommitBatch    1. claims the IDs (InflightIds) and reads what is stored
//                     (ReadStored);
//                  2. runs the handlers (RunHandlers, engine/engine_handle.cc);
//                  then, in the ordered critical section (QueueCommit):
//                  3. validates their reads (ValidateReads),
//                  4. builds the WriteBatch (BuildBatch),
//                  5. queues it (Enqueue);
//                  6. waits for the group commit's write, which syncs under
//                     kSync (WriteQueued, AwaitWrite, Landed);
//                  7. publishes its state writes (InFlightCommit::Publish)
//                     and its outcomes (CountOutcomes);
//   WaitDurable    8. the sync under kBuffered, asked for by the caller
//                     (MakeDurable).
//
// A read that went stale at step 3 sends the commit back to step 2. The
// pieces the steps share (InFlightCommit, RerunTurn) close the file.

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "engine/engine_impl.h"
#include "engine/outbox_store.h"
#include "engine/record.h"
#include "engine/status_util.h"
#include "engine/tsan_scope.h"
#include "engine/validate.h"

namespace idem {
namespace {

// The WriteBatch header, and the bytes a commit reserves per message: a
// dedupe record (tag, family, 16-byte key, 13-byte value, lengths) and a
// short state write.
constexpr size_t kBatchHeaderBytes = 12;
constexpr size_t kBatchBytesPerMessage = 80;

// A commit whose write failed while a WAL sync failed (engine/wal_watch.h):
// its record may have reached the log, which the next reopen replays.
absl::Status CommitOutcomeUnknown(const rocksdb::Status& s) {
  return absl::UnknownError(absl::StrCat(
      "committing: the outcome is unknown: the write reached the write-ahead "
      "log but syncing it failed, so the commit may be recovered by the "
      "reopen or lost; retrying is safe: a retry returns the committed "
      "outcome (kDuplicate with its result) if it was kept, and runs the "
      "message otherwise (",
      s.ToString(), ")"));
}

// kInvalidArgument naming the first message that is not valid.
absl::Status ValidateMessages(absl::Span<const Message> messages) {
  for (size_t i = 0; i < messages.size(); ++i) {
    if (absl::Status s = ValidateMessage(messages[i]); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("message ", i, ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

void AddIfNonZero(std::atomic<uint64_t>& counter, uint64_t n) {
  if (n != 0) counter.fetch_add(n, std::memory_order_relaxed);
}

// A commit's outcomes, counted by kind.
struct OutcomeCounts {
  uint64_t processed = 0;
  uint64_t duplicates = 0;
  uint64_t conflicts = 0;
  uint64_t failed = 0;

  void Add(Outcome outcome) {
    switch (outcome) {
      case Outcome::kProcessed:
        ++processed;
        break;
      case Outcome::kDuplicate:
        ++duplicates;
        break;
      case Outcome::kConflict:
        ++conflicts;
        break;
      case Outcome::kFailed:
        ++failed;
        break;
    }
  }
};

}  // namespace

absl::StatusOr<std::vector<Result>> EngineImpl::ProcessBatch(
    absl::Span<const Message> messages, Handler handler) {
  if (absl::Status s = ValidateMessages(messages); !s.ok()) return s;
  if (absl::Status s = RejectInsideHandler("ProcessBatch"); !s.ok()) return s;
  if (absl::Status s = RejectIfReadOnly("ProcessBatch"); !s.ok()) return s;
  if (messages.empty()) return std::vector<Result>();
  // Under kBuffered a sync about to start waits for this commit to join it.
  std::optional<WalSyncer::CommitScope> in_flight;
  if (options_.durability == Durability::kBuffered) in_flight.emplace(&syncer_);
  if (needs_reopen_.load()) {
    CommitLock commit_lock(this);
    if (absl::Status s = RecoverIfNeeded(); !s.ok()) return s;
  }
  // Buckets change only under the store lock held exclusively, at an engine
  // time read before the change; a commit reads the engine time under its
  // shared hold, so that time covers every bucket dropped before, and none
  // is dropped until its write landed. Most commits neither drop nor create
  // a bucket; the others make the change and look again (twice at most,
  // then commit: a missing bucket fails the commit with kInternal).
  constexpr int kMaxBucketChanges = 2;
  for (int changes = 0;; ++changes) {
    absl::StatusOr<int64_t> now_micros;
    RecordPlacements placements;
    // Set by a commit whose merges, timers or values that expire need a
    // newer store format.
    int needs_format = 0;
    {
      absl::ReaderMutexLock store_lock(&store_mu_);
      absl::StatusOr<Store*> store = CurrentStore();
      if (!store.ok()) return store.status();
      // In a store of format 6 the commit's time is registered as it is
      // read, until its write has landed or failed (the end of this scope):
      // CompactExpired's removal horizon stays at or below it
      // (engine/commit_time_watermark.h). A store marked format 6 later
      // waits for this commit first (MarkFormat takes the store lock
      // exclusively).
      CommitTimeWatermark::InFlight commit_time(&watermark_);
      now_micros = ReadCommitTime(**store, commit_time);
      if (!now_micros.ok()) return now_micros.status();
      // Each record's expiry and bucket, once for the whole commit.
      placements = PlaceRecords(options_, messages, *now_micros);
      // Messages that will write a stream time mark the store first, before
      // their handlers run (so that these do not run again).
      if (!(*store)->read_only &&
          (*store)->format_version < kTimerFormatVersion &&
          CarriesStreamTime(messages, *now_micros)) {
        needs_format = kTimerFormatVersion;
      } else if ((*store)->read_only || changes == kMaxBucketChanges ||
                 !BucketsChange(**store, placements, *now_micros)) {
        // A read-only store fails the commit itself.
        absl::StatusOr<std::vector<Result>> results = CommitBatch(
            **store, messages, placements, handler, *now_micros, needs_format);
        if (needs_format == 0) return results;
      }
    }
    CommitLock commit_lock(this);
    if (needs_format != 0) {
      // Once per store: its handlers run (again) on the marked store.
      if (absl::Status s = MarkFormat(needs_format); !s.ok()) return s;
      --changes;
      continue;
    }
    if (absl::Status s = MaintainBuckets(placements, *now_micros); !s.ok()) {
      return s;
    }
  }
}

absl::StatusOr<std::vector<Result>> EngineImpl::CommitBatch(
    Store& store, absl::Span<const Message> messages,
    absl::Span<const RecordPlacement> placements, Handler handler,
    int64_t now_micros, int& needs_format) {
  CommitInput in{.messages = messages,
                 .placements = placements,
                 .handler = handler,
                 .now_micros = now_micros};
  // Step 1: claim the IDs. The key of each message's record (its ID's hash,
  // or its partition and the hash) also names the message's emits. A
  // delivery of an ID in flight in another commit waits here for that
  // commit's outcome. Once claimed, nothing else writes these records, so
  // one lookup per message before any handler runs stays true for the whole
  // batch.
  in.record_keys.reserve(messages.size());
  for (const Message& message : messages) {
    in.record_keys.push_back(RecordKeyFor(store.partition_scope, message,
                                          HashMessageId(message.id)));
  }
  InflightIds::Claim claim =
      inflight_.Acquire(in.record_keys, !hooks_.skip_inflight_ids);
  if (absl::Status s = ReadStored(store, in); !s.ok()) return s;
  // Handlers run again while a read went stale, taking turns with other
  // handlers that run again, with priority after kRerunsBeforePriority.
  RerunTurn rerun_turn(this);
  for (int reruns = 0;; ++reruns) {
    if (reruns == kRerunsBeforePriority && !hooks_.no_rerun_priority) {
      rerun_turn.TakePriority();
    }
    // Step 2: run the handlers.
    HandlerRun run(store, messages.size());
    absl::StatusOr<std::vector<Result>> results = RunHandlers(store, in, run);
    if (!results.ok()) return results.status();
    // What they wrote needs a newer store format: the caller marks the
    // store, then they run again.
    needs_format = FormatNeeded(store, run);
    if (needs_format != 0) return results;
    // Steps 3 to 6: validate, build, queue, write.
    absl::StatusOr<bool> landed = WriteCommit(store, in, run, rerun_turn);
    if (!landed.ok()) return landed.status();
    if (!*landed) {  // a read went stale: back to step 2
      handler_reruns_.fetch_add(run.ages.handlers, std::memory_order_relaxed);
      rerun_turn.Take();
      continue;
    }
    // Step 7: publish the outcomes (the state writes were, at step 6).
    CountOutcomes(store, *results, run.ages, run.commit.emitted(),
                  run.sequence);
    return results;
  }
}

absl::Status EngineImpl::ReadStored(Store& store, CommitInput& in) {
  absl::StatusOr<LiveLookup> stored =
      LookupLiveRecords(store, in.record_keys, in.now_micros);
  if (!stored.ok()) return stored.status();
  in.stored = *std::move(stored);
  // A malformed offset fails the call before any handler runs. Commits
  // queued since are newer; QueueCommit compares with those.
  absl::StatusOr<StoredOffsets> offsets =
      ReadStoredOffsets(store.db, store.offsets, in.messages);
  if (!offsets.ok()) return offsets.status();
  in.stored_offsets = *std::move(offsets);
  // Each message's fingerprint, hashed once, when conflicts are detected.
  if (options_.detect_conflicts && !hooks_.ignore_conflicts) {
    in.fingerprints.reserve(in.messages.size());
    for (const Message& message : in.messages) {
      in.fingerprints.push_back(MessageFingerprint(message));
    }
  }
  return absl::OkStatus();
}

HandlerRun::HandlerRun(const Store& store, size_t messages)
    : commit(store.state, store.offsets, store.outbox) {
  commit.set_state_enveloped(store.format_version >= kStateTtlFormatVersion);
  commit.Reserve(messages);
}

absl::StatusOr<std::vector<Result>> EngineImpl::RunHandlers(
    Store& store, const CommitInput& in, HandlerRun& run) {
  if (absl::Status s = LoadStreamTimes(store, in.messages); !s.ok()) return s;
  HandlePass pass{.store = store,
                  .timers = run.timers,
                  .timer_reads = run.timer_reads,
                  .messages = in.messages,
                  .placements = in.placements,
                  .record_keys = in.record_keys,
                  .stored = in.stored,
                  .fingerprints = in.fingerprints,
                  .handler = in.handler,
                  .now_micros = in.now_micros,
                  .commit = run.commit,
                  .ages = run.ages,
                  .reads = run.reads};
  return HandleMessages(pass);
}

absl::StatusOr<int64_t> EngineImpl::ReadCommitTime(
    const Store& store, CommitTimeWatermark::InFlight& commit_time) {
  return store.format_version >= kStateTtlFormatVersion ? commit_time.Start()
                                                        : clock_->NowMicros();
}

int EngineImpl::StateFormatNeeded(const Store& store,
                                  const BatchOverlay& state) {
  // Values that expire need format 6.
  if (state.has_expiry() && store.format_version < kStateTtlFormatVersion) {
    return kStateTtlFormatVersion;
  }
  // Merge operands need format 4.
  if (state.has_merges() && store.format_version < kMergeFormatVersion) {
    return kMergeFormatVersion;
  }
  return 0;
}

int EngineImpl::FormatNeeded(const Store& store, const HandlerRun& run) const {
  if (const int needed = StateFormatNeeded(store, run.commit.state());
      needed != 0) {
    return needed;
  }
  if (!run.timers.empty() && store.format_version < kTimerFormatVersion) {
    return kTimerFormatVersion;
  }
  return 0;
}

absl::StatusOr<bool> EngineImpl::WriteCommit(Store& store,
                                             const CommitInput& in,
                                             HandlerRun& run,
                                             RerunTurn& rerun_turn) {
  TimerCommit timer_commit{run.timers, run.timer_reads, store.timers};
  // One WriteBatch: state, dedupe records and offsets commit together.
  // Sized for a dedupe record and a small state write per message, so
  // that a typical batch is built without growing.
  rocksdb::WriteBatch batch(kBatchHeaderBytes +
                            kBatchBytesPerMessage * in.messages.size());
  // Only with hooks_.split_commit: the second write of a broken variant.
  std::optional<rocksdb::WriteBatch> split_records;
  if (hooks_.split_commit) split_records.emplace();
  CommitQueue::Writer writer(&batch);
  InFlightCommit in_flight(&queue_, &versions_, store.db, &writer);
  // Before the commit can join a group write: a sync failing after this
  // may be this commit's.
  const uint64_t failed_syncs = parts_.wal_watch->failed_syncs();
  absl::StatusOr<Queued> queued = QueueCommit(
      run.commit, run.reads, in.stored_offsets, batch,
      split_records.has_value() ? *split_records : batch, in_flight, rerun_turn,
      run.timers.empty() && run.timer_reads.empty() ? nullptr : &timer_commit);
  if (!queued.ok()) return queued.status();
  if (*queued == Queued::kStale) return false;
  rerun_turn.Release();
  if (hooks_.after_queue) hooks_.after_queue();
  // A duration, not an expiry decision: the steady clock, not
  // Options::clock.
  const auto write_start = std::chrono::steady_clock::now();
  if (absl::Status s = WriteQueued(store, *queued, in_flight, batch,
                                   failed_syncs, timer_commit);
      !s.ok()) {
    return s;
  }
  if (*queued == Queued::kQueued) {
    // Written alone with unordered_writes, so its own header was stamped.
    run.sequence = hooks_.unordered_writes ? CommitQueue::LastSequenceOf(batch)
                                           : writer.last_sequence();
    PlainMutexLock lock(&durations_mu_);
    commit_micros_.Add(std::chrono::duration<double, std::micro>(
                           std::chrono::steady_clock::now() - write_start)
                           .count());
  }
  if (split_records.has_value()) {
    if (absl::Status s = Write(store, &*split_records); !s.ok()) return s;
    run.sequence = 0;  // the store's latest covers the second write
  }
  return true;
}

absl::StatusOr<EngineImpl::Queued> EngineImpl::QueueCommit(
    CommitBuilder& commit, StateReads& reads, const StoredOffsets& stored,
    rocksdb::WriteBatch& batch, rocksdb::WriteBatch& records,
    InFlightCommit& in_flight, RerunTurn& rerun_turn, TimerCommit* timers) {
  for (;;) {
    absl::StatusOr<Queued> queued =
        QueueInOrder(commit, reads, stored, batch, records, in_flight,
                     rerun_turn.priority(), timers);
    if (!queued.ok() || *queued != Queued::kYield) return queued;
    rerun_turn.AwaitPriority();
  }
}

absl::StatusOr<EngineImpl::Queued> EngineImpl::QueueInOrder(
    CommitBuilder& commit, StateReads& reads, const StoredOffsets& stored,
    rocksdb::WriteBatch& batch, rocksdb::WriteBatch& records,
    InFlightCommit& in_flight, bool priority, TimerCommit* timers) {
  PlainMutexLock order(&order_mu_);
  // Step 3: validate.
  if (std::optional<Queued> not_now =
          ValidateReads(commit, reads, priority, timers);
      not_now.has_value()) {
    return *not_now;
  }
  // Step 4: build.
  const StoredOffsets latest = LatestOffsets(commit, stored);
  const OutboxCursor outbox = CurrentOutboxCursor();
  if (absl::Status s =
          BuildBatch(commit, latest, outbox, batch, records, timers);
      !s.ok()) {
    return s;
  }
  // Step 5: queue.
  if (batch.Count() == 0) {
    // The handlers' outcomes may rest on values of commits in flight: wait
    // for those to land, as a commit that writes does.
    if (!reads.read_in_flight() || hooks_.skip_nothing_wait ||
        hooks_.unordered_writes) {
      return Queued::kNothing;
    }
    in_flight.Queue();
    return Queued::kBarrier;
  }
  Enqueue(commit, reads, latest, outbox, in_flight, timers);
  return Queued::kQueued;
}

std::optional<EngineImpl::Queued> EngineImpl::ValidateReads(
    const CommitBuilder& commit, const StateReads& reads, bool priority,
    const TimerCommit* timers) {
  // A commit whose handlers run with priority must not lose its reads to
  // this one's writes.
  if (priority_ && !priority && !commit.state().empty()) return Queued::kYield;
  // Every commit queued before this point precedes this one in the log, so
  // a handler read is current if no such commit changed its key since.
  if (!hooks_.skip_read_validation &&
      versions_.Changed(reads, !hooks_.skip_range_validation)) {
    return Queued::kStale;
  }
  if (timers != nullptr &&
      ((!hooks_.skip_read_validation &&
        timer_versions_.Changed(timers->reads)) ||
       timers->writes.Stale(stream_times_, !hooks_.skip_read_validation))) {
    return Queued::kStale;
  }
  return std::nullopt;
}

StoredOffsets EngineImpl::LatestOffsets(const CommitBuilder& commit,
                                        const StoredOffsets& stored) {
  // The latest queued, else the stored one (no commit queued since it was
  // read, or it would be the latest queued).
  StoredOffsets latest;
  commit.offsets().ForEach(
      [&](const std::string& key,
          int64_t) ABSL_EXCLUSIVE_LOCKS_REQUIRED(order_mu_) {
        if (auto queued = queued_offsets_.find(key);
            queued != queued_offsets_.end() && !hooks_.skip_queued_offsets) {
          latest.emplace(key, queued->second);
        } else if (auto it = stored.find(key); it != stored.end()) {
          latest.emplace(key, it->second);
        }
      });
  return latest;
}

absl::Status EngineImpl::BuildBatch(CommitBuilder& commit,
                                    const StoredOffsets& latest,
                                    const OutboxCursor& outbox,
                                    rocksdb::WriteBatch& batch,
                                    rocksdb::WriteBatch& records,
                                    TimerCommit* timers) {
  if (absl::Status s = commit.Build(latest, outbox, batch, records); !s.ok()) {
    return s;
  }
  if (timers == nullptr) return absl::OkStatus();
  return timers->writes.Build(timers->family, stream_times_, batch);
}

void EngineImpl::Enqueue(const CommitBuilder& commit, StateReads& reads,
                         const StoredOffsets& latest,
                         const OutboxCursor& outbox, InFlightCommit& in_flight,
                         TimerCommit* timers) {
  commit.offsets().ForEach(
      [&](const std::string& key,
          int64_t offset) ABSL_EXCLUSIVE_LOCKS_REQUIRED(order_mu_) {
        int64_t& queued = queued_offsets_.try_emplace(key, -1).first->second;
        auto it = latest.find(key);
        queued = std::max(it != latest.end() ? it->second : -1, offset);
      });
  if (commit.emitted() > 0) {
    outbox_issued_.store(outbox.issued + commit.emitted());
  }
  in_flight.Pend(commit.state(), reads);
  if (timers != nullptr) {
    timers->version = timer_versions_.Pend(timers->writes.index());
  }
  if (!hooks_.unordered_writes) in_flight.Queue();
}

absl::Status EngineImpl::WriteQueued(Store& store, Queued queued,
                                     InFlightCommit& in_flight,
                                     rocksdb::WriteBatch& batch,
                                     uint64_t failed_syncs,
                                     const TimerCommit& timers) {
  if (queued == Queued::kBarrier) {
    return AwaitWrite(store, in_flight, batch, failed_syncs);
  }
  if (queued != Queued::kQueued) return absl::OkStatus();
  absl::Status written = AwaitWrite(store, in_flight, batch, failed_syncs);
  TimersLanded(timers, written.ok());
  return written;
}

absl::Status EngineImpl::AwaitWrite(Store& store, InFlightCommit& in_flight,
                                    rocksdb::WriteBatch& batch,
                                    uint64_t failed_syncs) {
  rocksdb::Status s;
  if (hooks_.unordered_writes) {
    // Every other commit pauses first, so later ones overtake it.
    static std::atomic<uint64_t> commits{0};
    if (commits.fetch_add(1) % 2 == 0) absl::SleepFor(absl::Microseconds(300));
    rocksdb::WriteOptions options;
    options.sync = options_.durability == Durability::kSync;
    RocksWriteScope rocks_write;
    s = store.db->Write(options, &batch);
  } else {
    s = in_flight.Wait();
  }
  in_flight.Publish();
  // A barrier's wait: nothing of its own landed.
  if (batch.Count() == 0 && s.ok()) return absl::OkStatus();
  return Landed(store, s, batch, failed_syncs);
}

absl::Status EngineImpl::Landed(Store& store, const rocksdb::Status& s,
                                const rocksdb::WriteBatch& batch,
                                uint64_t failed_syncs) {
  if (!s.ok()) {
    needs_reopen_.store(true);
    if (parts_.wal_watch->failed_syncs() != failed_syncs) {
      return CommitOutcomeUnknown(s);
    }
    return FromRocksStatus(s, "committing (nothing committed)");
  }
  // Concurrent writers land in order; the highest sequence read wins.
  const uint64_t latest = store.db->GetLatestSequenceNumber();
  uint64_t issued = issued_sequence_.load();
  while (issued < latest &&
         !issued_sequence_.compare_exchange_weak(issued, latest)) {
  }
  user_bytes_.fetch_add(batch.GetDataSize(), std::memory_order_relaxed);
  return absl::OkStatus();
}

void EngineImpl::CountOutcomes(Store& store, std::vector<Result>& results,
                               const DuplicateAges& ages, uint64_t emitted,
                               uint64_t own_sequence) {
  AddIfNonZero(outbox_emitted_, emitted);
  // A commit that wrote: its own write's last record, which every commit
  // its outcomes depend on precedes (an ID's first delivery, a value read
  // in flight: both landed first, in queue order). Not the store's latest:
  // a later group may have landed meanwhile, and two commits would report
  // one sequence. A commit that wrote nothing depends on at most the
  // commits published so far.
  const uint64_t sequence =
      own_sequence != 0 && !hooks_.outcomes_take_latest_sequence
          ? own_sequence
          : store.db->GetLatestSequenceNumber();
  // Counted here, published once per commit.
  OutcomeCounts counts;
  for (Result& result : results) {
    if (result.outcome != Outcome::kFailed || result.permanent) {
      result.sequence = sequence;
    }
    counts.Add(result.outcome);
  }
  AddIfNonZero(processed_, counts.processed);
  AddIfNonZero(duplicates_, counts.duplicates);
  AddIfNonZero(conflicts_, counts.conflicts);
  AddIfNonZero(failed_, counts.failed);
  if (!ages.ages_micros.empty()) {
    redelivery_ages_.Add(ages.ages_micros);
    late_duplicates_.fetch_add(ages.late, std::memory_order_relaxed);
  }
}

absl::Status EngineImpl::WaitDurable(uint64_t sequence) {
  if (absl::Status s = PrepareOutsideCommit("WaitDurable"); !s.ok()) return s;
  ReadLock lock(this);
  absl::StatusOr<Store*> store = CurrentStore();
  if (!store.ok()) return store.status();
  const uint64_t latest = (*store)->db->GetLatestSequenceNumber();
  if (sequence > latest) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sequence ", sequence, " was never issued (latest is ", latest, ")"));
  }
  return MakeDurable(**store, sequence);
}

absl::Status EngineImpl::MakeDurable(Store& store, uint64_t sequence) {
  // Under kSync every commit was synced before its outcome was returned; a
  // read-only engine has nothing to make durable.
  if (options_.durability == Durability::kSync || options_.read_only) {
    return absl::OkStatus();
  }
  absl::Status s = syncer_.WaitDurable(store.db, sequence);
  if (!s.ok()) needs_reopen_.store(true);
  return s;
}

EngineImpl::InFlightCommit::~InFlightCommit() {
  if (queued_ && !waited_) Wait().PermitUncheckedError();
  Publish();
}

void EngineImpl::InFlightCommit::Pend(const StateLayer& writes,
                                      StateReads& reads) {
  writes_ = &writes;
  version_ = versions_->Pend(writes, &reads);
}

void EngineImpl::InFlightCommit::Queue() {
  queue_->Add(writer_);
  queued_ = true;
}

rocksdb::Status EngineImpl::InFlightCommit::Wait() {
  waited_ = true;
  return queue_->Wait(db_, writer_);
}

void EngineImpl::InFlightCommit::Publish() {
  if (writes_ == nullptr) return;
  versions_->Publish(*writes_, version_);
  writes_ = nullptr;
}

void EngineImpl::RerunTurn::TakePriority() {
  {
    PlainMutexLock order(&engine_->order_mu_);
    engine_->priority_ = true;
  }
  priority_ = true;
  // From here no write outside the handler path queues; those queued
  // before land first, so that nothing invalidates the pass.
  engine_->versions_.AwaitAllPublished();
}

void EngineImpl::RerunTurn::Release() {
  if (priority_) {
    PlainMutexLock order(&engine_->order_mu_);
    engine_->priority_ = false;
    priority_ = false;
  }
  if (held_) engine_->rerun_mu_.Unlock();
  held_ = false;
}

}  // namespace idem
