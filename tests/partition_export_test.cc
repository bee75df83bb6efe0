// Engine::ExportPartition and ImportPartition on partition-scoped stores
// (DedupeScope::kPartition): a partition's dedupe records move with its state
// and offset, the import replaces the target's records of that partition and
// no other, and both calls read only the partition's key ranges.
// tests/partition_state_test.cc covers the state and offset on any store.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/record.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/clock.h"
#include "idem/engine.h"
#include "idem/partition_state.h"
#include "rocksdb/db.h"
#include "tests/testing/engine_test_util.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::SizeIs;

// Adds the message's amount (its payload) to the partition's "total" and
// returns "seen-<id>".
absl::Status AddAmount(const Message& m, Txn& txn) {
  PartitionTxn partition(txn, m.source, m.partition);
  absl::StatusOr<std::optional<std::string>> total = partition.Get("total");
  if (!total.ok()) return total.status();
  const int sum = (total->has_value() ? std::stoi(**total) : 0) +
                  std::stoi(std::string(m.payload));
  partition.Put("total", std::to_string(sum));
  partition.SetResult("seen-" + std::string(m.id));
  return absl::OkStatus();
}

// Views only: the arguments must outlive the Message.
Message On(std::string_view id, std::string_view source, int32_t partition,
           int64_t offset, std::string_view amount = "1") {
  Message m;
  m.id = id;
  m.source = source;
  m.partition = partition;
  m.offset = offset;
  m.payload = amount;
  return m;
}

class PartitionExportTest : public ::testing::TestWithParam<int> {
 protected:
  // GetParam(): Options::expiry_buckets.
  Options MakeOptions(DedupeScope scope) {
    Options options;
    options.clock = &clock_;
    options.dedupe_scope = scope;
    options.dedupe_window = absl::Hours(1);
    options.expiry_buckets = GetParam();
    return options;
  }
  std::unique_ptr<Engine> Open(const std::string& name,
                               DedupeScope scope = DedupeScope::kPartition) {
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        Engine::Open(dir_.Sub(name), MakeOptions(scope));
    EXPECT_TRUE(engine.ok()) << engine.status();
    return engine.ok() ? std::move(*engine) : nullptr;
  }
  static void Process(Engine& engine, const std::vector<Message>& batch) {
    absl::StatusOr<std::vector<Result>> results =
        engine.ProcessBatch(batch, AddAmount);
    ASSERT_TRUE(results.ok()) << results.status();
  }

  util::TempDir dir_;
  ManualClock clock_{test::kStart};
};

TEST_P(PartitionExportTest, ExportCarriesThePartitionsLiveRecords) {
  std::unique_ptr<Engine> from = Open("from");
  ASSERT_NE(from, nullptr);
  Message short_lived = On("brief", "orders", 0, 1);
  short_lived.ttl = absl::Minutes(1);
  ASSERT_NO_FATAL_FAILURE(Process(*from, {short_lived}));
  clock_.Advance(absl::Minutes(2));  // "brief" has expired
  ASSERT_NO_FATAL_FAILURE(Process(
      *from, {On("a", "orders", 0, 2, "5"), On("b", "orders", 0, 3, "7"),
              On("c", "orders", 1, 9), On("a", "other", 0, 4)}));

  absl::StatusOr<PartitionSnapshot> snapshot =
      from->ExportPartition("orders", 0);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_EQ(snapshot->offset, 3);
  EXPECT_THAT(snapshot->entries, ElementsAre(Pair("total", "13")));
  ASSERT_THAT(snapshot->records, SizeIs(2));
  std::vector<std::string> hashes, results;
  for (const PartitionRecord& r : snapshot->records) {
    hashes.push_back(DedupeKeyToHex(r.id_hash));
    results.push_back(r.result);
    EXPECT_EQ(r.expires_at, clock_.Now() + absl::Hours(1));
  }
  // In hash order.
  std::vector<std::pair<std::string, std::string>> expected = {
      {test::HexOfIdHash("a"), "seen-a"}, {test::HexOfIdHash("b"), "seen-b"}};
  std::sort(expected.begin(), expected.end());
  EXPECT_THAT(hashes, ElementsAre(expected[0].first, expected[1].first));
  EXPECT_THAT(results, ElementsAre(expected[0].second, expected[1].second));
}

TEST_P(PartitionExportTest, ImportReplacesThePartitionsRecordsAndNoOthers) {
  std::unique_ptr<Engine> from = Open("from");
  std::unique_ptr<Engine> to = Open("to");
  ASSERT_NE(from, nullptr);
  ASSERT_NE(to, nullptr);
  ASSERT_NO_FATAL_FAILURE(Process(
      *from, {On("a", "orders", 0, 10, "5"), On("b", "orders", 0, 11, "7")}));
  // The target's stale copy of partition 0, and a partition it keeps.
  ASSERT_NO_FATAL_FAILURE(Process(
      *to, {On("stale", "orders", 0, 4, "100"), On("a", "orders", 1, 8)}));

  absl::StatusOr<PartitionSnapshot> snapshot =
      from->ExportPartition("orders", 0);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  ASSERT_TRUE(to->ImportPartition(*snapshot).ok());

  EXPECT_TRUE(*to->Seen("a", "orders", 0));
  EXPECT_TRUE(*to->Seen("b", "orders", 0));
  EXPECT_FALSE(*to->Seen("stale", "orders", 0));
  EXPECT_TRUE(*to->Seen("a", "orders", 1));  // untouched
  EXPECT_EQ(*to->CommittedOffset("orders", 0), 11);
  EXPECT_EQ(*to->GetState(PartitionStatePrefix("orders", 0) + "total"),
            std::optional<std::string>("12"));
  // A producer duplicate of "a" (same ID, a new offset) is recognised by the
  // new owner, with the first delivery's result.
  absl::StatusOr<Result> again =
      to->Process(On("a", "orders", 0, 12, "5"), AddAmount);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->outcome, Outcome::kDuplicate);
  EXPECT_EQ(again->result, "seen-a");
  EXPECT_EQ(*to->GetState(PartitionStatePrefix("orders", 0) + "total"),
            std::optional<std::string>("12"));
  // The records expire when they did in the old owner.
  clock_.Advance(absl::Hours(1) + absl::Seconds(1));
  EXPECT_FALSE(*to->Seen("b", "orders", 0));
}

// A stale copy ahead of the snapshot is refused, unless allow_rewind: then
// state, records and offset all go back to the snapshot's (to no offset at
// all for a snapshot without one).
TEST_P(PartitionExportTest, ImportWithAllowRewindMovesAStoreBack) {
  std::unique_ptr<Engine> from = Open("from");
  std::unique_ptr<Engine> to = Open("to");
  ASSERT_NE(from, nullptr);
  ASSERT_NE(to, nullptr);
  ASSERT_NO_FATAL_FAILURE(Process(*from, {On("a", "orders", 0, 10, "5")}));
  ASSERT_NO_FATAL_FAILURE(Process(
      *to, {On("a", "orders", 0, 10, "5"), On("ahead", "orders", 0, 11, "7")}));
  absl::StatusOr<PartitionSnapshot> snapshot =
      from->ExportPartition("orders", 0);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();

  EXPECT_EQ(to->ImportPartition(*snapshot).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(to->ImportPartition(*snapshot, {.allow_rewind = false}).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(*to->CommittedOffset("orders", 0), 11);

  ASSERT_TRUE(to->ImportPartition(*snapshot, {.allow_rewind = true}).ok());
  EXPECT_EQ(*to->CommittedOffset("orders", 0), 10);
  EXPECT_FALSE(*to->Seen("ahead", "orders", 0));
  EXPECT_TRUE(*to->Seen("a", "orders", 0));
  EXPECT_EQ(*to->GetState(PartitionStatePrefix("orders", 0) + "total"),
            std::optional<std::string>("5"));

  PartitionSnapshot empty;
  empty.source = "orders";
  empty.partition = 0;
  ASSERT_TRUE(to->ImportPartition(empty, {.allow_rewind = true}).ok());
  EXPECT_EQ(*to->CommittedOffset("orders", 0), std::nullopt);
  EXPECT_FALSE(*to->Seen("a", "orders", 0));
  EXPECT_EQ(*to->GetState(PartitionStatePrefix("orders", 0) + "total"),
            std::nullopt);
}

TEST_P(PartitionExportTest, ExportAndImportReadOnlyThePartitionsRanges) {
  {
    std::unique_ptr<Engine> engine = Open("db");
    ASSERT_NE(engine, nullptr);
    ASSERT_NO_FATAL_FAILURE(
        Process(*engine, {On("a", "orders", 0, 1), On("b", "orders", 1, 1)}));
  }
  // Damage the store outside partition 0: a record of partition 1 that does
  // not decode, and a state entry under no partition.
  ASSERT_NO_FATAL_FAILURE(test::ChangeRawFamily(
      dir_.Sub("db"), "idem.dedupe",
      [](rocksdb::DB* db, rocksdb::ColumnFamilyHandle* dedupe) {
        ASSERT_NE(dedupe, nullptr);
        const RecordKey key =
            RecordKey::ForPartition("orders", 1, HashMessageId("x"));
        ASSERT_TRUE(
            db->Put({}, dedupe,
                    rocksdb::Slice(key.view().data(), key.view().size()),
                    "garbage")
                .ok());
      }));
  std::unique_ptr<Engine> engine = Open("db");
  ASSERT_NE(engine, nullptr);
  // A whole-store reader meets the damage...
  EXPECT_EQ(
      engine->Dump([](const DumpEntry&) { return absl::OkStatus(); }).code(),
      absl::StatusCode::kDataLoss);
  EXPECT_EQ(engine->ExportPartition("orders", 1).status().code(),
            absl::StatusCode::kDataLoss);
  // ...a reader of partition 0 does not.
  absl::StatusOr<PartitionSnapshot> snapshot =
      engine->ExportPartition("orders", 0);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  EXPECT_THAT(snapshot->records, SizeIs(1));
  snapshot->entries = {{"total", "42"}};
  ASSERT_TRUE(engine->ImportPartition(*snapshot).ok());
  EXPECT_EQ(*engine->GetState(PartitionStatePrefix("orders", 0) + "total"),
            std::optional<std::string>("42"));
}

TEST_P(PartitionExportTest, RecordsImportedIntoAStoreScopedStoreAreAdded) {
  std::unique_ptr<Engine> from = Open("from");
  std::unique_ptr<Engine> to = Open("to", DedupeScope::kStore);
  ASSERT_NE(from, nullptr);
  ASSERT_NE(to, nullptr);
  // The target has its own record of "a"; the source's is half a window
  // younger (with expiry buckets, in a later bucket).
  ASSERT_NO_FATAL_FAILURE(
      Process(*to, {On("kept", "orders", 0, 0), On("a", "payments", 5, 0)}));
  clock_.Advance(absl::Minutes(30));
  ASSERT_NO_FATAL_FAILURE(Process(*from, {On("a", "orders", 0, 1)}));
  absl::StatusOr<PartitionSnapshot> snapshot =
      from->ExportPartition("orders", 0);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  ASSERT_TRUE(to->ImportPartition(*snapshot).ok());
  EXPECT_TRUE(*to->Seen("a"));
  EXPECT_TRUE(*to->Seen("kept"));
  // One record of "a" remains, the imported one.
  std::vector<absl::Time> expiries;
  ASSERT_TRUE(to->Dump([&](const DumpEntry& e) {
                  if (e.kind == DumpEntry::Kind::kDedupe &&
                      e.key == test::HexOfIdHash("a")) {
                    expiries.push_back(e.expires_at);
                  }
                  return absl::OkStatus();
                }).ok());
  EXPECT_THAT(expiries, ElementsAre(clock_.Now() + absl::Hours(1)));
  // A store-scoped export has no records to give.
  absl::StatusOr<PartitionSnapshot> back = to->ExportPartition("orders", 0);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_THAT(back->records, IsEmpty());
}

TEST_P(PartitionExportTest, ExpiredAndBadRecordsInASnapshot) {
  std::unique_ptr<Engine> to = Open("to");
  ASSERT_NE(to, nullptr);
  PartitionSnapshot snapshot;
  snapshot.source = "orders";
  snapshot.partition = 2;
  snapshot.offset = 7;
  snapshot.records = {{std::string(KeyView(HashMessageId("old"))),
                       clock_.Now() - absl::Seconds(1), "r"},
                      {std::string(KeyView(HashMessageId("live"))),
                       clock_.Now() + absl::Minutes(5), "r"}};
  ASSERT_TRUE(to->ImportPartition(snapshot).ok());
  EXPECT_FALSE(*to->Seen("old", "orders", 2));
  EXPECT_TRUE(*to->Seen("live", "orders", 2));

  PartitionSnapshot bad = snapshot;
  bad.offset = 8;
  bad.records[0].id_hash = "short";
  EXPECT_EQ(to->ImportPartition(bad).code(),
            absl::StatusCode::kInvalidArgument);
  bad.records[0].id_hash = snapshot.records[0].id_hash;
  bad.records[1].expires_at = absl::InfiniteFuture();
  EXPECT_EQ(to->ImportPartition(bad).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*to->CommittedOffset("orders", 2), 7);  // nothing written
}

// A rewinding import replaces the partition every time: a repeat of an
// earlier import (the same snapshot) after the partition moved on, by
// processing or by ApplyPartitionChanges, moves it back again. Only an
// import without allow_rewind is deduplicated.
TEST_P(PartitionExportTest, RepeatedRewindImportReplacesThePartitionAgain) {
  std::unique_ptr<Engine> from = Open("from");
  std::unique_ptr<Engine> to = Open("to");
  ASSERT_NE(from, nullptr);
  ASSERT_NE(to, nullptr);
  ASSERT_NO_FATAL_FAILURE(Process(*from, {On("a", "orders", 0, 10, "5")}));
  absl::StatusOr<PartitionSnapshot> snapshot =
      from->ExportPartition("orders", 0);
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  const std::string total = PartitionStatePrefix("orders", 0) + "total";

  auto expect_the_snapshot = [&](const char* when) {
    SCOPED_TRACE(when);
    EXPECT_EQ(*to->CommittedOffset("orders", 0), 10);
    EXPECT_EQ(*to->GetState(total), std::optional<std::string>("5"));
    EXPECT_TRUE(*to->Seen("a", "orders", 0));
    EXPECT_FALSE(*to->Seen("later", "orders", 0));
  };
  ASSERT_TRUE(to->ImportPartition(*snapshot, {.allow_rewind = true}).ok());
  expect_the_snapshot("first import");

  // The partition moves on by processing, then the same import again.
  ASSERT_NO_FATAL_FAILURE(Process(*to, {On("later", "orders", 0, 11, "7")}));
  EXPECT_EQ(*to->GetState(total), std::optional<std::string>("12"));
  ASSERT_TRUE(to->ImportPartition(*snapshot, {.allow_rewind = true}).ok());
  expect_the_snapshot("import repeated after processing");

  // The same after ApplyPartitionChanges.
  PartitionChanges changes;
  changes.source = "orders";
  changes.partition = 0;
  changes.offset = 20;
  changes.writes = {{"total", std::optional<std::string>("99")}};
  ASSERT_TRUE(to->ApplyPartitionChanges(changes, {}).ok());
  EXPECT_EQ(*to->CommittedOffset("orders", 0), 20);
  ASSERT_TRUE(to->ImportPartition(*snapshot, {.allow_rewind = true}).ok());
  expect_the_snapshot("import repeated after ApplyPartitionChanges");

  // Without allow_rewind a repeat is still a duplicate that writes nothing.
  absl::StatusOr<Stats> before = to->GetStats();
  ASSERT_TRUE(before.ok());
  ASSERT_TRUE(to->ImportPartition(*snapshot).ok());
  absl::StatusOr<Stats> after = to->GetStats();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->duplicates, before->duplicates + 1);
}

// Offsets a consumer could not resume after: negative ones (broker
// sentinels: -1 is librdkafka's OFFSET_END) and INT64_MAX. Every path that
// stores an offset refuses them and changes nothing.
TEST_P(PartitionExportTest, OffsetsOutsideTheirRangeAreRefusedEverywhere) {
  std::unique_ptr<Engine> to = Open("to");
  ASSERT_NE(to, nullptr);
  ASSERT_NO_FATAL_FAILURE(Process(*to, {On("a", "orders", 0, 10, "5")}));
  for (int64_t bad : {int64_t{-1}, int64_t{-2}, int64_t{-5},
                      std::numeric_limits<int64_t>::min(),
                      std::numeric_limits<int64_t>::max()}) {
    SCOPED_TRACE(bad);
    PartitionSnapshot snapshot;
    snapshot.source = "orders";
    snapshot.partition = 0;
    snapshot.offset = bad;
    EXPECT_EQ(to->ImportPartition(snapshot).code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(to->ImportPartition(snapshot, {.allow_rewind = true}).code(),
              absl::StatusCode::kInvalidArgument);
    PartitionChanges changes;
    changes.source = "orders";
    changes.partition = 0;
    changes.offset = bad;
    EXPECT_EQ(to->ApplyPartitionChanges(changes, {.allow_rewind = true}).code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(to->SetCommittedOffset("orders", 0, bad).code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(*to->CommittedOffset("orders", 0), 10);
  }
  // A message at INT64_MAX is refused too; below it is a real offset.
  Message last = On("last", "orders", 0, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(to->ProcessBatch({last}, AddAmount).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(to->SetCommittedOffset("orders", 0,
                                     std::numeric_limits<int64_t>::max() - 1)
                  .ok());
  EXPECT_TRUE(to->SetCommittedOffset("orders", 0, 0).ok());
  EXPECT_EQ(*to->CommittedOffset("orders", 0), 0);
}

// An import that names a state key or an ID hash twice would silently keep
// one of them; it is refused, as ApplyPartitionChanges refuses it.
TEST_P(PartitionExportTest, RepeatedKeysAndHashesAreRefusedByBothCalls) {
  std::unique_ptr<Engine> to = Open("to");
  ASSERT_NE(to, nullptr);
  const std::string hash(KeyView(HashMessageId("a")));
  PartitionSnapshot snapshot;
  snapshot.source = "orders";
  snapshot.partition = 0;
  snapshot.offset = 3;
  snapshot.entries = {{"k", "1"}, {"k", "2"}};
  EXPECT_EQ(to->ImportPartition(snapshot).code(),
            absl::StatusCode::kInvalidArgument);
  snapshot.entries = {{"k", "1"}};
  snapshot.records = {{hash, clock_.Now() + absl::Minutes(5), "x"},
                      {hash, clock_.Now() + absl::Minutes(6), "y"}};
  EXPECT_EQ(to->ImportPartition(snapshot, {.allow_rewind = true}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*to->CommittedOffset("orders", 0), std::nullopt);  // unchanged

  PartitionChanges changes;
  changes.source = "orders";
  changes.partition = 0;
  changes.offset = 3;
  changes.records = snapshot.records;
  EXPECT_EQ(to->ApplyPartitionChanges(changes, {}).code(),
            absl::StatusCode::kInvalidArgument);
  changes.records.pop_back();
  changes.writes = {{"k", std::nullopt},
                    {"k", std::optional<std::string>("1")}};
  EXPECT_EQ(to->ApplyPartitionChanges(changes, {}).code(),
            absl::StatusCode::kInvalidArgument);
  changes.writes.pop_back();
  EXPECT_TRUE(to->ApplyPartitionChanges(changes, {}).ok());
  EXPECT_EQ(*to->CommittedOffset("orders", 0), 3);
}

INSTANTIATE_TEST_SUITE_P(ExpiryBuckets, PartitionExportTest,
                         ::testing::Values(0, 4));

}  // namespace
}  // namespace idem
