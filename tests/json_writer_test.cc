// The shared JSON output (util/json_writer.h): both string conventions
// escape what JSON requires and round-trip through a parser, and the writer
// places commas and colons so that nested output parses.

#include "util/json_writer.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/json_bytes.h"

namespace idem::util {
namespace {

using json = nlohmann::json;

// `text` parsed, or a discarded value if it is not valid JSON.
json Parse(const std::string& text) {
  return json::parse(text, /*cb=*/nullptr, /*allow_exceptions=*/false);
}

TEST(JsonQuoteBytesTest, EscapesEveryByteOutsidePrintableAscii) {
  EXPECT_EQ(JsonQuoteBytes("plain text"), "\"plain text\"");
  EXPECT_EQ(JsonQuoteBytes(std::string("q\"b\\\n\x00\x7f\xff", 8)),
            "\"q\\\"b\\\\\\u000a\\u0000\\u007f\\u00ff\"");
}

TEST(JsonQuoteBytesTest, RoundTripsEveryByteThroughAJsonParser) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const std::string quoted = JsonQuoteBytes(all);
  for (char c : quoted) {
    EXPECT_TRUE(c >= 0x20 && c <= 0x7e) << "non-ASCII output byte " << int{c};
  }
  const json parsed = Parse(quoted);
  ASSERT_TRUE(parsed.is_string()) << quoted;
  EXPECT_EQ(test::Latin1Bytes(parsed.get<std::string>()), all);
}

TEST(JsonQuoteTest, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(JsonQuote("a\"b\\c\nd\te\x01"), "\"a\\\"b\\\\c\\nd\\te\\u0001\"");
  // Text keeps its UTF-8 bytes as they are.
  EXPECT_EQ(JsonQuote("na\xc3\xafve"), "\"na\xc3\xafve\"");
}

TEST(JsonQuoteTest, RoundTripsControlCharactersThroughAJsonParser) {
  std::string text = "quote \" backslash \\ ";
  for (int b = 0; b < 0x20; ++b) text.push_back(static_cast<char>(b));
  const json parsed = Parse(JsonQuote(text));
  ASSERT_TRUE(parsed.is_string()) << JsonQuote(text);
  EXPECT_EQ(parsed.get<std::string>(), text);
}

TEST(JsonWriterTest, NestedValuesParse) {
  JsonWriter j;
  j.BeginObject();
  j.Key("name");
  j.String("run \"1\"");
  j.Key("bytes");
  j.Bytes(std::string("\x00\xff", 2));
  j.Key("counts");
  j.BeginArray();
  j.Int(-3);
  j.Uint(std::numeric_limits<uint64_t>::max());
  j.BeginObject();
  j.EndObject();
  j.BeginArray();
  j.EndArray();
  j.EndArray();
  j.Key("ratio");
  j.Number(2.5);
  j.Key("undefined");
  j.Number(std::nan(""));
  j.Key("infinite");
  j.Number(std::numeric_limits<double>::infinity());
  j.Key("ok");
  j.Bool(true);
  j.Key("none");
  j.Null();
  j.EndObject();

  EXPECT_EQ(j.str(),
            "{\"name\":\"run \\\"1\\\"\",\"bytes\":\"\\u0000\\u00ff\","
            "\"counts\":[-3,18446744073709551615,{},[]],\"ratio\":2.5,"
            "\"undefined\":null,\"infinite\":null,\"ok\":true,\"none\":null}");
  const json parsed = Parse(j.str());
  ASSERT_TRUE(parsed.is_object()) << j.str();
  ASSERT_TRUE(parsed.contains("counts"));
  EXPECT_EQ(parsed["counts"].size(), 4u);
  EXPECT_EQ(parsed["counts"][1].get<uint64_t>(),
            std::numeric_limits<uint64_t>::max());
  ASSERT_TRUE(parsed.contains("name"));
  EXPECT_EQ(parsed["name"].get<std::string>(), "run \"1\"");
  EXPECT_EQ(test::Latin1Bytes(parsed["bytes"].get<std::string>()),
            std::string("\x00\xff", 2));
}

TEST(JsonWriterTest, TopLevelArrayOfScalars) {
  JsonWriter j;
  j.BeginArray();
  j.String("a");
  j.Int(1);
  j.Null();
  j.EndArray();
  EXPECT_EQ(j.str(), "[\"a\",1,null]");
}

}  // namespace
}  // namespace idem::util
