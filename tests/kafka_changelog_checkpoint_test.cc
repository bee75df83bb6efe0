// CheckpointTracker (kafka/changelog_checkpoint.h) without Kafka: a
// revocation's checkpoint is given only when the relay's reports account for
// every changelog record up to the high watermark; and the checkpoint's text.

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/outbox.h"
#include "kafka/changelog_checkpoint.h"
#include "kafka/changelog_format.h"

namespace idem::kafka {
namespace {

constexpr char kCheckpointChangelog[] = "orders-state";

OutboxEntry StateEntry(int32_t partition, const std::string& key) {
  OutboxEntry entry;
  entry.destination = kCheckpointChangelog;
  entry.partition = partition;
  entry.key = StateRecordKey(key);
  entry.value = "1";
  return entry;
}

OutboxEntry MarkEntry(int32_t partition, int64_t epoch, int64_t offset) {
  OutboxEntry entry;
  entry.destination = kCheckpointChangelog;
  entry.partition = partition;
  entry.key = OffsetRecordKey(epoch);
  entry.value = absl::StrCat(offset);
  return entry;
}

std::vector<const OutboxEntry*> Pointers(const std::vector<OutboxEntry>& e) {
  std::vector<const OutboxEntry*> pointers;
  for (const OutboxEntry& entry : e) pointers.push_back(&entry);
  return pointers;
}

// Partition 0 verified at changelog offset 10; one commit of epoch 7 at
// input offset 41 published: a state record and its mark.
class CheckpointTrackerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tracker_.Verified(0, 10);
    published_ = {StateEntry(0, "total"), MarkEntry(0, 7, 41)};
  }

  CheckpointTracker tracker_{kCheckpointChangelog};
  std::vector<OutboxEntry> published_;
};

TEST_F(CheckpointTrackerTest, EveryRecordCountedGivesTheHighWatermark) {
  tracker_.NotePublished(Pointers(published_), /*complete=*/true,
                         /*transaction=*/false);
  EXPECT_EQ(tracker_.Checkpoint(0, {7, 41}, 12),
            (ChangelogCheckpoint{{7, 41}, 12}));
  // The engine's last commit must be the mark published last.
  EXPECT_EQ(tracker_.Checkpoint(0, {7, 42}, 12), std::nullopt);
  EXPECT_EQ(tracker_.Checkpoint(0, {8, 41}, 12), std::nullopt);
}

TEST_F(CheckpointTrackerTest, ARecordOfSomeoneElseMeansNoCheckpoint) {
  tracker_.NotePublished(Pointers(published_), true, false);
  EXPECT_EQ(tracker_.Checkpoint(0, {7, 41}, 13), std::nullopt);
}

TEST_F(CheckpointTrackerTest, AFailedRoundMeansNoCheckpointUntilVerified) {
  tracker_.NotePublished(Pointers(published_), true, false);
  tracker_.NotePublished({}, /*complete=*/false, false);
  EXPECT_EQ(tracker_.Checkpoint(0, {7, 41}, 12), std::nullopt);
  tracker_.Verified(0, 12);
  std::vector<OutboxEntry> next = {MarkEntry(0, 7, 42)};
  tracker_.NotePublished(Pointers(next), true, false);
  EXPECT_EQ(tracker_.Checkpoint(0, {7, 42}, 13),
            (ChangelogCheckpoint{{7, 42}, 13}));
}

TEST_F(CheckpointTrackerTest, ATransactionCountsItsMarker) {
  tracker_.NotePublished(Pointers(published_), true, /*transaction=*/true);
  EXPECT_EQ(tracker_.Checkpoint(0, {7, 41}, 12), std::nullopt);
  EXPECT_EQ(tracker_.Checkpoint(0, {7, 41}, 13),
            (ChangelogCheckpoint{{7, 41}, 13}));
}

TEST_F(CheckpointTrackerTest, AWriteAfterTheLastMarkMeansNoCheckpoint) {
  published_.push_back(StateEntry(0, "total"));
  tracker_.NotePublished(Pointers(published_), true, false);
  EXPECT_EQ(tracker_.Checkpoint(0, {7, 41}, 13), std::nullopt);
}

TEST_F(CheckpointTrackerTest, OtherTopicsAndForgottenPartitionsDoNotCount) {
  OutboxEntry output = StateEntry(0, "x");
  output.destination = "ledger";
  published_.push_back(output);
  published_.push_back(MarkEntry(1, 7, 5));  // partition 1 is not verified
  tracker_.NotePublished(Pointers(published_), true, false);
  EXPECT_EQ(tracker_.Checkpoint(0, {7, 41}, 12),
            (ChangelogCheckpoint{{7, 41}, 12}));
  EXPECT_EQ(tracker_.Checkpoint(1, {7, 5}, 1), std::nullopt);
  tracker_.Forget(0);
  EXPECT_EQ(tracker_.Checkpoint(0, {7, 41}, 12), std::nullopt);
}

TEST(ChangelogCheckpointTextTest, RoundTripsAndRefusesMalformedText) {
  const ChangelogCheckpoint checkpoint{{123, -1}, 0};
  EXPECT_EQ(EncodeCheckpoint(checkpoint), "123 -1 0");
  EXPECT_EQ(DecodeCheckpoint("123 -1 0"), checkpoint);
  EXPECT_EQ(DecodeCheckpoint("7 41 12"), (ChangelogCheckpoint{{7, 41}, 12}));
  for (const char* bad : {"", "7 41", "7 41 -1", "7 41 x", "x 41 12",
                          "7 41 12 1", "7  41 12", "07 41 12"}) {
    EXPECT_EQ(DecodeCheckpoint(bad), std::nullopt) << bad;
  }
}

}  // namespace
}  // namespace idem::kafka
