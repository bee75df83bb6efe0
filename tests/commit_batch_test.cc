#include "engine/commit_batch.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "absl/time/time.h"
#include "engine/record.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rocksdb/comparator.h"

namespace idem {
namespace {

using ::testing::ElementsAre;
using ::testing::Optional;

// A column family handle with only a name and an ID: enough for building a
// WriteBatch, which records families by ID.
class FakeFamily : public rocksdb::ColumnFamilyHandle {
 public:
  FakeFamily(std::string name, uint32_t id) : name_(std::move(name)), id_(id) {}
  const std::string& GetName() const override { return name_; }
  uint32_t GetID() const override { return id_; }
  rocksdb::Status GetDescriptor(rocksdb::ColumnFamilyDescriptor*) override {
    return rocksdb::Status::NotSupported();
  }
  const rocksdb::Comparator* GetComparator() const override {
    return rocksdb::BytewiseComparator();
  }

 private:
  const std::string name_;
  const uint32_t id_;
};

// One WriteBatch entry: "put" or "delete", family ID, key.
using Entry = std::tuple<std::string, uint32_t, std::string>;

std::vector<Entry> Entries(const rocksdb::WriteBatch& batch) {
  struct Collect : rocksdb::WriteBatch::Handler {
    std::vector<Entry> entries;
    rocksdb::Status PutCF(uint32_t cf, const rocksdb::Slice& key,
                          const rocksdb::Slice&) override {
      entries.emplace_back("put", cf, key.ToString());
      return rocksdb::Status::OK();
    }
    rocksdb::Status DeleteCF(uint32_t cf, const rocksdb::Slice& key) override {
      entries.emplace_back("delete", cf, key.ToString());
      return rocksdb::Status::OK();
    }
  } collect;
  EXPECT_TRUE(batch.Iterate(&collect).ok());
  return collect.entries;
}

std::string Key(const DedupeKey& key) { return std::string(KeyView(key)); }

class CommitBuilderTest : public ::testing::Test {
 protected:
  FakeFamily state_{"idem.state", 1};
  FakeFamily offsets_{"idem.offsets", 2};
  FakeFamily dedupe_{"idem.dedupe", 3};
  FakeFamily bucket_{"idem.dedupe.until.100", 4};
  FakeFamily outbox_{"idem.outbox", 5};
};

TEST_F(CommitBuilderTest, BuildsSortedStateThenRecordsPerFamilyThenOffsets) {
  CommitBuilder commit(&state_, &offsets_);
  commit.state().Put("b", "2");
  commit.state().Delete("a");
  const DedupeKey x = HashMessageId("x"), y = HashMessageId("y"),
                  z = HashMessageId("z");
  commit.AddRecord(&bucket_, z, "v");
  commit.AddRecord(&dedupe_, y, "v");
  commit.AddRecord(&dedupe_, x, "v");
  commit.AddOutcome(
      Message{.id = "x", .source = "t", .partition = 0, .offset = 7},
      Outcome::kProcessed);
  rocksdb::WriteBatch batch;
  ASSERT_TRUE(commit.Build(StoredOffsets(), OutboxCursor(), batch, batch).ok());
  // Records go in the bytewise order of their keys, the order of the
  // family's comparator.
  const std::string first = std::min(Key(x), Key(y));
  const std::string second = std::max(Key(x), Key(y));
  EXPECT_THAT(Entries(batch),
              ElementsAre(Entry("delete", 1, "a"), Entry("put", 1, "b"),
                          Entry("put", 3, first), Entry("put", 3, second),
                          Entry("put", 4, Key(z)),
                          Entry("put", 2, EncodeOffsetKey("t", 0))));
}

// EngineHooks::split_commit writes the records in a second WriteBatch.
TEST_F(CommitBuilderTest, PutsRecordsInTheBatchGivenForThem) {
  CommitBuilder commit(&state_, &offsets_);
  commit.state().Put("a", "1");
  const DedupeKey x = HashMessageId("x");
  commit.AddRecord(&dedupe_, x, "v");
  rocksdb::WriteBatch batch, records;
  ASSERT_TRUE(
      commit.Build(StoredOffsets(), OutboxCursor(), batch, records).ok());
  EXPECT_THAT(Entries(batch), ElementsAre(Entry("put", 1, "a")));
  EXPECT_THAT(Entries(records), ElementsAre(Entry("put", 3, Key(x))));
}

TEST_F(CommitBuilderTest, LeavesOutOffsetsNotAboveTheStoredOnes) {
  CommitBuilder commit(&state_, &offsets_);
  commit.AddOutcome(
      Message{.id = "x", .source = "t", .partition = 0, .offset = 5},
      Outcome::kDuplicate);
  commit.AddOutcome(
      Message{.id = "y", .source = "t", .partition = 1, .offset = 5},
      Outcome::kProcessed);
  StoredOffsets stored = {{EncodeOffsetKey("t", 0), 5},
                          {EncodeOffsetKey("t", 1), 4}};
  rocksdb::WriteBatch batch;
  ASSERT_TRUE(commit.Build(stored, OutboxCursor(), batch, batch).ok());
  EXPECT_THAT(Entries(batch),
              ElementsAre(Entry("put", 2, EncodeOffsetKey("t", 1))));
}

// Emits go last, at the positions after the cursor's, in the order they
// were added, followed by the cursor that records them as issued.
TEST_F(CommitBuilderTest, AppendsEmitsAtTheNextPositionsThenTheCursor) {
  CommitBuilder commit(&state_, &offsets_, &outbox_);
  commit.state().Put("a", "1");
  const DedupeKey x = HashMessageId("x");
  const DedupeKey y = HashMessageId("y");
  std::vector<Emitted> of_x(2);
  of_x[0].destination = of_x[1].destination = "out";
  of_x[1].headers = {{"h", "v"}};
  std::vector<Emitted> of_y(1);
  of_y[0].destination = "other";
  commit.AddEmits(RecordKey::ForStore(x), of_x);
  commit.AddEmits(RecordKey::ForStore(y), of_y);
  EXPECT_EQ(commit.emitted(), 3u);
  rocksdb::WriteBatch batch;
  ASSERT_TRUE(
      commit.Build(StoredOffsets(), OutboxCursor{7, 5}, batch, batch).ok());
  EXPECT_THAT(Entries(batch), ElementsAre(Entry("put", 1, "a"),
                                          Entry("put", 5, EncodeOutboxKey(8)),
                                          Entry("put", 5, EncodeOutboxKey(9)),
                                          Entry("put", 5, EncodeOutboxKey(10)),
                                          Entry("put", 5, EncodeOutboxKey(0))));
  // Without emits the outbox is untouched; without a family, emits fail.
  CommitBuilder quiet(&state_, &offsets_, &outbox_);
  rocksdb::WriteBatch empty;
  ASSERT_TRUE(
      quiet.Build(StoredOffsets(), OutboxCursor{7, 5}, empty, empty).ok());
  EXPECT_EQ(empty.Count(), 0u);
  CommitBuilder no_outbox(&state_, &offsets_);
  no_outbox.AddEmits(RecordKey::ForStore(x), of_y);
  rocksdb::WriteBatch refused;
  EXPECT_EQ(
      no_outbox.Build(StoredOffsets(), OutboxCursor(), refused, refused).code(),
      absl::StatusCode::kInternal);
}

TEST(PlaceRecordsTest, RoundsTheTtlUpAndPlacesInTheBucketOfTheExpiry) {
  Options options;
  options.dedupe_window = absl::Seconds(40);
  options.expiry_buckets = 4;  // width 10 s
  const int64_t now = 1'000'000'000;
  const std::vector<Message> messages = {
      Message{.id = "a"}, Message{.id = "b", .ttl = absl::Nanoseconds(1500)},
      Message{.id = "c", .ttl = absl::Hours(1)}};
  const RecordPlacements p = PlaceRecords(options, messages, now);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].expiry_micros, now + 40'000'000);
  EXPECT_THAT(p[0].bucket_end, Optional(now + 50'000'000));
  EXPECT_EQ(p[1].expiry_micros, now + 2);
  EXPECT_THAT(p[1].bucket_end, Optional(now + 10'000'000));
  // Beyond the newest bucket: idem.dedupe.
  EXPECT_EQ(p[2].bucket_end, std::nullopt);
}

TEST(PlaceRecordsTest, KeepsWholeMicrosecondsAndSaturatesHugeTtls) {
  Options options;
  const int64_t now = 1'000'000'000;
  const std::vector<Message> messages = {
      Message{.id = "a", .ttl = absl::Microseconds(7)},
      Message{.id = "b", .ttl = absl::Nanoseconds(1)},
      Message{.id = "c", .ttl = absl::InfiniteDuration()},
      Message{.id = "d", .ttl = absl::Hours(24 * 365) * 1'000'000}};
  const RecordPlacements p = PlaceRecords(options, messages, now);
  ASSERT_EQ(p.size(), 4u);
  EXPECT_EQ(p[0].expiry_micros, now + 7);
  EXPECT_EQ(p[1].expiry_micros, now + 1);
  EXPECT_EQ(p[2].expiry_micros, std::numeric_limits<int64_t>::max());
  EXPECT_EQ(p[3].expiry_micros, std::numeric_limits<int64_t>::max());
}

TEST(PlaceRecordsTest, PlacesEveryRecordInIdemDedupeWithoutBuckets) {
  Options options;
  options.dedupe_window = absl::Seconds(40);
  const std::vector<Message> messages = {Message{.id = "a"}};
  const RecordPlacements p = PlaceRecords(options, messages, 0);
  EXPECT_EQ(p[0].expiry_micros, 40'000'000);
  EXPECT_EQ(p[0].bucket_end, std::nullopt);
}

}  // namespace
}  // namespace idem
