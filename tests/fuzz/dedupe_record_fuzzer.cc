// Fuzzes the dedupe record decoder (engine/record.h) and the TTL filter that
// judges stored values with it (engine/ttl_filter.h).
//
// Properties, for any value:
// - DecodeDedupeRecord accepts exactly the values of at least the header's
//   size that start with kRecordVersion;
// - a decoded record's result is a view of the input's bytes after the
//   header, and encoding the record again gives the input back;
// - encoding (expiry, result) taken from the input and decoding it gives
//   them back;
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

void CheckDecode(std::string_view value) {
  const std::optional<DedupeRecord> record = DecodeDedupeRecord(value);
  const bool well_formed = value.size() >= kRecordHeaderBytes &&
                           static_cast<uint8_t>(value[0]) == kRecordVersion;
  IDEM_FUZZ_CHECK(record.has_value() == well_formed);
  if (!record.has_value()) return;
  IDEM_FUZZ_CHECK(IsInside(record->result, value));
  IDEM_FUZZ_CHECK(record->result.size() == value.size() - kRecordHeaderBytes);
  IDEM_FUZZ_CHECK(record->result.data() == value.data() + kRecordHeaderBytes);
  IDEM_FUZZ_CHECK(EncodeDedupeRecord(record->expiry_micros, record->result) ==
                  value);
}

void CheckEncode(std::string_view input) {
  int64_t expiry = 0;
  std::string_view result = input;
  if (input.size() >= sizeof(expiry)) {
    std::memcpy(&expiry, input.data(), sizeof(expiry));
    result.remove_prefix(sizeof(expiry));
  }
  const std::string value = EncodeDedupeRecord(expiry, result);
  IDEM_FUZZ_CHECK(value.size() == kRecordHeaderBytes + result.size());
  const std::optional<DedupeRecord> record = DecodeDedupeRecord(value);
  IDEM_FUZZ_CHECK(record.has_value());
  IDEM_FUZZ_CHECK(record->expiry_micros == expiry);
  IDEM_FUZZ_CHECK(record->result == result);
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
  return {
      EncodeDedupeRecord(kNowMicros + 1, ""),
      EncodeDedupeRecord(kNowMicros - 1, "done:order-17"),
      EncodeDedupeRecord(std::numeric_limits<int64_t>::max(), "result"),
      EncodeDedupeRecord(std::numeric_limits<int64_t>::min(),
                         std::string(40, '\0')),
      EncodeDedupeRecord(kNowMicros, "r").substr(0, kRecordHeaderBytes - 1),
      wrong_version,
  };
}

void FuzzOne(std::string_view input) {
  CheckDecode(input);
  CheckEncode(input);
  CheckFilter(input);
}

}  // namespace idem::fuzz
