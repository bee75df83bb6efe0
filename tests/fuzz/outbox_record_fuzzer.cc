// Fuzzes the outbox decoders (engine/outbox_record.h). The input is decoded
// as an entry key, an entry value and a cursor value of idem.outbox.
//
// Properties, for any bytes:
// - DecodeOutboxKey accepts exactly 8-byte keys, and encoding the decoded
//   position gives the input back;
// - a decoded entry's fields are views inside the input, and encoding them
//   gives the input back (the encoding has one spelling);
// - DecodeOutboxCursor accepts only 17-byte values with acked <= issued, and
//   encoding the decoded cursor gives the input back;
// - encoding fields taken from the input and decoding them gives them back.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/outbox_record.h"
#include "tests/fuzz/fuzz_target.h"

namespace idem::fuzz {
namespace {

void CheckKey(std::string_view key) {
  const std::optional<uint64_t> position = DecodeOutboxKey(key);
  IDEM_FUZZ_CHECK(position.has_value() == (key.size() == kOutboxKeyBytes));
  if (position.has_value()) IDEM_FUZZ_CHECK(EncodeOutboxKey(*position) == key);
}

void CheckValue(std::string_view value) {
  const std::optional<OutboxFields> fields = DecodeOutboxValue(value);
  if (!fields.has_value()) return;
  std::vector<std::string_view> views = {
      fields->message_id, fields->destination, fields->key, fields->value};
  for (const auto& [name, header_value] : fields->headers) {
    views.push_back(name);
    views.push_back(header_value);
  }
  for (std::string_view field : views) {
    IDEM_FUZZ_CHECK(field.empty() || IsInside(field, value));
  }
  IDEM_FUZZ_CHECK(EncodeOutboxValue(*fields) == value);
}

void CheckCursor(std::string_view value) {
  const std::optional<OutboxCursor> cursor = DecodeOutboxCursor(value);
  if (!cursor.has_value()) return;
  IDEM_FUZZ_CHECK(value.size() == 17);
  IDEM_FUZZ_CHECK(cursor->acked <= cursor->issued);
  IDEM_FUZZ_CHECK(EncodeOutboxCursor(*cursor) == value);
}

void CheckEncode(std::string_view input) {
  // Three fields, up to two headers and the value, cut from the input at
  // points it chooses.
  std::vector<std::string_view> parts;
  std::string_view rest = input;
  for (int i = 0; i < 7; ++i) {
    const size_t cut = rest.empty() ? 0 : static_cast<uint8_t>(rest[0]);
    const size_t take = std::min(cut, rest.size());
    parts.push_back(rest.substr(0, take));
    rest.remove_prefix(take);
  }
  parts.push_back(rest);
  OutboxFields fields{parts[0], parts[1], parts[2], parts[7], {}};
  const uint8_t last = input.empty() ? 0 : static_cast<uint8_t>(input.back());
  const size_t headers = last % 3;
  // A destination partition (-1, 0 or a large one) and, with an empty
  // value, a tombstone: the second entry version.
  fields.partition = last / 3 % 3 == 0 ? -1 : (last / 3 % 3 == 1 ? 0 : 1 << 30);
  fields.tombstone = fields.value.empty() && last / 9 % 2 == 1;
  for (size_t h = 0; h < headers; ++h) {
    fields.headers.emplace_back(parts[3 + 2 * h], parts[4 + 2 * h]);
  }
  const std::string value = EncodeOutboxValue(fields);
  const std::optional<OutboxFields> decoded = DecodeOutboxValue(value);
  IDEM_FUZZ_CHECK(decoded.has_value());
  IDEM_FUZZ_CHECK(decoded->message_id == fields.message_id);
  IDEM_FUZZ_CHECK(decoded->destination == fields.destination);
  IDEM_FUZZ_CHECK(decoded->key == fields.key);
  IDEM_FUZZ_CHECK(decoded->value == fields.value);
  IDEM_FUZZ_CHECK(decoded->headers == fields.headers);
  IDEM_FUZZ_CHECK(decoded->partition == fields.partition);
  IDEM_FUZZ_CHECK(decoded->tombstone == fields.tombstone);
  uint64_t position = 0;
  std::memcpy(&position, input.data(),
              std::min(input.size(), sizeof(position)));
  IDEM_FUZZ_CHECK(DecodeOutboxKey(EncodeOutboxKey(position)) == position);
}

}  // namespace

std::vector<std::string> Seeds() {
  return {
      EncodeOutboxKey(1),
      EncodeOutboxKey(0),
      EncodeOutboxValue(OutboxFields{"0123456789abcdef0123456789abcdef-0",
                                     "ledger-entries",
                                     "account-7",
                                     "+42",
                                     {}}),
      EncodeOutboxValue(OutboxFields{"id-1",
                                     "dead-letters",
                                     "",
                                     "payload",
                                     {{"idem.error", "bad"}, {"h", ""}}}),
      EncodeOutboxValue(OutboxFields{}),
      EncodeOutboxValue(OutboxFields{.message_id = "id-2",
                                     .destination = "orders-changelog",
                                     .key = "s/k",
                                     .partition = 3,
                                     .tombstone = true}),
      EncodeOutboxCursor(OutboxCursor{10, 4}),
      EncodeOutboxCursor(OutboxCursor{0, 0}),
  };
}

void FuzzOne(std::string_view input) {
  CheckKey(input);
  CheckValue(input);
  CheckCursor(input);
  CheckEncode(input);
}

}  // namespace idem::fuzz
