// A small, strict JSON parser for tests that check a tool's machine-readable
// output. Strings decode code points up to U+00FF to one byte each (the
// Latin-1 convention of idemctl's output) and larger ones to UTF-8. Pure
// functions and plain values: not thread-safe.

#ifndef IDEM_TESTS_TESTING_JSON_VALUE_H_
#define IDEM_TESTS_TESTING_JSON_VALUE_H_

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace idem::test {

struct JsonValue {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<JsonValue> array;
  // Members in document order.
  std::vector<std::pair<std::string, JsonValue>> object;

  // Returns the member named `key` of an object, or nullptr.
  const JsonValue* Find(std::string_view key) const;
};

// Parses `text`, which must hold exactly one JSON value (whitespace around it
// is allowed). kInvalidArgument, with the byte offset, for anything else.
absl::StatusOr<JsonValue> ParseJson(std::string_view text);

}  // namespace idem::test

#endif  // IDEM_TESTS_TESTING_JSON_VALUE_H_
