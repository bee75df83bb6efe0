// The shared JSON output (util/json_writer.h): both string conventions
// escape what JSON requires and round-trip through a parser, and the writer
// places commas and colons so that nested output parses.

#include "util/json_writer.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

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
            "\"q\\\"b\\\\\\n\\u0000\\u007f\\u00ff\"");
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

TEST(JsonQuoteTest, ReplacesInvalidUtf8) {
  EXPECT_EQ(JsonQuote("a\xff"), "\"a\xef\xbf\xbd\"");
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

TEST(JsonWriterTest, NumbersHaveSixSignificantDigits) {
  JsonWriter j;
  j.BeginArray();
  j.Number(1.0 / 3);
  j.Number(1234567.0);
  j.Number(0.25);
  j.EndArray();
  const json parsed = Parse(j.str());
  ASSERT_TRUE(parsed.is_array()) << j.str();
  EXPECT_EQ(parsed[0].get<double>(), 0.333333);
  EXPECT_EQ(parsed[1].get<double>(), 1234570.0);
  EXPECT_EQ(parsed[2].get<double>(), 0.25);
}

TEST(JsonWriterTest, OutputIsAscii) {
  JsonWriter j;
  j.BeginObject();
  j.Key("na\xc3\xafve");
  j.String("caf\xc3\xa9");
  j.EndObject();
  EXPECT_EQ(j.str(), "{\"na\\u00efve\":\"caf\\u00e9\"}");
  const json parsed = Parse(j.str());
  ASSERT_TRUE(parsed.is_object()) << j.str();
  EXPECT_EQ(parsed.value("na\xc3\xafve", ""), "caf\xc3\xa9");
}

TEST(JsonWriterTest, ValueWritesEachTypeAsItsCall) {
  JsonWriter j;
  j.BeginArray();
  j.Value(std::optional<double>());
  j.Value(std::optional<double>(1.5));
  j.Value(-2);
  j.Value(uint64_t{7});
  j.Value(std::optional<uint64_t>(std::numeric_limits<uint64_t>::max()));
  j.Value(true);
  j.Value("text");
  j.Value(std::string("string"));
  j.EndArray();
  EXPECT_EQ(j.str(),
            "[null,1.5,-2,7,18446744073709551615,true,\"text\",\"string\"]");
}

TEST(JsonWriterTest, FieldIsKeyThenValue) {
  JsonWriter j;
  j.BeginObject();
  j.Field("a", 1);
  j.Field("b", std::optional<int>());
  j.Field("c", std::string_view("x"));
  j.EndObject();
  EXPECT_EQ(j.str(), "{\"a\":1,\"b\":null,\"c\":\"x\"}");
}

}  // namespace
}  // namespace idem::util
