// JSON text output shared by the crash harness's report, the tools and the
// benchmarks: string quoting in the two conventions idem uses, and a small
// streaming writer, all over nlohmann::json (which does the escaping, the
// number formatting and the commas). Not a parser. Internal: not part of the
// public API.
//
// Two string conventions:
//   Quote       text (UTF-8): quotes, backslashes and control characters are
//               escaped, every other character is copied as it is; invalid
//               UTF-8 becomes U+FFFD.
//   QuoteBytes  arbitrary bytes (keys, values, results): every byte is one
//               code point U+0000..U+00FF; printable ASCII is copied and every
//               other byte escaped (\n, \t and the like, or \u00XX). The
//               output is pure ASCII and lossless: parse it and encode each
//               code point as one byte (Latin-1) to get the bytes back.
//
// JsonWriter is a plain value type: not thread-safe.

#ifndef IDEM_UTIL_JSON_WRITER_H_
#define IDEM_UTIL_JSON_WRITER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "nlohmann/json.hpp"

namespace idem::util {

std::string JsonQuote(std::string_view text);
std::string JsonQuoteBytes(std::string_view bytes);

// Builds one JSON value, call by call, and writes it as compact JSON text:
// object members in the order written, no white space, pure ASCII (text
// strings as JsonQuote quotes them, but non-ASCII characters escaped as
// \uXXXX; byte strings as JsonQuoteBytes). REQUIRES: the calls form one valid
// JSON value (Key only inside an object, once before each value; every Begin
// ended); the writer does not check.
class JsonWriter {
 public:
  void BeginObject();
  void EndObject() { open_.pop_back(); }
  void BeginArray();
  void EndArray() { open_.pop_back(); }
  void Key(std::string_view key) { key_ = key; }
  void String(std::string_view text);  // JsonQuote
  void Bytes(std::string_view bytes);  // JsonQuoteBytes
  void Number(double v);               // 6 significant digits; null if
                                       // not finite
  void Int(int64_t v);
  void Uint(uint64_t v);
  void Bool(bool v);
  void Null();

  // `v` written as its type says: text (anything that converts to
  // std::string_view) as String, bool as Bool, floating point as Number,
  // other integers as Int or Uint, and a std::optional as null when empty.
  // Byte strings need Bytes.
  template <typename T>
  void Value(const T& v) {
    if constexpr (std::is_same_v<T, bool>) {
      Bool(v);
    } else if constexpr (std::is_floating_point_v<T>) {
      Number(v);
    } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
      Int(v);
    } else if constexpr (std::is_integral_v<T>) {
      Uint(v);
    } else {
      static_assert(std::is_convertible_v<const T&, std::string_view>,
                    "JsonWriter::Value: text, a number, bool or optional");
      String(v);
    }
  }
  template <typename T>
  void Value(const std::optional<T>& v) {
    if (v.has_value()) {
      Value(*v);
    } else {
      Null();
    }
  }
  // One member of the innermost open object: Key(key), then Value(v).
  template <typename T>
  void Field(std::string_view key, const T& v) {
    Key(key);
    Value(v);
  }

  // The JSON text of the value written ("null" before any call).
  std::string str() const;

 private:
  using Json = nlohmann::ordered_json;

  // Places `v` where the calls so far say the next value goes (the document
  // itself, the end of the innermost open array, or the innermost open
  // object's member named by the last Key) and returns it.
  Json& Add(Json v);

  Json root_;
  // The containers begun and not yet ended, outermost first. Only the
  // innermost one grows, so pointers to its ancestors stay valid.
  std::vector<Json*> open_;
  std::string key_;
};

}  // namespace idem::util

#endif  // IDEM_UTIL_JSON_WRITER_H_
