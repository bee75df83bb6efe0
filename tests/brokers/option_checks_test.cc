// The checks of the options every broker adapter has (brokers/option_checks.h).

#include "brokers/option_checks.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace idem::brokers {
namespace {

using ::testing::IsEmpty;

struct TimesOptions {
  absl::Duration io_timeout = absl::Seconds(5);
  absl::Duration reconnect_backoff = absl::Milliseconds(200);
};

TEST(InvalidOptionTest, IsInvalidArgumentNamingTheAdaptersOptions) {
  const absl::Status s = InvalidOption("redis", "host is required");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "redis::ConsumerOptions::host is required");
}

TEST(AddressProblemTest, AcceptsAHostWithAPortInRange) {
  EXPECT_THAT(AddressProblem("127.0.0.1", 1), IsEmpty());
  EXPECT_THAT(AddressProblem("127.0.0.1", 65535), IsEmpty());
}

TEST(AddressProblemTest, RejectsAMissingHost) {
  EXPECT_EQ(AddressProblem("", 6379), "host is required");
}

TEST(AddressProblemTest, RejectsAPortOutsideTcpsRange) {
  EXPECT_EQ(AddressProblem("h", 0), "port must be in [1, 65535]");
  EXPECT_EQ(AddressProblem("h", 65536), "port must be in [1, 65535]");
}

TEST(ConnectionTimesProblemTest, AcceptsTheDefaultsAndNoBackoff) {
  TimesOptions options;
  EXPECT_THAT(ConnectionTimesProblem(options), IsEmpty());
  options.reconnect_backoff = absl::ZeroDuration();
  EXPECT_THAT(ConnectionTimesProblem(options), IsEmpty());
}

TEST(ConnectionTimesProblemTest, RejectsAnIoTimeoutThatIsNotPositiveAndFinite) {
  for (absl::Duration bad :
       {absl::ZeroDuration(), -absl::Seconds(1), absl::InfiniteDuration()}) {
    TimesOptions options;
    options.io_timeout = bad;
    EXPECT_EQ(ConnectionTimesProblem(options),
              "io_timeout must be > 0 and finite")
        << bad;
  }
}

TEST(ConnectionTimesProblemTest, RejectsANegativeOrInfiniteBackoff) {
  for (absl::Duration bad :
       {-absl::Milliseconds(1), absl::InfiniteDuration()}) {
    TimesOptions options;
    options.reconnect_backoff = bad;
    EXPECT_EQ(ConnectionTimesProblem(options),
              "reconnect_backoff must be >= 0 and finite")
        << bad;
  }
}

}  // namespace
}  // namespace idem::brokers
