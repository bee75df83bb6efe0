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
