// The Kafka consumer's logs and statistics: ConsumerOptions::logger receives
// librdkafka's log lines with their severity, on_statistics receives its
// JSON statistics every statistics_interval. Runs against librdkafka's mock
// cluster (and, for an error line, a loopback port nothing listens on).

#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "idem/logger.h"
#include "nlohmann/json.hpp"
#include "tests/testing/engine_test_util.h"
#include "tests/testing/kafka_test_util.h"
#include "tests/testing/recording_logger.h"
#include "util/temp_dir.h"

namespace idem::kafka {
namespace {

using ::idem::test::ApplyRecord;
using ::idem::test::KafkaTestBed;
using ::idem::test::MakeStream;
using ::idem::test::PollUntil;
using ::idem::test::RecordingLogger;
using ::idem::test::StartKafka;
using ::idem::test::TestConsumerOptions;
using ::idem::util::TempDir;

class KafkaConsumerObservationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(StartKafka("orders", 2, bed_));
    absl::Status s =
        bed_.producer->Produce(MakeStream(bed_.topic, 2, 10, 0, 1).records);
    ASSERT_TRUE(s.ok()) << s;
    auto engine = Engine::Open(dir_.Sub("store"), Options());
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
  }

  TempDir dir_;
  KafkaTestBed bed_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(KafkaConsumerObservationTest, LoggerReceivesLibrdkafkasDebugLines) {
  RecordingLogger logger;
  ConsumerOptions options = TestConsumerOptions(bed_, "g");
  options.kafka_config.emplace_back("log_level", "7");
  options.kafka_config.emplace_back("debug", "cgrp");
  options.logger = &logger;
  auto consumer = Consumer::Create(engine_.get(), options);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  ASSERT_TRUE(PollUntil(**consumer, ApplyRecord, [&] {
                return (*consumer)->stats().records == 10;
              }).ok());
  ASSERT_TRUE((*consumer)->Close().ok());
  // The consumer-group protocol's lines, at debug level.
  EXPECT_TRUE(logger.Has(LogSeverity::kDebug, "librdkafka CGRP"))
      << logger.lines().size() << " lines";
}

// The outbox relay's producer logs to the consumer's logger too.
TEST_F(KafkaConsumerObservationTest, LoggerReceivesTheRelaysProducerLines) {
  RecordingLogger logger;
  ConsumerOptions options = TestConsumerOptions(bed_, "g");
  options.relay_kafka_config = {{"log_level", "7"}, {"debug", "eos"}};
  options.logger = &logger;
  auto consumer = Consumer::Create(engine_.get(), options);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  ASSERT_TRUE(PollUntil(**consumer, ApplyRecord, [&] {
                return (*consumer)->stats().records == 10 &&
                       logger.Has(LogSeverity::kDebug, "librdkafka");
              }).ok());
  ASSERT_TRUE((*consumer)->Close().ok());
  // Only the producer was asked for debug lines (its idempotence: "eos").
  EXPECT_TRUE(logger.Has(LogSeverity::kDebug, "librdkafka"));
}

TEST_F(KafkaConsumerObservationTest, LoggerReceivesErrorsAsErrors) {
  RecordingLogger logger;
  ConsumerOptions options = TestConsumerOptions(bed_, "g");
  options.brokers = "127.0.0.1:1";  // refused: nothing listens there
  options.relay_outbox = false;
  options.logger = &logger;
  auto consumer = Consumer::Create(engine_.get(), options);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!logger.Has(LogSeverity::kError, "127.0.0.1:1") &&
         absl::Now() < deadline) {
    ASSERT_TRUE((*consumer)->PollBatch(ApplyRecord).ok());
  }
  EXPECT_TRUE(logger.Has(LogSeverity::kError, "127.0.0.1:1"));
}

TEST_F(KafkaConsumerObservationTest, OnStatisticsReceivesJsonEveryInterval) {
  std::vector<std::string> statistics;
  ConsumerOptions options = TestConsumerOptions(bed_, "g");
  options.statistics_interval = absl::Milliseconds(50);
  options.on_statistics = [&](std::string_view json) {
    statistics.emplace_back(json);
  };
  auto consumer = Consumer::Create(engine_.get(), options);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  ASSERT_TRUE(PollUntil(**consumer, ApplyRecord, [&] {
                return (*consumer)->stats().records == 10 &&
                       statistics.size() >= 2;
              }).ok());
  const nlohmann::json last = nlohmann::json::parse(statistics.back());
  EXPECT_EQ(last.at("type"), "consumer");
  EXPECT_TRUE(last.at("topics").contains(bed_.topic)) << last.dump();
}

TEST_F(KafkaConsumerObservationTest, AThrowingStatisticsCallbackIsAKafkaError) {
  ConsumerOptions options = TestConsumerOptions(bed_, "g");
  options.statistics_interval = absl::Milliseconds(20);
  options.on_statistics = [](std::string_view) {
    throw std::runtime_error("full");
  };
  auto consumer = Consumer::Create(engine_.get(), options);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  ASSERT_TRUE(PollUntil(**consumer, ApplyRecord, [&] {
                return (*consumer)->stats().records == 10 &&
                       (*consumer)->stats().kafka_errors > 0;
              }).ok());
  EXPECT_THAT((*consumer)->stats().last_kafka_error,
              ::testing::HasSubstr("on_statistics threw: full"));
}

TEST_F(KafkaConsumerObservationTest, RejectsABadStatisticsInterval) {
  for (absl::Duration d : {absl::ZeroDuration(), absl::Microseconds(999),
                           absl::InfiniteDuration()}) {
    ConsumerOptions options = TestConsumerOptions(bed_, "g");
    options.statistics_interval = d;
    auto consumer = Consumer::Create(engine_.get(), options);
    EXPECT_EQ(consumer.status().code(), absl::StatusCode::kInvalidArgument)
        << d;
    EXPECT_THAT(consumer.status().message(),
                ::testing::HasSubstr("statistics_interval"));
  }
}

}  // namespace
}  // namespace idem::kafka
