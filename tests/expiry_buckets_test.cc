// Options::expiry_buckets (engine/expiry_buckets.h), with a ManualClock: new
// records go to bucket column families by expiry, a duplicate is found in
// whichever family holds its record, a bucket is dropped whole only once all
// its records have expired (at a commit or CompactExpired), per-message ttls
// past the newest bucket stay in the filtered family, Forget reaches into
// buckets, the setting may change between opens, and a store with buckets
// is marked format 2.
//
// The strict-expiry check runs against the real engine (must pass) and
// against one that drops buckets a width early (EngineHooks::
// drop_buckets_at_start; the same check must fail).

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "engine/engine_hooks.h"
#include "engine/store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/clock.h"
#include "idem/crash/file_system.h"
#include "idem/engine.h"
#include "rocksdb/db.h"
#include "tests/testing/engine_test_util.h"
#include "tests/testing/findings.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

using test::Deliver;
using test::Delivered;
using test::EngineHarness;
using test::Findings;
using test::kStart;
using ::testing::Contains;
using ::testing::Not;

const absl::Duration kBucketWindow = absl::Hours(1);
constexpr int kBuckets = 4;  // 15-minute buckets

// The options of every engine here: a one-hour window in kBuckets buckets.
Options BucketOptions() {
  Options options;
  options.dedupe_window = kBucketWindow;
  options.expiry_buckets = kBuckets;
  options.durability = Durability::kBuffered;
  return options;
}

// Reopens `h` with `buckets`, which later opens keep.
absl::Status OpenWithBuckets(EngineHarness& h, int buckets) {
  h.options().expiry_buckets = buckets;
  return h.Open();
}

// The column family names of the store at `path`, as its MANIFEST lists
// them.
std::vector<std::string> Families(const std::string& path) {
  std::vector<std::string> names;
  rocksdb::Status s =
      rocksdb::DB::ListColumnFamilies(rocksdb::DBOptions(), path, &names);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return names;
}
int BucketFamilies(const std::string& path) {
  const std::vector<std::string> names = Families(path);
  return static_cast<int>(
      std::count_if(names.begin(), names.end(), [](const std::string& n) {
        return absl::StartsWith(n, "idem.dedupe.until.");
      }));
}

// Every 5 minutes for three windows, delivers a new ID and redelivers every
// earlier one. A model of the right answer (an ID is a duplicate while its
// last processing is less than a window ago) is compared with each outcome,
// so a record dropped while live (a redelivery that runs again) and a record
// kept past its expiry both show. Also checks that buckets are dropped and
// never more than kBuckets + 2 are held.
::testing::AssertionResult CheckStrictExpiry(EngineHarness& h) {
  if (absl::Status s = h.Open(); !s.ok()) {
    return ::testing::AssertionFailure() << "open: " << s;
  }
  Findings f;
  std::map<std::string, absl::Time> expiry;  // id -> model expiry
  int most_buckets = 0;
  for (int step = 0; step < 36; ++step) {
    const absl::Time now = h.clock().Now();
    const std::string fresh = absl::StrCat("m", step);
    expiry[fresh] = absl::InfinitePast();
    for (auto& [id, expires] : expiry) {
      const bool live = now < expires;
      Delivered d = Deliver(h.engine(), id, absl::StrCat(id, "@", step));
      if (!f.Ok(d.status, "delivering " + id)) continue;
      const std::string when = absl::StrCat(
          " at ", absl::FormatDuration(now - kStart), ", ",
          absl::FormatDuration(expires - now), " before its expiry");
      if (live) {
        f.Expect(d.outcome == Outcome::kDuplicate,
                 id + " ran again while live" + when);
      } else {
        f.Expect(d.outcome == Outcome::kProcessed,
                 id + " was a duplicate after its expiry" + when);
        if (d.outcome == Outcome::kProcessed) expires = now + kBucketWindow;
      }
    }
    absl::StatusOr<Stats> stats = h.engine().GetStats();
    if (f.Ok(stats.status(), "reading stats")) {
      most_buckets =
          std::max(most_buckets, static_cast<int>(stats->expiry_buckets));
    }
    h.clock().Advance(absl::Minutes(5));
  }
  absl::StatusOr<Stats> stats = h.engine().GetStats();
  if (f.Ok(stats.status(), "reading stats")) {
    f.Expect(stats->expiry_buckets_dropped > 0, "no bucket was ever dropped");
  }
  f.Expect(most_buckets >= 2,
           absl::StrCat("only ", most_buckets, " bucket(s) at any time"));
  f.Expect(most_buckets <= kBuckets + 2,
           absl::StrCat(most_buckets, " buckets held at once"));
  return f.Result();
}

TEST(ExpiryBucketsTest, DuplicatesExactlyWithinTheWindowAndBucketsAreDropped) {
  EngineHarness h(BucketOptions());
  EXPECT_TRUE(CheckStrictExpiry(h));
}

TEST(ExpiryBucketsBrokenVariantTest, DroppingBucketsEarlyIsCaught) {
  test::ExpectCaught({.name = "DroppingBucketsEarly",
                      .hooks =
                          [](Clock*) {
                            EngineHooks hooks;
                            hooks.drop_buckets_at_start = true;
                            return hooks;
                          },
                      .check = CheckStrictExpiry,
                      .failure = "ran again while live"},
                     BucketOptions());
}

TEST(ExpiryBucketsTest, RecordsLiveInBucketFamiliesAndTheStoreIsFormat2) {
  EngineHarness h(BucketOptions());
  ASSERT_TRUE(h.Open().ok());
  // A store created with buckets configured is format 2 from the start.
  EXPECT_THAT(Families(h.path()), Contains("idem.format.2"));
  EXPECT_EQ(BucketFamilies(h.path()), 0);
  ASSERT_EQ(Deliver(h.engine(), "a", "r-a").outcome, Outcome::kProcessed);
  EXPECT_EQ(BucketFamilies(h.path()), 1);
  std::vector<DumpEntry> dedupe;
  ASSERT_TRUE(h.engine()
                  .Dump([&](const DumpEntry& e) {
                    if (e.kind == DumpEntry::Kind::kDedupe) dedupe.push_back(e);
                    return absl::OkStatus();
                  })
                  .ok());
  ASSERT_EQ(dedupe.size(), 1u);
  EXPECT_EQ(dedupe[0].value, "r-a");
  EXPECT_EQ(dedupe[0].expires_at, kStart + kBucketWindow);
  absl::StatusOr<Stats> stats = h.engine().GetStats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->expiry_buckets, 1u);
  EXPECT_EQ(stats->estimated_live_records, 1u);
}

// Two names for one end would leave one of the families unread (missed
// duplicates): only the spelling BucketFamilyName writes names a bucket.
TEST(ExpiryBucketsTest, OnlyTheWrittenSpellingOfABucketNameIsABucket) {
  for (int64_t end : {int64_t{0}, int64_t{5}, int64_t{1'700'003'600'000'000},
                      std::numeric_limits<int64_t>::min()}) {
    EXPECT_EQ(ParseBucketFamilyName(BucketFamilyName(end)),
              std::optional<int64_t>(end));
  }
  for (const char* other : {"05", "+5", " 5", "5 ", "5\n", "-0", "", "x"}) {
    EXPECT_EQ(ParseBucketFamilyName(std::string(kBucketFamilyPrefix) + other),
              std::nullopt)
        << other;
  }
}

TEST(ExpiryBucketsTest, StoreWithoutBucketsStaysFormat1UntilItGetsOne) {
  EngineHarness h(BucketOptions());
  ASSERT_TRUE(OpenWithBuckets(h, 0).ok());
  ASSERT_EQ(Deliver(h.engine(), "a", "r").outcome, Outcome::kProcessed);
  EXPECT_THAT(Families(h.path()), Contains("idem.format.1"));
  EXPECT_THAT(Families(h.path()), Not(Contains("idem.format.2")));
  EXPECT_EQ(BucketFamilies(h.path()), 0);
  // Turning buckets on marks the store before its first bucket.
  ASSERT_TRUE(OpenWithBuckets(h, kBuckets).ok());
  EXPECT_THAT(Families(h.path()), Not(Contains("idem.format.2")));
  ASSERT_EQ(Deliver(h.engine(), "b", "r").outcome, Outcome::kProcessed);
  EXPECT_THAT(Families(h.path()), Contains("idem.format.2"));
  EXPECT_EQ(BucketFamilies(h.path()), 1);
  EXPECT_EQ(Deliver(h.engine(), "a", "x").outcome, Outcome::kDuplicate);
}

TEST(ExpiryBucketsTest, TtlBeyondTheNewestBucketStaysInTheFilteredFamily) {
  EngineHarness h(BucketOptions());
  ASSERT_TRUE(h.Open().ok());
  ASSERT_EQ(Deliver(h.engine(), "long", "r", 3 * kBucketWindow).outcome,
            Outcome::kProcessed);
  EXPECT_EQ(BucketFamilies(h.path()), 0);
  ASSERT_EQ(Deliver(h.engine(), "short", "r", absl::Minutes(1)).outcome,
            Outcome::kProcessed);
  EXPECT_EQ(BucketFamilies(h.path()), 1);
  // Two windows on, every bucket so far has ended and been dropped; the long
  // record is still a duplicate, the short one long gone.
  h.clock().Advance(2 * kBucketWindow);
  EXPECT_EQ(Deliver(h.engine(), "long", "again").outcome, Outcome::kDuplicate);
  EXPECT_EQ(Deliver(h.engine(), "short", "again").outcome, Outcome::kProcessed);
  absl::StatusOr<Stats> stats = h.engine().GetStats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_GE(stats->expiry_buckets_dropped, 1u);
  h.clock().Advance(kBucketWindow + absl::Seconds(1));
  EXPECT_EQ(Deliver(h.engine(), "long", "third").outcome, Outcome::kProcessed);
}

TEST(ExpiryBucketsTest, ForgetRemovesARecordHeldInABucket) {
  EngineHarness h(BucketOptions());
  ASSERT_TRUE(h.Open().ok());
  ASSERT_EQ(Deliver(h.engine(), "a", "first").outcome, Outcome::kProcessed);
  ASSERT_TRUE(h.engine().Forget("a").ok());
  absl::StatusOr<bool> seen = h.engine().Seen("a");
  ASSERT_TRUE(seen.ok()) << seen.status();
  EXPECT_FALSE(*seen);
  Delivered again = Deliver(h.engine(), "a", "second");
  EXPECT_EQ(again.outcome, Outcome::kProcessed);
  EXPECT_EQ(Deliver(h.engine(), "a", "third").result, "second");
}

TEST(ExpiryBucketsTest, ChangingTheBucketCountBetweenOpensKeepsLiveRecords) {
  EngineHarness h(BucketOptions());
  ASSERT_TRUE(OpenWithBuckets(h, kBuckets).ok());
  ASSERT_EQ(Deliver(h.engine(), "in-bucket", "1").outcome, Outcome::kProcessed);
  ASSERT_TRUE(OpenWithBuckets(h, 0).ok());
  EXPECT_EQ(Deliver(h.engine(), "in-bucket", "x").outcome, Outcome::kDuplicate);
  ASSERT_EQ(Deliver(h.engine(), "filtered", "2").outcome, Outcome::kProcessed);
  h.clock().Advance(absl::Minutes(20));
  ASSERT_TRUE(OpenWithBuckets(h, 7).ok());
  EXPECT_EQ(Deliver(h.engine(), "in-bucket", "x").outcome, Outcome::kDuplicate);
  EXPECT_EQ(Deliver(h.engine(), "filtered", "x").outcome, Outcome::kDuplicate);
  ASSERT_EQ(Deliver(h.engine(), "seven", "3").outcome, Outcome::kProcessed);
  // Past every expiry: all three run again, and a commit drops the ended
  // buckets of both bucket counts (with buckets off, too).
  h.clock().Advance(kBucketWindow + absl::Minutes(30));
  ASSERT_TRUE(OpenWithBuckets(h, 0).ok());
  for (const char* id : {"in-bucket", "filtered", "seven"}) {
    EXPECT_EQ(Deliver(h.engine(), id, "again").outcome, Outcome::kProcessed)
        << id;
  }
  EXPECT_EQ(BucketFamilies(h.path()), 0);
}

TEST(ExpiryBucketsTest, CompactExpiredDropsEndedBuckets) {
  EngineHarness h(BucketOptions());
  ASSERT_TRUE(h.Open().ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(Deliver(h.engine(), absl::StrCat("id", i), "r").outcome,
              Outcome::kProcessed);
    h.clock().Advance(absl::Minutes(20));
  }
  EXPECT_EQ(BucketFamilies(h.path()), 3);
  // id0 expires at 60 min, id1 at 80, id2 at 100; at 85 min the buckets of
  // id0 (and maybe id1) have ended, id2's has not.
  h.clock().Advance(absl::Minutes(25));
  ASSERT_TRUE(h.engine().CompactExpired().ok());
  absl::StatusOr<Stats> stats = h.engine().GetStats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_GE(stats->expiry_buckets_dropped, 1u);
  EXPECT_EQ(stats->expiry_buckets + stats->expiry_buckets_dropped, 3u);
  EXPECT_EQ(BucketFamilies(h.path()), static_cast<int>(stats->expiry_buckets));
  absl::StatusOr<bool> seen = h.engine().Seen("id2");
  ASSERT_TRUE(seen.ok());
  EXPECT_TRUE(*seen);
  h.clock().Advance(kBucketWindow);
  ASSERT_TRUE(h.engine().CompactExpired().ok());
  EXPECT_EQ(BucketFamilies(h.path()), 0);
}

TEST(ExpiryBucketsTest, DroppedBucketsGiveTheirDiskSpaceBack) {
  EngineHarness h(BucketOptions());
  ASSERT_TRUE(h.Open().ok());
  for (int i = 0; i < 2000; ++i) {
    ASSERT_EQ(Deliver(h.engine(), absl::StrCat("id", i), "r").outcome,
              Outcome::kProcessed);
  }
  ASSERT_TRUE(h.engine().CompactExpired().ok());  // flushes the bucket
  absl::StatusOr<Stats> full = h.engine().GetStats();
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_GE(full->dedupe_compaction_write_amplification, 1.0)
      << "RocksDB's figure over the bucket families";
  h.clock().Advance(kBucketWindow + absl::Minutes(20));
  ASSERT_TRUE(h.engine().CompactExpired().ok());
  absl::StatusOr<Stats> emptied = h.engine().GetStats();
  ASSERT_TRUE(emptied.ok()) << emptied.status();
  EXPECT_EQ(emptied->expiry_buckets, 0u);
  EXPECT_EQ(emptied->expiry_buckets_dropped, 1u);
  EXPECT_EQ(emptied->expiry_bucket_records_dropped, 2000u);
  // 2,000 records are tens of KiB of SST; what remains is the other
  // families' few files.
  EXPECT_LT(emptied->live_sst_bytes + 20'000, full->live_sst_bytes)
      << full->live_sst_bytes << " -> " << emptied->live_sst_bytes;
  EXPECT_EQ(emptied->expired_dropped, 0u) << "no record was filtered";
}

TEST(ExpiryBucketsTest, ReadOnlyEngineAndCheckpointSeeBucketRecords) {
  EngineHarness h(BucketOptions());
  ASSERT_TRUE(h.Open().ok());
  ASSERT_EQ(Deliver(h.engine(), "a", "r").outcome, Outcome::kProcessed);
  ASSERT_TRUE(h.engine().Checkpoint(h.Sub("copy")).ok());
  Options options;
  options.clock = &h.clock();
  options.read_only = true;
  for (const std::string& path : {h.path(), h.Sub("copy")}) {
    absl::StatusOr<std::unique_ptr<Engine>> reader =
        Engine::Open(path, options);
    ASSERT_TRUE(reader.ok()) << reader.status();
    absl::StatusOr<bool> seen = (*reader)->Seen("a");
    ASSERT_TRUE(seen.ok()) << seen.status();
    EXPECT_TRUE(*seen) << path;
  }
}

// Creating a bucket writes the MANIFEST: when that fails, the commit fails
// with the fault's code and commits nothing, and once the fault clears the
// retry creates the bucket and commits the message once.
TEST(ExpiryBucketsTest, FailedBucketCreationFailsTheCommitUntilTheFaultClears) {
  Options options = BucketOptions();
  options.durability = Durability::kSync;
  EngineHarness h(options, EngineHarness::Storage::kCrashFileSystem);
  ASSERT_TRUE(h.Open().ok());
  ASSERT_EQ(Deliver(h.engine(), "a", "r").outcome, Outcome::kProcessed);

  // A window later the next message needs a new bucket.
  h.clock().Advance(kBucketWindow);
  h.fs().SetFault(absl::StatusCode::kUnavailable,
                  crash::FaultTarget::kAllFiles);
  Delivered failed = Deliver(h.engine(), "b", "r");
  EXPECT_EQ(failed.status.code(), absl::StatusCode::kUnavailable)
      << failed.status;
  EXPECT_FALSE(failed.handler_ran);
  h.fs().SetFault(absl::StatusCode::kOk);
  Delivered retried = Deliver(h.engine(), "b", "r");
  ASSERT_TRUE(retried.status.ok()) << retried.status;
  EXPECT_EQ(retried.outcome, Outcome::kProcessed);
  EXPECT_EQ(Deliver(h.engine(), "b", "x").outcome, Outcome::kDuplicate);
  EXPECT_EQ(Deliver(h.engine(), "a", "x").outcome, Outcome::kProcessed)
      << "a's record expired a window after it was written";
  ASSERT_TRUE(h.Open().ok());
  EXPECT_EQ(Deliver(h.engine(), "b", "x").outcome, Outcome::kDuplicate);
}

TEST(ExpiryBucketsTest, BadBucketCountsAreRejected) {
  util::TempDir dir;
  for (int buckets : {-1, 65}) {
    Options options;
    options.expiry_buckets = buckets;
    EXPECT_EQ(Engine::Open(dir.Sub("db"), options).status().code(),
              absl::StatusCode::kInvalidArgument)
        << buckets;
  }
  Options options;
  options.dedupe_window = absl::Seconds(10);
  options.expiry_buckets = 20;  // half-second buckets
  EXPECT_EQ(Engine::Open(dir.Sub("db"), options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace idem
