// JSON text output shared by the crash harness's report, the tools and the
// benchmarks: string quoting in the two conventions idem uses, and a small
// streaming writer. Not a parser. Internal: not part of the public API.
//
// Two string conventions:
//   Quote       text (UTF-8): quotes, backslashes and control characters are
//               escaped, every other byte is copied.
//   QuoteBytes  arbitrary bytes (keys, values, results): every byte is one
//               code point U+0000..U+00FF; printable ASCII is copied and every
//               other byte written as \u00XX. The output is pure ASCII and
//               lossless: parse it and encode each code point as one byte
//               (Latin-1) to get the bytes back.
//
// JsonWriter is a plain value type: not thread-safe.

#ifndef IDEM_UTIL_JSON_WRITER_H_
#define IDEM_UTIL_JSON_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace idem::util {

std::string JsonQuote(std::string_view text);
std::string JsonQuoteBytes(std::string_view bytes);

// Writes one JSON value into a string, inserting commas and colons. Calls
// must form valid JSON (Key only inside an object, before each value); the
// writer does not check.
class JsonWriter {
 public:
  void BeginObject() { Open('{'); }
  void EndObject() { Close('}'); }
  void BeginArray() { Open('['); }
  void EndArray() { Close(']'); }
  void Key(std::string_view key);
  void String(std::string_view text);  // JsonQuote
  void Bytes(std::string_view bytes);  // JsonQuoteBytes
  void Number(double v);               // %.6g; null if not finite
  void Int(int64_t v);
  void Uint(uint64_t v);
  void Bool(bool v);
  void Null();

  // The text written so far.
  const std::string& str() const { return out_; }

 private:
  void Open(char c);
  void Close(char c);
  // Before a value: a comma unless it is the first in its container or
  // follows a key.
  void Separate();

  std::string out_;
  std::vector<bool> first_in_container_;
  bool after_key_ = false;
};

}  // namespace idem::util

#endif  // IDEM_UTIL_JSON_WRITER_H_
