#include "engine/record.h"

#include <cstring>
#include <limits>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "engine/coding.h"

namespace idem {

DedupeKey HashMessageId(std::string_view id) {
  const XXH128_hash_t h = XXH3_128bits(id.data(), id.size());
  DedupeKey key;
  PutBigEndian64(key.data(), h.high64);
  PutBigEndian64(key.data() + 8, h.low64);
  return key;
}

std::string DedupeKeyToHex(std::string_view key) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(key.size() * 2);
  for (unsigned char c : key) {
    hex.push_back(kDigits[c >> 4]);
    hex.push_back(kDigits[c & 0xf]);
  }
  return hex;
}

RecordKey RecordKey::ForStore(const DedupeKey& hash) {
  RecordKey key;
  key.bytes_.resize(kDedupeKeyBytes);
  std::memcpy(key.bytes_.data(), hash.data(), kDedupeKeyBytes);
  return key;
}

namespace {

// The partition's prefix of record keys (PartitionRecordPrefix), written at
// `out`. REQUIRES: 8 + source.size() writable bytes.
void PutPartitionPrefix(char* out, std::string_view source, int32_t partition) {
  PutBigEndian32(out, static_cast<uint32_t>(source.size()));
  // An empty source may have a null data(), which memcpy must not get.
  if (!source.empty()) std::memcpy(out + 4, source.data(), source.size());
  PutBigEndian32(out + 4 + source.size(), static_cast<uint32_t>(partition));
}

}  // namespace

RecordKey RecordKey::ForPartition(std::string_view source, int32_t partition,
                                  const DedupeKey& hash) {
  RecordKey key;
  key.bytes_.resize(8 + source.size() + kDedupeKeyBytes);
  PutPartitionPrefix(key.bytes_.data(), source, partition);
  std::memcpy(key.bytes_.data() + 8 + source.size(), hash.data(),
              kDedupeKeyBytes);
  return key;
}

RecordKey RecordKeyFor(bool partition_scope, const Message& message,
                       const DedupeKey& hash) {
  if (!partition_scope) return RecordKey::ForStore(hash);
  return RecordKey::ForPartition(message.source, message.partition, hash);
}

std::string PartitionRecordPrefix(std::string_view source, int32_t partition) {
  std::string prefix(8 + source.size(), '\0');
  PutPartitionPrefix(prefix.data(), source, partition);
  return prefix;
}

std::string KeyRangeEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) {
    end.pop_back();
  }
  if (!end.empty()) end.back() = static_cast<char>(end.back() + 1);
  return end;
}

std::optional<PartitionRecordKey> DecodePartitionRecordKey(
    std::string_view key) {
  if (key.size() < 8 + kDedupeKeyBytes) return std::nullopt;
  const uint32_t length = GetBigEndian32(key.data());
  if (key.size() != 8 + uint64_t{length} + kDedupeKeyBytes) {
    return std::nullopt;
  }
  PartitionRecordKey decoded;
  decoded.source = key.substr(4, length);
  decoded.partition =
      static_cast<int32_t>(GetBigEndian32(key.data() + 4 + length));
  if (decoded.partition < 0) return std::nullopt;  // never written
  decoded.hash = key.substr(8 + length);
  return decoded;
}

int64_t TimeToMicros(absl::Time t) {
  if (t == absl::InfiniteFuture()) return std::numeric_limits<int64_t>::max();
  if (t == absl::InfinitePast()) return std::numeric_limits<int64_t>::min();
  // ToUnixMicros saturates for times outside the int64 microsecond range.
  return absl::ToUnixMicros(t);
}

namespace {

constexpr int64_t kMicrosPerSecond = 1'000'000;

}  // namespace

uint32_t ProcessedBeforeExpiry(int64_t first_micros, int64_t expiry_micros) {
  if (first_micros == kUnknownFirstProcessed || first_micros > expiry_micros) {
    return kUnknownAge;
  }
  // expiry - first may overflow int64; as uint64 it is exact.
  const uint64_t micros = static_cast<uint64_t>(expiry_micros) -
                          static_cast<uint64_t>(first_micros);
  const uint64_t seconds =
      micros / kMicrosPerSecond + (micros % kMicrosPerSecond != 0 ? 1 : 0);
  return seconds >= kUnknownAge ? kUnknownAge : static_cast<uint32_t>(seconds);
}

int64_t FirstProcessedMicros(const DedupeRecord& record) {
  if (record.processed_before_expiry_s == kUnknownAge) {
    return kUnknownFirstProcessed;
  }
  const int64_t micros =
      int64_t{record.processed_before_expiry_s} * kMicrosPerSecond;
  if (record.expiry_micros < std::numeric_limits<int64_t>::min() + micros) {
    return kUnknownFirstProcessed;
  }
  return record.expiry_micros - micros;
}

std::string EncodeDedupeRecord(const DedupeRecord& record) {
  const bool failed = record.failure != absl::StatusCode::kOk;
  uint8_t first = kRecordVersion;
  if (record.fingerprint.has_value()) first |= kRecordFingerprint;
  if (failed) first |= kRecordFailed;
  std::string value;
  value.reserve(kRecordHeaderBytes +
                (record.fingerprint.has_value() ? kFingerprintBytes : 0) +
                (failed ? 1 : 0) + record.result.size());
  value.push_back(static_cast<char>(first));
  PutFixed64LE(&value, static_cast<uint64_t>(record.expiry_micros));
  PutFixed32LE(&value, record.processed_before_expiry_s);
  if (record.fingerprint.has_value()) PutFixed64LE(&value, *record.fingerprint);
  if (failed) value.push_back(static_cast<char>(record.failure));
  value.append(record.result);
  return value;
}

std::string EncodeDedupeRecord(int64_t expiry_micros, std::string_view result) {
  DedupeRecord record;
  record.expiry_micros = expiry_micros;
  record.result = result;
  return EncodeDedupeRecord(record);
}

std::string EncodeDedupeRecordV1(int64_t expiry_micros,
                                 std::string_view result) {
  std::string value;
  value.reserve(kRecordV1HeaderBytes + result.size());
  value.push_back(static_cast<char>(kRecordVersion1));
  PutFixed64LE(&value, static_cast<uint64_t>(expiry_micros));
  value.append(result);
  return value;
}

uint64_t MessageFingerprint(const Message& message) {
  const std::string_view content =
      message.fingerprint.empty() ? message.payload : message.fingerprint;
  return XXH3_64bits(content.data(), content.size());
}

std::optional<DedupeRecord> DecodeDedupeRecord(std::string_view value) {
  if (value.empty()) return std::nullopt;
  const uint8_t first = static_cast<uint8_t>(value[0]);
  DedupeRecord record;
  if (first == kRecordVersion1) {
    if (value.size() < kRecordV1HeaderBytes) return std::nullopt;
    record.version = kRecordVersion1;
    record.expiry_micros = static_cast<int64_t>(GetFixed64LE(value.data() + 1));
    record.result = value.substr(kRecordV1HeaderBytes);
    return record;
  }
  constexpr uint8_t kKnownFlags = kRecordFingerprint | kRecordFailed;
  if ((first & 0x0f) != kRecordVersion || (first & 0xf0 & ~kKnownFlags) != 0 ||
      value.size() < kRecordHeaderBytes) {
    return std::nullopt;
  }
  record.expiry_micros = static_cast<int64_t>(GetFixed64LE(value.data() + 1));
  record.processed_before_expiry_s = GetFixed32LE(value.data() + 9);
  size_t pos = kRecordHeaderBytes;
  if ((first & kRecordFingerprint) != 0) {
    if (value.size() < pos + kFingerprintBytes) return std::nullopt;
    record.fingerprint = GetFixed64LE(value.data() + pos);
    pos += kFingerprintBytes;
  }
  if ((first & kRecordFailed) != 0) {
    if (value.size() < pos + 1) return std::nullopt;
    const uint8_t code = static_cast<uint8_t>(value[pos]);
    if (code == 0 || code > 16) return std::nullopt;
    record.failure = static_cast<absl::StatusCode>(code);
    pos += 1;
  }
  record.result = value.substr(pos);
  return record;
}

std::string EncodeOffsetKey(std::string_view source, int32_t partition) {
  std::string key(source);
  char p[4];
  PutBigEndian32(p, static_cast<uint32_t>(partition));
  key.append(p, sizeof(p));
  return key;
}

std::optional<OffsetKey> DecodeOffsetKey(std::string_view key) {
  if (key.size() < 4) return std::nullopt;
  const uint32_t p = GetBigEndian32(key.data() + key.size() - 4);
  return OffsetKey{key.substr(0, key.size() - 4), static_cast<int32_t>(p)};
}

std::string EncodeOffsetValue(int64_t offset) {
  std::string value;
  PutFixed64LE(&value, static_cast<uint64_t>(offset));
  return value;
}

std::optional<int64_t> DecodeOffsetValue(std::string_view value) {
  if (value.size() != 8) return std::nullopt;
  return static_cast<int64_t>(GetFixed64LE(value.data()));
}

}  // namespace idem
