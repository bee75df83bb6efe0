// The Kafka tests' consumer settings against what librdkafka 2.0.2's mock
// cluster needs of them (tests/testing/kafka_test_util.h): a member whose
// session.timeout.ms ends before the mock's first election of an empty
// group is dropped with its JoinGroup unanswered, and waits for that answer
// until librdkafka gives the JoinGroup up (max.poll.interval.ms + 3 s). The
// outage tests met this as a consumer that never resumed: it rejoined its
// emptied group with a session exactly as long as the mock's wait, and lost
// whenever the mock's session sweep ran late.

#include "tests/testing/kafka_test_util.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "tests/testing/engine_test_util.h"
#include "util/temp_dir.h"

namespace idem::test {
namespace {

// The session.timeout.ms that `options` sets last; 0 if none.
int SessionTimeoutMs(const kafka::ConsumerOptions& options) {
  int ms = 0;
  for (const auto& [name, value] : options.kafka_config) {
    if (name == "session.timeout.ms" && !absl::SimpleAtoi(value, &ms)) ms = 0;
  }
  return ms;
}

// Polls a consumer of `options` for `wait`; the assignments it received.
int64_t AssignmentsWithin(const kafka::ConsumerOptions& options, Engine& engine,
                          absl::Duration wait) {
  auto consumer = kafka::Consumer::Create(&engine, options);
  EXPECT_TRUE(consumer.ok()) << consumer.status();
  if (!consumer.ok()) return -1;
  const absl::Time end = absl::Now() + wait;
  while (absl::Now() < end && (*consumer)->stats().assignments == 0) {
    absl::Status polled = (*consumer)->PollBatch(ApplyRecord).status();
    EXPECT_TRUE(polled.ok()) << polled;
  }
  const int64_t assignments = (*consumer)->stats().assignments;
  EXPECT_TRUE((*consumer)->Close().ok());
  return assignments;
}

class KafkaTestUtilTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartKafka("orders", 1, bed_));
    ASSERT_OPEN(engine, dir_.Sub("store"), Options());
    engine_ = std::move(engine);
  }

  KafkaTestBed bed_;
  util::TempDir dir_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(KafkaTestUtilTest, TestConsumersSessionOutlastsTheMocksFirstElection) {
  EXPECT_GE(SessionTimeoutMs(TestConsumerOptions(bed_, "g")),
            kMockFirstElectionMs + kMockElectionMarginMs);
  // A consumer of the group joins it while it is empty, and is elected.
  EXPECT_EQ(AssignmentsWithin(TestConsumerOptions(bed_, "g"), *engine_,
                              absl::Seconds(60)),
            1);
}

// The broken variant: a session that ends before the mock's first election
// (the sweep then always comes first; a session exactly as long loses only
// when the sweep runs late). The JoinGroup is never answered, so the
// consumer is never assigned anything, however long it waits below the
// JoinGroup's own timeout.
TEST_F(KafkaTestUtilTest,
       BrokenVariantSessionEndingBeforeTheFirstElectionIsNeverAnswered) {
  kafka::ConsumerOptions options = TestConsumerOptions(bed_, "g");
  options.kafka_config.emplace_back(
      "session.timeout.ms",
      absl::StrCat(kMockFirstElectionMs - kMockElectionMarginMs));
  // librdkafka gives the JoinGroup up 3 s after this, long after the wait.
  options.kafka_config.emplace_back("max.poll.interval.ms", "30000");
  EXPECT_EQ(AssignmentsWithin(
                options, *engine_,
                absl::Milliseconds(kMockFirstElectionMs) + absl::Seconds(4)),
            0);
}

}  // namespace
}  // namespace idem::test
