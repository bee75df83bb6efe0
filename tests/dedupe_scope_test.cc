// Options::dedupe_scope: with kPartition, one ID is one message per (source,
// partition), each partition's records form one key range, the scope is
// fixed when the store is created, and Seen/Forget name the partition. With
// kStore (the default) nothing changes.

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/record.h"
#include "engine/store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/clock.h"
#include "idem/engine.h"
#include "rocksdb/db.h"
#include "tests/testing/engine_test_util.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::Status Count(const Message& m, Txn& txn) {
  absl::StatusOr<std::optional<std::string>> n = txn.Get("count");
  if (!n.ok()) return n.status();
  txn.Put("count", std::to_string(n->has_value() ? std::stoi(**n) + 1 : 1));
  txn.SetResult("first:" + std::string(m.source) + "/" +
                std::to_string(m.partition));
  return absl::OkStatus();
}

// Views only: `id` and `source` must outlive the Message.
Message On(std::string_view id, std::string_view source, int32_t partition,
           int64_t offset = -1) {
  Message m;
  m.id = id;
  m.source = source;
  m.partition = partition;
  m.offset = offset;
  return m;
}

class DedupeScopeTest : public ::testing::Test {
 protected:
  std::unique_ptr<Engine> Open(DedupeScope scope, bool read_only = false) {
    Options options;
    options.clock = &clock_;
    options.dedupe_scope = scope;
    options.read_only = read_only;
    options.dedupe_window = absl::Hours(1);
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        Engine::Open(dir_.Sub("db"), options);
    EXPECT_TRUE(engine.ok()) << engine.status();
    return engine.ok() ? std::move(*engine) : nullptr;
  }

  util::TempDir dir_;
  ManualClock clock_{test::kStart};
};

TEST_F(DedupeScopeTest,
       PartitionScopeMakesTheSameIdOnTwoPartitionsTwoMessages) {
  std::unique_ptr<Engine> engine = Open(DedupeScope::kPartition);
  ASSERT_NE(engine, nullptr);
  // In one batch, and then redelivered in another.
  const std::vector<Message> batch = {On("m", "t", 0), On("m", "t", 1),
                                      On("m", "u", 0), On("m", "t", 0),
                                      On("m", "", 0)};
  absl::StatusOr<std::vector<Result>> results =
      engine->ProcessBatch(batch, Count);
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_THAT(
      test::Outcomes(*results),
      ElementsAre(Outcome::kProcessed, Outcome::kProcessed, Outcome::kProcessed,
                  Outcome::kDuplicate, Outcome::kProcessed));
  EXPECT_EQ((*results)[3].result, "first:t/0");
  for (const Message& m : batch) {
    EXPECT_TRUE(*engine->Seen(m.id, m.source, m.partition));
  }
  absl::StatusOr<std::vector<Result>> again =
      engine->ProcessBatch(batch, Count);
  ASSERT_TRUE(again.ok());
  for (size_t k = 0; k < again->size(); ++k) {
    EXPECT_EQ((*again)[k].outcome, Outcome::kDuplicate) << k;
  }
  EXPECT_EQ((*again)[1].result, "first:t/1");
  EXPECT_EQ(*engine->GetState("count"), "4");
}

TEST_F(DedupeScopeTest, StoreScopeMakesTheSameIdOnTwoPartitionsOneMessage) {
  std::unique_ptr<Engine> engine = Open(DedupeScope::kStore);
  ASSERT_NE(engine, nullptr);
  absl::StatusOr<std::vector<Result>> results = engine->ProcessBatch(
      {On("m", "t", 0), On("m", "t", 1), On("m", "u", 0)}, Count);
  ASSERT_TRUE(results.ok());
  EXPECT_THAT(test::Outcomes(*results),
              ElementsAre(Outcome::kProcessed, Outcome::kDuplicate,
                          Outcome::kDuplicate));
  // The partition given to Seen and Forget does not matter.
  EXPECT_TRUE(*engine->Seen("m"));
  EXPECT_TRUE(*engine->Seen("m", "elsewhere", 9));
  ASSERT_TRUE(engine->Forget("m", "t", 1).ok());
  EXPECT_FALSE(*engine->Seen("m"));
}

TEST_F(DedupeScopeTest, SeenAndForgetNameThePartition) {
  std::unique_ptr<Engine> engine = Open(DedupeScope::kPartition);
  ASSERT_NE(engine, nullptr);
  ASSERT_TRUE(
      engine->ProcessBatch({On("m", "t", 0), On("n", "", 0)}, Count).ok());
  EXPECT_TRUE(*engine->Seen("m", "t", 0));
  EXPECT_FALSE(*engine->Seen("m", "t", 1));
  EXPECT_TRUE(*engine->Seen("n", "", 0));
  EXPECT_EQ(engine->Seen("m").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(engine->Seen("m").status().message(), HasSubstr("partition"));
  EXPECT_EQ(engine->Forget("m").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(engine->Seen("m", "t", -1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine->Seen("m", std::string(kMaxSourceBytes + 1, 's'), 0)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(engine->Forget("m", "t", 1).ok());  // another partition's
  EXPECT_TRUE(*engine->Seen("m", "t", 0));
  ASSERT_TRUE(engine->Forget("m", "t", 0).ok());
  EXPECT_FALSE(*engine->Seen("m", "t", 0));
  absl::StatusOr<Result> rerun = engine->Process(On("m", "t", 0), Count);
  ASSERT_TRUE(rerun.ok());
  EXPECT_EQ(rerun->outcome, Outcome::kProcessed);
}

TEST_F(DedupeScopeTest, RecordsExpireAsInStoreScope) {
  for (int buckets : {0, 4}) {
    SCOPED_TRACE(buckets);
    util::TempDir dir;
    Options options;
    options.clock = &clock_;
    options.dedupe_scope = DedupeScope::kPartition;
    options.dedupe_window = absl::Hours(1);
    options.expiry_buckets = buckets;
    ASSERT_OPEN(engine, dir.Sub("db"), options);
    ASSERT_TRUE(engine->Process(On("m", "t", 0), Count).ok());
    clock_.Advance(absl::Minutes(59));
    EXPECT_EQ(engine->Process(On("m", "t", 0), Count)->outcome,
              Outcome::kDuplicate);
    clock_.Advance(absl::Minutes(2));
    EXPECT_FALSE(*engine->Seen("m", "t", 0));
    EXPECT_EQ(engine->Process(On("m", "t", 0), Count)->outcome,
              Outcome::kProcessed);
    ASSERT_TRUE(engine->CompactExpired().ok());
    EXPECT_TRUE(*engine->Seen("m", "t", 0));
  }
}

// Each partition's records are one key range of idem.dedupe: the prefix of
// (source, partition), then the ID's hash.
TEST_F(DedupeScopeTest, APartitionsRecordsFormOneKeyRange) {
  std::unique_ptr<Engine> engine = Open(DedupeScope::kPartition);
  ASSERT_NE(engine, nullptr);
  std::vector<Message> batch;
  std::vector<std::string> ids;
  for (int i = 0; i < 30; ++i) ids.push_back("id-" + std::to_string(i));
  for (int i = 0; i < 30; ++i) {
    batch.push_back(On(ids[i], i % 3 == 0 ? "t" : "tt", i % 2));
  }
  ASSERT_TRUE(engine->ProcessBatch(batch, Count).ok());
  std::vector<std::pair<std::string, int32_t>> order;
  ASSERT_TRUE(engine
                  ->Dump([&](const DumpEntry& e) {
                    if (e.kind == DumpEntry::Kind::kDedupe) {
                      order.emplace_back(e.source, e.partition);
                    }
                    return absl::OkStatus();
                  })
                  .ok());
  ASSERT_EQ(order.size(), 30u);
  // Dump goes in key order: each (source, partition) appears as one run.
  std::set<std::pair<std::string, int32_t>> finished;
  for (size_t i = 0; i < order.size(); ++i) {
    if (i > 0 && order[i] != order[i - 1]) {
      EXPECT_TRUE(finished.insert(order[i - 1]).second)
          << order[i - 1].first << "/" << order[i - 1].second
          << " appears in two runs";
    }
    EXPECT_FALSE(finished.contains(order[i]));
  }
  // The key layout itself.
  const DedupeKey hash = HashMessageId("id-0");
  const RecordKey key = RecordKey::ForPartition("t", 0, hash);
  EXPECT_TRUE(key.view().starts_with(PartitionRecordPrefix("t", 0)));
  std::optional<PartitionRecordKey> decoded =
      DecodePartitionRecordKey(key.view());
  ASSERT_TRUE(decoded.has_value());
  EXPECT_EQ(decoded->source, "t");
  EXPECT_EQ(decoded->partition, 0);
  EXPECT_EQ(decoded->hash, KeyView(hash));
  EXPECT_FALSE(DecodePartitionRecordKey(KeyView(hash)).has_value());
  EXPECT_FALSE(
      PartitionRecordPrefix("t", 1).starts_with(PartitionRecordPrefix("t", 0)));
  EXPECT_FALSE(PartitionRecordPrefix("tt", 0).starts_with(
      PartitionRecordPrefix("t", 0)));
}

TEST_F(DedupeScopeTest, TheScopeIsFixedWhenTheStoreIsCreated) {
  {
    std::unique_ptr<Engine> engine = Open(DedupeScope::kPartition);
    ASSERT_NE(engine, nullptr);
    ASSERT_TRUE(engine->Process(On("m", "t", 0, 5), Count).ok());
  }
  const auto before = test::SnapshotTree(dir_.Sub("db"));
  Options store_scope;
  store_scope.clock = &clock_;
  absl::StatusOr<std::unique_ptr<Engine>> wrong =
      Engine::Open(dir_.Sub("db"), store_scope);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(wrong.status().message(), HasSubstr("kPartition"));
  EXPECT_EQ(test::SnapshotTree(dir_.Sub("db")), before);
  // A read-only open uses the store's scope.
  store_scope.read_only = true;
  ASSERT_OPEN(reader, dir_.Sub("db"), store_scope);
  EXPECT_EQ(reader->options().dedupe_scope, DedupeScope::kPartition);
  EXPECT_TRUE(reader->options().read_only);
  EXPECT_EQ(reader->options().clock, &clock_);
  EXPECT_TRUE(*reader->Seen("m", "t", 0));
  EXPECT_EQ(*reader->CommittedOffset("t", 0), 5);
  // The store is format 3, which builds reading formats 1 and 2 refuse.
  std::vector<std::string> names;
  ASSERT_TRUE(rocksdb::DB::ListColumnFamilies({}, dir_.Sub("db"), &names).ok());
  EXPECT_EQ(*FormatVersionFromFamilies(names, "db"), 3);
  EXPECT_THAT(names, ::testing::Contains("idem.scope.partition"));

  // And the other way round.
  util::TempDir other;
  Options plain;
  plain.clock = &clock_;
  { ASSERT_OPEN(engine, other.Sub("db"), plain); }
  plain.dedupe_scope = DedupeScope::kPartition;
  EXPECT_EQ(Engine::Open(other.Sub("db"), plain).status().code(),
            absl::StatusCode::kFailedPrecondition);
  names.clear();
  ASSERT_TRUE(
      rocksdb::DB::ListColumnFamilies({}, other.Sub("db"), &names).ok());
  EXPECT_EQ(*FormatVersionFromFamilies(names, "db"), 1);
}

TEST_F(DedupeScopeTest, BadScopeValueIsInvalid) {
  Options options;
  options.dedupe_scope = static_cast<DedupeScope>(7);
  EXPECT_EQ(Engine::Open(dir_.Sub("db"), options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace idem
