// Engine::ApplyPartitionChanges: changes applied on top of a partition's
// copy (what a standby copy following a changelog applies): state writes and
// deletes, dedupe records added or replacing the ID's record wherever its
// expiry placed it, timers set and deleted, the stream time moved forward,
// expiries kept, the offset moved (back only with allow_rewind), nothing
// of other partitions touched, and bad changes refused with nothing written.

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/clock.h"
#include "idem/engine.h"
#include "idem/partition_state.h"
#include "tests/testing/engine_test_util.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;
using ::testing::SizeIs;

// A 16-byte id_hash: the hash of `id`, as an export gives it.
class PartitionChangesTest : public ::testing::TestWithParam<int> {
 protected:
  // GetParam(): Options::expiry_buckets.
  void SetUp() override {
    Options options;
    options.clock = &clock_;
    options.dedupe_scope = DedupeScope::kPartition;
    options.dedupe_window = absl::Hours(1);
    options.expiry_buckets = GetParam();
    absl::StatusOr<std::unique_ptr<Engine>> engine =
        Engine::Open(dir_.Sub("store"), options);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
  }

  // Processes message `id` at `offset` of orders/`partition`, writing
  // "k"=`id` in the partition, and returns its exported record.
  PartitionRecord ProcessOne(const std::string& id, int32_t partition,
                             int64_t offset) {
    Message m;
    m.id = id;
    m.source = "orders";
    m.partition = partition;
    m.offset = offset;
    absl::StatusOr<Result> result =
        engine_->Process(m, [&](const Message&, Txn& txn) {
          PartitionTxn(txn, "orders", partition).Put("k", id);
          txn.SetResult("r-" + id);
          return absl::OkStatus();
        });
    EXPECT_TRUE(result.ok()) << result.status();
    absl::StatusOr<PartitionSnapshot> snapshot =
        engine_->ExportPartition("orders", partition);
    EXPECT_TRUE(snapshot.ok()) << snapshot.status();
    for (const PartitionRecord& r : snapshot->records) {
      if (r.result == "r-" + id) return r;
    }
    ADD_FAILURE() << "no record of " << id;
    return {};
  }

  PartitionSnapshot Export(int32_t partition) {
    absl::StatusOr<PartitionSnapshot> snapshot =
        engine_->ExportPartition("orders", partition);
    EXPECT_TRUE(snapshot.ok()) << snapshot.status();
    return snapshot.ok() ? *std::move(snapshot) : PartitionSnapshot();
  }

  static PartitionChanges Changes(int32_t partition) {
    PartitionChanges changes;
    changes.source = "orders";
    changes.partition = partition;
    return changes;
  }

  util::TempDir dir_;
  ManualClock clock_{test::kStart};
  std::unique_ptr<Engine> engine_;
};

TEST_P(PartitionChangesTest, WritesDeletesRecordsAndOffsetOnTopOfTheCopy) {
  const PartitionRecord a = ProcessOne("a", 0, 10);
  ProcessOne("other", 1, 3);
  PartitionChanges changes = Changes(0);
  changes.offset = 12;
  changes.writes = {{"k", std::nullopt}, {"n", "1"}};
  PartitionRecord b = a;
  b.id_hash[0] = static_cast<char>(b.id_hash[0] ^ 1);
  b.result = "r-b";
  changes.records = {b};
  ASSERT_TRUE(engine_->ApplyPartitionChanges(changes, {}).ok());

  const PartitionSnapshot after = Export(0);
  EXPECT_EQ(after.offset, 12);
  EXPECT_THAT(after.entries, ElementsAre(Pair("n", "1")));
  ASSERT_THAT(after.records, SizeIs(2));  // "a" kept, b added
  EXPECT_TRUE(*engine_->Seen("a", "orders", 0));
  // Applying the same changes again leaves the same copy.
  ASSERT_TRUE(engine_->ApplyPartitionChanges(changes, {}).ok());
  const PartitionSnapshot again = Export(0);
  EXPECT_EQ(again.entries, after.entries);
  EXPECT_EQ(again.records.size(), after.records.size());
  EXPECT_EQ(again.offset, after.offset);
  // The other partition is untouched.
  const PartitionSnapshot other = Export(1);
  EXPECT_EQ(other.offset, 3);
  EXPECT_THAT(other.entries, ElementsAre(Pair("k", "other")));
}

// A record for an ID the copy has already replaces it, even when its new
// expiry places it elsewhere (another expiry bucket): one record per ID.
TEST_P(PartitionChangesTest, ARecordReplacesTheIdsRecordWhereverItLives) {
  PartitionRecord a = ProcessOne("a", 0, 10);
  a.expires_at += absl::Minutes(50);
  a.result = "r-a-refreshed";
  PartitionChanges changes = Changes(0);
  changes.records = {a};
  ASSERT_TRUE(engine_->ApplyPartitionChanges(changes, {}).ok());
  const PartitionSnapshot after = Export(0);
  ASSERT_THAT(after.records, SizeIs(1));
  EXPECT_EQ(after.records[0].result, "r-a-refreshed");
  EXPECT_EQ(after.records[0].expires_at, a.expires_at);
  // Past the first expiry, the record is still there.
  clock_.Advance(absl::Minutes(70));
  EXPECT_TRUE(*engine_->Seen("a", "orders", 0));
  // An expired record is left out.
  a.expires_at = clock_.Now();
  a.id_hash[0] = static_cast<char>(a.id_hash[0] ^ 1);
  changes.records = {a};
  ASSERT_TRUE(engine_->ApplyPartitionChanges(changes, {}).ok());
  EXPECT_THAT(Export(0).records, SizeIs(1));
}

TEST_P(PartitionChangesTest, TheOffsetMovesBackOnlyWithAllowRewind) {
  ProcessOne("a", 0, 10);
  PartitionChanges back = Changes(0);
  back.offset = 9;
  back.writes = {{"k", "old"}};
  EXPECT_EQ(engine_->ApplyPartitionChanges(back, {}).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Export(0).entries, ElementsAre(Pair("k", "a")));
  ASSERT_TRUE(
      engine_->ApplyPartitionChanges(back, {.allow_rewind = true}).ok());
  EXPECT_EQ(*engine_->CommittedOffset("orders", 0), 9);
  // Without an offset, the offset stays.
  PartitionChanges no_offset = Changes(0);
  no_offset.writes = {{"k", "new"}};
  ASSERT_TRUE(engine_->ApplyPartitionChanges(no_offset, {}).ok());
  EXPECT_EQ(*engine_->CommittedOffset("orders", 0), 9);
  EXPECT_THAT(Export(0).entries, ElementsAre(Pair("k", "new")));
}

TEST_P(PartitionChangesTest, BadChangesAreRefusedWithNothingWritten) {
  ProcessOne("a", 0, 10);
  PartitionChanges twice = Changes(0);
  twice.writes = {{"k", "1"}, {"k", std::nullopt}};
  EXPECT_EQ(engine_->ApplyPartitionChanges(twice, {}).code(),
            absl::StatusCode::kInvalidArgument);
  PartitionChanges short_hash = Changes(0);
  short_hash.records = {PartitionRecord{"short", clock_.Now(), ""}};
  EXPECT_EQ(engine_->ApplyPartitionChanges(short_hash, {}).code(),
            absl::StatusCode::kInvalidArgument);
  PartitionChanges bad_source = Changes(0);
  bad_source.source = "";
  EXPECT_EQ(engine_->ApplyPartitionChanges(bad_source, {}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Export(0).entries, ElementsAre(Pair("k", "a")));

  // Inside a handler.
  Message m;
  m.id = "inside";
  absl::StatusOr<Result> inside =
      engine_->Process(m, [&](const Message&, Txn&) {
        return engine_->ApplyPartitionChanges(Changes(0), {});
      });
  ASSERT_TRUE(inside.ok());
  EXPECT_EQ(inside->error.code(), absl::StatusCode::kFailedPrecondition);
}

// Timers set on top of the copy replace the key's timer (leaving its old
// place in the queue), deletions remove it, the stream time only moves
// forward, and a write's expiry is kept: the value is invisible once it
// passed.
TEST_P(PartitionChangesTest, TimersStreamTimeAndExpiriesOnTopOfTheCopy) {
  ProcessOne("a", 0, 10);
  const absl::Time at = test::kStart + absl::Minutes(5);
  auto timer = [&](TimeDomain domain, absl::Time fire_at) {
    return std::optional<TimerFire>(
        TimerFire{.domain = domain, .fire_at = fire_at, .payload = "p"});
  };
  PartitionChanges set = Changes(0);
  set.timers = {{"close", timer(TimeDomain::kEvent, at)},
                {"remind", timer(TimeDomain::kProcessing, at)}};
  set.stream_time = at - absl::Minutes(1);
  set.writes = {{"session", "open"}};
  set.expires_at = {{"session", test::kStart + absl::Minutes(30)}};
  ASSERT_TRUE(engine_->ApplyPartitionChanges(set, {}).ok());
  PartitionChanges move = Changes(0);
  move.timers = {{"close", timer(TimeDomain::kEvent, at + absl::Minutes(1))},
                 {"remind", std::nullopt}};
  move.stream_time = at - absl::Minutes(2);  // earlier: ignored
  ASSERT_TRUE(engine_->ApplyPartitionChanges(move, {}).ok());

  const PartitionSnapshot after = Export(0);
  ASSERT_THAT(after.timers, SizeIs(1));
  EXPECT_EQ(after.timers[0].timer_key, "close");
  EXPECT_EQ(after.timers[0].fire_at, at + absl::Minutes(1));
  EXPECT_EQ(after.timers[0].payload, "p");
  EXPECT_EQ(after.stream_time, at - absl::Minutes(1));
  EXPECT_THAT(after.expires_at,
              ElementsAre(Pair("session", test::kStart + absl::Minutes(30))));
  absl::StatusOr<std::optional<TimerFire>> next =
      engine_->NextTimer("orders", 0, TimeDomain::kEvent);
  ASSERT_TRUE(next.ok() && next->has_value());
  EXPECT_EQ((*next)->fire_at, at + absl::Minutes(1));
  EXPECT_EQ(*engine_->NextTimer("orders", 0, TimeDomain::kProcessing),
            std::nullopt);
  clock_.Advance(absl::Hours(1));
  EXPECT_EQ(*engine_->GetState(PartitionStatePrefix("orders", 0) + "session"),
            std::nullopt);
}

TEST_P(PartitionChangesTest, BadTimerChangesAreRefused) {
  PartitionChanges infinite = Changes(0);
  infinite.timers = {{"t", TimerFire{.fire_at = absl::InfiniteFuture()}}};
  EXPECT_EQ(engine_->ApplyPartitionChanges(infinite, {}).code(),
            absl::StatusCode::kInvalidArgument);
  PartitionChanges twice = Changes(0);
  twice.timers = {{"t", std::nullopt}, {"t", std::nullopt}};
  EXPECT_EQ(engine_->ApplyPartitionChanges(twice, {}).code(),
            absl::StatusCode::kInvalidArgument);
  PartitionChanges domain = Changes(0);
  domain.timers = {{"t", TimerFire{.domain = static_cast<TimeDomain>(9),
                                   .fire_at = test::kStart}}};
  EXPECT_EQ(engine_->ApplyPartitionChanges(domain, {}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Export(0).timers, SizeIs(0));
}

TEST_P(PartitionChangesTest, RecordsNeedAPartitionScopedStore) {
  Options options;
  options.clock = &clock_;
  options.expiry_buckets = GetParam();
  ASSERT_OPEN(store_scoped, dir_.Sub("store-scoped"), options);
  const PartitionRecord a = ProcessOne("a", 0, 10);
  PartitionChanges changes = Changes(0);
  changes.records = {a};
  EXPECT_EQ(store_scoped->ApplyPartitionChanges(changes, {}).code(),
            absl::StatusCode::kFailedPrecondition);
  changes.records.clear();
  changes.writes = {{"k", "v"}};
  EXPECT_TRUE(store_scoped->ApplyPartitionChanges(changes, {}).ok());
  EXPECT_EQ(*store_scoped->GetState(PartitionStatePrefix("orders", 0) + "k"),
            std::optional<std::string>("v"));
}

INSTANTIATE_TEST_SUITE_P(ExpiryBuckets, PartitionChangesTest,
                         ::testing::Values(0, 4));

}  // namespace
}  // namespace idem
