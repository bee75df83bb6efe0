// The changelog's record format (kafka/changelog_format.h) and what a restore
// makes of a changelog partition (kafka/changelog_image.h), without Kafka:
// only complete commits count, a half-published commit's keys are orphans,
// and a dedupe record counts only if its commit is complete.

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "engine/record.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kafka/changelog_format.h"
#include "kafka/changelog_image.h"

namespace idem::kafka {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Optional;
using ::testing::Pair;

const absl::Time kNow = absl::FromUnixSeconds(1'800'000'000);

// Owns the bytes a LogRecord points to.
struct Stored {
  std::string key;
  std::optional<std::string> value;
  std::string mark;
  int64_t offset = 0;

  LogRecord View() const {
    LogRecord record;
    record.record.topic = "log";
    record.record.offset = offset;
    record.record.key = key;
    if (value.has_value()) record.record.value = *value;
    record.tombstone = !value.has_value();
    if (!mark.empty()) record.record.headers = {{kChangelogMarkHeader, mark}};
    return record;
  }
};

class ChangelogImageTest : public ::testing::Test {
 protected:
  void State(const std::string& key, std::optional<std::string> value,
             ChangelogMark mark = {}) {
    Add(Stored{StateRecordKey(key), std::move(value), EncodeMark(mark)});
  }
  void Offset(ChangelogMark mark) {
    Add(Stored{OffsetRecordKey(mark.epoch), absl::StrCat(mark.offset),
               EncodeMark(mark)});
  }
  void Dedupe(const std::string& id, absl::Time expires, ChangelogMark mark) {
    Stored s{DedupeKeyToHex(KeyView(HashMessageId(id))),
             EncodeDedupeValue(expires, "r-" + id), EncodeMark(mark)};
    ASSERT_TRUE(builder_.AddDedupeRecord(s.View()).ok());
  }
  void Add(const Stored& s) {
    ASSERT_TRUE(builder_.AddChangelogRecord(s.View()).ok()) << s.key;
  }
  static std::vector<std::string> Results(const ChangelogChanges& changes) {
    std::vector<std::string> results;
    for (const PartitionRecord& r : changes.records) {
      results.push_back(r.result);
    }
    std::sort(results.begin(), results.end());
    return results;
  }

  ChangelogImageBuilder builder_;
};

TEST(ChangelogFormatTest, MarksKeysAndValuesRoundTrip) {
  EXPECT_EQ(DecodeMark(EncodeMark({3, 41})), (ChangelogMark{3, 41}));
  EXPECT_EQ(DecodeMark("0 -1"), (ChangelogMark{0, -1}));
  for (const char* bad : {"", "1", "1 2 3", "-1 2", "01 2", "1 -2", "1 +2",
                          "a b", "1  2", "99999999999999999999 1"}) {
    EXPECT_EQ(DecodeMark(bad), std::nullopt) << bad;
  }
  const std::string state_key = StateRecordKey("k/1");  // the views' bytes
  std::optional<ChangelogKey> key = DecodeChangelogKey(state_key);
  ASSERT_TRUE(key.has_value());
  EXPECT_EQ(key->kind, ChangelogKey::Kind::kState);
  EXPECT_EQ(key->state_key, "k/1");
  const std::string offset_key = OffsetRecordKey(12);
  key = DecodeChangelogKey(offset_key);
  ASSERT_TRUE(key.has_value());
  EXPECT_EQ(key->kind, ChangelogKey::Kind::kOffset);
  EXPECT_EQ(key->epoch, 12);
  EXPECT_EQ(DecodeChangelogKey("x/1"), std::nullopt);
  EXPECT_EQ(DecodeChangelogKey("o/x"), std::nullopt);
  const std::string encoded = EncodeDedupeValue(kNow, "result");
  std::optional<DedupeValue> value = DecodeDedupeValue(encoded);
  ASSERT_TRUE(value.has_value());
  EXPECT_EQ(value->expires_at, kNow);
  EXPECT_EQ(value->result, "result");
  EXPECT_EQ(DecodeDedupeValue("short"), std::nullopt);
  EXPECT_EQ(DedupeTopicOf("orders.changelog"), "orders.changelog.dedupe");
}

// Records carry a format version; a record without one is version 1 (the
// other tests' records have none). A newer version is refused as a
// precondition naming the version, never read as if it were this build's.
TEST_F(ChangelogImageTest, FormatVersionNewerThanThisBuildIsRefusedNamingIt) {
  Stored current{StateRecordKey("a"), "1", EncodeMark({0, 5}), 7};
  LogRecord record = current.View();
  record.record.headers.emplace_back(kChangelogVersionHeader,
                                     kChangelogFormatVersionText);
  EXPECT_TRUE(builder_.AddChangelogRecord(record).ok());

  const std::string future = absl::StrCat(kChangelogFormatVersion + 1);
  record.record.headers.back().second = future;
  absl::Status refused = builder_.AddChangelogRecord(record);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
  EXPECT_THAT(refused.message(),
              ::testing::HasSubstr(absl::StrCat("format version ", future)));
  EXPECT_THAT(refused.message(), ::testing::HasSubstr("log/0@7"));
  Stored dedupe{DedupeKeyToHex(KeyView(HashMessageId("m"))),
                EncodeDedupeValue(kNow, "r"), EncodeMark({0, 5}), 8};
  LogRecord dedupe_record = dedupe.View();
  dedupe_record.record.headers.emplace_back(kChangelogVersionHeader, future);
  EXPECT_EQ(builder_.AddDedupeRecord(dedupe_record).code(),
            absl::StatusCode::kFailedPrecondition);

  for (const char* bad : {"0", "x", "-1", "01", ""}) {
    record.record.headers.back().second = bad;
    EXPECT_EQ(builder_.AddChangelogRecord(record).code(),
              absl::StatusCode::kDataLoss)
        << bad;
  }
  EXPECT_EQ(DecodeFormatVersion("1"), 1);
  EXPECT_EQ(DecodeFormatVersion("0"), std::nullopt);
}

TEST_F(ChangelogImageTest, AnEmptyChangelogHasNoLastCommit) {
  ChangelogChanges changes = builder_.TakeChanges(kNow);
  EXPECT_EQ(changes.last, std::nullopt);
  EXPECT_EQ(builder_.Last(), std::nullopt);
  EXPECT_THAT(changes.writes, IsEmpty());
}

// Changes join the state when their commit's offset record arrives;
// tombstones delete; the changes after the last one are orphans.
TEST_F(ChangelogImageTest, OnlyCompleteCommitsCount) {
  State("a", "1");
  State("b", "1");
  Offset({0, 5});
  State("a", "2");
  State("b", std::nullopt);
  Offset({0, 6});
  State("c", "half");  // the next commit, never finished
  State("a", "half");
  ChangelogChanges changes = builder_.TakeChanges(kNow);
  ASSERT_TRUE(changes.last.has_value());
  EXPECT_EQ(*changes.last, (ChangelogMark{0, 6}));
  EXPECT_THAT(changes.writes, ElementsAre(Pair("a", Optional(std::string("2"))),
                                          Pair("b", std::nullopt)));
  EXPECT_THAT(builder_.Orphans(), ElementsAre("a", "c"));
  EXPECT_EQ(changes.records_read, 8);
}

// A dedupe record counts only if its epoch's last offset covers it; expired
// ones are left out; the latest of an ID wins.
TEST_F(ChangelogImageTest, DedupeRecordsOfIncompleteCommitsAreLeftOut) {
  const absl::Time live = kNow + absl::Hours(1);
  Dedupe("a", live, {0, 5});
  Dedupe("b", live, {0, 7});  // epoch 0 ended at 6: never complete
  Dedupe("c", kNow, {0, 4});  // expired
  Dedupe("d", live, {2, 9});  // an epoch with no offset record
  Dedupe("e", live, {1, 8});
  State("x", "1");
  Offset({0, 6});
  Offset({1, 8});
  ChangelogChanges changes = builder_.TakeChanges(kNow);
  EXPECT_THAT(Results(changes), ElementsAre("r-a", "r-e"));
  for (const PartitionRecord& r : changes.records) {
    EXPECT_EQ(r.id_hash.size(), 16u);
    EXPECT_EQ(r.expires_at, live);
  }
}

// Taken as they complete (a standby copy's way), the changes hand out each
// commit once when its offset record arrives, deletes as nullopt; a dedupe
// record waits for its commit; the orphans are the writes after the last
// offset record.
TEST_F(ChangelogImageTest, ChangesAreTakenAsTheirCommitsComplete) {
  const absl::Time live = kNow + absl::Hours(1);
  State("a", "1", {0, 5});
  Dedupe("x", live, {0, 5});
  Dedupe("y", live, {0, 6});  // its commit is not complete yet
  Offset({0, 5});
  const ChangelogChanges first = builder_.TakeChanges(kNow);
  EXPECT_EQ(first.last, (ChangelogMark{0, 5}));
  EXPECT_THAT(first.writes, ElementsAre(Pair("a", Optional(std::string("1")))));
  EXPECT_THAT(Results(first), ElementsAre("r-x"));
  EXPECT_EQ(first.records_read, 4);

  State("a", std::nullopt, {0, 6});
  State("b", "2", {0, 6});
  EXPECT_THAT(builder_.Orphans(), ElementsAre("a", "b"));
  const ChangelogChanges between = builder_.TakeChanges(kNow);
  EXPECT_EQ(between.last, (ChangelogMark{0, 5}));
  EXPECT_THAT(between.writes, IsEmpty());
  EXPECT_THAT(between.records, IsEmpty());

  Offset({0, 6});
  State("c", "half", {0, 7});
  const ChangelogChanges second = builder_.TakeChanges(kNow);
  EXPECT_EQ(second.last, (ChangelogMark{0, 6}));
  EXPECT_THAT(second.writes,
              ElementsAre(Pair("a", std::nullopt),
                          Pair("b", Optional(std::string("2")))));
  EXPECT_THAT(Results(second), ElementsAre("r-y"));
  EXPECT_EQ(second.records_read, 2);
  EXPECT_THAT(builder_.Orphans(), ElementsAre("c"));
}

// A zombie: the owner of epoch 1 lost the partition to epoch 2's owner and
// still published a commit afterwards. Its writes and dedupe records
// complete nothing after epoch 2's mark; its keys are orphans (the next
// owner publishes their values again).
TEST_F(ChangelogImageTest, ZombieEpochCompletesNothingAfterANewOwnersMark) {
  const absl::Time live = kNow + absl::Hours(1);
  State("a", "1", {1, 5});
  Offset({1, 5});
  Offset({2, 5});  // the new owner's first mark: epoch 1 is over
  State("a", "2", {2, 6});
  Dedupe("new", live, {2, 6});
  Offset({2, 6});
  State("a", "stale", {1, 7});
  State("b", "stale", {1, 7});
  Dedupe("zombie", live, {1, 7});
  Offset({1, 7});
  State("c", "3", {2, 7});
  Offset({2, 7});
  const ChangelogChanges changes = builder_.TakeChanges(kNow);
  EXPECT_EQ(changes.last, (ChangelogMark{2, 7}));
  EXPECT_THAT(changes.writes,
              ElementsAre(Pair("a", Optional(std::string("2"))),
                          Pair("c", Optional(std::string("3")))));
  EXPECT_THAT(Results(changes), ElementsAre("r-new"));
  EXPECT_EQ(changes.stale_records, 4);  // two writes, a mark, a dedupe
  EXPECT_THAT(builder_.Orphans(), ElementsAre("a", "b"));
  // A complete commit that writes a key again makes it whole.
  State("a", "4", {2, 8});
  State("b", std::nullopt, {2, 8});
  Offset({2, 8});
  EXPECT_THAT(builder_.Orphans(), IsEmpty());
}

// A new owner's first mark ends the epoch before it, and that epoch's
// unfinished commit with it: its writes are orphans, not completed by the
// new owner's mark (the new owner sets them back in its first commit).
TEST_F(ChangelogImageTest, ANewEpochsMarkDropsTheOldEpochsUnfinishedCommit) {
  State("a", "1", {1, 5});
  Offset({1, 5});
  State("a", "half", {1, 6});  // killed before its mark
  State("a", "1", {2, 5});     // the new owner sets it back
  Offset({2, 5});
  EXPECT_THAT(builder_.TakeChanges(kNow).writes,
              ElementsAre(Pair("a", Optional(std::string("1")))));
  EXPECT_THAT(builder_.Orphans(), IsEmpty());
}

TEST_F(ChangelogImageTest, UndecodableRecordsAreDataLoss) {
  EXPECT_EQ(builder_.AddChangelogRecord(Stored{"q/1", "v"}.View()).code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(builder_.AddChangelogRecord(Stored{"o/1", "x"}.View()).code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(
      builder_.AddChangelogRecord(Stored{"o/1", std::nullopt}.View()).code(),
      absl::StatusCode::kDataLoss);
  const std::string hex = DedupeKeyToHex(KeyView(HashMessageId("a")));
  const std::string value = EncodeDedupeValue(kNow, "");
  EXPECT_EQ(builder_.AddDedupeRecord(Stored{"zz", value, "0 1"}.View()).code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(builder_.AddDedupeRecord(Stored{hex, value, ""}.View()).code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(builder_.AddDedupeRecord(Stored{hex, "short", "0 1"}.View()).code(),
            absl::StatusCode::kDataLoss);
  EXPECT_TRUE(builder_.AddDedupeRecord(Stored{hex, value, "0 1"}.View()).ok());
}

}  // namespace
}  // namespace idem::kafka
