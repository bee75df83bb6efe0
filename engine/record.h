// The on-disk encoding of dedupe records and source offsets.
//
// Dedupe key:   16 bytes, the XXH3-128 hash of the message ID, high 64 bits
//               first, each half big-endian (DedupeScope::kStore); in a
//               partition-scoped store (format 3), the source's length (4
//               bytes big-endian), the source, the partition (4 bytes
//               big-endian), then those 16 bytes, so that one partition's
//               records form one key range.
// Dedupe value: 1 byte record version (kRecordVersion), 8 bytes absolute
//               expiry in microseconds since the Unix epoch (int64,
//               little-endian), then the handler's result bytes.
// Offset key:   the source name followed by the partition as 4 bytes
//               big-endian (the name is the key minus its last 4 bytes).
// Offset value: the offset, int64 little-endian.
//
// Pure functions; thread-safe.

#ifndef IDEM_ENGINE_RECORD_H_
#define IDEM_ENGINE_RECORD_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/container/inlined_vector.h"
#include "absl/hash/hash.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "idem/message.h"

namespace idem {

inline constexpr uint8_t kRecordVersion = 1;
inline constexpr size_t kDedupeKeyBytes = 16;
inline constexpr size_t kRecordHeaderBytes = 9;

using DedupeKey = std::array<char, kDedupeKeyBytes>;

// Hashes a message ID into its dedupe key.
DedupeKey HashMessageId(std::string_view id);

// The key as a string_view over `key`'s bytes (valid while `key` lives).
inline std::string_view KeyView(const DedupeKey& key) {
  return std::string_view(key.data(), key.size());
}

// Lowercase hex digits, two per byte (32 for a DedupeKey).
std::string DedupeKeyToHex(std::string_view key);

// The key of a message's dedupe record (see the file comment): the ID's hash
// alone, or prefixed by its partition. A value type; keys of short sources
// stay inline (no allocation).
class RecordKey {
 public:
  // The store-scoped key: the hash.
  static RecordKey ForStore(const DedupeKey& hash);
  // The partition-scoped key of `hash` on (source, partition).
  static RecordKey ForPartition(std::string_view source, int32_t partition,
                                const DedupeKey& hash);

  std::string_view view() const {
    return std::string_view(bytes_.data(), bytes_.size());
  }
  bool operator==(const RecordKey& other) const {
    return view() == other.view();
  }
  template <typename H>
  friend H AbslHashValue(H h, const RecordKey& key) {
    return H::combine(std::move(h),
                      absl::string_view(key.bytes_.data(), key.bytes_.size()));
  }

 private:
  absl::InlinedVector<char, 48> bytes_;
};

// The record key of `message`, whose ID hashes to `hash`, in a store that is
// partition-scoped or not.
RecordKey RecordKeyFor(bool partition_scope, const Message& message,
                       const DedupeKey& hash);

// The prefix every partition-scoped record key of (source, partition) has.
std::string PartitionRecordPrefix(std::string_view source, int32_t partition);

// The least key above every key that starts with `prefix` (the end of the
// prefix's key range in bytewise order), or "" if there is none (`prefix`
// is empty or all 0xff bytes).
std::string KeyRangeEnd(std::string_view prefix);

// A partition-scoped record key, decoded; views into the key.
struct PartitionRecordKey {
  std::string_view source;
  int32_t partition = 0;
  std::string_view hash;  // kDedupeKeyBytes bytes
};
// nullopt unless `key` is a partition-scoped record key as ForPartition
// writes it for a partition >= 0.
std::optional<PartitionRecordKey> DecodePartitionRecordKey(
    std::string_view key);

struct DedupeRecord {
  int64_t expiry_micros = 0;
  std::string_view result;  // points into the decoded value
};

// Converts an absolute time to the stored int64 microseconds, saturating at
// the int64 range (absl::InfiniteFuture() maps to INT64_MAX).
int64_t TimeToMicros(absl::Time t);

std::string EncodeDedupeRecord(int64_t expiry_micros, std::string_view result);

// Returns nullopt if `value` is not a record this version understands.
std::optional<DedupeRecord> DecodeDedupeRecord(std::string_view value);

// A record is live while now < expiry.
inline bool IsExpired(const DedupeRecord& record, int64_t now_micros) {
  return record.expiry_micros <= now_micros;
}

std::string EncodeOffsetKey(std::string_view source, int32_t partition);

struct OffsetKey {
  std::string_view source;
  int32_t partition = 0;
};
std::optional<OffsetKey> DecodeOffsetKey(std::string_view key);

std::string EncodeOffsetValue(int64_t offset);
std::optional<int64_t> DecodeOffsetValue(std::string_view value);

}  // namespace idem

#endif  // IDEM_ENGINE_RECORD_H_
