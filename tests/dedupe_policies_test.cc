// The dedupe policies (docs/design.md, "Dedupe policies"): conflicting
// redeliveries (Options::detect_conflicts), the sliding window
// (Options::refresh_on_duplicate), Result::first_processed_at, late
// duplicates and redelivery ages, and remembered permanent failures; and
// that records of the earlier format (version 1) keep working.

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/record.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "tests/testing/engine_test_util.h"

namespace idem {
namespace {

using test::EngineHarness;
using test::kStart;

// Delivers `id` with `payload` (and `fingerprint`) at `offset` of partition
// 0 of "orders"; the handler, if it runs, adds one to state key "runs" and
// sets the result "done:<payload>".
struct Delivery {
  Result result;
  bool handler_ran = false;
};
Delivery Deliver(Engine& engine, std::string_view id, std::string_view payload,
                 int64_t offset = -1, std::string_view fingerprint = "",
                 absl::Duration ttl = absl::ZeroDuration()) {
  Message m;
  m.id = id;
  m.payload = payload;
  m.fingerprint = fingerprint;
  m.ttl = ttl;
  if (offset >= 0) {
    m.source = "orders";
    m.offset = offset;
  }
  Delivery run;
  absl::StatusOr<Result> r =
      engine.Process(m, [&](const Message& msg, Txn& txn) -> absl::Status {
        run.handler_ran = true;
        absl::StatusOr<std::optional<std::string>> runs = txn.Get("runs");
        if (!runs.ok()) return runs.status();
        const int n = runs->has_value() ? std::stoi(**runs) : 0;
        txn.Put("runs", std::to_string(n + 1));
        txn.SetResult("done:" + std::string(msg.payload));
        return absl::OkStatus();
      });
  EXPECT_TRUE(r.ok()) << r.status();
  if (r.ok()) run.result = *r;
  return run;
}

std::string Runs(Engine& engine) {
  absl::StatusOr<std::optional<std::string>> v = engine.GetState("runs");
  EXPECT_TRUE(v.ok());
  return v.ok() && v->has_value() ? **v : "";
}

// The dedupe records Dump shows for `id`.
std::vector<DumpEntry> RecordsOf(Engine& engine, std::string_view id) {
  std::vector<DumpEntry> found;
  const std::string hex = test::HexOfIdHash(id);
  EXPECT_TRUE(engine
                  .Dump([&](const DumpEntry& e) {
                    if (e.kind == DumpEntry::Kind::kDedupe && e.key == hex) {
                      found.push_back(e);
                    }
                    return absl::OkStatus();
                  })
                  .ok());
  return found;
}

Options ConflictOptions() {
  Options options;
  options.detect_conflicts = true;
  return options;
}

// ---- Conflicts ----

TEST(DedupePoliciesTest, RedeliveryWithOtherPayloadIsAConflict) {
  EngineHarness h(ConflictOptions());
  ASSERT_TRUE(h.Open().ok());
  ASSERT_EQ(Deliver(h.engine(), "a", "pay 10", 0).result.outcome,
            Outcome::kProcessed);
  const std::vector<DumpEntry> before = RecordsOf(h.engine(), "a");
  h.clock().Advance(absl::Seconds(5));
  const Delivery conflict = Deliver(h.engine(), "a", "pay 99", 1);
  EXPECT_EQ(conflict.result.outcome, Outcome::kConflict);
  EXPECT_FALSE(conflict.handler_ran);
  EXPECT_EQ(conflict.result.result, "done:pay 10");  // the first delivery's
  EXPECT_GT(conflict.result.sequence, 0u);
  EXPECT_EQ(conflict.result.first_processed_at, kStart);
  // Nothing written but the offset, which advances as for a duplicate.
  EXPECT_EQ(Runs(h.engine()), "1");
  const std::vector<DumpEntry> after = RecordsOf(h.engine(), "a");
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].expires_at, before[0].expires_at);
  EXPECT_EQ(after[0].fingerprint, before[0].fingerprint);
  EXPECT_EQ(*h.engine().CommittedOffset("orders", 0), 1);
  // The same content again is a duplicate.
  EXPECT_EQ(Deliver(h.engine(), "a", "pay 10", 2).result.outcome,
            Outcome::kDuplicate);
  absl::StatusOr<Stats> stats = h.engine().GetStats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->conflicts, 1u);
  EXPECT_EQ(stats->duplicates, 1u);
  EXPECT_EQ(stats->processed, 1u);
}

TEST(DedupePoliciesTest, FingerprintFieldReplacesThePayload) {
  EngineHarness h(ConflictOptions());
  ASSERT_TRUE(h.Open().ok());
  ASSERT_EQ(Deliver(h.engine(), "a", "v1", -1, "order-7").result.outcome,
            Outcome::kProcessed);
  // Same fingerprint, other payload (say, a new delivery timestamp): the
  // same message.
  EXPECT_EQ(Deliver(h.engine(), "a", "v2", -1, "order-7").result.outcome,
            Outcome::kDuplicate);
  EXPECT_EQ(Deliver(h.engine(), "a", "v1", -1, "order-8").result.outcome,
            Outcome::kConflict);
}

TEST(DedupePoliciesTest, WithoutDetectConflictsEveryRedeliveryIsADuplicate) {
  EngineHarness h;
  ASSERT_TRUE(h.Open().ok());
  ASSERT_EQ(Deliver(h.engine(), "a", "pay 10").result.outcome,
            Outcome::kProcessed);
  EXPECT_EQ(Deliver(h.engine(), "a", "pay 99").result.outcome,
            Outcome::kDuplicate);
  const std::vector<DumpEntry> records = RecordsOf(h.engine(), "a");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_FALSE(records[0].fingerprint.has_value());  // no bytes spent on it
  // Records written without fingerprints stay duplicates once it is on.
  h.options().detect_conflicts = true;
  ASSERT_TRUE(h.Open().ok());
  EXPECT_EQ(Deliver(h.engine(), "a", "pay 99").result.outcome,
            Outcome::kDuplicate);
}

TEST(DedupePoliciesTest, ConflictWithinOneBatch) {
  EngineHarness h(ConflictOptions());
  ASSERT_TRUE(h.Open().ok());
  std::vector<Message> batch(3);
  batch[0].id = "a";
  batch[0].payload = "x";
  batch[1].id = "a";
  batch[1].payload = "y";
  batch[2].id = "a";
  batch[2].payload = "x";
  for (int i = 0; i < 3; ++i) {
    batch[i].source = "orders";
    batch[i].offset = i;
  }
  absl::StatusOr<std::vector<Result>> results =
      h.engine().ProcessBatch(batch, [](const Message& m, Txn& txn) {
        txn.SetResult(m.payload);
        return absl::OkStatus();
      });
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_EQ(test::Outcomes(*results),
            (std::vector<Outcome>{Outcome::kProcessed, Outcome::kConflict,
                                  Outcome::kDuplicate}));
  EXPECT_EQ((*results)[1].result, "x");
  EXPECT_EQ(*h.engine().CommittedOffset("orders", 0), 2);
}

TEST(DedupePoliciesTest, ConcurrentConflictingDeliveriesProcessOnce) {
  EngineHarness h(ConflictOptions());
  ASSERT_TRUE(h.Open().ok());
  constexpr int kThreads = 8;
  std::atomic<int> processed{0}, conflicts{0}, other{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const std::string payload = absl::StrCat("content-", t);
      const Delivery run = Deliver(h.engine(), "shared-id", payload);
      switch (run.result.outcome) {
        case Outcome::kProcessed:
          ++processed;
          break;
        case Outcome::kConflict:
          ++conflicts;
          break;
        default:
          ++other;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(processed.load(), 1);
  EXPECT_EQ(conflicts.load(), kThreads - 1);
  EXPECT_EQ(other.load(), 0);
  EXPECT_EQ(Runs(h.engine()), "1");
}

// ---- First processed ----

TEST(DedupePoliciesTest, FirstProcessedAtIsTheFirstCommitsTime) {
  EngineHarness h;
  ASSERT_TRUE(h.Open().ok());
  h.clock().Advance(absl::Milliseconds(1500));
  const absl::Time first = kStart + absl::Milliseconds(1500);
  const Delivery processed = Deliver(h.engine(), "a", "x");
  EXPECT_EQ(processed.result.first_processed_at, first);
  h.clock().Advance(absl::Hours(3));
  ASSERT_TRUE(h.Open().ok());  // read from the store, not from memory
  const Delivery duplicate = Deliver(h.engine(), "a", "x");
  ASSERT_EQ(duplicate.result.outcome, Outcome::kDuplicate);
  // Stored at one-second precision: at most a second early.
  EXPECT_LE(duplicate.result.first_processed_at, first);
  EXPECT_GT(duplicate.result.first_processed_at, first - absl::Seconds(1));
  const std::vector<DumpEntry> records = RecordsOf(h.engine(), "a");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].record_version, 2);
  EXPECT_EQ(records[0].first_processed_at, duplicate.result.first_processed_at);
}

// A store written by a build before record version 2: its records are
// version 1 values (version byte, expiry, result).
TEST(DedupePoliciesTest, VersionOneRecordReadsAsDuplicateWithUnknownTime) {
  EngineHarness h(ConflictOptions());
  ASSERT_TRUE(h.Open().ok());
  h.Close();
  const int64_t expiry = absl::ToUnixMicros(kStart + absl::Hours(1));
  test::ChangeRawFamily(
      h.path(), "idem.dedupe",
      [&](rocksdb::DB* db, rocksdb::ColumnFamilyHandle* family) {
        const DedupeKey key = HashMessageId("old");
        ASSERT_TRUE(db->Put({}, family, rocksdb::Slice(key.data(), key.size()),
                            EncodeDedupeRecordV1(expiry, "old-result"))
                        .ok());
      });
  ASSERT_TRUE(h.Open().ok());
  h.clock().Advance(absl::Minutes(10));
  // Whatever the payload: a version 1 record has no fingerprint.
  const Delivery run = Deliver(h.engine(), "old", "any content");
  EXPECT_EQ(run.result.outcome, Outcome::kDuplicate);
  EXPECT_FALSE(run.handler_ran);
  EXPECT_EQ(run.result.result, "old-result");
  EXPECT_EQ(run.result.first_processed_at, absl::InfinitePast());
  const std::vector<DumpEntry> records = RecordsOf(h.engine(), "old");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].record_version, 1);
  EXPECT_EQ(records[0].value, "old-result");
  EXPECT_EQ(records[0].first_processed_at, absl::InfinitePast());
  // It expires as it always did.
  h.clock().Advance(absl::Minutes(50));
  EXPECT_EQ(Deliver(h.engine(), "old", "any content").result.outcome,
            Outcome::kProcessed);
  absl::StatusOr<Stats> stats = h.engine().GetStats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->late_duplicates, 0u);  // its window is unknown
}

// ---- Sliding window ----

TEST(DedupePoliciesTest, WithoutRefreshExpiryIsFixedAtFirstProcessing) {
  Options options;
  options.dedupe_window = absl::Hours(1);
  EngineHarness h(options);
  ASSERT_TRUE(h.Open().ok());
  ASSERT_EQ(Deliver(h.engine(), "a", "x").result.outcome, Outcome::kProcessed);
  h.clock().Advance(absl::Minutes(50));
  ASSERT_EQ(Deliver(h.engine(), "a", "x").result.outcome, Outcome::kDuplicate);
  h.clock().Advance(absl::Minutes(11));
  EXPECT_EQ(Deliver(h.engine(), "a", "x").result.outcome, Outcome::kProcessed);
}

TEST(DedupePoliciesTest, RefreshOnDuplicateSlidesTheWindow) {
  Options options;
  options.dedupe_window = absl::Hours(1);
  options.refresh_on_duplicate = true;
  EngineHarness h(options);
  ASSERT_TRUE(h.Open().ok());
  ASSERT_EQ(Deliver(h.engine(), "a", "x").result.outcome, Outcome::kProcessed);
  for (int i = 1; i <= 3; ++i) {
    h.clock().Advance(absl::Minutes(50));
    const Delivery run = Deliver(h.engine(), "a", "x");
    ASSERT_EQ(run.result.outcome, Outcome::kDuplicate) << i;
    EXPECT_EQ(run.result.first_processed_at, kStart);  // stays the first
  }
  const std::vector<DumpEntry> records = RecordsOf(h.engine(), "a");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].expires_at, kStart + absl::Minutes(150 + 60));
  EXPECT_EQ(records[0].first_processed_at, kStart);
  h.clock().Advance(absl::Minutes(61));
  EXPECT_EQ(Deliver(h.engine(), "a", "x").result.outcome, Outcome::kProcessed);
}

// Regression: a duplicate with a 1 us ttl cut a 1 h record to 1 us, and the
// next delivery ran again. A refresh only ever extends a record's life.
TEST(DedupePoliciesTest, RefreshNeverBringsAnExpiryEarlier) {
  for (int buckets : {0, 4}) {
    SCOPED_TRACE(buckets);
    Options options;
    options.dedupe_window = absl::Hours(4);
    options.expiry_buckets = buckets;
    options.refresh_on_duplicate = true;
    EngineHarness h(options);
    ASSERT_TRUE(h.Open().ok());
    ASSERT_EQ(Deliver(h.engine(), "a", "x").result.outcome,
              Outcome::kProcessed);
    h.clock().Advance(absl::Minutes(10));
    ASSERT_EQ(Deliver(h.engine(), "a", "x", -1, "", absl::Microseconds(1))
                  .result.outcome,
              Outcome::kDuplicate);
    std::vector<DumpEntry> records = RecordsOf(h.engine(), "a");
    ASSERT_EQ(records.size(), 1u);
    EXPECT_EQ(records[0].expires_at, kStart + absl::Hours(4));
    h.clock().Advance(absl::Hours(1));
    EXPECT_EQ(Deliver(h.engine(), "a", "x").result.outcome,
              Outcome::kDuplicate);
    // A longer one still extends it.
    records = RecordsOf(h.engine(), "a");
    ASSERT_EQ(records.size(), 1u);
    EXPECT_EQ(records[0].expires_at,
              kStart + absl::Minutes(70) + absl::Hours(4));
  }
}

TEST(DedupePoliciesTest, RefreshMovesTheRecordToItsNewBucket) {
  Options options;
  options.dedupe_window = absl::Hours(4);
  options.expiry_buckets = 4;
  options.refresh_on_duplicate = true;
  EngineHarness h(options);
  ASSERT_TRUE(h.Open().ok());
  ASSERT_EQ(Deliver(h.engine(), "a", "x").result.outcome, Outcome::kProcessed);
  h.clock().Advance(absl::Hours(3));
  ASSERT_EQ(Deliver(h.engine(), "a", "x").result.outcome, Outcome::kDuplicate);
  // One record, in the bucket of its new expiry: the old bucket's copy went
  // in the same commit.
  std::vector<DumpEntry> records = RecordsOf(h.engine(), "a");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].expires_at, kStart + absl::Hours(7));
  // The first bucket ends and is dropped whole; the record lives on.
  h.clock().Advance(absl::Hours(2));
  ASSERT_TRUE(h.engine().CompactExpired().ok());
  absl::StatusOr<Stats> stats = h.engine().GetStats();
  ASSERT_TRUE(stats.ok());
  EXPECT_GE(stats->expiry_buckets_dropped, 1u);
  EXPECT_EQ(Deliver(h.engine(), "a", "x").result.outcome, Outcome::kDuplicate);
  records = RecordsOf(h.engine(), "a");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].expires_at, kStart + absl::Hours(9));
}

// ---- Late duplicates and redelivery ages ----

TEST(DedupePoliciesTest, LateDuplicatesAndRedeliveryAges) {
  Options options;
  options.dedupe_window = absl::Seconds(100);
  EngineHarness h(options);
  ASSERT_TRUE(h.Open().ok());
  absl::StatusOr<Stats> stats = h.engine().GetStats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->redelivery_age_max, absl::ZeroDuration());
  ASSERT_EQ(Deliver(h.engine(), "a", "x").result.outcome, Outcome::kProcessed);
  h.clock().Advance(absl::Seconds(50));  // half way: in time
  ASSERT_EQ(Deliver(h.engine(), "a", "x").result.outcome, Outcome::kDuplicate);
  h.clock().Advance(absl::Seconds(29));  // 79%: in time
  ASSERT_EQ(Deliver(h.engine(), "a", "x").result.outcome, Outcome::kDuplicate);
  h.clock().Advance(absl::Seconds(11));  // 90%: late
  ASSERT_EQ(Deliver(h.engine(), "a", "x").result.outcome, Outcome::kDuplicate);
  stats = h.engine().GetStats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->duplicates, 3u);
  EXPECT_EQ(stats->late_duplicates, 1u);
  // Ages 50 s, 79 s and 90 s, within the histogram's 4.4%.
  EXPECT_EQ(stats->redelivery_age_max, absl::Seconds(90));
  EXPECT_GE(stats->redelivery_age_p50, absl::Seconds(79));
  EXPECT_LE(stats->redelivery_age_p50, absl::Seconds(83));
  EXPECT_EQ(stats->redelivery_age_p99, absl::Seconds(90));
}

// ---- Remembered permanent failures ----

absl::Status RejectUnknownAccount(const Message&, Txn& txn) {
  txn.Put("touched", "yes");  // dropped with the failure
  return PermanentError(absl::InvalidArgumentError("no account 42"));
}

TEST(DedupePoliciesTest, PermanentFailureIsRememberedAcrossReopen) {
  EngineHarness h;
  ASSERT_TRUE(h.Open().ok());
  Message m;
  m.id = "bad";
  m.source = "orders";
  m.offset = 7;
  absl::StatusOr<Result> first = h.engine().Process(m, RejectUnknownAccount);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->outcome, Outcome::kFailed);
  EXPECT_TRUE(first->permanent);
  EXPECT_TRUE(IsPermanentError(first->error));
  EXPECT_EQ(first->error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_GT(first->sequence, 0u);
  EXPECT_EQ(*h.engine().CommittedOffset("orders", 0), 7);  // moved past it
  EXPECT_FALSE(h.engine().GetState("touched")->has_value());

  h.clock().Advance(absl::Minutes(1));
  ASSERT_TRUE(h.Open().ok());
  m.offset = 8;
  int runs = 0;
  absl::StatusOr<Result> again =
      h.engine().Process(m, [&](const Message&, Txn&) {
        ++runs;
        return absl::OkStatus();
      });
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(runs, 0);
  EXPECT_EQ(again->outcome, Outcome::kFailed);
  EXPECT_TRUE(again->permanent);
  EXPECT_EQ(again->error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(again->error.message(), "no account 42");
  EXPECT_TRUE(IsPermanentError(again->error));
  EXPECT_EQ(again->first_processed_at, kStart);
  EXPECT_EQ(*h.engine().CommittedOffset("orders", 0), 8);
  const std::vector<DumpEntry> records = RecordsOf(h.engine(), "bad");
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].failure.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(records[0].failure.message(), "no account 42");

  // Forget clears it: the next delivery runs.
  ASSERT_TRUE(h.engine().Forget("bad").ok());
  absl::StatusOr<Result> after = h.engine().Process(m, test::AddOne);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->outcome, Outcome::kProcessed);
}

TEST(DedupePoliciesTest, PermanentFailureExpiresWithItsRecord) {
  Options options;
  options.dedupe_window = absl::Minutes(10);
  EngineHarness h(options);
  ASSERT_TRUE(h.Open().ok());
  Message m;
  m.id = "bad";
  ASSERT_TRUE(h.engine().Process(m, RejectUnknownAccount)->permanent);
  h.clock().Advance(absl::Minutes(10));
  absl::StatusOr<Result> after = h.engine().Process(m, test::AddOne);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->outcome, Outcome::kProcessed);
}

TEST(DedupePoliciesTest, TransientFailureIsNotRemembered) {
  EngineHarness h;
  ASSERT_TRUE(h.Open().ok());
  Message m;
  m.id = "flaky";
  m.source = "orders";
  m.offset = 3;
  absl::StatusOr<Result> first =
      h.engine().Process(m, [](const Message&, Txn&) {
        return absl::UnavailableError("downstream down");
      });
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->outcome, Outcome::kFailed);
  EXPECT_FALSE(first->permanent);
  EXPECT_EQ(first->sequence, 0u);
  EXPECT_FALSE(h.engine().CommittedOffset("orders", 0)->has_value());
  EXPECT_EQ(h.engine().Process(m, test::AddOne)->outcome, Outcome::kProcessed);
}

TEST(DedupePoliciesTest, PermanentFailureAnswersLaterCopiesInItsBatch) {
  EngineHarness h;
  ASSERT_TRUE(h.Open().ok());
  std::vector<Message> batch(2);
  batch[0].id = batch[1].id = "bad";
  int runs = 0;
  absl::StatusOr<std::vector<Result>> results =
      h.engine().ProcessBatch(batch, [&](const Message& m, Txn& txn) {
        ++runs;
        return RejectUnknownAccount(m, txn);
      });
  ASSERT_TRUE(results.ok());
  EXPECT_EQ(runs, 1);
  EXPECT_TRUE((*results)[1].permanent);
  EXPECT_EQ((*results)[1].error.message(), "no account 42");
}

// Other content under a remembered failure's ID is a conflict; the failure's
// message is not handed out as a result.
TEST(DedupePoliciesTest, OtherContentUnderARememberedFailureIsAConflict) {
  EngineHarness h(ConflictOptions());
  ASSERT_TRUE(h.Open().ok());
  Message m;
  m.id = "bad";
  m.payload = "v1";
  ASSERT_TRUE(h.engine().Process(m, RejectUnknownAccount)->permanent);
  const Delivery run = Deliver(h.engine(), "bad", "v2");
  EXPECT_EQ(run.result.outcome, Outcome::kConflict);
  EXPECT_FALSE(run.handler_ran);
  EXPECT_TRUE(run.result.result.empty());
  EXPECT_EQ(Deliver(h.engine(), "bad", "v1").result.outcome, Outcome::kFailed);
}

TEST(DedupePoliciesTest, PermanentErrorOfOkIsUnknown) {
  const absl::Status s = PermanentError(absl::OkStatus());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnknown);
  EXPECT_TRUE(IsPermanentError(s));
  EXPECT_FALSE(IsPermanentError(absl::InvalidArgumentError("x")));
  EXPECT_FALSE(IsPermanentError(absl::OkStatus()));
}

}  // namespace
}  // namespace idem
