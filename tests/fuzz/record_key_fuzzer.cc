// Fuzzes the partition-scoped record key decoder (engine/record.h), which
// Dump and ExportPartition run on every key of a partition-scoped store's
// dedupe families.
//
// Properties, for any bytes:
// - DecodePartitionRecordKey accepts exactly keys made of a 4-byte
//   big-endian length L, L source bytes, a 4-byte big-endian partition below
//   2^31 and 16 hash bytes; its views lie inside the input, and
//   RecordKey::ForPartition of the decoded parts gives the input back;
// - the key starts with PartitionRecordPrefix of its source and partition,
//   and sorts below KeyRangeEnd of that prefix;
// - ForPartition of a source, partition and hash taken from the input
//   decodes to them;
// - the message ID of its emits (OutboxMessageId) is "<32 hex digits>-N"
//   and depends on the source and partition, not only on the hash: it
//   differs from the store-scoped key's and from another partition's.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/outbox_record.h"
#include "engine/record.h"
#include "tests/fuzz/fuzz_target.h"

namespace idem::fuzz {
namespace {

uint32_t BigEndian32(std::string_view bytes) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) {
    v = (v << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  }
  return v;
}

DedupeKey ToHash(std::string_view bytes) {
  DedupeKey hash{};
  std::copy_n(bytes.begin(), std::min(bytes.size(), hash.size()), hash.begin());
  return hash;
}

void CheckDecode(std::string_view key) {
  const std::optional<PartitionRecordKey> decoded =
      DecodePartitionRecordKey(key);
  bool well_formed = false;
  if (key.size() >= 8 + kDedupeKeyBytes) {
    const uint64_t length = BigEndian32(key);
    well_formed = key.size() == 8 + length + kDedupeKeyBytes &&
                  BigEndian32(key.substr(4 + length)) < 0x80000000u;
  }
  IDEM_FUZZ_CHECK(decoded.has_value() == well_formed);
  if (!decoded.has_value()) return;
  IDEM_FUZZ_CHECK(IsInside(decoded->source, key));
  IDEM_FUZZ_CHECK(IsInside(decoded->hash, key));
  IDEM_FUZZ_CHECK(decoded->partition >= 0);
  IDEM_FUZZ_CHECK(decoded->hash.size() == kDedupeKeyBytes);
  const RecordKey again = RecordKey::ForPartition(
      decoded->source, decoded->partition, ToHash(decoded->hash));
  IDEM_FUZZ_CHECK(again.view() == key);
  const std::string prefix =
      PartitionRecordPrefix(decoded->source, decoded->partition);
  IDEM_FUZZ_CHECK(key.starts_with(prefix));
  const std::string end = KeyRangeEnd(prefix);
  IDEM_FUZZ_CHECK(end.empty() || key < std::string_view(end));
}

void CheckEncode(std::string_view input) {
  int32_t partition = 0;
  std::string_view source = input;
  DedupeKey hash{};
  if (input.size() >= 4 + kDedupeKeyBytes) {
    std::memcpy(&partition, input.data(), sizeof(partition));
    hash = ToHash(input.substr(4));
    source = input.substr(4 + kDedupeKeyBytes);
  }
  if (partition < 0) partition = -(partition + 1);
  const RecordKey key = RecordKey::ForPartition(source, partition, hash);
  const std::optional<PartitionRecordKey> decoded =
      DecodePartitionRecordKey(key.view());
  IDEM_FUZZ_CHECK(decoded.has_value());
  IDEM_FUZZ_CHECK(decoded->source == source);
  IDEM_FUZZ_CHECK(decoded->partition == partition);
  IDEM_FUZZ_CHECK(decoded->hash == KeyView(hash));

  const std::string emit_id = OutboxMessageId(key, 0);
  IDEM_FUZZ_CHECK(emit_id.size() == 34 && emit_id.substr(32) == "-0");
  IDEM_FUZZ_CHECK(emit_id != OutboxMessageId(RecordKey::ForStore(hash), 0));
  const int32_t other =
      partition == std::numeric_limits<int32_t>::max() ? 0 : partition + 1;
  IDEM_FUZZ_CHECK(
      emit_id !=
      OutboxMessageId(RecordKey::ForPartition(source, other, hash), 0));
}

}  // namespace

std::vector<std::string> Seeds() {
  return {
      std::string(
          RecordKey::ForPartition("orders", 0, HashMessageId("a")).view()),
      std::string(
          RecordKey::ForPartition("", 2147483647, HashMessageId("b")).view()),
      std::string(KeyView(HashMessageId("store-scoped"))),
      PartitionRecordPrefix("payments", 3),
  };
}

void FuzzOne(std::string_view input) {
  CheckDecode(input);
  CheckEncode(input);
}

}  // namespace idem::fuzz
