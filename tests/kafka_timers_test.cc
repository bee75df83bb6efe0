// The Kafka consumer's event time and timers (ConsumerOptions::
// timer_handler): records' timestamps are their messages' event times, so a
// partition's stream time follows them; event-time timers fire after the
// batch that moves the stream time past them, processing-time ones on the
// next poll, each with its handler's writes (with changelog_topic:
// tests/kafka_changelog_timers_test.cc).

#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "idem/kafka/producer.h"
#include "tests/testing/engine_test_util.h"
#include "tests/testing/kafka_test_util.h"
#include "util/temp_dir.h"

namespace idem::kafka {
namespace {

using ::idem::test::KafkaTestBed;
using ::idem::test::PollUntil;
using ::idem::test::StartKafka;
using ::idem::test::TestConsumerOptions;

// Produces one record with `value` to partition 0 of the bed's topic.
void ProduceOne(KafkaTestBed& bed, const std::string& id,
                const std::string& value) {
  OutgoingRecord record;
  record.topic = bed.topic;
  record.partition = 0;
  record.key = id;
  record.value = value;
  record.headers = {{"message-id", id}};
  ASSERT_TRUE(bed.producer->Produce({record}).ok());
}

// "arm": an event-time timer just after the record's timestamp;
// "remind": a processing-time timer due now; anything else: nothing.
absl::Status ArmTimers(const Record& record, Txn& txn) {
  if (record.value == "arm") {
    return txn.SetTimer(
        "close", TimeDomain::kEvent,
        absl::FromUnixMillis(record.timestamp_ms) + absl::Milliseconds(1));
  }
  if (record.value == "remind") {
    return txn.SetTimer("remind", TimeDomain::kProcessing, absl::Now());
  }
  return absl::OkStatus();
}

TEST(KafkaTimersTest, FiresTimersOnRecordTimestampsAndOnPolls) {
  KafkaTestBed bed;
  StartKafka("timers", 1, bed);
  ASSERT_NE(bed.cluster, nullptr);
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("store"), Options());
  ConsumerOptions options = TestConsumerOptions(bed, "g");
  std::vector<std::string> fired;
  options.timer_handler = [&](const TimerFire& fire, Txn& txn) {
    fired.push_back(fire.timer_key);
    txn.Put("fired/" + fire.timer_key, "yes");
    return absl::OkStatus();
  };
  auto consumer = Consumer::Create(engine.get(), options);
  ASSERT_TRUE(consumer.ok()) << consumer.status();

  ProduceOne(bed, "a", "arm");
  ASSERT_TRUE(PollUntil(**consumer, ArmTimers, [&] {
                return (*consumer)->stats().records == 1;
              }).ok());
  EXPECT_TRUE(fired.empty());  // the stream time is the record's own
  absl::StatusOr<absl::Time> stream = engine->StreamTime(bed.topic, 0);
  ASSERT_TRUE(stream.ok() && *stream != absl::InfinitePast());

  absl::SleepFor(absl::Milliseconds(20));  // a later timestamp
  ProduceOne(bed, "b", "later");
  ASSERT_TRUE(PollUntil(**consumer, ArmTimers, [&] {
                return (*consumer)->stats().timers_fired == 1;
              }).ok());
  EXPECT_EQ(fired, std::vector<std::string>{"close"});

  ProduceOne(bed, "c", "remind");
  ASSERT_TRUE(PollUntil(**consumer, ArmTimers, [&] {
                return (*consumer)->stats().timers_fired == 2;
              }).ok());
  EXPECT_EQ(fired, (std::vector<std::string>{"close", "remind"}));
  EXPECT_EQ((*consumer)->stats().timer_failures, 0);
  EXPECT_GE((*consumer)->stats().timer_lag, absl::ZeroDuration());
  // Each fire committed its handler's write.
  for (const char* key : {"fired/close", "fired/remind"}) {
    absl::StatusOr<std::optional<std::string>> v = engine->GetState(key);
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(*v, "yes") << key;
  }
  EXPECT_TRUE((*consumer)->Close().ok());
}

}  // namespace
}  // namespace idem::kafka
