#include "engine/offset_tracker.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/record.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace idem {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;

using namespace std::string_literals;

// The offsets `tracker` would record, keyed by encoded offset key. Fails the
// test if a key is reported twice.
std::map<std::string, int64_t> Recorded(const OffsetTracker& tracker) {
  std::map<std::string, int64_t> out;
  tracker.ForEach([&](const std::string& key, int64_t offset) {
    EXPECT_TRUE(out.emplace(key, offset).second) << "key reported twice";
  });
  return out;
}

Message At(std::string_view source, int32_t partition, int64_t offset) {
  return Message{
      .id = "id", .source = source, .partition = partition, .offset = offset};
}

TEST(OffsetTrackerTest, EmptyTrackerRecordsNothing) {
  OffsetTracker tracker;
  EXPECT_THAT(Recorded(tracker), IsEmpty());
}

TEST(OffsetTrackerTest, RecordsHighestProcessedOrDuplicateOffset) {
  OffsetTracker tracker;
  tracker.Add(At("t", 0, 3), Outcome::kProcessed);
  tracker.Add(At("t", 0, 9), Outcome::kDuplicate);
  tracker.Add(At("t", 0, 5), Outcome::kProcessed);
  EXPECT_THAT(Recorded(tracker), ElementsAre(Pair(EncodeOffsetKey("t", 0), 9)));
}

TEST(OffsetTrackerTest, DuplicateAloneAdvancesTheOffset) {
  OffsetTracker tracker;
  tracker.Add(At("t", 0, 4), Outcome::kDuplicate);
  EXPECT_THAT(Recorded(tracker), ElementsAre(Pair(EncodeOffsetKey("t", 0), 4)));
}

TEST(OffsetTrackerTest, RecordsOffsetZero) {
  OffsetTracker tracker;
  tracker.Add(At("t", 0, 0), Outcome::kProcessed);
  EXPECT_THAT(Recorded(tracker), ElementsAre(Pair(EncodeOffsetKey("t", 0), 0)));
}

TEST(OffsetTrackerTest, StopsBelowTheFirstFailure) {
  OffsetTracker tracker;
  tracker.Add(At("t", 0, 1), Outcome::kProcessed);
  tracker.Add(At("t", 0, 2), Outcome::kProcessed);
  tracker.Add(At("t", 0, 3), Outcome::kFailed);
  tracker.Add(At("t", 0, 4), Outcome::kProcessed);
  tracker.Add(At("t", 0, 5), Outcome::kDuplicate);
  EXPECT_THAT(Recorded(tracker), ElementsAre(Pair(EncodeOffsetKey("t", 0), 2)));
}

TEST(OffsetTrackerTest, UsesTheLowestFailedOffsetOfSeveral) {
  OffsetTracker tracker;
  tracker.Add(At("t", 0, 1), Outcome::kProcessed);
  tracker.Add(At("t", 0, 6), Outcome::kFailed);
  tracker.Add(At("t", 0, 3), Outcome::kProcessed);
  tracker.Add(At("t", 0, 4), Outcome::kFailed);
  tracker.Add(At("t", 0, 5), Outcome::kProcessed);
  EXPECT_THAT(Recorded(tracker), ElementsAre(Pair(EncodeOffsetKey("t", 0), 3)));
}

TEST(OffsetTrackerTest, NeverRecordsPastAFailureEvenIfSuccessCameFirst) {
  // A later-offset success followed (in batch order) by an earlier-offset
  // failure: recording 7 would skip the failed offset 5 on resume.
  OffsetTracker tracker;
  tracker.Add(At("t", 0, 7), Outcome::kProcessed);
  tracker.Add(At("t", 0, 5), Outcome::kFailed);
  EXPECT_THAT(Recorded(tracker), IsEmpty());
}

TEST(OffsetTrackerTest, FailureAtFirstOffsetRecordsNothing) {
  OffsetTracker tracker;
  tracker.Add(At("t", 0, 0), Outcome::kFailed);
  tracker.Add(At("t", 0, 1), Outcome::kProcessed);
  EXPECT_THAT(Recorded(tracker), IsEmpty());
}

TEST(OffsetTrackerTest, OnlyFailuresRecordNothing) {
  OffsetTracker tracker;
  tracker.Add(At("t", 0, 10), Outcome::kFailed);
  EXPECT_THAT(Recorded(tracker), IsEmpty());
}

TEST(OffsetTrackerTest, FailureOnlyHoldsBackItsOwnPartition) {
  OffsetTracker tracker;
  tracker.Add(At("t", 0, 1), Outcome::kFailed);
  tracker.Add(At("t", 0, 2), Outcome::kProcessed);
  tracker.Add(At("t", 1, 2), Outcome::kProcessed);
  tracker.Add(At("u", 0, 8), Outcome::kProcessed);
  EXPECT_THAT(Recorded(tracker), ElementsAre(Pair(EncodeOffsetKey("t", 1), 2),
                                             Pair(EncodeOffsetKey("u", 0), 8)));
}

TEST(OffsetTrackerTest, PartitionsAndSourcesAreIndependent) {
  OffsetTracker tracker;
  tracker.Add(At("t", 0, 5), Outcome::kProcessed);
  tracker.Add(At("t", 1, 50), Outcome::kProcessed);
  tracker.Add(At("u", 0, 500), Outcome::kDuplicate);
  tracker.Add(At("t", 0, 6), Outcome::kProcessed);
  EXPECT_THAT(Recorded(tracker),
              ElementsAre(Pair(EncodeOffsetKey("t", 0), 6),
                          Pair(EncodeOffsetKey("t", 1), 50),
                          Pair(EncodeOffsetKey("u", 0), 500)));
}

TEST(OffsetTrackerTest, SourcesDifferingOnlyAfterNulAreDistinct) {
  OffsetTracker tracker;
  const std::string a = "s\0a"s;
  const std::string b = "s\0b"s;
  tracker.Add(At(a, 0, 1), Outcome::kProcessed);
  tracker.Add(At(b, 0, 2), Outcome::kProcessed);
  EXPECT_THAT(Recorded(tracker), ElementsAre(Pair(EncodeOffsetKey(a, 0), 1),
                                             Pair(EncodeOffsetKey(b, 0), 2)));
}

TEST(OffsetTrackerTest, IgnoresMessagesWithoutAPosition) {
  OffsetTracker tracker;
  tracker.Add(At("", 0, 5), Outcome::kProcessed);
  tracker.Add(At("t", 0, -1), Outcome::kProcessed);
  tracker.Add(At("t", 0, -7), Outcome::kDuplicate);
  EXPECT_THAT(Recorded(tracker), IsEmpty());
}

TEST(OffsetTrackerTest, FailureWithoutAPositionHoldsNothingBack) {
  OffsetTracker tracker;
  tracker.Add(At("t", 0, -1), Outcome::kFailed);
  tracker.Add(At("", 0, 0), Outcome::kFailed);
  tracker.Add(At("t", 0, 4), Outcome::kProcessed);
  EXPECT_THAT(Recorded(tracker), ElementsAre(Pair(EncodeOffsetKey("t", 0), 4)));
}

TEST(OffsetTrackerTest, RecordsInt64MaxOffset) {
  OffsetTracker tracker;
  tracker.Add(At("t", 0, std::numeric_limits<int64_t>::max()),
              Outcome::kProcessed);
  EXPECT_THAT(Recorded(tracker),
              ElementsAre(Pair(EncodeOffsetKey("t", 0),
                               std::numeric_limits<int64_t>::max())));
}

TEST(OffsetTrackerTest, RepeatedOffsetIsRecordedOnce) {
  OffsetTracker tracker;
  tracker.Add(At("t", 2, 11), Outcome::kProcessed);
  tracker.Add(At("t", 2, 11), Outcome::kDuplicate);
  EXPECT_THAT(Recorded(tracker),
              ElementsAre(Pair(EncodeOffsetKey("t", 2), 11)));
}

// Runs of one partition share an entry, and new partitions grow the map
// between runs (rehashing it): each partition still gets its own offsets.
TEST(OffsetTrackerTest, RunsOfPartitionsBetweenNewOnesAreEachRecorded) {
  OffsetTracker tracker;
  std::map<std::string, int64_t> expected;
  for (int32_t partition = 0; partition < 64; ++partition) {
    for (int64_t offset = 0; offset < 3; ++offset) {
      tracker.Add(At("t", partition, partition * 10 + offset),
                  Outcome::kProcessed);
      tracker.Add(At("t", 0, 1000 + partition * 10 + offset),
                  offset == 1 && partition == 63 ? Outcome::kFailed
                                                 : Outcome::kProcessed);
    }
    expected[EncodeOffsetKey("t", partition)] = partition * 10 + 2;
  }
  // Partition 0's lowest failure (1631) holds it below it.
  expected[EncodeOffsetKey("t", 0)] = 1630;
  std::map<std::string, int64_t> recorded;
  tracker.ForEach(
      [&](const std::string& key, int64_t offset) { recorded[key] = offset; });
  EXPECT_EQ(recorded, expected);
}

// The commit reads these stored offsets before any handler runs, so every
// key ForEach can report must be among them.
TEST(OffsetTrackerTest, OffsetKeysAreTheDistinctPartitionsWithAPosition) {
  const std::vector<Message> messages = {
      At("t", 1, 4),  At("t", 0, 2), At("t", 1, 5), At("", 3, 1),
      At("t", 2, -1), At("u", 0, 0), At("t", 0, 9)};
  EXPECT_THAT(OffsetTracker::OffsetKeys(messages),
              ElementsAre(EncodeOffsetKey("t", 1), EncodeOffsetKey("t", 0),
                          EncodeOffsetKey("u", 0)));
  EXPECT_THAT(OffsetTracker::OffsetKeys({}), IsEmpty());
}

}  // namespace
}  // namespace idem
