// The on-disk encoding of the outbox (column family idem.outbox; see
// docs/design.md, "Outbox").
//
// Entry key:    the position, 8 bytes big-endian (so key order is position
//               order). Positions start at 1.
// Entry value:  1 byte version, then for version 2 only the destination
//               partition (int32, 4 bytes little-endian, -1 for "by key")
//               and a flags byte (bit 0: tombstone, the value is null),
//               then the message ID, the destination and the key, each as a
//               4-byte little-endian length and its bytes, then the number
//               of headers (4 bytes little-endian) and each header's name
//               and value, length-prefixed alike, then the value (the rest).
//               Entries without a partition or tombstone are written as
//               version 1 (kOutboxEntryVersion), which has neither field;
//               a version 2 entry with neither does not decode.
// Cursor key:   position 0's key (never an entry's).
// Cursor value: 1 byte version, then the last position issued and the last
//               position acknowledged, each 8 bytes little-endian. Written by
//               every commit that emits and by every acknowledgement, so
//               positions are never reused, even once every entry is gone.
//
// Pure functions; thread-safe.

#ifndef IDEM_ENGINE_OUTBOX_RECORD_H_
#define IDEM_ENGINE_OUTBOX_RECORD_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/record.h"
#include "idem/outbox.h"

namespace idem {

inline constexpr uint8_t kOutboxEntryVersion = 1;
inline constexpr uint8_t kOutboxPartitionedEntryVersion = 2;
inline constexpr uint8_t kOutboxCursorVersion = 1;
inline constexpr size_t kOutboxKeyBytes = 8;

// The message ID of the emit with index `index` (0 for a handler run's first
// Emit) of the message whose dedupe record key is `key` (RecordKeyFor):
// OutboxEntry::message_id, "<32 hex digits>-<index>". The hex digits are
// those of a store-scoped key, which is the message ID's hash itself, or of
// XXH3-128 of a partition-scoped key, which also holds the message's source
// and partition. So the ID depends on exactly what makes the record
// distinct: two deliveries that are two messages (one ID on two partitions
// of a partition-scoped store) emit under different IDs, and the same
// message processed in any store of the same scope emits the same IDs.
std::string OutboxMessageId(const RecordKey& key, uint32_t index);

std::string EncodeOutboxKey(uint64_t position);
// nullopt if `key` is not 8 bytes.
std::optional<uint64_t> DecodeOutboxKey(std::string_view key);

// The stored fields of an entry (its position is its key).
struct OutboxFields {
  std::string_view message_id;
  std::string_view destination;
  std::string_view key;
  std::string_view value;  // empty if tombstone
  std::vector<std::pair<std::string_view, std::string_view>> headers;
  int32_t partition = -1;  // >= -1
  bool tombstone = false;
};

std::string EncodeOutboxValue(const OutboxFields& fields);
// nullopt if `value` is not an entry this version understands. The views
// point into `value`.
std::optional<OutboxFields> DecodeOutboxValue(std::string_view value);

// Where the outbox stands: positions 1..issued were handed out, 1..acked
// acknowledged (removed). acked <= issued; issued - acked entries are
// pending.
struct OutboxCursor {
  uint64_t issued = 0;
  uint64_t acked = 0;
};

std::string EncodeOutboxCursor(const OutboxCursor& cursor);
// nullopt if `value` is not a cursor this version understands, or acked >
// issued.
std::optional<OutboxCursor> DecodeOutboxCursor(std::string_view value);

}  // namespace idem

#endif  // IDEM_ENGINE_OUTBOX_RECORD_H_
