// The shared JSON output (util/json_writer.h): both string conventions
// escape what JSON requires and round-trip through a parser, and the writer
// places commas and colons so that nested output parses.

#include "util/json_writer.h"

#include <cmath>
#include <limits>
#include <string>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "tests/testing/json_value.h"

namespace idem::util {
namespace {

using test::JsonValue;
using test::ParseJson;

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
  absl::StatusOr<JsonValue> parsed = ParseJson(quoted);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->string, all);
}

TEST(JsonQuoteTest, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(JsonQuote("a\"b\\c\nd\te\x01"),
            "\"a\\\"b\\\\c\\nd\\te\\u0001\"");
  // Text keeps its UTF-8 bytes as they are.
  EXPECT_EQ(JsonQuote("na\xc3\xafve"), "\"na\xc3\xafve\"");
}

TEST(JsonQuoteTest, RoundTripsControlCharactersThroughAJsonParser) {
  std::string text = "quote \" backslash \\ ";
  for (int b = 0; b < 0x20; ++b) text.push_back(static_cast<char>(b));
  absl::StatusOr<JsonValue> parsed = ParseJson(JsonQuote(text));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->string, text);
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
  absl::StatusOr<JsonValue> parsed = ParseJson(j.str());
  ASSERT_TRUE(parsed.ok()) << parsed.status() << " in " << j.str();
  ASSERT_NE(parsed->Find("counts"), nullptr);
  EXPECT_EQ(parsed->Find("counts")->array.size(), 4u);
  ASSERT_NE(parsed->Find("name"), nullptr);
  EXPECT_EQ(parsed->Find("name")->string, "run \"1\"");
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
