// EngineImpl::CommitToPartition, the commit of ImportPartition and
// ApplyPartitionChanges (engine/engine_partition.cc), top to bottom as its
// steps, under the commit lock:
//   1. ready the store and place the records (PlanPartitionCommit: the
//      store formats the commit needs, each live record's expiry bucket);
//   2. validate (CheckPartitionCommit: the store's dedupe scope, the stored
//      offset against the commit's), and skip a repeat of the commit
//      (CommittedBefore);
//   3. build one WriteBatch: state (BuildPartitionState), dedupe records
//      (BuildPartitionRecords), offset (BuildPartitionOffset) and timers
//      (BuildPartitionTimers);
//   4. write it through the commit queue (Write, engine/engine_writes.cc);
//      the caller then makes it durable (WaitDurable).

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/absl_view.h"
#include "engine/coding.h"
#include "engine/commit_batch.h"
#include "engine/engine_impl.h"
#include "engine/expiry_buckets.h"
#include "engine/record.h"
#include "engine/state_value.h"
#include "engine/status_util.h"
#include "engine/timer_record.h"
#include "idem/partition_state.h"

namespace idem {
namespace {

// A PartitionRecord's ID hash (ValidateSnapshot checked its length) as a key.
DedupeKey ToDedupeKey(std::string_view hash) {
  DedupeKey key;
  std::copy(hash.begin(), hash.end(), key.begin());
  return key;
}

// Adds to `batch` the timer `timer_key` of the partition `partition_key`
// fires (its place in the queue, with its payload) and its index entry.
absl::Status PutTimer(const Store& store, const std::string& partition_key,
                      std::string_view timer_key, const TimerFire& timer,
                      const char* what, rocksdb::WriteBatch& batch) {
  const int64_t fire_at = absl::ToUnixMicros(timer.fire_at);
  if (absl::Status s = FromRocksStatus(
          batch.Put(
              store.timers,
              TimerQueueKey(partition_key, timer.domain, fire_at, timer_key),
              timer.payload),
          what);
      !s.ok()) {
    return s;
  }
  return FromRocksStatus(
      batch.Put(store.timers, TimerIndexKey(partition_key, timer_key),
                EncodeTimerIndex(timer.domain, fire_at)),
      what);
}

// Adds to `batch` the change of one timer of a partition (nullopt: delete
// it), moving the key's current timer out of the queue.
absl::Status BuildTimerChange(const Store& store,
                              const std::string& partition_key,
                              const std::string& timer_key,
                              const std::optional<TimerFire>& timer,
                              const char* what, rocksdb::WriteBatch& batch) {
  auto check = [&](const rocksdb::Status& s) {
    return FromRocksStatus(s, what);
  };
  // The key's timer, if it has one, leaves its place in the queue.
  const std::string index_key = TimerIndexKey(partition_key, timer_key);
  std::string value;
  rocksdb::Status got =
      store.db->Get(rocksdb::ReadOptions(), store.timers, index_key, &value);
  if (!got.ok() && !got.IsNotFound()) return check(got);
  if (got.ok()) {
    std::optional<TimerIndex> index = DecodeTimerIndex(value);
    if (!index.has_value()) {
      return absl::DataLossError("undecodable timer index entry");
    }
    if (absl::Status s = check(batch.Delete(
            store.timers, TimerQueueKey(partition_key, index->domain,
                                        index->fire_at_micros, timer_key)));
        !s.ok()) {
      return s;
    }
  }
  if (!timer.has_value()) return check(batch.Delete(store.timers, index_key));
  return PutTimer(store, partition_key, timer_key, *timer, what, batch);
}

}  // namespace

absl::StatusOr<uint64_t> EngineImpl::CommitToPartition(
    const PartitionCommit& commit, const ImportOptions& options) {
  CommitLock commit_lock(this);
  if (absl::Status s = RecoverIfNeeded(); !s.ok()) return s;
  // Step 1: ready the store and place the records.
  absl::StatusOr<PartitionPlan> plan = PlanPartitionCommit(commit);
  if (!plan.ok()) return plan.status();

  absl::ReaderMutexLock store_lock(&store_mu_);
  absl::StatusOr<Store*> current_store = CurrentStore();
  if (!current_store.ok()) return current_store.status();
  Store& store = **current_store;
  // Step 2: validate.
  absl::StatusOr<std::optional<int64_t>> current =
      CheckPartitionCommit(store, commit, options);
  if (!current.ok()) return current.status();
  if (commit.commit_id.has_value()) {
    plan->own_key = RecordKeyFor(store.partition_scope, plan->own,
                                 HashMessageId(plan->own.id));
  }
  // A repeat of a commit writes nothing, unless it may rewind: then the
  // partition has perhaps moved on since, and the commit replaces it again.
  if (plan->own_key.has_value() && !options.allow_rewind) {
    absl::StatusOr<bool> repeat = CommittedBefore(store, *plan);
    if (!repeat.ok()) return repeat.status();
    if (*repeat) {  // write nothing
      duplicates_.fetch_add(1, std::memory_order_relaxed);
      return store.db->GetLatestSequenceNumber();
    }
  }

  // Step 3: build.
  rocksdb::WriteBatch batch;
  if (absl::Status s = BuildPartitionState(commit, store, batch); !s.ok()) {
    return s;
  }
  if (absl::Status s = BuildPartitionRecords(commit, *plan, store, batch);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = BuildPartitionOffset(commit, *current, store, batch);
      !s.ok()) {
    return s;
  }
  const std::string partition_key =
      TimerPartitionKey(commit.source, commit.partition);
  absl::StatusOr<int64_t> stored_stream =
      stream_times_.Load(store.db, store.timers, partition_key);
  if (!stored_stream.ok()) return stored_stream.status();
  if (absl::Status s =
          BuildPartitionTimers(commit, store, *stored_stream, batch);
      !s.ok()) {
    return s;
  }
  // Step 4: write.
  absl::Status written = Write(store, &batch);
  // Reloaded from the store; a seek starts at the queue's start again.
  stream_times_.Forget(partition_key);
  timer_cursors_.Clear();
  if (!written.ok()) return written;
  if (commit.commit_id.has_value()) {
    processed_.fetch_add(1, std::memory_order_relaxed);
  }
  return store.db->GetLatestSequenceNumber();
}

absl::StatusOr<PartitionPlan> EngineImpl::PlanPartitionCommit(
    const PartitionCommit& commit) {
  if (commit.expires_at != nullptr && !commit.expires_at->empty()) {
    // Values that expire need format 5 (a no-op once the store is).
    if (absl::Status s = MarkFormat(kStateTtlFormatVersion); !s.ok()) {
      return s;
    }
  }
  absl::StatusOr<int64_t> now_micros = clock_->NowMicros();
  if (!now_micros.ok()) return now_micros.status();
  PartitionPlan plan;
  plan.now_micros = *now_micros;
  // The commit's own record, if it has one (placed as a message's), then
  // the live records, each in the bucket its expiry belongs to.
  if (commit.commit_id.has_value()) {
    plan.own.id = *commit.commit_id;
    plan.own.source = commit.source;
    plan.own.partition = commit.partition;
    plan.placements =
        PlaceRecords(options_, absl::MakeConstSpan(&plan.own, 1), *now_micros);
  }
  plan.first_live = plan.placements.size();
  for (const PartitionRecord& record : commit.records) {
    const int64_t expiry = TimeToMicros(record.expires_at);
    if (expiry <= *now_micros) continue;
    plan.live.push_back(&record);
    plan.placements.push_back(
        RecordPlacement{expiry, BucketEndFor(options_, expiry, *now_micros)});
  }
  if (absl::Status s = MaintainBuckets(plan.placements, *now_micros); !s.ok()) {
    return s;
  }
  if ((commit.stream_micros != kNoStreamTime || !commit.timers.empty() ||
       !commit.timer_changes.empty()) &&
      !options_.read_only) {
    if (absl::Status s = MarkFormat(kTimerFormatVersion); !s.ok()) return s;
  }
  return plan;
}

absl::StatusOr<bool> EngineImpl::CommittedBefore(Store& store,
                                                 const PartitionPlan& plan) {
  absl::StatusOr<LiveLookup> committed = LookupLiveRecords(
      store, absl::MakeConstSpan(&*plan.own_key, 1), plan.now_micros);
  if (!committed.ok()) return committed.status();
  return (*committed)[0].has_value();
}

absl::StatusOr<std::optional<int64_t>> EngineImpl::CheckPartitionCommit(
    const Store& store, const PartitionCommit& commit,
    const ImportOptions& options) const {
  if (!commit.replace && !commit.records.empty() && !store.partition_scope) {
    return absl::FailedPreconditionError(
        absl::StrCat(commit.what,
                     ": dedupe records need a partition-scoped store "
                     "(Options::dedupe_scope = DedupeScope::kPartition)"));
  }
  absl::StatusOr<std::optional<int64_t>> current =
      ReadStoredOffset(store.db, store.offsets, rocksdb::ReadOptions(),
                       commit.source, commit.partition);
  if (!current.ok()) return current.status();
  const bool offset_changes = commit.replace || commit.offset.has_value();
  if (offset_changes && current->has_value() && !options.allow_rewind &&
      (!commit.offset.has_value() || **current > *commit.offset)) {
    return absl::FailedPreconditionError(
        absl::StrCat(commit.what, ": the engine is at offset ", **current,
                     " of this partition, past the ",
                     commit.replace ? "snapshot's " : "changes' ",
                     commit.offset.has_value() ? absl::StrCat(*commit.offset)
                                               : std::string("(none)")));
  }
  return current;
}

absl::Status EngineImpl::BuildPartitionState(const PartitionCommit& commit,
                                             const Store& store,
                                             rocksdb::WriteBatch& batch) const {
  auto check = [&](const rocksdb::Status& s) {
    return FromRocksStatus(s, commit.what);
  };
  const std::string state_prefix =
      PartitionStatePrefix(commit.source, commit.partition);
  if (commit.replace) {
    // The partition's old state and records go first; the puts after them
    // in the same batch have later sequence numbers, so they survive.
    if (absl::Status s = check(batch.DeleteRange(store.state, state_prefix,
                                                 KeyRangeEnd(state_prefix)));
        !s.ok()) {
      return s;
    }
    if (store.partition_scope) {
      const std::string record_prefix =
          PartitionRecordPrefix(commit.source, commit.partition);
      for (rocksdb::ColumnFamilyHandle* family : AllDedupeFamilies(store)) {
        if (absl::Status s = check(batch.DeleteRange(
                family, record_prefix, KeyRangeEnd(record_prefix)));
            !s.ok()) {
          return s;
        }
      }
    }
  }
  const bool enveloped = store.format_version >= kStateTtlFormatVersion;
  for (const auto& [key, value] : commit.writes) {
    const std::string scoped = absl::StrCat(state_prefix, AbslView(key));
    int64_t expires_micros = kNeverExpires;
    if (commit.expires_at != nullptr && enveloped) {
      if (auto it = commit.expires_at->find(std::string(key));
          it != commit.expires_at->end()) {
        expires_micros = std::min(kNeverExpires - 1, TimeToMicros(it->second));
      }
    }
    if (absl::Status s = check(
            value.has_value()
                ? batch.Put(store.state, scoped,
                            EncodeStateValue(*value, expires_micros, enveloped))
                : batch.Delete(store.state, scoped));
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status EngineImpl::BuildPartitionRecords(
    const PartitionCommit& commit, const PartitionPlan& plan,
    const Store& store, rocksdb::WriteBatch& batch) const {
  auto check = [&](const rocksdb::Status& s) {
    return FromRocksStatus(s, commit.what);
  };
  auto family_of = [&](const RecordPlacement& placement)
      -> absl::StatusOr<rocksdb::ColumnFamilyHandle*> {
    if (!placement.bucket_end.has_value()) return store.dedupe;
    auto bucket = store.buckets.find(*placement.bucket_end);
    if (bucket == store.buckets.end()) {
      return absl::InternalError("expiry bucket missing at a partition commit");
    }
    return bucket->second;
  };
  for (size_t i = 0; i < plan.live.size(); ++i) {
    const RecordPlacement& placement = plan.placements[plan.first_live + i];
    absl::StatusOr<rocksdb::ColumnFamilyHandle*> family = family_of(placement);
    if (!family.ok()) return family.status();
    const DedupeKey hash = ToDedupeKey(plan.live[i]->id_hash);
    const RecordKey key =
        store.partition_scope
            ? RecordKey::ForPartition(commit.source, commit.partition, hash)
            : RecordKey::ForStore(hash);
    if (!store.partition_scope || !commit.replace) {
      // A record of the ID may live in another family: one live record per
      // key, as lookups assume.
      for (rocksdb::ColumnFamilyHandle* other : AllDedupeFamilies(store)) {
        if (other == *family) continue;
        if (absl::Status s = check(batch.Delete(other, ToSlice(key.view())));
            !s.ok()) {
          return s;
        }
      }
    }
    if (absl::Status s = check(batch.Put(
            *family, ToSlice(key.view()),
            EncodeDedupeRecord(placement.expiry_micros, plan.live[i]->result)));
        !s.ok()) {
      return s;
    }
  }
  if (!plan.own_key.has_value()) return absl::OkStatus();
  absl::StatusOr<rocksdb::ColumnFamilyHandle*> own_family =
      family_of(plan.placements[0]);
  if (!own_family.ok()) return own_family.status();
  return check(
      batch.Put(*own_family, ToSlice(plan.own_key->view()),
                EncodeDedupeRecord(plan.placements[0].expiry_micros, "")));
}

absl::Status EngineImpl::BuildPartitionOffset(
    const PartitionCommit& commit, const std::optional<int64_t>& current,
    const Store& store, rocksdb::WriteBatch& batch) const {
  const std::string offset_key =
      EncodeOffsetKey(commit.source, commit.partition);
  if (commit.offset.has_value()) {
    return FromRocksStatus(
        batch.Put(store.offsets, offset_key, EncodeOffsetValue(*commit.offset)),
        commit.what);
  }
  if (commit.replace && current.has_value()) {
    // allow_rewind to no offset at all
    return FromRocksStatus(batch.Delete(store.offsets, offset_key),
                           commit.what);
  }
  return absl::OkStatus();
}

absl::Status EngineImpl::BuildPartitionTimers(
    const PartitionCommit& commit, const Store& store, int64_t stored,
    rocksdb::WriteBatch& batch) const {
  if (store.timers == nullptr) {
    if (commit.stream_micros == kNoStreamTime && commit.timers.empty() &&
        commit.timer_changes.empty()) {
      return absl::OkStatus();
    }
    return absl::FailedPreconditionError(
        absl::StrCat(commit.what, ": the store has no timers family"));
  }
  auto check = [&](const rocksdb::Status& s) {
    return FromRocksStatus(s, commit.what);
  };
  const std::string partition_key =
      TimerPartitionKey(commit.source, commit.partition);
  if (commit.replace) {
    // Every kind of the partition's timer keys: stream time, queue, index,
    // dead letters.
    for (const std::string& prefix :
         {StreamTimeKey(partition_key),
          TimerQueueStart(partition_key, TimeDomain::kEvent)
              .substr(0, 1 + partition_key.size()),
          TimerIndexKey(partition_key, ""),
          DeadTimerKey(partition_key, TimeDomain::kEvent, 0, "")
              .substr(0, 1 + partition_key.size())}) {
      if (absl::Status s = check(
              batch.DeleteRange(store.timers, prefix, KeyRangeEnd(prefix)));
          !s.ok()) {
        return s;
      }
    }
    for (const TimerFire& timer : commit.timers) {
      if (absl::Status s = PutTimer(store, partition_key, timer.timer_key,
                                    timer, commit.what, batch);
          !s.ok()) {
        return s;
      }
    }
  }
  for (const auto& [timer_key, timer] : commit.timer_changes) {
    if (absl::Status s = BuildTimerChange(store, partition_key, timer_key,
                                          timer, commit.what, batch);
        !s.ok()) {
      return s;
    }
  }
  if (commit.stream_micros != kNoStreamTime &&
      (commit.replace || commit.stream_micros > stored)) {
    return check(batch.Put(store.timers, StreamTimeKey(partition_key),
                           EncodeStreamTime(commit.stream_micros)));
  }
  return absl::OkStatus();
}

}  // namespace idem
