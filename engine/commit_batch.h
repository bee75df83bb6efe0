// The parts of the commit path (docs/design.md, "Commit path") that do not
// need the engine's locks: where each message's dedupe record goes, the
// reads before any handler runs (live records, stored offsets), and
// CommitBuilder, which collects one commit's writes and builds its
// WriteBatch. EngineImpl::CommitBatch calls them under the shared store lock;
// idem-bench's RocksDB layouts (bench/idem_bench/targets.cc) build their
// commits with them too, so both measure the same code.
//
// Free functions are thread-safe as far as their RocksDB handles are.
// CommitBuilder is not thread-safe; it lives for one commit. Column family
// handles are borrowed and must outlive their use.

#ifndef IDEM_ENGINE_COMMIT_BATCH_H_
#define IDEM_ENGINE_COMMIT_BATCH_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/batch_txn.h"
#include "engine/offset_tracker.h"
#include "engine/outbox_record.h"
#include "engine/record.h"
#include "idem/engine.h"
#include "idem/options.h"
#include "rocksdb/db.h"
#include "rocksdb/write_batch.h"

namespace idem {

// Where the dedupe record of a message would go, computed once per commit
// at the commit's engine time.
struct RecordPlacement {
  // now + ceil(ttl to 1 µs), ttl being the message's or the window.
  int64_t expiry_micros = 0;
  // The expiry bucket (engine/expiry_buckets.h) the record goes to, or
  // nullopt for idem.dedupe.
  std::optional<int64_t> bucket_end;
};

// The expiry of the record `message` would commit at `now_micros`
// (saturating at the largest int64_t).
int64_t RecordExpiry(const Options& options, const Message& message,
                     int64_t now_micros);

// One placement per message; a single message needs no allocation.
using RecordPlacements = absl::InlinedVector<RecordPlacement, 1>;

// The placement of each message's record, in order.
RecordPlacements PlaceRecords(const Options& options,
                              absl::Span<const Message> messages,
                              int64_t now_micros);

// A live dedupe record as a lookup found it, and the family holding it. The
// decoded record's `result` views RocksDB's buffer only while it is read, so
// a LiveRecord keeps those bytes in `result` and `record.result` is left
// empty: View() puts them back together.
struct LiveRecord {
  DedupeRecord record;
  std::string result;
  rocksdb::ColumnFamilyHandle* family = nullptr;

  // `record` with its result viewing `result`. Valid while this LiveRecord
  // is neither changed nor moved.
  DedupeRecord View() const {
    DedupeRecord viewed = record;
    viewed.result = result;
    return viewed;
  }
};

// One entry per key looked up; a single key needs no allocation.
using LiveLookup = absl::InlinedVector<std::optional<LiveRecord>, 1>;

// For each key, the live record if one exists in one of `families` (one
// MultiGet per family, or one Get for a single key; at most one family holds
// a live record for a key).
// kDataLoss naming the key if a record does not decode; the converted
// RocksDB error if a read fails.
absl::StatusOr<LiveLookup> LookupLive(
    rocksdb::DB* db, absl::Span<rocksdb::ColumnFamilyHandle* const> families,
    absl::Span<const RecordKey> keys, int64_t now_micros);
// The same for store-scoped keys (the hashes themselves).
absl::StatusOr<LiveLookup> LookupLive(
    rocksdb::DB* db, absl::Span<rocksdb::ColumnFamilyHandle* const> families,
    absl::Span<const DedupeKey> keys, int64_t now_micros);

// Stored offsets by offset key (engine/record.h); a partition without one
// is absent.
using StoredOffsets = absl::flat_hash_map<std::string, int64_t>;

// The stored offsets of the partitions `messages` carry a position in, one
// MultiGet over the distinct ones. kDataLoss naming the source and
// partition if one does not decode.
absl::StatusOr<StoredOffsets> ReadStoredOffsets(
    rocksdb::DB* db, rocksdb::ColumnFamilyHandle* offsets,
    absl::Span<const Message> messages);

// The stored offset of (source, partition), read through `read`; nullopt if
// none. kDataLoss if it does not decode; the converted RocksDB error if the
// read fails.
absl::StatusOr<std::optional<int64_t>> ReadStoredOffset(
    rocksdb::DB* db, rocksdb::ColumnFamilyHandle* offsets,
    const rocksdb::ReadOptions& read, std::string_view source,
    int32_t partition);

// kDataLoss for a stored offset that does not decode, naming its source and
// partition, or showing `offset_key` in hex if it is too short to hold them.
// For the commit path, CommittedOffset and Dump.
absl::Status UndecodableOffsetError(std::string_view offset_key);

// One commit's writes, collected while its messages are handled: the state
// overlay (final state values), the new dedupe records with their family,
// the emits of the messages processed, and each message's outcome for the
// offsets. Build makes the WriteBatch.
class CommitBuilder {
 public:
  // `outbox` may be null (a store without idem.outbox; then no message may
  // emit).
  CommitBuilder(rocksdb::ColumnFamilyHandle* state,
                rocksdb::ColumnFamilyHandle* offsets,
                rocksdb::ColumnFamilyHandle* outbox = nullptr)
      : state_family_(state),
        offsets_family_(offsets),
        outbox_family_(outbox) {}
  CommitBuilder(const CommitBuilder&) = delete;
  CommitBuilder& operator=(const CommitBuilder&) = delete;

  // Whether the store is of format 5: state values are written as
  // engine/state_value.h encodes them. Default: false (raw values).
  void set_state_enveloped(bool enveloped) { state_enveloped_ = enveloped; }

  // The final state values written by the commit so far (a BatchTxn reads
  // through it and applies into it).
  BatchOverlay& state() { return state_; }
  const BatchOverlay& state() const { return state_; }

  // The offset each partition of the commit advances to, before Build
  // compares it with the stored one.
  const OffsetTracker& offsets() const { return offsets_; }

  // Records the outcome of `message` for the offsets (OffsetTracker::Add).
  void AddOutcome(const Message& message, Outcome outcome) {
    offsets_.Add(message, outcome);
  }

  // Deletes `key` from `family` (a refreshed record that moves to another
  // expiry bucket leaves its old one), before the records are put.
  void AddRecordDelete(rocksdb::ColumnFamilyHandle* family,
                       const RecordKey& key) {
    record_deletes_.push_back(
        NewRecord{family, family->GetID(), key, std::string()});
  }

  // Makes room for the records of `messages` messages (an estimate; more
  // may still be added).
  void Reserve(size_t messages) { records_.reserve(messages); }

  // Adds the dedupe record `value` for `key` in `family`.
  void AddRecord(rocksdb::ColumnFamilyHandle* family, const RecordKey& key,
                 std::string value) {
    records_.push_back(
        NewRecord{family, family->GetID(), key, std::move(value)});
  }
  void AddRecord(rocksdb::ColumnFamilyHandle* family, const DedupeKey& key,
                 std::string value) {
    AddRecord(family, RecordKey::ForStore(key), std::move(value));
  }

  // Adds the emits of the processed message whose dedupe record key is
  // `key`, in order; each gets its message ID (OutboxMessageId) now and its
  // position in Build.
  void AddEmits(const RecordKey& key, std::vector<Emitted> emitted);

  // The number of outbox entries the commit adds.
  uint64_t emitted() const { return emits_.size(); }

  // Builds the commit into `batch`: the state's range deletions, then its
  // other writes sorted by key (merges as their operands), then the
  // dedupe records sorted by family ID, then key bytes (into `records`, which
  // is
  // `batch` except for a deliberately split commit), then per partition the
  // offset, if higher than the one in `stored` (offsets never move back),
  // then the outbox entries at positions outbox.issued + 1, + 2, ... and the
  // outbox cursor that records them as issued (if there are any). Sorted
  // inserts let RocksDB's memtable skiplist reuse its search position.
  // Fails only if RocksDB refuses an entry (converted RocksDB error), or
  // kInternal for emits without an outbox family.
  absl::Status Build(const StoredOffsets& stored, const OutboxCursor& outbox,
                     rocksdb::WriteBatch& batch, rocksdb::WriteBatch& records);

 private:
  struct NewRecord {
    rocksdb::ColumnFamilyHandle* family;
    uint32_t family_id;  // family->GetID(), a virtual call: once per record
    RecordKey key;
    std::string value;
  };

  struct NewEmit {
    std::string message_id;
    Emitted emitted;
  };

  // Adds the state writes to `batch`: the range deletions, then the rest in
  // key order.
  absl::Status BuildState(rocksdb::WriteBatch& batch) const;
  // Adds the outbox entries and the cursor to `batch`.
  absl::Status BuildOutbox(const OutboxCursor& outbox,
                           rocksdb::WriteBatch& batch) const;

  rocksdb::ColumnFamilyHandle* const state_family_;
  bool state_enveloped_ = false;
  rocksdb::ColumnFamilyHandle* const offsets_family_;
  rocksdb::ColumnFamilyHandle* const outbox_family_;
  BatchOverlay state_;
  absl::InlinedVector<NewRecord, 1> records_;  // one message: no allocation
  std::vector<NewRecord> record_deletes_;
  std::vector<NewEmit> emits_;
  OffsetTracker offsets_;
};

}  // namespace idem

#endif  // IDEM_ENGINE_COMMIT_BATCH_H_
