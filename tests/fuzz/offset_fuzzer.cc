// Fuzzes the offset key and value decoders (engine/record.h). The input is
// decoded both as a key and as a value of the idem.offsets column family.
//
// Properties, for any bytes:
// - DecodeOffsetKey accepts exactly keys of at least 4 bytes; the source is
//   a view of the input without its last 4 bytes, and encoding the decoded
//   (source, partition) gives the input back;
// - DecodeOffsetValue accepts exactly 8-byte values, and encoding the
//   decoded offset gives the input back;
// - encoding a (source, partition) or an offset taken from the input and
//   decoding it gives them back.

#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/record.h"
#include "tests/fuzz/fuzz_target.h"

namespace idem::fuzz {
namespace {

void CheckKey(std::string_view key) {
  const std::optional<OffsetKey> decoded = DecodeOffsetKey(key);
  IDEM_FUZZ_CHECK(decoded.has_value() == (key.size() >= 4));
  if (!decoded.has_value()) return;
  IDEM_FUZZ_CHECK(IsInside(decoded->source, key));
  IDEM_FUZZ_CHECK(decoded->source.data() == key.data());
  IDEM_FUZZ_CHECK(decoded->source.size() == key.size() - 4);
  IDEM_FUZZ_CHECK(EncodeOffsetKey(decoded->source, decoded->partition) == key);
}

void CheckValue(std::string_view value) {
  const std::optional<int64_t> decoded = DecodeOffsetValue(value);
  IDEM_FUZZ_CHECK(decoded.has_value() == (value.size() == 8));
  if (!decoded.has_value()) return;
  IDEM_FUZZ_CHECK(EncodeOffsetValue(*decoded) == value);
}

void CheckEncode(std::string_view input) {
  int32_t partition = 0;
  int64_t offset = 0;
  std::string_view source = input;
  if (input.size() >= sizeof(offset)) {
    std::memcpy(&partition, input.data(), sizeof(partition));
    std::memcpy(&offset, input.data(), sizeof(offset));
    source.remove_prefix(sizeof(offset));
  }
  const std::string key = EncodeOffsetKey(source, partition);
  const std::optional<OffsetKey> decoded_key = DecodeOffsetKey(key);
  IDEM_FUZZ_CHECK(decoded_key.has_value());
  IDEM_FUZZ_CHECK(decoded_key->source == source);
  IDEM_FUZZ_CHECK(decoded_key->partition == partition);
  const std::optional<int64_t> decoded_offset =
      DecodeOffsetValue(EncodeOffsetValue(offset));
  IDEM_FUZZ_CHECK(decoded_offset == offset);
}

}  // namespace

std::vector<std::string> Seeds() {
  return {
      EncodeOffsetKey("orders", 0),
      EncodeOffsetKey("", std::numeric_limits<int32_t>::max()),
      EncodeOffsetKey("payments.v2", 7),
      EncodeOffsetValue(0),
      EncodeOffsetValue(123'456'789),
      EncodeOffsetValue(std::numeric_limits<int64_t>::max()),
      EncodeOffsetValue(-1).substr(0, 7),
  };
}

void FuzzOne(std::string_view input) {
  CheckKey(input);
  CheckValue(input);
  CheckEncode(input);
}

}  // namespace idem::fuzz
