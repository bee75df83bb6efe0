// Format version 2 of the changelog (kafka/changelog_format.h): timer
// records ("t/"), the stream time on offset records and the expiry of state
// records encode and decode, and a restore (kafka/changelog_image.h) folds
// them as it folds state: only complete commits count, a half-published
// commit's timers are orphans, and version-1 records still read as before.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
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

const absl::Time kT = absl::FromUnixMicros(1'800'000'000'123'456);

// Owns the bytes a LogRecord points to.
struct StoredRecord {
  std::string key;
  std::optional<std::string> value;
  std::vector<std::pair<std::string, std::string>> headers;

  LogRecord View() const {
    LogRecord record;
    record.record.topic = "log";
    record.record.key = key;
    if (value.has_value()) record.record.value = *value;
    record.tombstone = !value.has_value();
    for (const auto& [name, header] : headers) {
      record.record.headers.emplace_back(name, header);
    }
    return record;
  }
};

// The headers of a version-2 record of `mark`, plus `more`.
std::vector<std::pair<std::string, std::string>> V2(
    ChangelogMark mark,
    std::vector<std::pair<std::string, std::string>> more = {}) {
  more.emplace_back(kChangelogMarkHeader, EncodeMark(mark));
  more.emplace_back(kChangelogVersionHeader, kChangelogFormatVersionText);
  return more;
}

class ChangelogFormatV2Test : public ::testing::Test {
 protected:
  void Add(const StoredRecord& s) {
    ASSERT_TRUE(builder_.AddChangelogRecord(s.View()).ok()) << s.key;
  }
  void Timer(const std::string& key, std::optional<ChangelogTimer> timer,
             ChangelogMark mark) {
    std::optional<std::string> value;
    if (timer.has_value()) value = EncodeTimerValue(*timer);
    Add({TimerRecordKey(key), std::move(value), V2(mark)});
  }
  void Offset(ChangelogMark mark, std::optional<absl::Time> stream_time) {
    std::vector<std::pair<std::string, std::string>> more;
    if (stream_time.has_value()) {
      more.emplace_back(kChangelogStreamTimeHeader,
                        EncodeTimeHeader(*stream_time));
    }
    Add({OffsetRecordKey(mark.epoch), absl::StrCat(mark.offset),
         V2(mark, std::move(more))});
  }

  ChangelogImageBuilder builder_;
};

TEST(ChangelogRecordsV2Test, TimerValuesAndTimeHeadersRoundTrip) {
  const ChangelogTimer timer{TimeDomain::kProcessing, kT,
                             std::string("pay\0load", 8)};
  EXPECT_THAT(DecodeTimerValue(EncodeTimerValue(timer)), Optional(timer));
  const ChangelogTimer early{TimeDomain::kEvent, absl::FromUnixMicros(-5), ""};
  EXPECT_THAT(DecodeTimerValue(EncodeTimerValue(early)), Optional(early));
  EXPECT_EQ(DecodeTimerValue("short"), std::nullopt);
  std::string unknown_domain = EncodeTimerValue(timer);
  unknown_domain[0] = 7;
  EXPECT_EQ(DecodeTimerValue(unknown_domain), std::nullopt);

  EXPECT_THAT(DecodeTimeHeader(EncodeTimeHeader(kT)), Optional(kT));
  EXPECT_THAT(DecodeTimeHeader("-12"), Optional(absl::FromUnixMicros(-12)));
  for (const char* bad : {"", "-", "-0", "01", "1x", "+1"}) {
    EXPECT_EQ(DecodeTimeHeader(bad), std::nullopt) << bad;
  }

  const std::string record_key = TimerRecordKey("w/1");  // key views it
  std::optional<ChangelogKey> key = DecodeChangelogKey(record_key);
  ASSERT_TRUE(key.has_value());
  EXPECT_EQ(key->kind, ChangelogKey::Kind::kTimer);
  EXPECT_EQ(key->state_key, "w/1");
}

// A commit's timers and stream time count once its "o/" record arrives; a
// later commit's tombstone (a fire, a cancel) removes the timer; the
// stream time never goes back.
TEST_F(ChangelogFormatV2Test, CompleteCommitsCarryTimersAndStreamTime) {
  const ChangelogTimer close{TimeDomain::kEvent, kT, "w0"};
  Timer("close", close, {1, 0});
  Timer("remind", ChangelogTimer{TimeDomain::kProcessing, kT, ""}, {1, 0});
  EXPECT_THAT(builder_.TimerOrphans(), ElementsAre("close", "remind"));
  Offset({1, 0}, kT - absl::Seconds(5));
  ChangelogChanges changes = builder_.TakeChanges(kT);
  EXPECT_THAT(
      changes.timers,
      ElementsAre(Pair("close", Optional(close)),
                  Pair("remind", Optional(ChangelogTimer{
                                     TimeDomain::kProcessing, kT, ""}))));
  EXPECT_THAT(changes.stream_time, Optional(kT - absl::Seconds(5)));
  EXPECT_FALSE(builder_.HasOrphans());

  Timer("close", std::nullopt, {1, 0});   // fired, at the same offset
  Offset({1, 0}, kT - absl::Seconds(9));  // an older stream time
  changes = builder_.TakeChanges(kT);
  EXPECT_THAT(changes.timers, ElementsAre(Pair("close", std::nullopt)));
  EXPECT_THAT(changes.stream_time, Optional(kT - absl::Seconds(5)));
}

// A timer record of an unfinished commit, or of an epoch that is over, is
// an orphan, not a timer; a new owner's complete commit of it clears it.
TEST_F(ChangelogFormatV2Test, HalfPublishedTimersAreOrphans) {
  Offset({1, 0}, std::nullopt);
  Timer("t", ChangelogTimer{TimeDomain::kEvent, kT, ""}, {1, 1});
  Offset({2, 0}, std::nullopt);  // a new owner: epoch 1 is over
  Timer("u", ChangelogTimer{TimeDomain::kEvent, kT, ""}, {1, 2});
  EXPECT_THAT(builder_.TimerOrphans(), ElementsAre("t", "u"));
  EXPECT_THAT(builder_.TakeChanges(kT).timers, IsEmpty());
  Timer("t", std::nullopt, {2, 0});
  Offset({2, 0}, std::nullopt);
  EXPECT_THAT(builder_.TimerOrphans(), ElementsAre("u"));
}

// A state record's expiry header is the value's expiry; a later write
// without one never expires.
TEST_F(ChangelogFormatV2Test, StateRecordsCarryTheirExpiry) {
  Add({StateRecordKey("session"), "v",
       V2({1, 0}, {{kChangelogExpiresHeader, EncodeTimeHeader(kT)}})});
  Add({StateRecordKey("plain"), "p", V2({1, 0})});
  Offset({1, 0}, std::nullopt);
  ChangelogChanges changes = builder_.TakeChanges(kT);
  EXPECT_THAT(changes.expires_at, ElementsAre(Pair("session", kT)));
  Add({StateRecordKey("session"), "forever", V2({1, 1})});
  Offset({1, 1}, std::nullopt);
  changes = builder_.TakeChanges(kT);
  EXPECT_THAT(changes.writes,
              ElementsAre(Pair("session", Optional(std::string("forever")))));
  EXPECT_THAT(changes.expires_at, IsEmpty());

  StoredRecord bad{StateRecordKey("k"), "v",
                   V2({1, 2}, {{kChangelogExpiresHeader, "soon"}})};
  EXPECT_EQ(builder_.AddChangelogRecord(bad.View()).code(),
            absl::StatusCode::kDataLoss);
}

// A version-1 record (no version header, no timers, no stream time) reads
// as it always did.
TEST_F(ChangelogFormatV2Test, VersionOneRecordsReadAsBefore) {
  Add({StateRecordKey("k"), "v", {{kChangelogMarkHeader, EncodeMark({4, 9})}}});
  Add({OffsetRecordKey(4), "9", {{kChangelogMarkHeader, EncodeMark({4, 9})}}});
  ChangelogChanges changes = builder_.TakeChanges(kT);
  EXPECT_THAT(changes.writes,
              ElementsAre(Pair("k", Optional(std::string("v")))));
  EXPECT_THAT(changes.last, Optional(ChangelogMark{4, 9}));
  EXPECT_EQ(changes.stream_time, std::nullopt);
  EXPECT_THAT(changes.timers, IsEmpty());
  EXPECT_THAT(changes.expires_at, IsEmpty());
}

TEST_F(ChangelogFormatV2Test, UndecodableTimerAndStreamTimeAreDataLoss) {
  StoredRecord timer{TimerRecordKey("t"), "x", V2({1, 0})};
  EXPECT_EQ(builder_.AddChangelogRecord(timer.View()).code(),
            absl::StatusCode::kDataLoss);
  StoredRecord offset{OffsetRecordKey(1), "0",
                      V2({1, 0}, {{kChangelogStreamTimeHeader, "later"}})};
  EXPECT_EQ(builder_.AddChangelogRecord(offset.View()).code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace idem::kafka
