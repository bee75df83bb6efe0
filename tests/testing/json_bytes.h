// Reading back the byte-string convention of util::JsonQuoteBytes (and of
// idemctl's output) from JSON parsed with nlohmann::json: arbitrary bytes are
// written one code point per byte (U+0000..U+00FF, i.e. Latin-1), which
// nlohmann::json holds as UTF-8. Pure functions: thread-safe.

#ifndef IDEM_TESTS_TESTING_JSON_BYTES_H_
#define IDEM_TESTS_TESTING_JSON_BYTES_H_

#include <string>
#include <string_view>

namespace idem::test {

// The bytes a JSON string written by JsonQuoteBytes stands for: each code
// point up to U+00FF of `utf8` (a string as nlohmann::json decodes it)
// becomes one byte; larger code points keep their UTF-8 bytes.
inline std::string Latin1Bytes(std::string_view utf8) {
  std::string bytes;
  for (size_t i = 0; i < utf8.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(utf8[i]);
    if ((c == 0xc2 || c == 0xc3) && i + 1 < utf8.size()) {
      const unsigned char next = static_cast<unsigned char>(utf8[i + 1]);
      bytes.push_back(static_cast<char>(((c & 0x03) << 6) | (next & 0x3f)));
      ++i;
    } else {
      bytes.push_back(static_cast<char>(c));
    }
  }
  return bytes;
}

}  // namespace idem::test

#endif  // IDEM_TESTS_TESTING_JSON_BYTES_H_
