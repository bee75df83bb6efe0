// EngineImpl's partition moves: ExportPartition, ImportPartition and
// ApplyPartitionChanges, each on
// the partition's own key ranges (PartitionStatePrefix in idem.state,
// PartitionRecordPrefix in the dedupe families of a partition-scoped store);
// and SetCommittedOffset, which moves only the partition's offset.

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
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
#include "engine/validate.h"
#include "idem/partition_state.h"

namespace idem {
namespace {

// Visits every (key, value) of `cf` in [begin, end) as read through `read`.
template <typename Visit>
absl::Status ScanRange(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf,
                       rocksdb::ReadOptions read, const std::string& begin,
                       const std::string& end, Visit visit) {
  const rocksdb::Slice upper(end);
  if (!end.empty()) read.iterate_upper_bound = &upper;
  // The hashed dedupe memtable iterates in key order only when asked to.
  read.total_order_seek = true;
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(read, cf));
  for (it->Seek(begin); it->Valid(); it->Next()) {
    if (absl::Status s =
            visit(it->key().ToStringView(), it->value().ToStringView());
        !s.ok()) {
      return s;
    }
  }
  return FromRocksStatus(it->status(), "reading a partition's range");
}

// The checks ImportPartition and ApplyPartitionChanges share: the
// position, the offset, and the records (no ID hash twice).
absl::Status ValidatePartitionCommit(
    std::string_view what, std::string_view source, int32_t partition,
    const std::optional<int64_t>& offset,
    absl::Span<const PartitionRecord> records) {
  if (absl::Status s = ValidateSource(source, partition); !s.ok()) return s;
  if (offset.has_value()) {
    if (absl::Status s =
            ValidateOffset(*offset, absl::StrCat(AbslView(what), ": offset"));
        !s.ok()) {
      return s;
    }
  }
  absl::flat_hash_set<std::string_view> hashes;
  for (const PartitionRecord& record : records) {
    if (record.id_hash.size() != kDedupeKeyBytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("a partition record's id_hash must be ", kDedupeKeyBytes,
                       " bytes, got ", record.id_hash.size()));
    }
    if (record.expires_at == absl::InfiniteFuture() ||
        record.expires_at == absl::InfinitePast()) {
      return absl::InvalidArgumentError(
          "a partition record's expires_at must be finite");
    }
    if (!hashes.insert(record.id_hash).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(AbslView(what), ": two records have the ID hash ",
                       DedupeKeyToHex(record.id_hash)));
    }
  }
  return absl::OkStatus();
}

// kInvalidArgument if a key of `entries` (pairs whose first is the key)
// appears twice: one of the values would be silently dropped.
template <typename Entries>
absl::Status RejectRepeatedKeys(std::string_view what, const Entries& entries) {
  absl::flat_hash_set<std::string_view> keys;
  for (const auto& [key, value] : entries) {
    if (!keys.insert(key).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(AbslView(what), ": the state key \"",
                       absl::CHexEscape(AbslView(key)), "\" appears twice"));
    }
  }
  return absl::OkStatus();
}

// kInvalidArgument for a stream time of InfiniteFuture, or a timer with a
// bad domain or time, of another partition or whose key appears twice.
absl::Status ValidatePartitionTimers(std::string_view what,
                                     std::string_view source, int32_t partition,
                                     absl::Time stream_time,
                                     absl::Span<const TimerFire> timers) {
  if (stream_time == absl::InfiniteFuture()) {
    return absl::InvalidArgumentError(absl::StrCat(
        AbslView(what), ": stream_time must be finite or InfinitePast"));
  }
  absl::flat_hash_set<std::string_view> keys;
  for (const TimerFire& timer : timers) {
    if (timer.source != source || timer.partition != partition) {
      return absl::InvalidArgumentError(
          absl::StrCat(AbslView(what), ": a timer of another partition (",
                       timer.source, "/", timer.partition, ")"));
    }
    if (!ValidTimeDomain(timer.domain) ||
        timer.fire_at == absl::InfiniteFuture() ||
        timer.fire_at == absl::InfinitePast()) {
      return absl::InvalidArgumentError(absl::StrCat(
          AbslView(what), ": timer \"", absl::CHexEscape(timer.timer_key),
          "\" has a bad domain or an infinite fire_at"));
    }
    if (!keys.insert(timer.timer_key).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(AbslView(what), ": the timer key \"",
                       absl::CHexEscape(timer.timer_key), "\" appears twice"));
    }
  }
  return absl::OkStatus();
}

int64_t StreamMicros(absl::Time stream_time) {
  return stream_time == absl::InfinitePast() ? kNoStreamTime
                                             : absl::ToUnixMicros(stream_time);
}

absl::Status ValidateSnapshot(const PartitionSnapshot& snapshot) {
  if (absl::Status s = ValidatePartitionCommit(
          "ImportPartition", snapshot.source, snapshot.partition,
          snapshot.offset, snapshot.records);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = ValidatePartitionTimers(
          "ImportPartition", snapshot.source, snapshot.partition,
          snapshot.stream_time, snapshot.timers);
      !s.ok()) {
    return s;
  }
  return RejectRepeatedKeys("ImportPartition", snapshot.entries);
}

absl::Status ValidateChanges(const PartitionChanges& changes) {
  if (absl::Status s = ValidatePartitionCommit(
          "ApplyPartitionChanges", changes.source, changes.partition,
          changes.offset, changes.records);
      !s.ok()) {
    return s;
  }
  std::vector<TimerFire> set;
  for (const auto& [key, timer] : changes.timers) {
    if (!timer.has_value()) continue;
    TimerFire& checked = set.emplace_back(*timer);
    checked.source = changes.source;
    checked.partition = changes.partition;
    checked.timer_key = key;
  }
  if (absl::Status s = ValidatePartitionTimers(
          "ApplyPartitionChanges", changes.source, changes.partition,
          changes.stream_time.value_or(absl::InfinitePast()), set);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          RejectRepeatedKeys("ApplyPartitionChanges: timers", changes.timers);
      !s.ok()) {
    return s;
  }
  return RejectRepeatedKeys("ApplyPartitionChanges", changes.writes);
}

// The ID an import of `snapshot` commits under: a hash of everything it
// holds, so that the same snapshot imported twice is a duplicate.
std::string ImportId(const PartitionSnapshot& snapshot) {
  XXH3_state_t hash;
  XXH3_64bits_reset(&hash);
  auto add = [&hash](std::string_view bytes) {
    const uint64_t size = bytes.size();  // sizes keep the fields apart
    XXH3_64bits_update(&hash, &size, sizeof(size));
    XXH3_64bits_update(&hash, bytes.data(), bytes.size());
  };
  add(PartitionStatePrefix(snapshot.source, snapshot.partition));
  add(absl::StrCat(snapshot.offset.value_or(-1)));
  for (const auto& [key, value] : snapshot.entries) {
    add(key);
    add(value);
  }
  for (const PartitionRecord& record : snapshot.records) {
    add(record.id_hash);
    add(absl::StrCat(TimeToMicros(record.expires_at)));
    add(record.result);
  }
  if (snapshot.stream_time != absl::InfinitePast() ||
      !snapshot.timers.empty()) {
    // Snapshots without timers keep the IDs they had before timers.
    add(absl::StrCat(StreamMicros(snapshot.stream_time)));
    for (const TimerFire& timer : snapshot.timers) {
      add(absl::StrCat(static_cast<int>(timer.domain)));
      add(absl::StrCat(absl::ToUnixMicros(timer.fire_at)));
      add(timer.timer_key);
      add(timer.payload);
    }
  }
  // Only when present, so that a snapshot without TTLs keeps its ID.
  for (const auto& [key, expires_at] : snapshot.expires_at) {
    add(key);
    add(absl::StrCat(TimeToMicros(expires_at)));
  }
  return absl::StrCat("idem.import/", absl::Hex(XXH3_64bits_digest(&hash)));
}

DedupeKey ToDedupeKey(std::string_view hash) {
  DedupeKey key;
  std::copy(hash.begin(), hash.end(), key.begin());
  return key;
}

}  // namespace

absl::StatusOr<PartitionSnapshot> EngineImpl::ExportPartition(
    std::string_view source, int32_t partition) {
  if (absl::Status s = ValidateSource(source, partition); !s.ok()) return s;
  absl::StatusOr<int64_t> now_micros = clock_->NowMicros();
  if (!now_micros.ok()) return now_micros.status();
  ReadLock lock(this);
  absl::StatusOr<Store*> current_store = CurrentStore();
  if (!current_store.ok()) return current_store.status();
  Store& store = **current_store;

  // One snapshot: state, offset and records agree.
  const rocksdb::Snapshot* db_snapshot = store.db->GetSnapshot();
  struct Release {
    rocksdb::DB* db;
    const rocksdb::Snapshot* snapshot;
    ~Release() { db->ReleaseSnapshot(snapshot); }
  } release{store.db, db_snapshot};
  rocksdb::ReadOptions read;
  read.snapshot = db_snapshot;

  PartitionSnapshot snapshot;
  snapshot.source = std::string(source);
  snapshot.partition = partition;
  const std::string state_prefix = PartitionStatePrefix(source, partition);
  // Values that expired are not exported; the others go with their expiry.
  const StateReadTime state_time = StateReadTimeAt(store, *now_micros);
  if (absl::Status s = ScanRange(
          store.db, store.state, read, state_prefix, KeyRangeEnd(state_prefix),
          [&](std::string_view key, std::string_view value) {
            if (!LiveStateValue(value, state_time).has_value()) {
              return absl::OkStatus();
            }
            const StateValue live =
                DecodeStateValue(value, state_time.enveloped);
            const std::string_view relative = key.substr(state_prefix.size());
            snapshot.entries.emplace_back(relative, live.value);
            if (live.expires_micros != kNeverExpires) {
              snapshot.expires_at.emplace(
                  relative, absl::FromUnixMicros(live.expires_micros));
            }
            return absl::OkStatus();
          });
      !s.ok()) {
    return s;
  }

  absl::StatusOr<std::optional<int64_t>> offset =
      ReadStoredOffset(store.db, store.offsets, read, source, partition);
  if (!offset.ok()) return offset.status();
  snapshot.offset = *offset;

  if (store.partition_scope) {
    const std::string record_prefix = PartitionRecordPrefix(source, partition);
    for (rocksdb::ColumnFamilyHandle* family :
         LiveDedupeFamilies(store, *now_micros)) {
      absl::Status s = ScanRange(
          store.db, family, read, record_prefix, KeyRangeEnd(record_prefix),
          [&](std::string_view key, std::string_view value) {
            std::optional<DedupeRecord> record = DecodeDedupeRecord(value);
            std::optional<PartitionRecordKey> scoped =
                DecodePartitionRecordKey(key);
            if (!record.has_value() || !scoped.has_value()) {
              return absl::DataLossError(absl::StrCat(
                  "undecodable dedupe record for key ", DedupeKeyToHex(key)));
            }
            // A remembered failure has no result to carry: it stays behind
            // (the partition's next engine runs a redelivery again).
            if (IsExpired(*record, *now_micros) ||
                record->failure != absl::StatusCode::kOk) {
              return absl::OkStatus();
            }
            snapshot.records.push_back(
                PartitionRecord{std::string(scoped->hash),
                                absl::FromUnixMicros(record->expiry_micros),
                                std::string(record->result)});
            return absl::OkStatus();
          });
      if (!s.ok()) return s;
    }
    std::sort(snapshot.records.begin(), snapshot.records.end(),
              [](const PartitionRecord& a, const PartitionRecord& b) {
                return a.id_hash < b.id_hash;
              });
  }
  if (absl::Status s = ExportTimers(store, read, snapshot); !s.ok()) return s;
  return snapshot;
}

absl::Status EngineImpl::ImportPartition(const PartitionSnapshot& snapshot) {
  return ImportPartition(snapshot, ImportOptions());
}

absl::Status EngineImpl::ImportPartition(const PartitionSnapshot& snapshot,
                                         const ImportOptions& options) {
  if (absl::Status s = ValidateSnapshot(snapshot); !s.ok()) return s;
  if (absl::Status s = RejectInsideHandler("ImportPartition"); !s.ok()) {
    return s;
  }
  if (absl::Status s = RejectIfReadOnly("ImportPartition"); !s.ok()) return s;
  const std::string import_id = ImportId(snapshot);
  PartitionCommit commit{.what = "ImportPartition",
                         .source = snapshot.source,
                         .partition = snapshot.partition,
                         .offset = snapshot.offset,
                         .replace = true,
                         .commit_id = import_id,
                         .writes = {},
                         .records = snapshot.records,
                         .stream_micros = StreamMicros(snapshot.stream_time),
                         .timers = snapshot.timers,
                         .expires_at = &snapshot.expires_at,
                         .timer_changes = {}};
  commit.writes.reserve(snapshot.entries.size());
  for (const auto& [key, value] : snapshot.entries) {
    commit.writes.emplace_back(key, value);
  }
  absl::StatusOr<uint64_t> sequence = CommitToPartition(commit, options);
  if (!sequence.ok()) return sequence.status();
  // Outside the commit lock: a sync waits for the commits in flight, which
  // may be waiting for that lock.
  if (absl::Status s = WaitDurable(*sequence); !s.ok()) return s;
  LogEvent(
      LogSeverity::kInfo,
      absl::StrCat("imported partition ", snapshot.source, "/",
                   snapshot.partition, " at offset ",
                   snapshot.offset.has_value() ? absl::StrCat(*snapshot.offset)
                                               : std::string("(none)"),
                   ": ", snapshot.entries.size(), " state entries, ",
                   snapshot.records.size(), " dedupe records"));
  return absl::OkStatus();
}

absl::Status EngineImpl::ApplyPartitionChanges(const PartitionChanges& changes,
                                               const ImportOptions& options) {
  if (absl::Status s = ValidateChanges(changes); !s.ok()) return s;
  if (absl::Status s = RejectInsideHandler("ApplyPartitionChanges"); !s.ok()) {
    return s;
  }
  if (absl::Status s = RejectIfReadOnly("ApplyPartitionChanges"); !s.ok()) {
    return s;
  }
  PartitionCommit commit{
      .what = "ApplyPartitionChanges",
      .source = changes.source,
      .partition = changes.partition,
      .offset = changes.offset,
      .replace = false,
      .commit_id = std::nullopt,
      .writes = {},
      .records = changes.records,
      .stream_micros =
          StreamMicros(changes.stream_time.value_or(absl::InfinitePast())),
      .timers = {},
      .expires_at = &changes.expires_at,
      .timer_changes = changes.timers};
  commit.writes.reserve(changes.writes.size());
  for (const auto& [key, value] : changes.writes) {
    commit.writes.emplace_back(key, value);
  }
  absl::StatusOr<uint64_t> sequence = CommitToPartition(commit, options);
  if (!sequence.ok()) return sequence.status();
  return WaitDurable(*sequence);  // outside the commit lock, as above
}

absl::StatusOr<uint64_t> EngineImpl::CommitToPartition(
    const PartitionCommit& commit, const ImportOptions& options) {
  CommitLock commit_lock(this);
  if (absl::Status s = RecoverIfNeeded(); !s.ok()) return s;
  if (commit.expires_at != nullptr && !commit.expires_at->empty()) {
    // Values that expire need format 5 (a no-op once the store is).
    if (absl::Status s = MarkFormat(kStateTtlFormatVersion); !s.ok()) {
      return s;
    }
  }
  absl::StatusOr<int64_t> now_micros = clock_->NowMicros();
  if (!now_micros.ok()) return now_micros.status();

  // The commit's own record, if it has one (placed as a message's), then
  // the live records, each in the bucket its expiry belongs to.
  Message own;  // views: commit.commit_id outlives it
  if (commit.commit_id.has_value()) {
    own.id = *commit.commit_id;
    own.source = commit.source;
    own.partition = commit.partition;
  }
  RecordPlacements placements =
      commit.commit_id.has_value()
          ? PlaceRecords(options_, absl::MakeConstSpan(&own, 1), *now_micros)
          : RecordPlacements();
  const size_t first_live = placements.size();
  std::vector<const PartitionRecord*> live;
  for (const PartitionRecord& record : commit.records) {
    const int64_t expiry = TimeToMicros(record.expires_at);
    if (expiry <= *now_micros) continue;
    live.push_back(&record);
    placements.push_back(
        RecordPlacement{expiry, BucketEndFor(options_, expiry, *now_micros)});
  }
  if (absl::Status s = MaintainBuckets(placements, *now_micros); !s.ok()) {
    return s;
  }
  if ((commit.stream_micros != kNoStreamTime || !commit.timers.empty() ||
       !commit.timer_changes.empty()) &&
      !options_.read_only) {
    if (absl::Status s = MarkFormat(kTimerFormatVersion); !s.ok()) return s;
  }

  absl::ReaderMutexLock store_lock(&store_mu_);
  absl::StatusOr<Store*> current_store = CurrentStore();
  if (!current_store.ok()) return current_store.status();
  Store& store = **current_store;
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

  std::optional<RecordKey> own_key;
  if (commit.commit_id.has_value()) {
    own_key = RecordKeyFor(store.partition_scope, own, HashMessageId(own.id));
  }
  // A repeat of a commit writes nothing, unless it may rewind: then the
  // partition has perhaps moved on since, and the commit replaces it again.
  if (own_key.has_value() && !options.allow_rewind) {
    absl::StatusOr<LiveLookup> committed = LookupLiveRecords(
        store, absl::MakeConstSpan(&*own_key, 1), *now_micros);
    if (!committed.ok()) return committed.status();
    if ((*committed)[0].has_value()) {  // committed before: write nothing
      duplicates_.fetch_add(1, std::memory_order_relaxed);
      return store.db->GetLatestSequenceNumber();
    }
  }

  auto family_of = [&](const RecordPlacement& placement)
      -> absl::StatusOr<rocksdb::ColumnFamilyHandle*> {
    if (!placement.bucket_end.has_value()) return store.dedupe;
    auto bucket = store.buckets.find(*placement.bucket_end);
    if (bucket == store.buckets.end()) {
      return absl::InternalError("expiry bucket missing at a partition commit");
    }
    return bucket->second;
  };
  rocksdb::WriteBatch batch;
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
  for (size_t i = 0; i < live.size(); ++i) {
    const RecordPlacement& placement = placements[first_live + i];
    absl::StatusOr<rocksdb::ColumnFamilyHandle*> family = family_of(placement);
    if (!family.ok()) return family.status();
    const DedupeKey hash = ToDedupeKey(live[i]->id_hash);
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
            EncodeDedupeRecord(placement.expiry_micros, live[i]->result)));
        !s.ok()) {
      return s;
    }
  }
  if (own_key.has_value()) {
    absl::StatusOr<rocksdb::ColumnFamilyHandle*> own_family =
        family_of(placements[0]);
    if (!own_family.ok()) return own_family.status();
    if (absl::Status s = check(
            batch.Put(*own_family, ToSlice(own_key->view()),
                      EncodeDedupeRecord(placements[0].expiry_micros, "")));
        !s.ok()) {
      return s;
    }
  }
  const std::string offset_key =
      EncodeOffsetKey(commit.source, commit.partition);
  if (commit.offset.has_value()) {
    if (absl::Status s = check(batch.Put(store.offsets, offset_key,
                                         EncodeOffsetValue(*commit.offset)));
        !s.ok()) {
      return s;
    }
  } else if (commit.replace && current->has_value()) {
    // allow_rewind to no offset at all
    if (absl::Status s = check(batch.Delete(store.offsets, offset_key));
        !s.ok()) {
      return s;
    }
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
      const int64_t fire_at = absl::ToUnixMicros(timer.fire_at);
      if (absl::Status s =
              check(batch.Put(store.timers,
                              TimerQueueKey(partition_key, timer.domain,
                                            fire_at, timer.timer_key),
                              timer.payload));
          !s.ok()) {
        return s;
      }
      if (absl::Status s = check(batch.Put(
              store.timers, TimerIndexKey(partition_key, timer.timer_key),
              EncodeTimerIndex(timer.domain, fire_at)));
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

absl::Status EngineImpl::BuildTimerChange(const Store& store,
                                          const std::string& partition_key,
                                          const std::string& timer_key,
                                          const std::optional<TimerFire>& timer,
                                          const char* what,
                                          rocksdb::WriteBatch& batch) const {
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
  const int64_t fire_at = absl::ToUnixMicros(timer->fire_at);
  if (absl::Status s = check(batch.Put(
          store.timers,
          TimerQueueKey(partition_key, timer->domain, fire_at, timer_key),
          timer->payload));
      !s.ok()) {
    return s;
  }
  return check(batch.Put(store.timers, index_key,
                         EncodeTimerIndex(timer->domain, fire_at)));
}

absl::Status EngineImpl::ExportTimers(const Store& store,
                                      const rocksdb::ReadOptions& read,
                                      PartitionSnapshot& snapshot) const {
  if (store.timers == nullptr) return absl::OkStatus();
  const std::string partition_key =
      TimerPartitionKey(snapshot.source, snapshot.partition);
  std::string value;
  rocksdb::Status got =
      store.db->Get(read, store.timers, StreamTimeKey(partition_key), &value);
  if (!got.ok() && !got.IsNotFound()) {
    return FromRocksStatus(got, "reading a stream time");
  }
  if (got.ok()) {
    std::optional<int64_t> micros = DecodeStreamTime(value);
    if (!micros.has_value()) {
      return absl::DataLossError("undecodable stored stream time");
    }
    snapshot.stream_time = absl::FromUnixMicros(*micros);
  }
  const std::string queue = TimerQueueStart(partition_key, TimeDomain::kEvent)
                                .substr(0, 1 + partition_key.size());
  return ScanRange(
      store.db, store.timers, read, queue, KeyRangeEnd(queue),
      [&](std::string_view key, std::string_view payload) {
        std::optional<QueuedTimer> timer =
            DecodeTimerQueueKey(key, partition_key.size());
        if (!timer.has_value()) {
          return absl::DataLossError("undecodable timer queue key");
        }
        snapshot.timers.push_back(
            TimerFire{.source = snapshot.source,
                      .partition = snapshot.partition,
                      .domain = timer->domain,
                      .timer_key = std::string(timer->timer_key),
                      .fire_at = absl::FromUnixMicros(timer->fire_at_micros),
                      .payload = std::string(payload)});
        return absl::OkStatus();
      });
}

absl::Status EngineImpl::SetCommittedOffset(std::string_view source,
                                            int32_t partition, int64_t offset) {
  if (absl::Status s = ValidateSource(source, partition); !s.ok()) return s;
  if (absl::Status s = ValidateOffset(offset, "SetCommittedOffset: offset");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = RejectInsideHandler("SetCommittedOffset"); !s.ok()) {
    return s;
  }
  if (absl::Status s = RejectIfReadOnly("SetCommittedOffset"); !s.ok()) {
    return s;
  }
  absl::StatusOr<uint64_t> sequence = CommitOffset(source, partition, offset);
  if (!sequence.ok()) return sequence.status();
  // Outside the commit lock, as ImportPartition.
  return WaitDurable(*sequence);
}

absl::StatusOr<uint64_t> EngineImpl::CommitOffset(std::string_view source,
                                                  int32_t partition,
                                                  int64_t offset) {
  CommitLock commit_lock(this);
  if (absl::Status s = RecoverIfNeeded(); !s.ok()) return s;
  absl::ReaderMutexLock store_lock(&store_mu_);
  absl::StatusOr<Store*> current_store = CurrentStore();
  if (!current_store.ok()) return current_store.status();
  Store& store = **current_store;
  rocksdb::WriteBatch batch;
  if (absl::Status s = FromRocksStatus(
          batch.Put(store.offsets, EncodeOffsetKey(source, partition),
                    EncodeOffsetValue(offset)),
          "building an offset change");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = Write(store, &batch); !s.ok()) return s;
  return store.db->GetLatestSequenceNumber();
}

}  // namespace idem
