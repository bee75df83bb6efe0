// Expiry of dedupe records through the engine, with a ManualClock (no test
// sleeps): expired records are absent on read before any compaction, the TTL
// filter drops them at flush and compaction and keeps live ones, expiry is
// absolute (a shorter window on reopen does not shorten it), and a record
// re-added after expiry or Forget is neither lost nor shadowed by its old
// version. Periodic compaction is set no longer than the window.
//
// Each guarantee is a check function run by two tests: against the real
// engine (must pass) and against the engine with a deliberately broken TTL
// filter installed through EngineHooks::dedupe_filter (the same check must
// report failure), which shows the check catches that breakage.

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/engine_hooks.h"
#include "engine/record.h"
#include "engine/store.h"
#include "engine/ttl_filter.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/clock.h"
#include "idem/engine.h"
#include "rocksdb/compaction_filter.h"
#include "rocksdb/convenience.h"
#include "rocksdb/env.h"
#include "rocksdb/options.h"
#include "rocksdb/utilities/options_util.h"
#include "tests/testing/engine_test_util.h"
#include "tests/testing/findings.h"

namespace idem {
namespace {

using test::Deliver;
using test::Delivered;
using test::EngineHarness;
using test::Findings;
using test::kStart;

const absl::Duration kWindow = absl::Hours(1);
const absl::Duration kTick = absl::Microseconds(1);

std::string Fmt(absl::Duration d) { return absl::FormatDuration(d); }

// Builds the hooks for an engine whose clock is `clock`.
using HooksMaker = std::function<EngineHooks(Clock* clock)>;

// The options of every engine here: a one-hour window, and no syncs (expiry
// does not need them).
Options ExpiryOptions() {
  Options options;
  options.dedupe_window = kWindow;
  options.durability = Durability::kBuffered;
  return options;
}

// Reopens `h` with `window`, which later opens keep.
absl::Status OpenWithWindow(EngineHarness& h, absl::Duration window) {
  h.options().dedupe_window = window;
  return h.Open();
}

std::string KeyHex(const std::string& id) {
  return DedupeKeyToHex(KeyView(HashMessageId(id)));
}

// The stored dedupe records, by key hex.
absl::StatusOr<std::map<std::string, DumpEntry>> DumpRecords(Engine& engine) {
  std::map<std::string, DumpEntry> records;
  absl::Status s = engine.Dump([&](const DumpEntry& entry) {
    if (entry.kind == DumpEntry::Kind::kDedupe) records[entry.key] = entry;
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return records;
}

// Expects `id` to be live with stored result `want`: Seen is true and a
// redelivery is a duplicate returning `want` without running the handler.
void ExpectLive(Findings& f, Engine& engine, const std::string& id,
                const std::string& want, const std::string& when) {
  absl::StatusOr<bool> seen = engine.Seen(id);
  if (!f.Ok(seen.status(), "Seen(" + id + ") " + when)) return;
  f.Expect(*seen,
           "Seen(" + id + ") is false " + when + ", but its record is live");
  Delivered d = Deliver(engine, id, "redelivery-must-not-run");
  if (!f.Ok(d.status, "redelivering " + id + " " + when)) return;
  f.Expect(d.outcome == Outcome::kDuplicate && !d.handler_ran,
           "redelivery of live " + id + " " + when + " ran the handler");
  f.Expect(d.outcome != Outcome::kDuplicate || d.result == want,
           "redelivery of " + id + " " + when + " returned result '" +
               d.result + "', want '" + want + "'");
}

// Expects `id` to be absent for Seen (without redelivering it).
void ExpectAbsent(Findings& f, Engine& engine, const std::string& id,
                  const std::string& when) {
  absl::StatusOr<bool> seen = engine.Seen(id);
  if (!f.Ok(seen.status(), "Seen(" + id + ") " + when)) return;
  if (*seen) {
    // Say which result a redelivery would get: tells a resurrected old
    // version apart from a record that was never dropped.
    Delivered d = Deliver(engine, id, "probe");
    f.Fail("Seen(" + id + ") is true " + when +
           ", but it should be absent (a redelivery returned '" + d.result +
           "')");
  }
}

// ---- Shared checks -------------------------------------------------------

// An expired record is absent for Seen and Process before any compaction:
// the redelivery after the window runs the handler again, even though the
// old record is still stored.
::testing::AssertionResult CheckExpiredIsAbsentBeforeCompaction(
    EngineHarness& h) {
  Findings f;
  if (!f.Ok(h.Open(), "open")) return f.Result();
  Engine& e = h.engine();
  Delivered first = Deliver(e, "x", "r1");
  f.Ok(first.status, "first delivery");
  f.Expect(first.outcome == Outcome::kProcessed,
           "first delivery not kProcessed");
  h.clock().Advance(kWindow - kTick);
  ExpectLive(f, e, "x", "r1", "just before expiry");
  h.clock().Advance(kTick);
  absl::StatusOr<bool> seen = e.Seen("x");
  f.Ok(seen.status(), "Seen at expiry");
  f.Expect(seen.ok() && !*seen, "Seen(x) is true at its expiry time");
  absl::StatusOr<std::map<std::string, DumpEntry>> records = DumpRecords(e);
  if (f.Ok(records.status(), "Dump")) {
    auto it = records->find(KeyHex("x"));
    f.Expect(it != records->end() && it->second.expired,
             "the expired record should still be stored (no compaction ran) "
             "and marked expired");
  }
  Delivered again = Deliver(e, "x", "r2");
  f.Ok(again.status, "redelivery after the window");
  f.Expect(again.handler_ran && again.outcome == Outcome::kProcessed &&
               again.result == "r2",
           "redelivery after the window did not run the handler again");
  ExpectLive(f, e, "x", "r2", "after the redelivery");
  return f.Result();
}

// CompactExpired drops expired records and keeps live ones: Seen, Dump and
// the estimated record count all agree afterwards.
::testing::AssertionResult CheckCompactionDropsExpiredKeepsLive(
    EngineHarness& h) {
  Findings f;
  if (!f.Ok(h.Open(), "open")) return f.Result();
  Engine& e = h.engine();
  constexpr int kEach = 10;
  for (int i = 0; i < kEach; ++i) {
    f.Ok(Deliver(e, "old-" + std::to_string(i), "o").status, "deliver old");
  }
  // Push the old ones to disk first, so compaction meets them in an SST.
  f.Ok(e.CompactExpired(), "CompactExpired while all live");
  h.clock().Advance(kWindow / 2);
  for (int i = 0; i < kEach; ++i) {
    f.Ok(Deliver(e, "new-" + std::to_string(i), "n").status, "deliver new");
  }
  h.clock().Advance(kWindow / 2);  // old ones expire now; new ones live
  absl::StatusOr<Stats> before = e.GetStats();
  f.Ok(before.status(), "GetStats before");
  f.Ok(e.CompactExpired(), "CompactExpired");
  absl::StatusOr<Stats> after = e.GetStats();
  f.Ok(after.status(), "GetStats after");
  if (before.ok() && after.ok()) {
    f.Expect(after->estimated_live_records < before->estimated_live_records,
             "estimated records did not shrink: " +
                 std::to_string(before->estimated_live_records) + " -> " +
                 std::to_string(after->estimated_live_records));
    f.Expect(after->estimated_live_records == kEach,
             "estimated records after compaction: " +
                 std::to_string(after->estimated_live_records) + ", want " +
                 std::to_string(kEach));
  }
  absl::StatusOr<std::map<std::string, DumpEntry>> records = DumpRecords(e);
  if (f.Ok(records.status(), "Dump")) {
    for (int i = 0; i < kEach; ++i) {
      f.Expect(!records->contains(KeyHex("old-" + std::to_string(i))),
               "Dump still shows expired old-" + std::to_string(i));
      auto it = records->find(KeyHex("new-" + std::to_string(i)));
      f.Expect(it != records->end() && !it->second.expired,
               "Dump lost live new-" + std::to_string(i));
    }
  }
  for (int i = 0; i < kEach; ++i) {
    ExpectAbsent(f, e, "old-" + std::to_string(i), "after compaction");
    ExpectLive(f, e, "new-" + std::to_string(i), "n", "after compaction");
  }
  return f.Result();
}

// Records that expire while still in the memtable never reach disk: the
// flush (here the one Checkpoint forces) drops them; a live one survives.
::testing::AssertionResult CheckExpiredInMemtableDroppedAtFlush(
    EngineHarness& h) {
  Findings f;
  if (!f.Ok(h.Open(), "open")) return f.Result();
  Engine& e = h.engine();
  constexpr int kExpiring = 5;
  for (int i = 0; i < kExpiring; ++i) {
    f.Ok(Deliver(e, "m-" + std::to_string(i), "r").status, "deliver");
  }
  f.Ok(Deliver(e, "long", "l", 3 * kWindow).status, "deliver long");
  h.clock().Advance(kWindow);
  // Checkpoint flushes every memtable (and compacts nothing).
  f.Ok(e.Checkpoint(h.Sub("checkpoint")), "Checkpoint (flush)");
  absl::StatusOr<std::map<std::string, DumpEntry>> records = DumpRecords(e);
  if (f.Ok(records.status(), "Dump")) {
    for (int i = 0; i < kExpiring; ++i) {
      f.Expect(!records->contains(KeyHex("m-" + std::to_string(i))),
               "m-" + std::to_string(i) +
                   " expired in the memtable but was written out by the "
                   "flush");
    }
    f.Expect(records->contains(KeyHex("long")), "flush dropped a live record");
  }
  ExpectLive(f, e, "long", "l", "after the flush");
  for (int i = 0; i < kExpiring; ++i) {
    ExpectAbsent(f, e, "m-" + std::to_string(i), "after the flush");
  }
  return f.Result();
}

// Reopening with a shorter dedupe_window keeps existing records for their
// original life: expiry is stored as an absolute time.
::testing::AssertionResult CheckShorterWindowKeepsAbsoluteExpiry(
    EngineHarness& h) {
  Findings f;
  const absl::Duration kLong = absl::Hours(10);
  const absl::Duration kShort = absl::Hours(1);
  if (!f.Ok(OpenWithWindow(h, kLong), "open with the long window"))
    return f.Result();
  f.Ok(Deliver(h.engine(), "x", "rx").status, "deliver x");
  f.Ok(h.engine().CompactExpired(), "CompactExpired");
  if (!f.Ok(OpenWithWindow(h, kShort), "reopen with the short window"))
    return f.Result();
  Engine& e = h.engine();
  h.clock().Advance(absl::Hours(2));  // past the short window
  ExpectLive(f, e, "x", "rx", "2h later, window now 1h, before compaction");
  f.Ok(e.CompactExpired(), "CompactExpired at 2h");
  ExpectLive(f, e, "x", "rx", "2h later after compaction");
  absl::StatusOr<std::map<std::string, DumpEntry>> records = DumpRecords(e);
  if (f.Ok(records.status(), "Dump")) {
    auto it = records->find(KeyHex("x"));
    f.Expect(it != records->end() && it->second.expires_at == kStart + kLong,
             "x's stored expiry is not the original absolute expiry");
  }
  // New records get the new window.
  f.Ok(Deliver(e, "y", "ry").status, "deliver y");
  h.clock().Set(kStart + absl::Hours(3));
  ExpectAbsent(f, e, "y", "after the short window");
  h.clock().Set(kStart + kLong - kTick);
  f.Ok(e.CompactExpired(), "CompactExpired just before x's expiry");
  ExpectLive(f, e, "x", "rx", "just before its original expiry");
  h.clock().Set(kStart + kLong);
  ExpectAbsent(f, e, "x", "at its original expiry");
  f.Ok(e.CompactExpired(), "CompactExpired at x's expiry");
  records = DumpRecords(e);
  if (f.Ok(records.status(), "Dump")) {
    f.Expect(!records->contains(KeyHex("x")),
             "x still stored after compaction past its expiry");
  }
  return f.Result();
}

struct ReAddCase {
  std::string name;  // the parameter's name in the test's name
  // Remove the first record with Forget instead of letting it expire. The
  // first record then lives 3 windows, longer than the re-added one.
  bool forget = false;
  // Offsets from the re-add at which CompactExpired runs; the record is
  // checked before and after each.
  std::vector<absl::Duration> compact_at;
};

void PrintTo(const ReAddCase& c, std::ostream* out) {
  *out << c.name << ": " << (c.forget ? "forgotten" : "expired")
       << ", compactions at +";
  for (absl::Duration d : c.compact_at) *out << Fmt(d) << " ";
}

// X is written, pushed into the bottom level, removed (by expiry or Forget)
// and re-added with a new result. Through compactions at the given clock
// points X stays live with the NEW result until the new expiry, then is
// absent (the old version never comes back), and a later delivery runs the
// handler again.
::testing::AssertionResult CheckReAddedRecordSurvivesCompactions(
    EngineHarness& h, const ReAddCase& c) {
  Findings f;
  if (!f.Ok(h.Open(), "open")) return f.Result();
  Engine& e = h.engine();
  const absl::Duration first_ttl = c.forget ? 3 * kWindow : kWindow;
  Delivered first = Deliver(e, "x", "old", first_ttl);
  f.Ok(first.status, "first delivery");
  f.Ok(e.CompactExpired(), "compacting the first record into the bottom");
  ExpectLive(f, e, "x", "old", "after the first compaction");
  if (c.forget) {
    f.Ok(e.Forget("x"), "Forget");
    ExpectAbsent(f, e, "x", "after Forget");
  } else {
    h.clock().Advance(kWindow);
    ExpectAbsent(f, e, "x", "after the first record expired");
  }
  const absl::Time added = h.clock().Now();
  Delivered re = Deliver(e, "x", "new");
  f.Ok(re.status, "re-adding x");
  f.Expect(re.handler_ran && re.outcome == Outcome::kProcessed,
           "re-adding x did not run the handler");
  const absl::Time new_expiry = added + kWindow;
  for (absl::Duration offset : c.compact_at) {
    h.clock().Set(added + offset);
    const std::string when = "at re-add+" + Fmt(offset);
    for (const char* phase : {" before compaction", " after compaction"}) {
      if (std::string(phase) == " after compaction") {
        f.Ok(e.CompactExpired(), "CompactExpired " + when);
      }
      if (h.clock().Now() < new_expiry) {
        ExpectLive(f, e, "x", "new", when + phase);
      } else {
        ExpectAbsent(f, e, "x", when + phase);
      }
    }
  }
  if (h.clock().Now() >= new_expiry) {
    Delivered last = Deliver(e, "x", "newest");
    f.Ok(last.status, "delivering x after the new expiry");
    f.Expect(last.handler_ran && last.result == "newest",
             "a delivery after the new expiry did not run the handler "
             "(returned '" +
                 last.result + "')");
  }
  return f.Result();
}

// The dedupe column family's options as RocksDB persisted them.
absl::StatusOr<rocksdb::ColumnFamilyOptions> LoadDedupeOptions(
    const std::string& path) {
  rocksdb::ConfigOptions config;
  config.env = rocksdb::Env::Default();
  config.ignore_unknown_options = true;
  config.ignore_unsupported_options = true;
  rocksdb::DBOptions db_options;
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  rocksdb::Status s =
      rocksdb::LoadLatestOptions(config, path, &db_options, &descriptors);
  if (!s.ok()) return absl::InternalError(s.ToString());
  for (const rocksdb::ColumnFamilyDescriptor& d : descriptors) {
    if (d.name == kDedupeColumnFamily) return d.options;
  }
  return absl::NotFoundError("no dedupe column family in the OPTIONS file");
}

// Cold files must meet the TTL filter within a window: periodic compaction
// is enabled and no longer than the window.
::testing::AssertionResult CheckPeriodicCompaction(
    const rocksdb::ColumnFamilyOptions& cf, absl::Duration window) {
  const uint64_t seconds = cf.periodic_compaction_seconds;
  if (seconds == 0) {
    return ::testing::AssertionFailure() << "periodic compaction is disabled";
  }
  if (static_cast<double>(seconds) > absl::ToDoubleSeconds(window)) {
    return ::testing::AssertionFailure()
           << "periodic_compaction_seconds " << seconds
           << " is longer than the window " << Fmt(window);
  }
  return ::testing::AssertionSuccess();
}

// ---- Deliberately broken TTL filters --------------------------------------

// Decides by `rule(record, now_micros, key, skip_until)`.
using Rule = std::function<rocksdb::CompactionFilter::Decision(
    const DedupeRecord&, int64_t, const rocksdb::Slice&, std::string*)>;

class RuleFilter : public rocksdb::CompactionFilter {
 public:
  RuleFilter(Rule rule, int64_t now_micros)
      : rule_(std::move(rule)), now_micros_(now_micros) {}
  Decision FilterV2(int, const rocksdb::Slice& key, ValueType type,
                    const rocksdb::Slice& value, std::string*,
                    std::string* skip_until) const override {
    if (type != ValueType::kValue) return Decision::kKeep;
    std::optional<DedupeRecord> record =
        DecodeDedupeRecord(std::string_view(value.data(), value.size()));
    if (!record.has_value()) return Decision::kKeep;
    return rule_(*record, now_micros_, key, skip_until);
  }
  const char* Name() const override { return "idem.test.RuleFilter"; }

 private:
  const Rule rule_;
  const int64_t now_micros_;
};

class RuleFilterFactory : public rocksdb::CompactionFilterFactory {
 public:
  RuleFilterFactory(Clock* clock, Rule rule)
      : clock_(clock), rule_(std::move(rule)) {}
  std::unique_ptr<rocksdb::CompactionFilter> CreateCompactionFilter(
      const rocksdb::CompactionFilter::Context&) override {
    return std::make_unique<RuleFilter>(rule_, TimeToMicros(clock_->Now()));
  }
  bool ShouldFilterTableFileCreation(
      rocksdb::TableFileCreationReason reason) const override {
    return reason == rocksdb::TableFileCreationReason::kFlush ||
           reason == rocksdb::TableFileCreationReason::kCompaction;
  }
  const char* Name() const override { return "idem.test.RuleFilterFactory"; }

 private:
  Clock* const clock_;
  const Rule rule_;
};

using Decision = rocksdb::CompactionFilter::Decision;

// Removes every record whose expiry is before now + window (drops live
// records: a confusion between write time and expiry).
HooksMaker DropBeforeNowPlusWindow() {
  return [](Clock* clock) {
    EngineHooks hooks;
    hooks.dedupe_filter = std::make_shared<RuleFilterFactory>(
        clock, [](const DedupeRecord& r, int64_t now, const rocksdb::Slice&,
                  std::string*) {
          return r.expiry_micros < now + absl::ToInt64Microseconds(kWindow)
                     ? Decision::kRemove
                     : Decision::kKeep;
        });
    return hooks;
  };
}

// Removes expired records with kRemoveAndSkipUntil (no deletion marker, so
// an older version of the key below can come back).
HooksMaker SkipUntilInsteadOfRemove() {
  return [](Clock* clock) {
    EngineHooks hooks;
    hooks.dedupe_filter = std::make_shared<RuleFilterFactory>(
        clock, [](const DedupeRecord& r, int64_t now, const rocksdb::Slice& key,
                  std::string* skip_until) {
          if (!IsExpired(r, now)) return Decision::kKeep;
          *skip_until = key.ToString() + '\0';  // just past this key
          return Decision::kRemoveAndSkipUntil;
        });
    return hooks;
  };
}

// DBWithTTL-style relative expiry: takes every record as written with a
// 10-hour TTL and expires it one (current) 1-hour window after writing.
HooksMaker RelativeTtlWithCurrentWindow() {
  return [](Clock* clock) {
    EngineHooks hooks;
    hooks.dedupe_filter = std::make_shared<RuleFilterFactory>(
        clock, [](const DedupeRecord& r, int64_t now, const rocksdb::Slice&,
                  std::string*) {
          const int64_t written =
              r.expiry_micros - absl::ToInt64Microseconds(absl::Hours(10));
          return written + absl::ToInt64Microseconds(absl::Hours(1)) <= now
                     ? Decision::kRemove
                     : Decision::kKeep;
        });
    return hooks;
  };
}

// The real filter, but only at compaction (RocksDB's default): records that
// expire in the memtable are flushed to disk.
class CompactionOnlyFactory : public TtlFilterFactory {
 public:
  using TtlFilterFactory::TtlFilterFactory;
  bool ShouldFilterTableFileCreation(
      rocksdb::TableFileCreationReason reason) const override {
    return reason == rocksdb::TableFileCreationReason::kCompaction;
  }
};

HooksMaker FilterOnlyAtCompaction() {
  return [](Clock* clock) {
    EngineHooks hooks;
    hooks.dedupe_filter = std::make_shared<CompactionOnlyFactory>(clock);
    return hooks;
  };
}

const ReAddCase kExpiredEveryStep = {
    .name = "AfterExpiryCompactedAtEveryStep",
    .forget = false,
    .compact_at = {absl::ZeroDuration(), kWindow / 2, kWindow - kTick, kWindow,
                   2 * kWindow, 4 * kWindow}};
const ReAddCase kExpiredLateCompaction = {
    .name = "AfterExpiryFirstCompactedAfterNewExpiry",
    .forget = false,
    .compact_at = {kWindow + kTick, 3 * kWindow}};
const ReAddCase kForgottenEveryStep = {
    .name = "AfterForgetCompactedAtEveryStep",
    .forget = true,
    .compact_at = {absl::ZeroDuration(), kWindow / 2, kWindow - kTick, kWindow,
                   2 * kWindow, 4 * kWindow}};
const ReAddCase kForgottenLateCompaction = {
    .name = "AfterForgetFirstCompactedAfterNewExpiry",
    .forget = true,
    .compact_at = {kWindow, 2 * kWindow, 3 * kWindow - kTick, 4 * kWindow}};

// ---- The real engine -------------------------------------------------------

TEST(ExpiryTest, ExpiredRecordIsAbsentBeforeAnyCompaction) {
  EngineHarness h(ExpiryOptions());
  EXPECT_TRUE(CheckExpiredIsAbsentBeforeCompaction(h));
}

TEST(ExpiryTest, PerMessageTtlOverridesTheWindow) {
  EngineHarness h(ExpiryOptions());
  ASSERT_TRUE(h.Open().ok());
  ASSERT_TRUE(Deliver(h.engine(), "short", "s", absl::Minutes(1)).status.ok());
  ASSERT_TRUE(Deliver(h.engine(), "long", "l", 2 * kWindow).status.ok());
  h.clock().Advance(absl::Minutes(1));
  EXPECT_FALSE(*h.engine().Seen("short"));
  h.clock().Advance(kWindow);
  EXPECT_TRUE(*h.engine().Seen("long"));
  ASSERT_TRUE(h.engine().CompactExpired().ok());
  EXPECT_TRUE(*h.engine().Seen("long"));
  h.clock().Set(kStart + 2 * kWindow);
  EXPECT_FALSE(*h.engine().Seen("long"));
}

TEST(ExpiryTest, CompactExpiredDropsExpiredAndKeepsLiveRecords) {
  EngineHarness h(ExpiryOptions());
  EXPECT_TRUE(CheckCompactionDropsExpiredKeepsLive(h));
  absl::StatusOr<Stats> stats = h.engine().GetStats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->expired_dropped, 10u);
}

TEST(ExpiryTest, ExpiredDroppedGrowsWithEachCompaction) {
  EngineHarness h(ExpiryOptions());
  ASSERT_TRUE(h.Open().ok());
  Engine& e = h.engine();
  ASSERT_TRUE(Deliver(e, "a", "r").status.ok());
  ASSERT_TRUE(e.CompactExpired().ok());
  EXPECT_EQ(e.GetStats()->expired_dropped, 0u);
  h.clock().Advance(kWindow);
  ASSERT_TRUE(Deliver(e, "b", "r").status.ok());
  ASSERT_TRUE(e.CompactExpired().ok());
  EXPECT_EQ(e.GetStats()->expired_dropped, 1u);
  h.clock().Advance(kWindow);
  ASSERT_TRUE(e.CompactExpired().ok());
  EXPECT_EQ(e.GetStats()->expired_dropped, 2u);
  EXPECT_EQ(e.GetStats()->estimated_live_records, 0u);
}

TEST(ExpiryTest, RecordsExpiringInTheMemtableAreDroppedAtFlush) {
  EngineHarness h(ExpiryOptions());
  EXPECT_TRUE(CheckExpiredInMemtableDroppedAtFlush(h));
  absl::StatusOr<Stats> stats = h.engine().GetStats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->expired_dropped, 5u);
}

TEST(ExpiryTest, ShorterWindowOnReopenDoesNotShortenExistingRecords) {
  EngineHarness h(ExpiryOptions());
  EXPECT_TRUE(CheckShorterWindowKeepsAbsoluteExpiry(h));
}

class ExpiryReAddTest : public ::testing::TestWithParam<ReAddCase> {};

TEST_P(ExpiryReAddTest, ReAddedRecordSurvivesCompactions) {
  EngineHarness h(ExpiryOptions());
  EXPECT_TRUE(CheckReAddedRecordSurvivesCompactions(h, GetParam()));
}

INSTANTIATE_TEST_SUITE_P(Cases, ExpiryReAddTest,
                         ::testing::Values(kExpiredEveryStep,
                                           kExpiredLateCompaction,
                                           kForgottenEveryStep,
                                           kForgottenLateCompaction),
                         [](const ::testing::TestParamInfo<ReAddCase>& info) {
                           return info.param.name;
                         });

TEST(ExpiryTest, PeriodicCompactionIsNoLongerThanTheWindow) {
  for (absl::Duration window :
       {absl::Seconds(1), absl::Seconds(90.5), absl::Hours(1),
        absl::Hours(24 * 7), absl::Hours(24 * 365)}) {
    SCOPED_TRACE(Fmt(window));
    EngineHarness h(ExpiryOptions());
    ASSERT_TRUE(OpenWithWindow(h, window).ok());
    h.Close();
    absl::StatusOr<rocksdb::ColumnFamilyOptions> cf =
        LoadDedupeOptions(h.path());
    ASSERT_TRUE(cf.ok()) << cf.status();
    EXPECT_TRUE(CheckPeriodicCompaction(*cf, window));
  }
}

TEST(ExpiryTest, PeriodicCompactionFollowsAShorterWindowOnReopen) {
  EngineHarness h(ExpiryOptions());
  ASSERT_TRUE(OpenWithWindow(h, absl::Hours(10)).ok());
  ASSERT_TRUE(OpenWithWindow(h, absl::Hours(1)).ok());
  h.Close();
  absl::StatusOr<rocksdb::ColumnFamilyOptions> cf = LoadDedupeOptions(h.path());
  ASSERT_TRUE(cf.ok()) << cf.status();
  EXPECT_TRUE(CheckPeriodicCompaction(*cf, absl::Hours(1)));
}

// ---- The same checks catch broken filters ----------------------------------

class ExpiryBrokenVariantTest
    : public ::testing::TestWithParam<test::BrokenVariant> {};

TEST_P(ExpiryBrokenVariantTest, CheckCatchesIt) {
  test::ExpectCaught(GetParam(), ExpiryOptions());
}

// The re-add check, with the case that shows each breakage.
::testing::AssertionResult CheckReAddedEveryStep(EngineHarness& h) {
  return CheckReAddedRecordSurvivesCompactions(h, kExpiredEveryStep);
}
::testing::AssertionResult CheckForgottenLateCompaction(EngineHarness& h) {
  return CheckReAddedRecordSurvivesCompactions(h, kForgottenLateCompaction);
}

INSTANTIATE_TEST_SUITE_P(
    Filters, ExpiryBrokenVariantTest,
    ::testing::Values(
        test::BrokenVariant{
            .name = "FilterDroppingLiveRecordsFailsCompactionCheck",
            .hooks = DropBeforeNowPlusWindow(),
            .check = CheckCompactionDropsExpiredKeepsLive,
            .failure = "Seen(new-0) is false"},
        test::BrokenVariant{.name = "FilterDroppingLiveRecordsFailsReAddCheck",
                            .hooks = DropBeforeNowPlusWindow(),
                            .check = CheckReAddedEveryStep,
                            .failure = "Seen(x) is false"},
        // The old version (result "old", still live by its own expiry) is
        // back.
        test::BrokenVariant{.name = "SkipUntilFilterResurrectsForgottenRecord",
                            .hooks = SkipUntilInsteadOfRemove(),
                            .check = CheckForgottenLateCompaction,
                            .failure = "returned 'old'"},
        test::BrokenVariant{.name = "FilterOnlyAtCompactionFailsFlushCheck",
                            .hooks = FilterOnlyAtCompaction(),
                            .check = CheckExpiredInMemtableDroppedAtFlush,
                            .failure = "written out by the flush"},
        test::BrokenVariant{.name = "RelativeTtlFilterFailsShorterWindowCheck",
                            .hooks = RelativeTtlWithCurrentWindow(),
                            .check = CheckShorterWindowKeepsAbsoluteExpiry,
                            .failure = "Seen(x) is false"}),
    test::BrokenVariantName);

TEST(ExpiryPeriodicCompactionBrokenVariantTest,
     RocksDbDefaultPeriodicCompactionFailsCheck) {
  // RocksDB's default (30 days once a filter is set, stored as a sentinel)
  // is what the engine must override.
  EXPECT_FALSE(CheckPeriodicCompaction(rocksdb::ColumnFamilyOptions(),
                                       absl::Hours(24 * 7)));
  rocksdb::ColumnFamilyOptions thirty_days;
  thirty_days.periodic_compaction_seconds = 30 * 24 * 3600;
  EXPECT_FALSE(CheckPeriodicCompaction(thirty_days, absl::Hours(24 * 7)));
  rocksdb::ColumnFamilyOptions disabled;
  disabled.periodic_compaction_seconds = 0;
  EXPECT_FALSE(CheckPeriodicCompaction(disabled, absl::Hours(24 * 7)));
}

}  // namespace
}  // namespace idem
