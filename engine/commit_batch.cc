#include "engine/commit_batch.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "engine/absl_view.h"
#include "engine/coding.h"
#include "engine/expiry_buckets.h"
#include "engine/status_util.h"

namespace idem {
namespace {

int64_t ExpiryMicros(int64_t now_micros, absl::Duration ttl) {
  // Round up: a positive ttl must outlive the instant of its commit.
  // ToInt64Microseconds truncates toward zero (saturating), so a remainder
  // adds one; cheaper than absl::Ceil, which divides durations.
  int64_t ttl_micros = absl::ToInt64Microseconds(ttl);
  if (ttl_micros < std::numeric_limits<int64_t>::max() &&
      ttl > absl::Microseconds(ttl_micros)) {
    ++ttl_micros;
  }
  if (now_micros > std::numeric_limits<int64_t>::max() - ttl_micros) {
    return std::numeric_limits<int64_t>::max();
  }
  return now_micros + ttl_micros;
}

}  // namespace

int64_t RecordExpiry(const Options& options, const Message& message,
                     int64_t now_micros) {
  return ExpiryMicros(now_micros, message.ttl == absl::ZeroDuration()
                                      ? options.dedupe_window
                                      : message.ttl);
}

RecordPlacements PlaceRecords(const Options& options,
                              absl::Span<const Message> messages,
                              int64_t now_micros) {
  RecordPlacements placements(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    RecordPlacement& p = placements[i];
    p.expiry_micros = RecordExpiry(options, messages[i], now_micros);
    p.bucket_end = BucketEndFor(options, p.expiry_micros, now_micros);
  }
  return placements;
}

absl::StatusOr<LiveLookup> LookupLive(
    rocksdb::DB* db, absl::Span<rocksdb::ColumnFamilyHandle* const> families,
    absl::Span<const DedupeKey> keys, int64_t now_micros) {
  std::vector<RecordKey> record_keys;
  record_keys.reserve(keys.size());
  for (const DedupeKey& key : keys) {
    record_keys.push_back(RecordKey::ForStore(key));
  }
  return LookupLive(db, families, record_keys, now_micros);
}

namespace {

// Takes the record `value` found for `key` in `family` into `live` if it is
// live and `live` is still empty. kDataLoss if it does not decode.
absl::Status TakeIfLive(std::string_view key, std::string_view value,
                        rocksdb::ColumnFamilyHandle* family, int64_t now_micros,
                        std::optional<LiveRecord>& live) {
  std::optional<DedupeRecord> record = DecodeDedupeRecord(value);
  if (!record.has_value()) {
    return absl::DataLossError(absl::StrCat(
        "undecodable dedupe record for key ", DedupeKeyToHex(key)));
  }
  if (!IsExpired(*record, now_micros) && !live.has_value()) {
    LiveRecord& found = live.emplace();
    found.result = std::string(record->result);
    found.record = *record;
    found.record.result = {};
    found.family = family;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LiveLookup> LookupLive(
    rocksdb::DB* db, absl::Span<rocksdb::ColumnFamilyHandle* const> families,
    absl::Span<const RecordKey> keys, int64_t now_micros) {
  LiveLookup live(keys.size());
  const rocksdb::ReadOptions read;
  if (keys.size() == 1) {
    // One key: a point Get per family costs less than MultiGet's setup.
    const std::string_view key = keys[0].view();
    rocksdb::PinnableSlice value;
    for (rocksdb::ColumnFamilyHandle* family : families) {
      value.Reset();
      rocksdb::Status s = db->Get(read, family, ToSlice(key), &value);
      if (s.IsNotFound()) continue;
      if (!s.ok()) return FromRocksStatus(s, "reading a dedupe record");
      if (absl::Status taken =
              TakeIfLive(key, std::string_view(value.data(), value.size()),
                         family, now_micros, live[0]);
          !taken.ok()) {
        return taken;
      }
    }
    return live;
  }
  std::vector<rocksdb::Slice> slices;
  slices.reserve(keys.size());
  for (const RecordKey& key : keys) slices.push_back(ToSlice(key.view()));
  std::vector<rocksdb::PinnableSlice> values(keys.size());
  std::vector<rocksdb::Status> statuses(keys.size());
  // At most one family holds a live record for a key (a live record makes
  // the next delivery a duplicate); expired ones may linger in others.
  for (rocksdb::ColumnFamilyHandle* family : families) {
    for (rocksdb::PinnableSlice& value : values) value.Reset();
    db->MultiGet(read, family, keys.size(), slices.data(), values.data(),
                 statuses.data());
    for (size_t i = 0; i < keys.size(); ++i) {
      if (statuses[i].IsNotFound()) continue;
      if (!statuses[i].ok()) {
        return FromRocksStatus(statuses[i], "reading a dedupe record");
      }
      if (absl::Status taken =
              TakeIfLive(keys[i].view(),
                         std::string_view(values[i].data(), values[i].size()),
                         family, now_micros, live[i]);
          !taken.ok()) {
        return taken;
      }
    }
  }
  return live;
}

absl::StatusOr<StoredOffsets> ReadStoredOffsets(
    rocksdb::DB* db, rocksdb::ColumnFamilyHandle* offsets,
    absl::Span<const Message> messages) {
  const std::vector<std::string> keys = OffsetTracker::OffsetKeys(messages);
  StoredOffsets stored;
  if (keys.empty()) return stored;
  std::vector<rocksdb::Slice> slices(keys.begin(), keys.end());
  std::vector<rocksdb::PinnableSlice> values(keys.size());
  std::vector<rocksdb::Status> statuses(keys.size());
  db->MultiGet(rocksdb::ReadOptions(), offsets, keys.size(), slices.data(),
               values.data(), statuses.data());
  for (size_t i = 0; i < keys.size(); ++i) {
    if (statuses[i].IsNotFound()) continue;
    if (!statuses[i].ok()) {
      return FromRocksStatus(statuses[i], "reading a committed offset");
    }
    std::optional<int64_t> offset =
        DecodeOffsetValue(std::string_view(values[i].data(), values[i].size()));
    if (!offset.has_value()) return UndecodableOffsetError(keys[i]);
    stored.emplace(keys[i], *offset);
  }
  return stored;
}

absl::StatusOr<std::optional<int64_t>> ReadStoredOffset(
    rocksdb::DB* db, rocksdb::ColumnFamilyHandle* offsets,
    const rocksdb::ReadOptions& read, std::string_view source,
    int32_t partition) {
  const std::string key = EncodeOffsetKey(source, partition);
  std::string value;
  rocksdb::Status s = db->Get(read, offsets, key, &value);
  if (s.IsNotFound()) return std::nullopt;
  if (!s.ok()) return FromRocksStatus(s, "reading a committed offset");
  std::optional<int64_t> offset = DecodeOffsetValue(value);
  if (!offset.has_value()) return UndecodableOffsetError(key);
  return *offset;
}

absl::Status UndecodableOffsetError(std::string_view offset_key) {
  std::optional<OffsetKey> key = DecodeOffsetKey(offset_key);
  if (!key.has_value()) {
    return absl::DataLossError(absl::StrCat(
        "undecodable stored offset key ", DedupeKeyToHex(offset_key),
        " (too short to hold a source and partition)"));
  }
  return absl::DataLossError(
      absl::StrCat("undecodable stored offset of source \"",
                   absl::CHexEscape(AbslView(key->source)), "\" partition ",
                   key->partition));
}

void CommitBuilder::AddEmits(const RecordKey& key,
                             std::vector<Emitted> emitted) {
  for (size_t i = 0; i < emitted.size(); ++i) {
    emits_.push_back(NewEmit{OutboxMessageId(key, static_cast<uint32_t>(i)),
                             std::move(emitted[i])});
  }
}

absl::Status CommitBuilder::BuildOutbox(const OutboxCursor& outbox,
                                        rocksdb::WriteBatch& batch) const {
  if (emits_.empty()) return absl::OkStatus();
  if (outbox_family_ == nullptr) {
    return absl::InternalError("emits, but the store has no outbox");
  }
  OutboxCursor next = outbox;
  for (const NewEmit& emit : emits_) {
    OutboxFields fields{.message_id = emit.message_id,
                        .destination = emit.emitted.destination,
                        .key = emit.emitted.key,
                        .value = emit.emitted.value,
                        .headers = {},
                        .partition = emit.emitted.partition,
                        .tombstone = emit.emitted.tombstone};
    for (const auto& [name, header_value] : emit.emitted.headers) {
      fields.headers.emplace_back(name, header_value);
    }
    const std::string value = EncodeOutboxValue(fields);
    rocksdb::Status s =
        batch.Put(outbox_family_, EncodeOutboxKey(++next.issued), value);
    if (!s.ok()) return FromRocksStatus(s, "building the commit");
  }
  rocksdb::Status s =
      batch.Put(outbox_family_, EncodeOutboxKey(0), EncodeOutboxCursor(next));
  return FromRocksStatus(s, "building the commit");
}

absl::Status CommitBuilder::BuildState(rocksdb::WriteBatch& batch) const {
  // The range deletions first: the state's point writes are newer
  // (engine/state_layer.h), so they must come after them in the batch.
  for (const KeyRange& range : state_.ranges()) {
    rocksdb::Status s =
        batch.DeleteRange(state_family_, range.begin, range.end);
    if (!s.ok()) return FromRocksStatus(s, "building the commit");
  }
  // In key order, which lets RocksDB's memtable skiplist reuse its search
  // position.
  for (const auto& [key, write] : state_.points()) {
    rocksdb::Status s;
    switch (write.kind) {
      case StateWrite::Kind::kPut:
        if (state_enveloped_) {
          s = batch.Put(state_family_, key,
                        EncodeStateValue(write.value, write.expires_micros,
                                         /*enveloped=*/true));
        } else {
          s = batch.Put(state_family_, key, write.value);
        }
        break;
      case StateWrite::Kind::kDelete:
        s = batch.Delete(state_family_, key);
        break;
      case StateWrite::Kind::kMerge:
        for (const auto& [op, operand] : write.merges.operands()) {
          // From format 5 each operand carries its commit's time
          // (engine/merge_operator.h).
          s = batch.Merge(
              state_family_, key,
              StoredOperand(
                  op, operand, write.merges.expiry(),
                  state_enveloped_ ? write.merges.written() : std::nullopt));
          if (!s.ok()) break;
        }
        break;
    }
    if (!s.ok()) return FromRocksStatus(s, "building the commit");
  }
  return absl::OkStatus();
}

absl::Status CommitBuilder::Build(const StoredOffsets& stored,
                                  const OutboxCursor& outbox,
                                  rocksdb::WriteBatch& batch,
                                  rocksdb::WriteBatch& records) {
  if (absl::Status s = BuildState(batch); !s.ok()) return s;
  // A record (key and value) is too big to move around: sorted by
  // reference, inline for small commits (no allocation).
  absl::InlinedVector<const NewRecord*, 8> sorted(records_.size());
  std::transform(records_.begin(), records_.end(), sorted.begin(),
                 [](const NewRecord& record) { return &record; });
  std::sort(sorted.begin(), sorted.end(),
            [](const NewRecord* a, const NewRecord* b) {
              if (a->family_id != b->family_id) {
                return a->family_id < b->family_id;
              }
              return a->key.view() < b->key.view();
            });
  for (const NewRecord& record : record_deletes_) {
    rocksdb::Status s =
        records.Delete(record.family, ToSlice(record.key.view()));
    if (!s.ok()) return FromRocksStatus(s, "building the commit");
  }
  for (const NewRecord* record : sorted) {
    rocksdb::Status s =
        records.Put(record->family, ToSlice(record->key.view()), record->value);
    if (!s.ok()) return FromRocksStatus(s, "building the commit");
  }
  absl::Status status;
  offsets_.ForEach([&](const std::string& offset_key, int64_t offset) {
    if (!status.ok()) return;
    auto it = stored.find(offset_key);
    if (it != stored.end() && it->second >= offset) {
      return;  // offsets only move forward
    }
    rocksdb::Status s =
        batch.Put(offsets_family_, offset_key, EncodeOffsetValue(offset));
    if (!s.ok()) status = FromRocksStatus(s, "building the commit");
  });
  if (!status.ok()) return status;
  return BuildOutbox(outbox, batch);
}

}  // namespace idem
