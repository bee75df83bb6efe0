// The Kafka consumer and the outbox relay take an engine with one shard:
// given a sharded engine (Options::shards > 1) their Create is
// kInvalidArgument naming the shards, before anything connects; a shard of
// it (Engine::shard) is an engine of one shard, whose outbox a relay takes.

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/kafka/consumer.h"
#include "idem/kafka/outbox_relay.h"
#include "util/temp_dir.h"

namespace idem::kafka {
namespace {

using ::testing::HasSubstr;

TEST(KafkaShardedEngineTest, ConsumerAndRelayRefuseAShardedEngine) {
  util::TempDir dir;
  Options options;
  options.shards = 2;
  options.dedupe_scope = DedupeScope::kPartition;
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Open(dir.Sub("store"), options);
  ASSERT_TRUE(engine.ok()) << engine.status();

  ConsumerOptions consumer;
  consumer.brokers = "localhost:1";
  consumer.group_id = "g";
  consumer.topics = {"t"};
  absl::Status s = Consumer::Create(engine->get(), consumer).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("2 shards"));

  OutboxRelayOptions relay;
  relay.brokers = "localhost:1";
  s = OutboxRelay::Create(engine->get(), relay).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("shard(i)"));
  // One shard's outbox is relayed through the shard.
  EXPECT_EQ((*engine)->shard(1)->shard_count(), 1);
}

}  // namespace
}  // namespace idem::kafka
