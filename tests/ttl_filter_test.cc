// Tests for engine/ttl_filter.h: the TTL compaction filter of the dedupe
// column family and its factory.
//
// Each guarantee is checked by a function shared by two tests: one runs it on
// the real filter and expects success, the other runs it on a deliberately
// broken filter (defined below) and expects the same check to fail, which
// shows the check can catch that kind of breakage.

#include "engine/ttl_filter.h"

#include <atomic>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "engine/engine_clock.h"
#include "engine/record.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/clock.h"
#include "rocksdb/compaction_filter.h"
#include "rocksdb/slice.h"
#include "rocksdb/types.h"

namespace idem {
namespace {

using Decision = rocksdb::CompactionFilter::Decision;
using ValueType = rocksdb::CompactionFilter::ValueType;
using ::testing::HasSubstr;

const absl::Time kStart = absl::FromUnixSeconds(1'700'000'000);
const int64_t kStartMicros = absl::ToUnixMicros(kStart);
constexpr char kKey[] = "0123456789abcdef";  // 16 bytes, like a dedupe key

const char* DecisionName(Decision d) {
  switch (d) {
    case Decision::kKeep:
      return "kKeep";
    case Decision::kRemove:
      return "kRemove";
    case Decision::kChangeValue:
      return "kChangeValue";
    case Decision::kRemoveAndSkipUntil:
      return "kRemoveAndSkipUntil";
    default:
      return "another decision";
  }
}

// One FilterV2 call with a fresh new_value/skip_until.
Decision Decide(const rocksdb::CompactionFilter& filter, std::string_view value,
                ValueType type = ValueType::kValue) {
  std::string new_value;
  std::string skip_until;
  return filter.FilterV2(/*level=*/1, rocksdb::Slice(kKey), type,
                         rocksdb::Slice(value.data(), value.size()), &new_value,
                         &skip_until);
}

rocksdb::CompactionFilter::Context MakeContext(
    rocksdb::TableFileCreationReason reason =
        rocksdb::TableFileCreationReason::kCompaction) {
  rocksdb::CompactionFilter::Context context;
  context.is_full_compaction = false;
  context.is_manual_compaction = false;
  context.column_family_id = 1;
  context.reason = reason;
  return context;
}

// ---- Shared checks -------------------------------------------------------

// A filter created at `now_micros` keeps records expiring after it.
::testing::AssertionResult CheckKeepsLiveRecords(
    const rocksdb::CompactionFilter& filter, int64_t now_micros) {
  for (int64_t ahead :
       {int64_t{1}, int64_t{1'000'000}, int64_t{7} * 24 * 3600 * 1'000'000,
        std::numeric_limits<int64_t>::max() - now_micros}) {
    const Decision d =
        Decide(filter, EncodeDedupeRecord(now_micros + ahead, "result"));
    if (d != Decision::kKeep) {
      return ::testing::AssertionFailure()
             << "a record expiring " << ahead << "us after the filter's time "
             << "was given " << DecisionName(d) << ", want kKeep";
    }
  }
  return ::testing::AssertionSuccess();
}

// A filter created at `now_micros` removes records whose expiry is at or
// before it, with kRemove (a deletion marker that keeps older versions
// hidden), never kRemoveAndSkipUntil, and leaves skip_until untouched.
::testing::AssertionResult CheckRemovesExpiredWithPlainRemove(
    const rocksdb::CompactionFilter& filter, int64_t now_micros) {
  for (int64_t behind :
       {int64_t{0}, int64_t{1}, int64_t{3'600'000'000}, now_micros}) {
    std::string new_value;
    std::string skip_until;
    const std::string value = EncodeDedupeRecord(now_micros - behind, "result");
    const Decision d =
        filter.FilterV2(1, rocksdb::Slice(kKey), ValueType::kValue, value,
                        &new_value, &skip_until);
    if (d != Decision::kRemove) {
      return ::testing::AssertionFailure()
             << "a record that expired " << behind << "us before the "
             << "filter's time was given " << DecisionName(d)
             << ", want kRemove";
    }
    if (!skip_until.empty()) {
      return ::testing::AssertionFailure()
             << "the filter set skip_until for an expired record";
    }
  }
  return ::testing::AssertionSuccess();
}

// Values that are not records this version understands, and entries that are
// not plain values, are kept whatever they contain.
::testing::AssertionResult CheckKeepsWhatItCannotJudge(
    const rocksdb::CompactionFilter& filter, int64_t now_micros) {
  const std::string expired = EncodeDedupeRecord(now_micros - 1, "r");
  std::string wrong_version = expired;
  wrong_version[0] = static_cast<char>(kRecordVersion + 1);
  const std::vector<std::pair<std::string, std::string>> undecodable = {
      {"an empty value", ""},
      {"a value shorter than the header", expired.substr(0, 8)},
      {"a value with an unknown record version", wrong_version},
      {"garbage", std::string(32, '\xff')},
  };
  for (const auto& [what, value] : undecodable) {
    const Decision d = Decide(filter, value);
    if (d != Decision::kKeep) {
      return ::testing::AssertionFailure()
             << what << " was given " << DecisionName(d) << ", want kKeep";
    }
  }
  for (ValueType type : {ValueType::kMergeOperand, ValueType::kBlobIndex}) {
    const Decision d = Decide(filter, expired, type);
    if (d != Decision::kKeep) {
      return ::testing::AssertionFailure()
             << "an expired-looking entry of value type "
             << static_cast<int>(type) << " was given " << DecisionName(d)
             << ", want kKeep";
    }
  }
  return ::testing::AssertionSuccess();
}

// A filter made by `factory` judges by the clock as it was when the filter
// was created: advancing the clock afterwards changes nothing for it, while a
// filter created after the advance sees the new time.
::testing::AssertionResult CheckFactoryReadsClockOncePerFilter(
    rocksdb::CompactionFilterFactory& factory, ManualClock& clock) {
  clock.Set(kStart);
  std::unique_ptr<rocksdb::CompactionFilter> early =
      factory.CreateCompactionFilter(MakeContext());
  clock.Advance(absl::Hours(2));
  // Expires one hour after the early filter was created: live for it,
  // expired for a filter created now.
  const std::string record =
      EncodeDedupeRecord(kStartMicros + 3'600'000'000, "r");
  if (Decision d = Decide(*early, record); d != Decision::kKeep) {
    return ::testing::AssertionFailure()
           << "a filter created before the clock moved judged by the new "
           << "time: " << DecisionName(d) << " for a record live at its "
           << "creation";
  }
  std::unique_ptr<rocksdb::CompactionFilter> late =
      factory.CreateCompactionFilter(MakeContext());
  if (Decision d = Decide(*late, record); d != Decision::kRemove) {
    return ::testing::AssertionFailure()
           << "a filter created after the clock moved did not see the new "
           << "time: " << DecisionName(d) << ", want kRemove";
  }
  if (Decision d = Decide(*early, record); d != Decision::kKeep) {
    return ::testing::AssertionFailure()
           << "the early filter changed its mind after another filter was "
           << "created: " << DecisionName(d);
  }
  return ::testing::AssertionSuccess();
}

// ---- Deliberately broken filters -----------------------------------------

// Treats a record expiring exactly now as live (an off-by-one against
// record.h's "live while now < expiry").
class OffByOneFilter : public rocksdb::CompactionFilter {
 public:
  explicit OffByOneFilter(int64_t now_micros) : now_micros_(now_micros) {}
  Decision FilterV2(int, const rocksdb::Slice&, ValueType type,
                    const rocksdb::Slice& value, std::string*,
                    std::string*) const override {
    if (type != ValueType::kValue) return Decision::kKeep;
    auto record =
        DecodeDedupeRecord(std::string_view(value.data(), value.size()));
    if (!record.has_value() || record->expiry_micros >= now_micros_) {
      return Decision::kKeep;
    }
    return Decision::kRemove;
  }
  const char* Name() const override { return "OffByOneFilter"; }

 private:
  const int64_t now_micros_;
};

// Removes expired records with kRemoveAndSkipUntil (which can expose an
// older, overwritten version of the key).
class SkipUntilFilter : public rocksdb::CompactionFilter {
 public:
  explicit SkipUntilFilter(int64_t now_micros) : now_micros_(now_micros) {}
  Decision FilterV2(int, const rocksdb::Slice& key, ValueType type,
                    const rocksdb::Slice& value, std::string*,
                    std::string* skip_until) const override {
    if (type != ValueType::kValue) return Decision::kKeep;
    auto record =
        DecodeDedupeRecord(std::string_view(value.data(), value.size()));
    if (!record.has_value() || !IsExpired(*record, now_micros_)) {
      return Decision::kKeep;
    }
    *skip_until = key.ToString() + '\0';
    return Decision::kRemoveAndSkipUntil;
  }
  const char* Name() const override { return "SkipUntilFilter"; }

 private:
  const int64_t now_micros_;
};

// Treats anything it cannot decode, and any non-value entry, as garbage.
class DropsUnknownFilter : public rocksdb::CompactionFilter {
 public:
  explicit DropsUnknownFilter(int64_t now_micros) : now_micros_(now_micros) {}
  Decision FilterV2(int, const rocksdb::Slice&, ValueType,
                    const rocksdb::Slice& value, std::string*,
                    std::string*) const override {
    auto record =
        DecodeDedupeRecord(std::string_view(value.data(), value.size()));
    if (!record.has_value() || IsExpired(*record, now_micros_)) {
      return Decision::kRemove;
    }
    return Decision::kKeep;
  }
  const char* Name() const override { return "DropsUnknownFilter"; }

 private:
  const int64_t now_micros_;
};

// Reads the clock on every decision instead of once per filter.
class ClockPerDecisionFilter : public rocksdb::CompactionFilter {
 public:
  explicit ClockPerDecisionFilter(Clock* clock) : clock_(clock) {}
  Decision FilterV2(int, const rocksdb::Slice&, ValueType type,
                    const rocksdb::Slice& value, std::string*,
                    std::string*) const override {
    if (type != ValueType::kValue) return Decision::kKeep;
    auto record =
        DecodeDedupeRecord(std::string_view(value.data(), value.size()));
    if (!record.has_value() ||
        !IsExpired(*record, TimeToMicros(clock_->Now()))) {
      return Decision::kKeep;
    }
    return Decision::kRemove;
  }
  const char* Name() const override { return "ClockPerDecisionFilter"; }

 private:
  Clock* const clock_;
};

class ClockPerDecisionFactory : public rocksdb::CompactionFilterFactory {
 public:
  explicit ClockPerDecisionFactory(Clock* clock) : clock_(clock) {}
  std::unique_ptr<rocksdb::CompactionFilter> CreateCompactionFilter(
      const rocksdb::CompactionFilter::Context&) override {
    return std::make_unique<ClockPerDecisionFilter>(clock_);
  }
  const char* Name() const override { return "ClockPerDecisionFactory"; }

 private:
  Clock* const clock_;
};

// A clock whose reading fails.
class ThrowingClock : public Clock {
 public:
  absl::Time Now() override { throw std::runtime_error("clock unavailable"); }
};

// A clock stuck at one time (which may be non-finite).
class FixedClock : public Clock {
 public:
  explicit FixedClock(absl::Time t) : t_(t) {}
  absl::Time Now() override { return t_; }

 private:
  const absl::Time t_;
};

// ---- The real filter -----------------------------------------------------

TEST(TtlFilterTest, KeepsRecordWhoseExpiryIsInTheFuture) {
  std::atomic<uint64_t> dropped{0};
  TtlFilter filter(kStartMicros, &dropped);
  EXPECT_TRUE(CheckKeepsLiveRecords(filter, kStartMicros));
  EXPECT_EQ(dropped.load(), 0u);
}

TEST(TtlFilterTest, RemovesExpiredRecordsWithPlainRemoveNeverSkipUntil) {
  std::atomic<uint64_t> dropped{0};
  TtlFilter filter(kStartMicros, &dropped);
  EXPECT_TRUE(CheckRemovesExpiredWithPlainRemove(filter, kStartMicros));
}

TEST(TtlFilterTest, KeepsUndecodableValuesAndNonValueTypes) {
  std::atomic<uint64_t> dropped{0};
  TtlFilter filter(kStartMicros, &dropped);
  EXPECT_TRUE(CheckKeepsWhatItCannotJudge(filter, kStartMicros));
  EXPECT_EQ(dropped.load(), 0u);
}

TEST(TtlFilterTest, RecordExpiringExactlyNowIsRemoved) {
  // record.h: a record is live while now < expiry.
  std::atomic<uint64_t> dropped{0};
  TtlFilter filter(kStartMicros, &dropped);
  EXPECT_EQ(Decide(filter, EncodeDedupeRecord(kStartMicros, "r")),
            Decision::kRemove);
  EXPECT_EQ(Decide(filter, EncodeDedupeRecord(kStartMicros + 1, "r")),
            Decision::kKeep);
}

// Both record versions: version 1 records of stores written before version 2,
// and version 2 records with every optional field.
TEST(TtlFilterTest, JudgesBothRecordVersionsByTheirExpiry) {
  DedupeRecord full;
  full.fingerprint = 42;
  full.failure = absl::StatusCode::kInvalidArgument;
  full.result = "no account";
  std::atomic<uint64_t> dropped{0};
  TtlFilter filter(kStartMicros, &dropped);
  for (int64_t ahead : {0, 1}) {
    full.expiry_micros = kStartMicros + ahead;
    const Decision expected = ahead > 0 ? Decision::kKeep : Decision::kRemove;
    EXPECT_EQ(Decide(filter, EncodeDedupeRecord(full)), expected) << ahead;
    EXPECT_EQ(Decide(filter, EncodeDedupeRecordV1(full.expiry_micros, "r")),
              expected)
        << ahead;
  }
  EXPECT_EQ(dropped.load(), 2u);
}

TEST(TtlFilterTest, DoesNotChangeValues) {
  std::atomic<uint64_t> dropped{0};
  TtlFilter filter(kStartMicros, &dropped);
  std::string new_value = "untouched";
  std::string skip_until;
  const std::string value = EncodeDedupeRecord(kStartMicros + 5, "r");
  EXPECT_EQ(filter.FilterV2(0, rocksdb::Slice(kKey), ValueType::kValue, value,
                            &new_value, &skip_until),
            Decision::kKeep);
  EXPECT_EQ(new_value, "untouched");
  EXPECT_TRUE(skip_until.empty());
}

TEST(TtlFilterFactoryTest, FilterUsesTheClockAsOfItsCreation) {
  ManualClock clock(kStart);
  TtlFilterFactory factory(&clock);
  EXPECT_TRUE(CheckFactoryReadsClockOncePerFilter(factory, clock));
}

TEST(TtlFilterFactoryTest, FiltersMadeByTheFactoryPassEveryRecordCheck) {
  ManualClock clock(kStart);
  TtlFilterFactory factory(&clock);
  std::unique_ptr<rocksdb::CompactionFilter> filter =
      factory.CreateCompactionFilter(MakeContext());
  EXPECT_TRUE(CheckKeepsLiveRecords(*filter, kStartMicros));
  EXPECT_TRUE(CheckRemovesExpiredWithPlainRemove(*filter, kStartMicros));
  EXPECT_TRUE(CheckKeepsWhatItCannotJudge(*filter, kStartMicros));
}

TEST(TtlFilterFactoryTest, ClockThatThrowsMakesTheFilterKeepEverything) {
  ThrowingClock clock;
  TtlFilterFactory factory(&clock);
  std::unique_ptr<rocksdb::CompactionFilter> filter;
  ASSERT_NO_THROW(filter = factory.CreateCompactionFilter(MakeContext()));
  ASSERT_NE(filter, nullptr);
  for (int64_t expiry : {kStartMicros, int64_t{1}, int64_t{0}, int64_t{-1},
                         std::numeric_limits<int64_t>::min() + 1}) {
    Decision d = Decision::kUndetermined;
    ASSERT_NO_THROW(d = Decide(*filter, EncodeDedupeRecord(expiry, "r")));
    EXPECT_EQ(d, Decision::kKeep) << "expiry " << expiry;
  }
  EXPECT_EQ(factory.dropped(), 0u);
}

// Regression: absl::InfiniteFuture() made every record look expired, and the
// filter removed live ones.
TEST(TtlFilterFactoryTest,
     ClockReturningANonFiniteTimeMakesTheFilterKeepEverything) {
  for (absl::Time t : {absl::InfiniteFuture(), absl::InfinitePast()}) {
    FixedClock clock(t);
    TtlFilterFactory factory(&clock);
    std::unique_ptr<rocksdb::CompactionFilter> filter =
        factory.CreateCompactionFilter(MakeContext());
    for (int64_t expiry : {kStartMicros, int64_t{1}, int64_t{0}, int64_t{-1},
                           std::numeric_limits<int64_t>::max(),
                           std::numeric_limits<int64_t>::min() + 1}) {
      EXPECT_EQ(Decide(*filter, EncodeDedupeRecord(expiry, "r")),
                Decision::kKeep)
          << t << ", expiry " << expiry;
    }
    EXPECT_EQ(factory.dropped(), 0u) << t;
  }
}

// The filter judges by the engine's time, shared with the engine: once the
// engine has used a time, a clock set back does not make the filter keep
// records expired at that time (nor the reads report them live).
TEST(TtlFilterFactoryTest, FilterJudgesByEngineTimeWhichNeverGoesBack) {
  ManualClock clock(kStart + absl::Hours(2));
  auto time = std::make_shared<EngineClock>(&clock);
  TtlFilterFactory factory(time);
  ASSERT_TRUE(time->NowMicros().ok());  // the engine read +2h
  clock.Set(kStart);
  std::unique_ptr<rocksdb::CompactionFilter> filter =
      factory.CreateCompactionFilter(MakeContext());
  const int64_t one_hour = absl::ToInt64Microseconds(absl::Hours(1));
  EXPECT_EQ(Decide(*filter, EncodeDedupeRecord(kStartMicros + one_hour, "r")),
            Decision::kRemove);
  EXPECT_EQ(
      Decide(*filter, EncodeDedupeRecord(kStartMicros + 3 * one_hour, "r")),
      Decision::kKeep);
}

TEST(TtlFilterFactoryTest, FiltersAtFlushAndAtCompaction) {
  ManualClock clock(kStart);
  TtlFilterFactory factory(&clock);
  EXPECT_TRUE(factory.ShouldFilterTableFileCreation(
      rocksdb::TableFileCreationReason::kFlush));
  EXPECT_TRUE(factory.ShouldFilterTableFileCreation(
      rocksdb::TableFileCreationReason::kCompaction));
}

TEST(TtlFilterFactoryTest, DroppedCountsRemovalsOfEveryFilterOnly) {
  ManualClock clock(kStart);
  TtlFilterFactory factory(&clock);
  EXPECT_EQ(factory.dropped(), 0u);
  std::unique_ptr<rocksdb::CompactionFilter> first =
      factory.CreateCompactionFilter(MakeContext());
  std::unique_ptr<rocksdb::CompactionFilter> second =
      factory.CreateCompactionFilter(
          MakeContext(rocksdb::TableFileCreationReason::kFlush));
  const std::string expired = EncodeDedupeRecord(kStartMicros - 1, "r");
  const std::string live = EncodeDedupeRecord(kStartMicros + 1, "r");
  EXPECT_EQ(Decide(*first, expired), Decision::kRemove);
  EXPECT_EQ(Decide(*first, expired), Decision::kRemove);
  EXPECT_EQ(Decide(*first, live), Decision::kKeep);
  EXPECT_EQ(Decide(*first, "garbage"), Decision::kKeep);
  EXPECT_EQ(Decide(*first, expired, ValueType::kMergeOperand), Decision::kKeep);
  EXPECT_EQ(factory.dropped(), 2u);
  EXPECT_EQ(Decide(*second, expired), Decision::kRemove);
  EXPECT_EQ(factory.dropped(), 3u);
}

TEST(TtlFilterTest, DroppedCounterIsTheOneGiven) {
  std::atomic<uint64_t> dropped{10};
  TtlFilter filter(kStartMicros, &dropped);
  Decide(filter, EncodeDedupeRecord(kStartMicros - 1, "r"));
  Decide(filter, EncodeDedupeRecord(kStartMicros + 1, "r"));
  EXPECT_EQ(dropped.load(), 11u);
}

// ---- The same checks catch broken filters --------------------------------

TEST(TtlFilterBrokenVariantTest, OffByOneFilterFailsTheRemovalCheck) {
  OffByOneFilter broken(kStartMicros);
  ::testing::AssertionResult result =
      CheckRemovesExpiredWithPlainRemove(broken, kStartMicros);
  EXPECT_FALSE(result);
  EXPECT_THAT(result.message(), HasSubstr("expired 0us before"));
}

TEST(TtlFilterBrokenVariantTest, SkipUntilFilterFailsTheRemovalCheck) {
  SkipUntilFilter broken(kStartMicros);
  ::testing::AssertionResult result =
      CheckRemovesExpiredWithPlainRemove(broken, kStartMicros);
  EXPECT_FALSE(result);
  EXPECT_THAT(result.message(), HasSubstr("kRemoveAndSkipUntil"));
}

TEST(TtlFilterBrokenVariantTest, FilterDroppingUnknownValuesFailsTheKeepCheck) {
  DropsUnknownFilter broken(kStartMicros);
  ::testing::AssertionResult result =
      CheckKeepsWhatItCannotJudge(broken, kStartMicros);
  EXPECT_FALSE(result);
  EXPECT_THAT(result.message(), HasSubstr("kRemove"));
}

TEST(TtlFilterBrokenVariantTest, OffByOneLiveRuleFailsTheKeepLiveCheck) {
  // A filter whose time is one microsecond ahead (i.e. that removes records
  // expiring just after its creation) breaks the keep-live check.
  std::atomic<uint64_t> dropped{0};
  TtlFilter ahead(kStartMicros + 1, &dropped);
  ::testing::AssertionResult result =
      CheckKeepsLiveRecords(ahead, kStartMicros);
  EXPECT_FALSE(result);
  EXPECT_THAT(result.message(), HasSubstr("expiring 1us after"));
}

TEST(TtlFilterBrokenVariantTest, FactoryReadingTheClockPerDecisionFailsCheck) {
  ManualClock clock(kStart);
  ClockPerDecisionFactory broken(&clock);
  ::testing::AssertionResult result =
      CheckFactoryReadsClockOncePerFilter(broken, clock);
  EXPECT_FALSE(result);
  EXPECT_THAT(result.message(), HasSubstr("before the clock moved"));
}

}  // namespace
}  // namespace idem
