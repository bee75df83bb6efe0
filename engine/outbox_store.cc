#include "engine/outbox_store.h"

#include <memory>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "engine/status_util.h"

namespace idem {

absl::StatusOr<OutboxCursor> LoadOutboxCursor(
    rocksdb::DB* db, rocksdb::ColumnFamilyHandle* outbox) {
  if (outbox == nullptr) return OutboxCursor{};
  std::string value;
  rocksdb::Status s =
      db->Get(rocksdb::ReadOptions(), outbox, EncodeOutboxKey(0), &value);
  if (s.IsNotFound()) return OutboxCursor{};
  if (!s.ok()) return FromRocksStatus(s, "reading the outbox cursor");
  std::optional<OutboxCursor> cursor = DecodeOutboxCursor(value);
  if (!cursor.has_value()) {
    return absl::DataLossError("undecodable outbox cursor");
  }
  return *cursor;
}

absl::StatusOr<std::vector<OutboxEntry>> ReadOutboxEntries(
    rocksdb::DB* db, rocksdb::ColumnFamilyHandle* outbox,
    const rocksdb::ReadOptions& read, uint64_t after, size_t max_entries) {
  std::vector<OutboxEntry> entries;
  // No position lies above the largest one.
  if (outbox == nullptr || after == ~uint64_t{0}) return entries;
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(read, outbox));
  for (it->Seek(EncodeOutboxKey(after + 1));
       it->Valid() && entries.size() < max_entries; it->Next()) {
    std::optional<uint64_t> position =
        DecodeOutboxKey(it->key().ToStringView());
    std::optional<OutboxFields> fields =
        DecodeOutboxValue(it->value().ToStringView());
    if (!position.has_value() || !fields.has_value()) {
      return absl::DataLossError(absl::StrCat(
          "undecodable outbox entry at position ",
          position.has_value()
              ? absl::StrCat(*position)
              : absl::StrCat("(key of ", it->key().size(), " bytes)")));
    }
    OutboxEntry& entry = entries.emplace_back();
    entry.position = *position;
    entry.message_id = std::string(fields->message_id);
    entry.destination = std::string(fields->destination);
    entry.partition = fields->partition;
    entry.key = std::string(fields->key);
    entry.value = std::string(fields->value);
    entry.tombstone = fields->tombstone;
    for (const auto& [name, header_value] : fields->headers) {
      entry.headers.emplace_back(name, header_value);
    }
  }
  if (absl::Status s = FromRocksStatus(it->status(), "reading the outbox");
      !s.ok()) {
    return s;
  }
  return entries;
}

absl::Status BuildOutboxAck(rocksdb::ColumnFamilyHandle* outbox,
                            const OutboxCursor& cursor, uint64_t position,
                            rocksdb::WriteBatch& batch) {
  rocksdb::Status s = batch.DeleteRange(
      outbox, EncodeOutboxKey(cursor.acked + 1), EncodeOutboxKey(position + 1));
  if (s.ok()) {
    s = batch.Put(outbox, EncodeOutboxKey(0),
                  EncodeOutboxCursor(OutboxCursor{cursor.issued, position}));
  }
  return FromRocksStatus(s, "building an outbox acknowledgement");
}

}  // namespace idem
