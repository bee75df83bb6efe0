// The on-disk encoding of dedupe records and source offsets.
//
// Dedupe key:   16 bytes, the XXH3-128 hash of the message ID, high 64 bits
//               first, each half big-endian.
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

#include "absl/time/time.h"

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

// 32 lowercase hex digits.
std::string DedupeKeyToHex(std::string_view key);

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
