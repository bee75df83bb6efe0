// ParseAckSubject (nats/jetstream_broker.h): the delivery count, stream
// sequence and timestamp read from a JetStream reply subject in both of its
// forms, and nothing from a subject of another shape.

#include <optional>

#include "gtest/gtest.h"
#include "nats/jetstream_broker.h"

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

}  // namespace
}  // namespace idem::nats
