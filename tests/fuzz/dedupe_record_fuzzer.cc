// Fuzzes the dedupe record decoder (engine/record.h) and the TTL filter that
// judges stored values with it (engine/ttl_filter.h).
//
// Properties, for any value:
// - DecodeDedupeRecord accepts exactly version 1 values (the byte 1 and at
//   least the 8-byte expiry) and version 2 values (low nibble 2, no unknown
//   flag, the 12-byte header and every field its flags announce, a failure
//   code in [1, 16]);
// - a decoded record's result is a view of the input's last bytes, and
//   encoding the record again (in its own version) gives the input back;
// - encoding fields taken from the input and decoding them gives them back;
// - the TTL filter keeps a value it cannot decode and a live record, and
//   removes (plain kRemove, skip_until untouched) only an expired record.

#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/record.h"
#include "engine/ttl_filter.h"
#include "rocksdb/slice.h"
#include "tests/fuzz/fuzz_target.h"

namespace idem::fuzz {
namespace {

// The filter's clock: 2023-11-14T22:13:20Z.
constexpr int64_t kNowMicros = int64_t{1'700'000'000} * 1'000'000;

// Whether `value` is well formed, by the format's definition (record.h).
bool WellFormed(std::string_view value) {
  if (value.empty()) return false;
  const uint8_t first = static_cast<uint8_t>(value[0]);
  if (first == kRecordVersion1) return value.size() >= kRecordV1HeaderBytes;
  if ((first & 0x0f) != kRecordVersion) return false;
  if ((first & 0xc0) != 0) return false;  // unknown flags
  size_t need = kRecordHeaderBytes;
  if ((first & kRecordFingerprint) != 0) need += kFingerprintBytes;
  if ((first & kRecordFailed) != 0) {
    if (value.size() < need + 1) return false;
    const uint8_t code = static_cast<uint8_t>(value[need]);
    if (code == 0 || code > 16) return false;
    need += 1;
  }
  return value.size() >= need;
}

void CheckDecode(std::string_view value) {
  const std::optional<DedupeRecord> record = DecodeDedupeRecord(value);
  IDEM_FUZZ_CHECK(record.has_value() == WellFormed(value));
  if (!record.has_value()) return;
  IDEM_FUZZ_CHECK(IsInside(record->result, value));
  IDEM_FUZZ_CHECK(record->result.data() + record->result.size() ==
                  value.data() + value.size());
  if (record->version == kRecordVersion1) {
    IDEM_FUZZ_CHECK(record->result.size() ==
                    value.size() - kRecordV1HeaderBytes);
    IDEM_FUZZ_CHECK(FirstProcessedMicros(*record) == kUnknownFirstProcessed);
    IDEM_FUZZ_CHECK(!record->fingerprint.has_value());
    IDEM_FUZZ_CHECK(record->failure == absl::StatusCode::kOk);
    IDEM_FUZZ_CHECK(
        EncodeDedupeRecordV1(record->expiry_micros, record->result) == value);
    return;
  }
  IDEM_FUZZ_CHECK(record->version == kRecordVersion);
  IDEM_FUZZ_CHECK(EncodeDedupeRecord(*record) == value);
  const int64_t first = FirstProcessedMicros(*record);
  IDEM_FUZZ_CHECK(first == kUnknownFirstProcessed ||
                  first <= record->expiry_micros);
}

void CheckEncode(std::string_view input) {
  DedupeRecord in;
  std::string_view rest = input;
  auto take = [&](void* out, size_t n) {
    if (rest.size() < n) return false;
    std::memcpy(out, rest.data(), n);
    rest.remove_prefix(n);
    return true;
  };
  uint8_t flags = 0;
  take(&flags, 1);
  take(&in.expiry_micros, sizeof(in.expiry_micros));
  take(&in.processed_before_expiry_s, sizeof(in.processed_before_expiry_s));
  uint64_t fingerprint = 0;
  if ((flags & 1) != 0 && take(&fingerprint, sizeof(fingerprint))) {
    in.fingerprint = fingerprint;
  }
  if ((flags & 2) != 0)
    in.failure = static_cast<absl::StatusCode>(1 + flags % 16);
  in.result = rest;
  const std::string value = EncodeDedupeRecord(in);
  IDEM_FUZZ_CHECK(value.size() ==
                  kRecordHeaderBytes +
                      (in.fingerprint.has_value() ? kFingerprintBytes : 0) +
                      (in.failure != absl::StatusCode::kOk ? 1 : 0) +
                      rest.size());
  const std::optional<DedupeRecord> record = DecodeDedupeRecord(value);
  IDEM_FUZZ_CHECK(record.has_value());
  IDEM_FUZZ_CHECK(record->expiry_micros == in.expiry_micros);
  IDEM_FUZZ_CHECK(record->processed_before_expiry_s ==
                  in.processed_before_expiry_s);
  IDEM_FUZZ_CHECK(record->fingerprint == in.fingerprint);
  IDEM_FUZZ_CHECK(record->failure == in.failure);
  IDEM_FUZZ_CHECK(record->result == in.result);
  const std::string v1 = EncodeDedupeRecordV1(in.expiry_micros, rest);
  const std::optional<DedupeRecord> old = DecodeDedupeRecord(v1);
  IDEM_FUZZ_CHECK(old.has_value() && old->expiry_micros == in.expiry_micros &&
                  old->result == rest);
}

void CheckFilter(std::string_view value) {
  std::atomic<uint64_t> dropped{0};
  const TtlFilter filter(kNowMicros, &dropped);
  std::string new_value;
  std::string skip_until;
  const auto decision = filter.FilterV2(
      /*level=*/1, rocksdb::Slice("0123456789abcdef"),
      rocksdb::CompactionFilter::ValueType::kValue,
      rocksdb::Slice(value.data(), value.size()), &new_value, &skip_until);
  const std::optional<DedupeRecord> record = DecodeDedupeRecord(value);
  const bool expired = record.has_value() && IsExpired(*record, kNowMicros);
  IDEM_FUZZ_CHECK(decision ==
                  (expired ? rocksdb::CompactionFilter::Decision::kRemove
                           : rocksdb::CompactionFilter::Decision::kKeep));
  IDEM_FUZZ_CHECK(dropped.load() == (expired ? 1u : 0u));
  IDEM_FUZZ_CHECK(skip_until.empty());
  IDEM_FUZZ_CHECK(new_value.empty());
}

}  // namespace

std::vector<std::string> Seeds() {
  std::string wrong_version = EncodeDedupeRecord(kNowMicros, "r");
  wrong_version[0] = static_cast<char>(kRecordVersion + 1);
  std::string unknown_flag = EncodeDedupeRecord(kNowMicros, "r");
  unknown_flag[0] = static_cast<char>(kRecordVersion | 0x40);
  DedupeRecord full;
  full.expiry_micros = kNowMicros + 60'000'000;
  full.processed_before_expiry_s =
      ProcessedBeforeExpiry(kNowMicros, full.expiry_micros);
  full.fingerprint = 0x0123456789abcdef;
  DedupeRecord failed = full;
  failed.failure = absl::StatusCode::kInvalidArgument;
  failed.result = "no account 42";
  std::string bad_code = EncodeDedupeRecord(failed);
  bad_code[kRecordHeaderBytes + kFingerprintBytes] = 17;
  return {
      EncodeDedupeRecord(kNowMicros + 1, ""),
      EncodeDedupeRecord(kNowMicros - 1, "done:order-17"),
      EncodeDedupeRecord(std::numeric_limits<int64_t>::max(), "result"),
      EncodeDedupeRecord(std::numeric_limits<int64_t>::min(),
                         std::string(40, '\0')),
      EncodeDedupeRecord(kNowMicros, "r").substr(0, kRecordHeaderBytes - 1),
      EncodeDedupeRecord(full),
      EncodeDedupeRecord(failed),
      EncodeDedupeRecord(failed).substr(0, kRecordHeaderBytes + 4),
      bad_code,
      EncodeDedupeRecordV1(kNowMicros + 1, "v1 result"),
      EncodeDedupeRecordV1(kNowMicros, "").substr(0, kRecordV1HeaderBytes - 1),
      wrong_version,
      unknown_flag,
  };
}

void FuzzOne(std::string_view input) {
  CheckDecode(input);
  CheckEncode(input);
  CheckFilter(input);
}

}  // namespace idem::fuzz
