// What an adapter keeps of the competing consumers its broker tells of
// (brokers/competing_consumers.h): every sighting counted, one warning;
// and the loop's stats follow Broker::CompetingConsumers.

#include "brokers/competing_consumers.h"

#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/brokers/delivery_loop.h"
#include "tests/testing/engine_test_util.h"
#include "tests/testing/fake_broker.h"
#include "tests/testing/recording_logger.h"

namespace idem::brokers {
namespace {

TEST(CompetingConsumersTest, CountsEverySightingAndWarnsOnce) {
  test::RecordingLogger logger;
  CompetingConsumers competing(&logger);
  EXPECT_EQ(competing.seen(), 0);
  competing.Saw("queue q has 1 other consumer(s)");
  competing.Saw("queue q has 2 other consumer(s)");
  EXPECT_EQ(competing.seen(), 2);
  ASSERT_EQ(logger.lines().size(), 1u);
  EXPECT_EQ(logger.lines()[0].first, LogSeverity::kWarning);
  EXPECT_THAT(logger.lines()[0].second,
              ::testing::HasSubstr("queue q has 1 other consumer(s)"));
  EXPECT_THAT(logger.lines()[0].second,
              ::testing::HasSubstr("Competing consumers"));
}

TEST(CompetingConsumersTest, WithoutALoggerTheWarningGoesToStderr) {
  CompetingConsumers competing(nullptr);
  ::testing::internal::CaptureStderr();
  competing.Saw("durable d of stream s has 1 pull request(s) waiting");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, ::testing::HasSubstr("durable d of stream s"));
  EXPECT_EQ(competing.seen(), 1);
}

TEST(CompetingConsumersTest, LoopStatsFollowTheBrokersCount) {
  test::EngineHarness harness;
  ASSERT_TRUE(harness.Open().ok());
  test::FakeBroker broker;
  DeliveryLoop loop(&harness.engine(), &broker, LoopOptions());
  broker.competing = 2;
  ASSERT_TRUE(
      loop.PollBatch([](const Delivery&, Txn&) { return absl::OkStatus(); })
          .ok());
  EXPECT_EQ(loop.stats().competing_consumers, 2);
}

}  // namespace
}  // namespace idem::brokers
