// Fuzzes the state a handler reads through its layers: a scan merging the
// handler's own writes, the batch's, the commits in flight and the store
// (engine/merged_scan.h, engine/state_layer.h), against a std::map model
// (tests/testing/state_model.h). The input is the writes and the reads.
//
// Property, for any bytes: every point read and scan (forward or reverse,
// bounded or not, limited or stopped) agrees with the model, and each
// scan's extent covers the keys it visited.

#include <string>
#include <string_view>
#include <vector>

#include "tests/fuzz/fuzz_target.h"
#include "tests/testing/state_model.h"

namespace idem::fuzz {

std::vector<std::string> Seeds() {
  return {
      std::string("\x00\x10\x01\x20\x02\x31\x05\x07\x03\x22\x09\x07\x04\x41\x42"
                  "\x0f\x01\x33\x07\x02\x12\x11\x08\x09\x0a\x0b\x0c",
                  27),
      std::string(64, '\x02'),
      std::string("\x04\x01\x3f\x07\x00\x11\x07\x0f\x07\x01\x21", 11),
  };
}

void FuzzOne(std::string_view input) {
  const std::string failure = test::CheckStateModel(input);
  if (!failure.empty()) {
    std::fprintf(stderr, "%s\n", failure.c_str());
    IDEM_FUZZ_CHECK(failure.empty());
  }
}

}  // namespace idem::fuzz
