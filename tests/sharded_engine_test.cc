// Options::shards (engine/sharded_engine.h): every message commits in the
// shard of its partition, with its dedupe record, state and offset; state
// is read per partition; the shard count is fixed at creation, a missing
// shard fails the open naming it; batches that span shards come back in
// order; outbox calls go through the shards; the stats add up. The broken
// routing of EngineHooks::wrong_shard applies a redelivered message twice,
// which the duplicate test below would catch.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/engine_hooks.h"
#include "engine/shard_layout.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "util/directory.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

using ::testing::HasSubstr;
using ::testing::SizeIs;
using ::testing::UnorderedElementsAre;

Options ShardedOptions(int shards) {
  Options options;
  options.shards = shards;
  options.dedupe_scope = DedupeScope::kPartition;
  options.durability = Durability::kBuffered;
  return options;
}

// Writes the message's payload to state key "last" of its shard.
absl::Status PutLast(const Message& message, Txn& txn) {
  txn.Put("last", message.payload);
  return absl::OkStatus();
}

// A message of source "orders"; it views `id` and `payload`, which must
// outlive it.
Message OnPartition(std::string_view id, int32_t partition, int64_t offset,
                    std::string_view payload) {
  return Message{.id = id,
                 .payload = payload,
                 .source = "orders",
                 .partition = partition,
                 .offset = offset};
}

class ShardedEngineTest : public ::testing::Test {
 protected:
  std::unique_ptr<Engine> OpenShards(int shards,
                                     const EngineHooks& hooks = {}) {
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        OpenEngineWithHooks(path_, ShardedOptions(shards), hooks);
    EXPECT_TRUE(engine.ok()) << engine.status();
    return engine.ok() ? *std::move(engine) : nullptr;
  }

  util::TempDir dir_;
  const std::string path_ = dir_.Sub("store");
};

TEST_F(ShardedEngineTest, ShardCountsOutOfRangeOrWithStoreScopeAreInvalid) {
  for (int shards : {0, -1, 257}) {
    EXPECT_EQ(Engine::Open(path_, ShardedOptions(shards)).status().code(),
              absl::StatusCode::kInvalidArgument)
        << shards;
  }
  Options store_scope = ShardedOptions(2);
  store_scope.dedupe_scope = DedupeScope::kStore;
  absl::Status s = Engine::Open(path_, store_scope).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("kPartition"));
}

TEST_F(ShardedEngineTest, EachPartitionCommitsInItsShard) {
  std::unique_ptr<Engine> engine = OpenShards(4);
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(engine->shard_count(), 4);
  for (int32_t p = 0; p < 8; ++p) {
    absl::StatusOr<Result> r = engine->Process(
        OnPartition(absl::StrCat("m", p), p, 10, absl::StrCat("from ", p)),
        PutLast);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->outcome, Outcome::kProcessed);
  }
  // Partitions p and p + 4 share shard p: the later message's write wins.
  for (int32_t p = 0; p < 8; ++p) {
    EXPECT_EQ(engine->ShardOf(p), p % 4);
    absl::StatusOr<std::optional<std::string>> v =
        engine->GetState("orders", p, "last");
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(*v, absl::StrCat("from ", p % 4 + 4));
    EXPECT_EQ(**engine->CommittedOffset("orders", p), 10);
  }
  EXPECT_EQ(*engine->shard(1)->GetState("last"), "from 5");
  EXPECT_EQ(engine->shard(4), nullptr);
  EXPECT_EQ(engine->shard(-1), nullptr);
  // State without a partition names no shard.
  EXPECT_EQ(engine->GetState("last").status().code(),
            absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<Stats> stats = engine->GetStats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->processed, 8u);
}

TEST_F(ShardedEngineTest, RedeliveryAfterReopenIsADuplicate) {
  {
    std::unique_ptr<Engine> engine = OpenShards(3);
    ASSERT_NE(engine, nullptr);
    for (int32_t p = 0; p < 6; ++p) {
      ASSERT_TRUE(
          engine->Process(OnPartition(absl::StrCat("m", p), p, 1, "x"), PutLast)
              .ok());
    }
  }
  std::unique_ptr<Engine> engine = OpenShards(3);
  ASSERT_NE(engine, nullptr);
  for (int32_t p = 0; p < 6; ++p) {
    absl::StatusOr<Result> r =
        engine->Process(OnPartition(absl::StrCat("m", p), p, 1, "y"), PutLast);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->outcome, Outcome::kDuplicate) << p;
  }
}

// The broken twin of the test above: routing that moves partitions at each
// open finds no record of the first delivery and applies it again.
TEST_F(ShardedEngineTest, BrokenRoutingAppliesRedeliveriesTwice) {
  {
    std::unique_ptr<Engine> engine = OpenShards(3);
    ASSERT_NE(engine, nullptr);
    ASSERT_TRUE(engine->Process(OnPartition("m", 1, 1, "x"), PutLast).ok());
  }
  std::unique_ptr<Engine> engine =
      OpenShards(3, EngineHooks{.wrong_shard = true});
  ASSERT_NE(engine, nullptr);
  absl::StatusOr<Result> r =
      engine->Process(OnPartition("m", 1, 1, "y"), PutLast);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outcome, Outcome::kProcessed);
}

TEST_F(ShardedEngineTest, BatchAcrossShardsKeepsItsOrderAndRejectsBadInput) {
  std::unique_ptr<Engine> engine = OpenShards(2);
  ASSERT_NE(engine, nullptr);
  // Message views its bytes: keep them alive through the call.
  std::vector<std::string> ids;
  std::vector<std::string> payloads;
  for (int i = 0; i < 6; ++i) {
    ids.push_back(absl::StrCat("b", i % 4));
    payloads.push_back(absl::StrCat(i));
  }
  std::vector<Message> batch;
  for (int i = 0; i < 6; ++i) {
    batch.push_back(OnPartition(ids[i], i % 3, i, payloads[i]));
  }
  absl::StatusOr<std::vector<Result>> results =
      engine->ProcessBatch(batch, PutLast);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 6u);
  // b0 and b1 come twice, on partitions 0 then 1 and 1 then 2: separate
  // partitions, separate records.
  for (size_t i = 0; i < results->size(); ++i) {
    EXPECT_EQ((*results)[i].outcome, Outcome::kProcessed) << i;
  }
  uint64_t largest = 0;
  for (const Result& r : *results) largest = std::max(largest, r.sequence);
  EXPECT_TRUE(engine->WaitDurable(largest).ok());
  EXPECT_EQ(engine->WaitDurable(uint64_t{7} << 56).code(),
            absl::StatusCode::kInvalidArgument);

  // An invalid message anywhere rejects the batch before any shard runs.
  std::vector<Message> bad = {OnPartition("c0", 0, 20, "z"),
                              OnPartition("", 1, 20, "z")};
  EXPECT_EQ(engine->ProcessBatch(bad, PutLast).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(*engine->Seen("c0", "orders", 0));
}

// A caller (the Kafka consumer's batches) finds a message's place in its
// batch by the address the handler is given: the shards pass the caller's
// messages, not their own copies.
TEST_F(ShardedEngineTest, BatchHandlerSeesTheCallersMessages) {
  std::unique_ptr<Engine> engine = OpenShards(2);
  ASSERT_NE(engine, nullptr);
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) ids.push_back(absl::StrCat("h", i));
  std::vector<Message> batch;
  for (int i = 0; i < 5; ++i) {
    batch.push_back(OnPartition(ids[i], i % 3, i, "x"));
  }
  std::vector<size_t> seen;
  absl::StatusOr<std::vector<Result>> results =
      engine->ProcessBatch(batch, [&](const Message& message, Txn&) {
        seen.push_back(static_cast<size_t>(&message - batch.data()));
        return absl::OkStatus();
      });
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_THAT(seen, SizeIs(5));
  for (size_t place : seen) {
    ASSERT_LT(place, batch.size());
    EXPECT_EQ(batch[place].id, ids[place]);
  }
  EXPECT_THAT(seen, UnorderedElementsAre(0, 1, 2, 3, 4));
}

TEST_F(ShardedEngineTest, OutboxIsRelayedPerShard) {
  std::unique_ptr<Engine> engine = OpenShards(2);
  ASSERT_NE(engine, nullptr);
  for (int32_t p = 0; p < 2; ++p) {
    ASSERT_TRUE(engine
                    ->Process(OnPartition(absl::StrCat("e", p), p, 0, "v"),
                              [](const Message& m, Txn& txn) {
                                txn.Emit("out", m.id, m.payload);
                                return absl::OkStatus();
                              })
                    .ok());
  }
  EXPECT_EQ(engine->ReadOutbox(10).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(engine->AckOutbox(1).code(), absl::StatusCode::kFailedPrecondition);
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<std::vector<OutboxEntry>> entries =
        engine->shard(i)->ReadOutbox(10);
    ASSERT_TRUE(entries.ok()) << entries.status();
    ASSERT_EQ(entries->size(), 1u);
    EXPECT_EQ((*entries)[0].key, absl::StrCat("e", i));
    EXPECT_TRUE(engine->shard(i)->AckOutbox((*entries)[0].position).ok());
  }
}

TEST_F(ShardedEngineTest, TimersAndStreamTimeLiveInThePartitionsShard) {
  std::unique_ptr<Engine> engine = OpenShards(2);
  ASSERT_NE(engine, nullptr);
  Message m = OnPartition("t", 3, 0, "v");
  m.event_time = absl::FromUnixSeconds(100);
  ASSERT_TRUE(engine
                  ->Process(m,
                            [](const Message&, Txn& txn) {
                              return txn.SetTimer("k", TimeDomain::kEvent,
                                                  absl::FromUnixSeconds(90) +
                                                      absl::Seconds(20));
                            })
                  .ok());
  EXPECT_EQ(*engine->StreamTime("orders", 3), absl::FromUnixSeconds(100));
  EXPECT_EQ(*engine->shard(1)->StreamTime("orders", 3),
            absl::FromUnixSeconds(100));
  absl::StatusOr<std::optional<TimerFire>> next =
      engine->NextTimer("orders", 3, TimeDomain::kEvent);
  ASSERT_TRUE(next.ok()) << next.status();
  ASSERT_TRUE(next->has_value());
  EXPECT_EQ((*next)->timer_key, "k");
  EXPECT_FALSE(engine->shard(0)
                   ->NextTimer("orders", 3, TimeDomain::kEvent)
                   ->has_value());
}

TEST_F(ShardedEngineTest, AnotherShardCountIsRefusedNamingBoth) {
  { ASSERT_NE(OpenShards(4), nullptr); }
  absl::Status two = Engine::Open(path_, ShardedOptions(2)).status();
  EXPECT_EQ(two.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(two.message()), HasSubstr("has 4 shards"));
  EXPECT_THAT(std::string(two.message()), HasSubstr("shards = 2"));
  Options plain;
  plain.dedupe_scope = DedupeScope::kPartition;
  absl::Status one = Engine::Open(path_, plain).status();
  EXPECT_EQ(one.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(one.message()), HasSubstr("shards = 1"));

  // And an ordinary store is never split.
  const std::string ordinary = dir_.Sub("ordinary");
  { ASSERT_TRUE(Engine::Open(ordinary, plain).ok()); }
  absl::Status split = Engine::Open(ordinary, ShardedOptions(4)).status();
  EXPECT_EQ(split.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(split.message()), HasSubstr("has 1 shard;"));
}

TEST_F(ShardedEngineTest, MissingShardFailsTheOpenNamingIt) {
  { ASSERT_NE(OpenShards(3), nullptr); }
  util::RemoveTree(ShardDirectory(path_, 2));
  absl::Status s = Engine::Open(path_, ShardedOptions(3)).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(s.message()), HasSubstr("shard 2"));
}

TEST_F(ShardedEngineTest, CheckpointOpensAsTheSameShards) {
  std::unique_ptr<Engine> engine = OpenShards(2);
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(engine->Process(OnPartition("m", 1, 5, "kept"), PutLast).ok());
  const std::string copy = dir_.Sub("copy");
  ASSERT_TRUE(engine->Checkpoint(copy).ok());
  absl::StatusOr<std::unique_ptr<Engine>> reopened =
      Engine::Open(copy, ShardedOptions(2));
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_EQ(*(*reopened)->GetState("orders", 1, "last"), "kept");
  EXPECT_EQ(engine->Checkpoint(copy).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace idem
