// EngineImpl's ordered critical section and its wait for the group commit
// (docs/design.md, "Concurrency"): QueueCommit, AwaitWrite, the counters of
// a landed commit, AckOutbox (whose cursor write is ordered with the
// commits'), and the bookkeeping of writes outside the handler path.

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "engine/engine_impl.h"
#include "engine/outbox_store.h"
#include "engine/record.h"
#include "engine/tsan_scope.h"

namespace idem {

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

absl::StatusOr<EngineImpl::Queued> EngineImpl::QueueCommit(
    CommitBuilder& commit, StateReads& reads, const StoredOffsets& stored,
    rocksdb::WriteBatch& batch, rocksdb::WriteBatch& records,
    InFlightCommit& in_flight, bool priority, TimerCommit* timers) {
  PlainMutexLock order(&order_mu_);
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
  // The offsets to compare with: the latest queued, else the stored one
  // (no commit queued since it was read, or it would be the latest queued).
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
  const OutboxCursor outbox = CurrentOutboxCursor();
  if (absl::Status s = commit.Build(latest, outbox, batch, records); !s.ok()) {
    return s;
  }
  if (timers != nullptr) {
    if (absl::Status s =
            timers->writes.Build(timers->family, stream_times_, batch);
        !s.ok()) {
      return s;
    }
  }
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
  return Queued::kQueued;
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

namespace {

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

void EngineImpl::CountOutcomes(Store& store, std::vector<Result>& results,
                               const DuplicateAges& ages, uint64_t emitted) {
  AddIfNonZero(outbox_emitted_, emitted);
  // Every outcome depends on at most the commits published so far.
  const uint64_t sequence = store.db->GetLatestSequenceNumber();
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

absl::Status EngineImpl::AckOutbox(uint64_t position) {
  if (absl::Status s = RejectInsideHandler("AckOutbox"); !s.ok()) return s;
  if (absl::Status s = RejectIfReadOnly("AckOutbox"); !s.ok()) return s;
  PlainMutexLock commit_lock(&commit_mu_);
  if (absl::Status s = RecoverIfNeeded(); !s.ok()) return s;
  absl::ReaderMutexLock store_lock(&store_mu_);
  absl::StatusOr<Store*> store = CurrentStore();
  if (!store.ok()) return store.status();
  rocksdb::WriteBatch batch;
  CommitQueue::Writer writer(&batch);
  const uint64_t failed_syncs = parts_.wal_watch->failed_syncs();
  uint64_t acked_before = 0;
  {
    // The cursor record holds the issued position too: built in the order
    // of the commits that advance it.
    PlainMutexLock order(&order_mu_);
    const OutboxCursor cursor = CurrentOutboxCursor();
    if (position == 0 || position > cursor.issued) {
      return absl::InvalidArgumentError(absl::StrCat(
          "AckOutbox: position ", position,
          " was never issued (the last issued is ", cursor.issued, ")"));
    }
    if (position <= cursor.acked) return absl::OkStatus();
    if (absl::Status s =
            BuildOutboxAck((*store)->outbox, cursor, position, batch);
        !s.ok()) {
      return s;
    }
    acked_before = cursor.acked;
    outbox_acked_.store(position);
    queue_.Add(&writer);
  }
  if (absl::Status s = Landed(**store, queue_.Wait((*store)->db, &writer),
                              batch, failed_syncs);
      !s.ok()) {
    return s;
  }
  outbox_acknowledged_.fetch_add(position - acked_before,
                                 std::memory_order_relaxed);
  return absl::OkStatus();
}

namespace {

// Notes what a batch outside the handler path writes: its offsets, and
// whether it touches state.
class QueuedWrites : public rocksdb::WriteBatch::Handler {
 public:
  QueuedWrites(uint32_t state, uint32_t offsets,
               absl::flat_hash_map<std::string, int64_t>& queued)
      : state_(state), offsets_(offsets), queued_(queued) {}

  bool writes_state() const { return writes_state_; }

  rocksdb::Status PutCF(uint32_t family, const rocksdb::Slice& key,
                        const rocksdb::Slice& value) override {
    if (family == offsets_) {
      std::optional<int64_t> offset =
          DecodeOffsetValue(std::string_view(value.data(), value.size()));
      queued_[key.ToString()] = offset.value_or(-1);
    }
    Touch(family);
    return rocksdb::Status::OK();
  }
  rocksdb::Status DeleteCF(uint32_t family,
                           const rocksdb::Slice& key) override {
    if (family == offsets_) queued_[key.ToString()] = -1;
    Touch(family);
    return rocksdb::Status::OK();
  }
  rocksdb::Status SingleDeleteCF(uint32_t family,
                                 const rocksdb::Slice& key) override {
    return DeleteCF(family, key);
  }
  rocksdb::Status DeleteRangeCF(uint32_t family, const rocksdb::Slice& begin,
                                const rocksdb::Slice& end) override {
    if (family == offsets_) {
      // Whole partitions go: every offset in the range is absent.
      for (auto& [key, offset] : queued_) {
        if (key >= begin.ToString() && key < end.ToString()) offset = -1;
      }
    }
    Touch(family);
    return rocksdb::Status::OK();
  }
  rocksdb::Status MergeCF(uint32_t family, const rocksdb::Slice&,
                          const rocksdb::Slice&) override {
    Touch(family);
    return rocksdb::Status::OK();
  }
  void LogData(const rocksdb::Slice&) override {}

 private:
  void Touch(uint32_t family) { writes_state_ |= family == state_; }

  const uint32_t state_;
  const uint32_t offsets_;
  absl::flat_hash_map<std::string, int64_t>& queued_;
  bool writes_state_ = false;
};

}  // namespace

bool EngineImpl::NoteQueuedWrites(const Store& store,
                                  const rocksdb::WriteBatch& batch) {
  QueuedWrites writes(store.state->GetID(), store.offsets->GetID(),
                      queued_offsets_);
  // Iterate fails only on a malformed batch, which the write would refuse:
  // then count it as writing state (every read in flight stale).
  if (!batch.Iterate(&writes).ok()) return true;
  return writes.writes_state();
}

}  // namespace idem
