// ParseAckSubject (nats/ack_subject.h): the delivery count, stream
// sequence and timestamp read from a JetStream reply subject in both of its
// forms, and nothing from a subject of another shape; and, over a quarter of
// a million generated and mangled subjects, the same answers as a plain
// reading (split on dots, std::from_chars).

#include <charconv>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nats/ack_subject.h"

namespace idem::nats {
namespace {

TEST(NatsAckSubjectTest, ReadsTheFieldsOfTheOlderForm) {
  const std::optional<AckSubject> parsed =
      ParseAckSubject("$JS.ACK.orders.d.3.42.40.1700000000123456789.7");
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->delivered, 3u);
  EXPECT_EQ(parsed->stream_sequence, 42u);
  EXPECT_EQ(parsed->timestamp, 1700000000123456789);
}

TEST(NatsAckSubjectTest, ReadsTheFieldsOfTheFormWithDomainAndAccount) {
  for (const char* subject :
       {"$JS.ACK._.ACCHASH.orders.d.2.9.8.1700000000000000001.0",
        "$JS.ACK.hub.ACCHASH.orders.d.2.9.8.1700000000000000001.0.rNd"}) {
    const std::optional<AckSubject> parsed = ParseAckSubject(subject);
    ASSERT_TRUE(parsed.has_value()) << subject;
    EXPECT_EQ(parsed->delivered, 2u) << subject;
    EXPECT_EQ(parsed->stream_sequence, 9u) << subject;
    EXPECT_EQ(parsed->timestamp, 1700000000000000001) << subject;
  }
}

TEST(NatsAckSubjectTest, ReadsTheLargestValues) {
  const std::optional<AckSubject> parsed = ParseAckSubject(
      "$JS.ACK.s.d.1.18446744073709551615.40.9223372036854775807.7");
  ASSERT_TRUE(parsed.has_value());
  EXPECT_EQ(parsed->stream_sequence, 18446744073709551615u);
  EXPECT_EQ(parsed->timestamp, 9223372036854775807);
}

TEST(NatsAckSubjectTest, OtherSubjectsAreNotRead) {
  for (const char* subject :
       {"", "_INBOX.abc", "$JS.ACK.orders.d.3.42.40.17",
        "$JS.NAK.s.d.1.2.3.4.5",
        "$JS.ACK.orders.d.x.42.40.1700000000123456789.7",
        "$JS.ACK.a.b.orders.d.1.2.3.4", "$JS.ACK.a.b.orders.d.1.2.3.4.5.6.7.8",
        "$JS.ACK.orders.d.3..40.1700000000123456789.7", "$JS.ACK.",
        // Past uint64 (a sequence), past int64 (a time).
        "$JS.ACK.orders.d.3.18446744073709551616.40.1.7",
        "$JS.ACK.orders.d.3.42.40.9223372036854775808.7"}) {
    EXPECT_FALSE(ParseAckSubject(subject).has_value()) << subject;
  }
}

TEST(NatsAckSubjectTest, EveryDigitPlaceIsReadAndAnyOtherByteRefused) {
  // Each place of a nineteen-digit timestamp (the eight-at-once reading
  // covers the first sixteen), and every byte that is not a digit there.
  const std::string base = "$JS.ACK.s.d.1.2.3.1234567890123456789.0";
  const size_t at = base.find("1234567890123456789");
  for (size_t place = 0; place < 19; ++place) {
    std::string subject = base;
    subject[at + place] = '0';
    const std::optional<AckSubject> parsed = ParseAckSubject(subject);
    ASSERT_TRUE(parsed.has_value()) << subject;
    std::string expected = "1234567890123456789";
    expected[place] = '0';
    EXPECT_EQ(parsed->timestamp, std::stoll(expected)) << subject;
    for (int byte = 0; byte < 256; ++byte) {
      if ((byte >= '0' && byte <= '9') || byte == '.') continue;
      subject[at + place] = static_cast<char>(byte);
      EXPECT_FALSE(ParseAckSubject(subject).has_value())
          << "byte " << byte << " at place " << place;
    }
  }
}

// The plain reading ParseAckSubject must agree with.
bool PlainNumber(std::string_view token, uint64_t* out) {
  if (token.empty() || token.size() > 20) return false;
  for (char c : token) {
    if (c < '0' || c > '9') return false;
  }
  const auto [end, error] =
      std::from_chars(token.data(), token.data() + token.size(), *out);
  return error == std::errc() && end == token.data() + token.size();
}

std::optional<AckSubject> PlainParse(std::string_view reply) {
  std::vector<std::string_view> tokens;
  for (size_t start = 0;;) {
    const size_t dot = reply.find('.', start);
    tokens.push_back(reply.substr(start, dot - start));
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  if (tokens.size() < 9 || tokens.size() == 10 || tokens.size() > 13 ||
      tokens[0] != "$JS" || tokens[1] != "ACK") {
    return std::nullopt;
  }
  const size_t first = tokens.size() == 9 ? 4 : 6;
  AckSubject parsed;
  uint64_t timestamp = 0;
  if (!PlainNumber(tokens[first], &parsed.delivered) ||
      !PlainNumber(tokens[first + 1], &parsed.stream_sequence) ||
      !PlainNumber(tokens[first + 3], &timestamp) ||
      timestamp > uint64_t{INT64_MAX}) {
    return std::nullopt;
  }
  parsed.timestamp = static_cast<int64_t>(timestamp);
  return parsed;
}

// A subject of either form, its numbers of any length up to 21 digits.
std::string GeneratedSubject(std::mt19937_64& random) {
  auto number = [&]() {
    const int digits = static_cast<int>(random() % 22);
    std::string token;
    for (int i = 0; i < digits; ++i) {
      token.push_back(static_cast<char>('0' + random() % 10));
    }
    if (random() % 4 == 0) token = std::to_string(random());  // up to 20
    return token;
  };
  std::string subject = "$JS.ACK.";
  if (random() % 2 == 0) subject += "hub.ACCHASH.";
  absl::StrAppend(&subject, "orders.d.", number(), ".", number(), ".", number(),
                  ".", number(), ".", number());
  for (int extra = static_cast<int>(random() % 4); extra > 0; --extra) {
    absl::StrAppend(&subject, ".", random() % 2 == 0 ? "rNd" : number());
  }
  return subject;
}

// `subject` with one byte changed, removed, or added.
void Mangle(std::mt19937_64& random, std::string& subject) {
  // Digits, dots, the prefix's letters, and bytes next to the digits.
  constexpr char kBytes[] = "0123456789.$JSACK a\x00\x3a\x2f\xb5";
  const char byte = kBytes[random() % (sizeof(kBytes) - 1)];
  const size_t at = random() % (subject.size() + 1);
  switch (random() % 3) {
    case 0:
      if (at < subject.size()) subject[at] = byte;
      break;
    case 1:
      if (at < subject.size()) subject.erase(at, 1);
      break;
    default:
      subject.insert(at, 1, byte);
  }
}

TEST(NatsAckSubjectTest, AgreesWithAPlainReadingOfGeneratedSubjects) {
  std::mt19937_64 random(20261207);
  int read = 0;
  for (int i = 0; i < 250000; ++i) {
    std::string subject = GeneratedSubject(random);
    for (int changes = static_cast<int>(random() % 3); changes > 0; --changes) {
      Mangle(random, subject);
    }
    const std::optional<AckSubject> fast = ParseAckSubject(subject);
    const std::optional<AckSubject> plain = PlainParse(subject);
    ASSERT_EQ(fast.has_value(), plain.has_value()) << subject;
    if (!fast.has_value()) continue;
    ++read;
    ASSERT_EQ(fast->delivered, plain->delivered) << subject;
    ASSERT_EQ(fast->stream_sequence, plain->stream_sequence) << subject;
    ASSERT_EQ(fast->timestamp, plain->timestamp) << subject;
  }
  // Both answers occur often (the test would say little otherwise).
  EXPECT_GT(read, 10000);
  EXPECT_LT(read, 240000);
}

}  // namespace
}  // namespace idem::nats
