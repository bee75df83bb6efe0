#include "engine/outbox_record.h"

#include "absl/strings/str_cat.h"
#include "engine/coding.h"

namespace idem {
namespace {

void PutLengthPrefixed(std::string* out, std::string_view field) {
  PutFixed32LE(out, static_cast<uint32_t>(field.size()));
  out->append(field);
}

// Takes a length-prefixed field off the front of `in`.
bool GetLengthPrefixed(std::string_view* in, std::string_view* field) {
  if (in->size() < 4) return false;
  const uint64_t length = GetFixed32LE(in->data());
  in->remove_prefix(4);
  if (length > in->size()) return false;
  *field = in->substr(0, length);
  in->remove_prefix(length);
  return true;
}

}  // namespace

std::string OutboxMessageId(const RecordKey& key, uint32_t index) {
  const std::string_view bytes = key.view();
  const std::string hex = bytes.size() == kDedupeKeyBytes
                              ? DedupeKeyToHex(bytes)
                              : DedupeKeyToHex(KeyView(HashMessageId(bytes)));
  return absl::StrCat(hex, "-", index);
}

std::string EncodeOutboxKey(uint64_t position) {
  std::string key(kOutboxKeyBytes, '\0');
  PutBigEndian64(key.data(), position);
  return key;
}

std::optional<uint64_t> DecodeOutboxKey(std::string_view key) {
  if (key.size() != kOutboxKeyBytes) return std::nullopt;
  return GetBigEndian64(key.data());
}

std::string EncodeOutboxValue(const OutboxFields& fields) {
  std::string value;
  value.reserve(1 + 16 + 8 * fields.headers.size() + fields.message_id.size() +
                fields.destination.size() + fields.key.size() +
                fields.value.size());
  if (fields.partition == -1 && !fields.tombstone) {
    value.push_back(static_cast<char>(kOutboxEntryVersion));
  } else {
    value.push_back(static_cast<char>(kOutboxPartitionedEntryVersion));
    PutFixed32LE(&value, static_cast<uint32_t>(fields.partition));
    value.push_back(fields.tombstone ? 1 : 0);
  }
  PutLengthPrefixed(&value, fields.message_id);
  PutLengthPrefixed(&value, fields.destination);
  PutLengthPrefixed(&value, fields.key);
  PutFixed32LE(&value, static_cast<uint32_t>(fields.headers.size()));
  for (const auto& [name, header_value] : fields.headers) {
    PutLengthPrefixed(&value, name);
    PutLengthPrefixed(&value, header_value);
  }
  value.append(fields.value);
  return value;
}

std::optional<OutboxFields> DecodeOutboxValue(std::string_view value) {
  if (value.empty()) return std::nullopt;
  const uint8_t version = static_cast<uint8_t>(value.front());
  value.remove_prefix(1);
  OutboxFields fields;
  if (version == kOutboxPartitionedEntryVersion) {
    if (value.size() < 5) return std::nullopt;
    fields.partition = static_cast<int32_t>(GetFixed32LE(value.data()));
    const uint8_t flags = static_cast<uint8_t>(value[4]);
    value.remove_prefix(5);
    fields.tombstone = flags == 1;
    // Version 2 only for what version 1 cannot say: one spelling per entry.
    if (fields.partition < -1 || flags > 1 ||
        (fields.partition == -1 && !fields.tombstone)) {
      return std::nullopt;
    }
  } else if (version != kOutboxEntryVersion) {
    return std::nullopt;
  }
  if (!GetLengthPrefixed(&value, &fields.message_id) ||
      !GetLengthPrefixed(&value, &fields.destination) ||
      !GetLengthPrefixed(&value, &fields.key) || value.size() < 4) {
    return std::nullopt;
  }
  const uint64_t headers = GetFixed32LE(value.data());
  value.remove_prefix(4);
  // Each header takes at least 8 bytes: bound the count before reserving.
  if (headers > value.size() / 8) return std::nullopt;
  fields.headers.reserve(headers);
  for (uint64_t i = 0; i < headers; ++i) {
    std::string_view name;
    std::string_view header_value;
    if (!GetLengthPrefixed(&value, &name) ||
        !GetLengthPrefixed(&value, &header_value)) {
      return std::nullopt;
    }
    fields.headers.emplace_back(name, header_value);
  }
  if (fields.tombstone && !value.empty()) return std::nullopt;
  fields.value = value;
  return fields;
}

std::string EncodeOutboxCursor(const OutboxCursor& cursor) {
  std::string value;
  value.push_back(static_cast<char>(kOutboxCursorVersion));
  PutFixed64LE(&value, cursor.issued);
  PutFixed64LE(&value, cursor.acked);
  return value;
}

std::optional<OutboxCursor> DecodeOutboxCursor(std::string_view value) {
  if (value.size() != 17 ||
      static_cast<uint8_t>(value.front()) != kOutboxCursorVersion) {
    return std::nullopt;
  }
  OutboxCursor cursor;
  cursor.issued = GetFixed64LE(value.data() + 1);
  cursor.acked = GetFixed64LE(value.data() + 9);
  if (cursor.acked > cursor.issued) return std::nullopt;
  return cursor;
}

}  // namespace idem
