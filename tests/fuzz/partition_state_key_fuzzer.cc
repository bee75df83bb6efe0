// Fuzzes the partition-scoped state key parser, ParsePartitionStateKey
// (idem/partition_state.h), which reads keys of the idem.state column family.
//
// Properties, for any key:
// - a key that parses has a partition that is not negative and is exactly
//   PartitionStatePrefix(source, partition) followed by the handler's key;
// - a key built from a (source, partition, key) taken from the input parses
//   back to them.

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "idem/partition_state.h"
#include "tests/fuzz/fuzz_target.h"

namespace idem::fuzz {
namespace {

bool SameParts(const std::optional<PartitionStateKey>& parsed,
               const PartitionStateKey& want) {
  return parsed.has_value() && parsed->source == want.source &&
         parsed->partition == want.partition && parsed->key == want.key;
}

}  // namespace

std::vector<std::string> Seeds() {
  return {
      PartitionStatePrefix("orders", 0) + "stock/apple",
      PartitionStatePrefix("a:b/c", 2147483647) + "",
      PartitionStatePrefix("", 3) + "k",
      std::string("partition/9:short/0/k"),
      std::string("counter"),
  };
}

void FuzzOne(std::string_view input) {
  const std::optional<PartitionStateKey> parsed = ParsePartitionStateKey(input);
  if (parsed.has_value()) {
    IDEM_FUZZ_CHECK(parsed->partition >= 0);
    IDEM_FUZZ_CHECK(PartitionStatePrefix(parsed->source, parsed->partition) +
                        parsed->key ==
                    input);
  }
  // (source length, partition, source, key) from the input.
  if (input.size() >= 2) {
    const size_t source_size =
        static_cast<uint8_t>(input[0]) % (input.size() - 1);
    PartitionStateKey want;
    // Spread over [0, 2^31): 255 * (2^23 - 1) < 2^31.
    want.partition = static_cast<uint8_t>(input[1]) * ((1 << 23) - 1);
    want.source = std::string(input.substr(2, source_size));
    want.key = std::string(input.substr(2 + want.source.size()));
    const std::string built =
        PartitionStatePrefix(want.source, want.partition) + want.key;
    IDEM_FUZZ_CHECK(SameParts(ParsePartitionStateKey(built), want));
  }
}

}  // namespace idem::fuzz
