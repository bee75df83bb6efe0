// The on-disk encoding of dedupe records and source offsets.
//
// Dedupe key:   16 bytes, the XXH3-128 hash of the message ID, high 64 bits
//               first, each half big-endian (DedupeScope::kStore); in a
//               partition-scoped store (format 3), the source's length (4
//               bytes big-endian), the source, the partition (4 bytes
//               big-endian), then those 16 bytes, so that one partition's
//               records form one key range.
// Dedupe value: version 2 (written): 1 byte, the version (2) in its low
//               four bits and flags in its high four (kRecordFingerprint:
//               a fingerprint follows; kRecordFailed: a remembered
//               permanent failure); 8 bytes absolute expiry in
//               microseconds since the Unix epoch (int64, little-endian);
//               4 bytes, the whole seconds from the first processing to the
//               expiry (uint32 little-endian, rounded up; 0xffffffff:
//               unknown); with kRecordFingerprint, the 8-byte XXH3-64
//               fingerprint (little-endian); with kRecordFailed, 1 byte,
//               the failure's absl::StatusCode (1 to 16); then the
//               handler's result bytes, or a failure's error message.
//               Version 1 (read only, written by earlier builds): the
//               byte 1, the 8-byte expiry, then the result bytes.
// Offset key:   the source name followed by the partition as 4 bytes
//               big-endian (the name is the key minus its last 4 bytes).
// Offset value: the offset, int64 little-endian.
//
// Pure functions; thread-safe.

#ifndef IDEM_ENGINE_RECORD_H_
#define IDEM_ENGINE_RECORD_H_

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "absl/container/inlined_vector.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "idem/message.h"

namespace idem {

// The version written; kRecordVersion1 is still read.
inline constexpr uint8_t kRecordVersion = 2;
inline constexpr uint8_t kRecordVersion1 = 1;
// Flags in the high bits of a version 2 record's first byte.
inline constexpr uint8_t kRecordFingerprint = 0x10;
inline constexpr uint8_t kRecordFailed = 0x20;
inline constexpr size_t kDedupeKeyBytes = 16;
// The shortest record of each version (no flags, empty result).
inline constexpr size_t kRecordHeaderBytes = 13;
inline constexpr size_t kRecordV1HeaderBytes = 9;
// What a fingerprint adds to a record.
inline constexpr size_t kFingerprintBytes = 8;

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
  // The ID's hash: the whole key, or the last kDedupeKeyBytes of a
  // partition-scoped one.
  std::string_view hash() const {
    return view().substr(bytes_.size() - kDedupeKeyBytes);
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

// A first-processed time the record does not know (version 1 records, and
// a processing more than 2^32 - 2 seconds before the expiry).
inline constexpr int64_t kUnknownFirstProcessed =
    std::numeric_limits<int64_t>::min();
inline constexpr uint32_t kUnknownAge = 0xffffffff;

struct DedupeRecord {
  int64_t expiry_micros = 0;
  // The handler's result, or a remembered failure's error message; points
  // into the decoded value.
  std::string_view result;
  // When the ID was first processed, as whole seconds before the expiry
  // (FirstProcessedMicros); kUnknownAge if not known.
  uint32_t processed_before_expiry_s = kUnknownAge;
  // XXH3-64 of the first delivery's fingerprint field or payload, if the
  // record keeps one (Options::detect_conflicts).
  std::optional<uint64_t> fingerprint;
  // kOk, or the code of a remembered permanent failure (whose message is
  // `result`).
  absl::StatusCode failure = absl::StatusCode::kOk;
  // The version the record was decoded from (kRecordVersion when encoded).
  uint8_t version = kRecordVersion;
};

// Converts an absolute time to the stored int64 microseconds, saturating at
// the int64 range (absl::InfiniteFuture() maps to INT64_MAX).
int64_t TimeToMicros(absl::Time t);

// The stored form of a first processing at `first_micros` of a record
// expiring at `expiry_micros`: whole seconds before the expiry, rounded up
// (so it reads back at most a second early); kUnknownAge if `first_micros`
// is kUnknownFirstProcessed, after the expiry, or 2^32 - 1 seconds or more
// before it.
uint32_t ProcessedBeforeExpiry(int64_t first_micros, int64_t expiry_micros);

// When `record`'s ID was first processed (microseconds since the epoch), or
// kUnknownFirstProcessed.
int64_t FirstProcessedMicros(const DedupeRecord& record);

// A version 2 record of `record`'s fields (its version is ignored).
// REQUIRES: record.failure is kOk or a valid non-OK code.
std::string EncodeDedupeRecord(const DedupeRecord& record);
// A version 2 record of a success with an unknown first-processed time and
// no fingerprint.
std::string EncodeDedupeRecord(int64_t expiry_micros, std::string_view result);
// A version 1 record, as builds before version 2 wrote them (for tests of
// stores written by them).
std::string EncodeDedupeRecordV1(int64_t expiry_micros,
                                 std::string_view result);

// The 64-bit fingerprint of a delivery's content: XXH3-64 of
// `message.fingerprint` if it is non-empty, otherwise of the payload.
uint64_t MessageFingerprint(const Message& message);

// Returns nullopt if `value` is not a record of a version this build reads:
// version 1, or version 2 with known flags, enough bytes for the fields its
// flags announce and, if failed, a non-OK code up to 16.
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
