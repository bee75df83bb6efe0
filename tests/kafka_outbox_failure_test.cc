// The outbox when the brokers will not take an entry: a poison entry (too
// large for the brokers) holds back every entry behind it unless the relay
// gives up on it after OutboxRelayOptions::max_attempts and publishes it to
// its dead-letter topic; and backpressure (ConsumerOptions::
// max_outbox_pending) pauses a consumer's input while its outbox is full.

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "idem/kafka/outbox_relay.h"
#include "kafka/consumer_hooks.h"
#include "kafka/partition_reader.h"
#include "tests/testing/engine_test_util.h"
#include "tests/testing/kafka_test_util.h"
#include "util/temp_dir.h"

namespace idem::kafka {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// A record as read back: key, value and headers.
struct ReadBack {
  std::string key;
  std::string value;
  std::map<std::string, std::string> headers;
};

std::vector<ReadBack> ReadTopic(const std::string& brokers,
                                const std::string& topic) {
  std::vector<ReadBack> out;
  auto reader = PartitionReader::Create(brokers, {{"log_level", "3"}});
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return out;
  absl::Status s =
      (*reader)->Read(topic, 0, 0, absl::Seconds(10), [&](const LogRecord& r) {
        ReadBack& back = out.emplace_back();
        back.key = std::string(r.record.key);
        back.value = std::string(r.record.value);
        for (const auto& [name, value] : r.record.headers) {
          back.headers[std::string(name)] = std::string(value);
        }
        return absl::OkStatus();
      });
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

class KafkaOutboxPoisonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(test::StartKafka("in", 1, bed_));
    ASSERT_TRUE(bed_.cluster->CreateTopic("out", 1).ok());
    ASSERT_TRUE(bed_.cluster->CreateTopic("out.dlq", 1).ok());
    auto engine = Engine::Open(dir_.Sub("store"), Options());
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
    // Three committed emits; the second is too large for the relay's
    // producer (message.max.bytes below).
    for (const auto& [id, value] :
         std::vector<std::pair<std::string, std::string>>{
             {"m1", "small"},
             {"m2", std::string(20000, 'x')},
             {"m3", "tiny"}}) {
      Message message;
      message.id = id;
      auto result = engine_->Process(message, [&](const Message&, Txn& txn) {
        txn.Emit("out", id, value);
        return absl::OkStatus();
      });
      ASSERT_TRUE(result.ok()) << result.status();
    }
  }

  OutboxRelayOptions RelayOptions() {
    OutboxRelayOptions options;
    options.brokers = bed_.cluster->bootstrap_servers();
    options.kafka_config = {{"log_level", "3"}, {"message.max.bytes", "10000"}};
    return options;
  }

  test::KafkaTestBed bed_;
  util::TempDir dir_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(KafkaOutboxPoisonTest,
       PoisonEntryGoesToTheDeadLetterTopicAndTheRestFlow) {
  OutboxRelayOptions options = RelayOptions();
  options.max_attempts = 2;
  EXPECT_THAT(OutboxRelay::Create(engine_.get(), options).status().message(),
              HasSubstr("max_attempts needs dead_letter_topic"));
  options.dead_letter_topic = "out.dlq";
  auto relay = OutboxRelay::Create(engine_.get(), options);
  ASSERT_TRUE(relay.ok()) << relay.status();
  // Two attempts fail (the first entry goes through in the first)...
  for (int attempt = 1; attempt <= 2; ++attempt) {
    absl::StatusOr<RelayReport> drained = (*relay)->Drain();
    ASSERT_FALSE(drained.ok()) << "attempt " << attempt;
    EXPECT_TRUE(absl::IsOutOfRange(drained.status())) << drained.status();
  }
  // ... then the entry is given up on, and the one behind it flows.
  absl::StatusOr<RelayReport> drained = (*relay)->Drain();
  ASSERT_TRUE(drained.ok()) << drained.status();
  EXPECT_EQ(drained->dead_lettered, 1);
  EXPECT_EQ((*relay)->stats().dead_lettered, 1);
  EXPECT_THAT(*engine_->ReadOutbox(10), IsEmpty());

  std::vector<std::string> out_keys;
  for (const ReadBack& r : ReadTopic(options.brokers, "out")) {
    out_keys.push_back(r.key);
  }
  EXPECT_THAT(out_keys, ElementsAre("m1", "m3"));
  std::vector<ReadBack> dead = ReadTopic(options.brokers, "out.dlq");
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_EQ(dead[0].key, "m2");
  EXPECT_EQ(dead[0].value, "") << "a value too large is left out";
  EXPECT_EQ(dead[0].headers["idem.destination"], "out");
  EXPECT_EQ(dead[0].headers["idem.attempts"], "2");
  EXPECT_EQ(dead[0].headers["idem.value.bytes"], "20000");
  EXPECT_THAT(dead[0].headers["idem.error"], HasSubstr("too large"));
  EXPECT_FALSE(dead[0].headers["message-id"].empty());
}

// Without max_attempts (the default) the poison entry holds back the
// outbox: what the test above shows the option fixes.
TEST_F(KafkaOutboxPoisonTest, PoisonEntryHoldsBackTheOutboxWithoutMaxAttempts) {
  auto relay = OutboxRelay::Create(engine_.get(), RelayOptions());
  ASSERT_TRUE(relay.ok()) << relay.status();
  for (int attempt = 1; attempt <= 3; ++attempt) {
    EXPECT_FALSE((*relay)->Drain().ok());
  }
  EXPECT_EQ((*relay)->stats().dead_lettered, 0);
  EXPECT_EQ(engine_->ReadOutbox(10)->size(), 2u);  // m2, and m3 behind it
}

// A relay whose idempotent producer fails for good (here the brokers refuse
// it a producer ID: CLUSTER_AUTHORIZATION_FAILED on InitProducerId, a fatal
// error in librdkafka) fails the round with kAborted naming the cause; the
// next round restarts the producer and publishes every entry, once.
TEST(KafkaOutboxRestartTest, RelayProducerFailedForGoodRestartsAndGoesOn) {
  constexpr int16_t kInitProducerId = 22;
  constexpr int32_t kClusterAuthorizationFailed = 31;
  test::KafkaTestBed bed;
  ASSERT_NO_FATAL_FAILURE(test::StartKafka("in", 1, bed));
  ASSERT_TRUE(bed.cluster->CreateTopic("out", 1).ok());
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("store"), Options());
  for (const char* id : {"m1", "m2", "m3"}) {
    Message message;
    message.id = id;
    ASSERT_TRUE(engine
                    ->Process(message,
                              [&](const Message&, Txn& txn) {
                                txn.Emit("out", id, "v");
                                return absl::OkStatus();
                              })
                    .ok());
  }
  ASSERT_TRUE(
      bed.cluster
          ->FailNextRequests(kInitProducerId, {kClusterAuthorizationFailed})
          .ok());
  OutboxRelayOptions options;
  options.brokers = bed.cluster->bootstrap_servers();
  options.kafka_config = {{"log_level", "0"}};
  auto relay = OutboxRelay::Create(engine.get(), options);
  ASSERT_TRUE(relay.ok()) << relay.status();
  absl::StatusOr<RelayReport> failed = (*relay)->Drain();
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kAborted)
      << failed.status();
  EXPECT_THAT(failed.status().message(), HasSubstr("failed for good"));
  EXPECT_EQ((*relay)->stats().producer_restarts, 0);
  absl::StatusOr<RelayReport> drained = (*relay)->Drain();
  ASSERT_TRUE(drained.ok()) << drained.status();
  EXPECT_EQ(drained->acknowledged, 3);
  EXPECT_EQ((*relay)->stats().producer_restarts, 1);
  std::vector<std::string> keys;
  for (const ReadBack& r : ReadTopic(options.brokers, "out")) {
    keys.push_back(r.key);
  }
  EXPECT_THAT(keys, ElementsAre("m1", "m2", "m3"));
}

// With the relay held back (ConsumerHooks::skip_relay, as a destination
// that cannot keep up), a consumer with max_outbox_pending stops taking
// input once its outbox is full; a consumer that publishes lets it go on.
TEST(KafkaBackpressureTest, BackpressurePausesInputUntilTheRelayCatchesUp) {
  test::KafkaTestBed bed;
  ASSERT_NO_FATAL_FAILURE(test::StartKafka("orders", 2, bed));
  ASSERT_TRUE(bed.cluster->CreateTopic("orders.out", 2).ok());
  const test::ProducedStream stream =
      test::MakeStream(bed.topic, 2, 200, /*duplicate_every=*/0, 3);
  ASSERT_TRUE(bed.producer->Produce(stream.records).ok());
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("store"), Options());
  ConsumerOptions options = test::TestConsumerOptions(bed, "g");
  options.max_batch = 10;
  options.max_outbox_pending = 25;
  auto forward = [](const Record& record, Txn& txn) {
    return test::ApplyAndForward(record, txn, "orders.out");
  };
  auto handled = [&] { return test::CommittedRecords(*engine, bed.topic, 2); };
  {
    ConsumerHooks held_back;
    held_back.skip_relay = true;
    auto consumer = CreateConsumerWithHooks(engine.get(), options, held_back);
    ASSERT_TRUE(consumer.ok()) << consumer.status();
    for (int i = 0; i < 100; ++i) {
      ASSERT_TRUE((*consumer)->PollBatch(forward).ok());
    }
    // At most one batch beyond the bound.
    EXPECT_GT(handled(), 0);
    EXPECT_LE(handled(), options.max_outbox_pending + options.max_batch);
    EXPECT_GE((*consumer)->stats().backpressure_pauses, 1);
    ASSERT_TRUE((*consumer)->Close().ok());
  }
  auto consumer = Consumer::Create(engine.get(), options);
  ASSERT_TRUE(consumer.ok()) << consumer.status();
  ASSERT_TRUE(test::PollUntil(**consumer, forward, [&] {
                return handled() >= 200;
              }).ok());
  EXPECT_THAT(
      test::EffectErrors(stream.unique_ids, test::AppliedCounts(*engine)),
      IsEmpty());
}

TEST(KafkaBackpressureTest, PoisonAndBackpressureOptionsAreChecked) {
  test::KafkaTestBed bed;
  ASSERT_NO_FATAL_FAILURE(test::StartKafka("orders", 1, bed));
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("store"), Options());
  ConsumerOptions options = test::TestConsumerOptions(bed, "g");
  options.outbox_max_attempts = 3;
  absl::Status s = Consumer::Create(engine.get(), options).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_THAT(s.message(), HasSubstr("outbox_max_attempts needs"));
  options.outbox_max_attempts = -1;
  EXPECT_TRUE(absl::IsInvalidArgument(
      Consumer::Create(engine.get(), options).status()));
  options.outbox_max_attempts = 0;
  options.max_outbox_pending = -5;
  s = Consumer::Create(engine.get(), options).status();
  EXPECT_THAT(s.message(), HasSubstr("max_outbox_pending must be >= 0"));
  OutboxRelayOptions relay;
  relay.brokers = bed.cluster->bootstrap_servers();
  relay.max_attempts = -1;
  EXPECT_TRUE(absl::IsInvalidArgument(
      OutboxRelay::Create(engine.get(), relay).status()));
}

}  // namespace
}  // namespace idem::kafka
