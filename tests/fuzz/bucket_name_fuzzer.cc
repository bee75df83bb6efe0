// Fuzzes the expiry bucket family name parser, ParseBucketFamilyName
// (engine/store.h), which Open applies to every column family name the
// store's MANIFEST lists.
//
// Properties, for any name:
// - a name that parses starts with kBucketFamilyPrefix;
// - the name BucketFamilyName gives for the parsed end parses back to the
//   same end;
// - the name of an end taken from the input parses back to it.
// The parser takes any spelling of the number that absl::SimpleAtoi takes (a
// sign, leading zeros, surrounding spaces), so a name that parses need not be
// BucketFamilyName of its end: the round trip is checked on the end.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/store.h"
#include "tests/fuzz/fuzz_target.h"

namespace idem::fuzz {

std::vector<std::string> Seeds() {
  return {
      BucketFamilyName(1'700'003'600'000'000),
      BucketFamilyName(0),
      BucketFamilyName(std::numeric_limits<int64_t>::min()),
      BucketFamilyName(std::numeric_limits<int64_t>::max()),
      std::string(kBucketFamilyPrefix) + "9223372036854775808",
      kDedupeColumnFamily,
  };
}

void FuzzOne(std::string_view input) {
  const std::optional<int64_t> end = ParseBucketFamilyName(input);
  if (end.has_value()) {
    IDEM_FUZZ_CHECK(input.starts_with(kBucketFamilyPrefix));
    // Only the spelling BucketFamilyName writes is accepted.
    IDEM_FUZZ_CHECK(BucketFamilyName(*end) == input);
  }
  int64_t from_input = 0;
  if (!input.empty()) {
    std::memcpy(&from_input, input.data(),
                std::min(input.size(), sizeof(from_input)));
  }
  IDEM_FUZZ_CHECK(ParseBucketFamilyName(BucketFamilyName(from_input)) ==
                  from_input);
}

}  // namespace idem::fuzz
