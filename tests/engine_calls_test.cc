// The engine's other calls: re-entrancy from handlers, Forget, Checkpoint,
// Dump, Stats, per-message ttl and durability sequences.

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "idem/stats.h"
#include "rocksdb/db.h"
#include "tests/testing/engine_test_util.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

using test::AddOne;
using test::CreateRocksDb;
using test::HexOfIdHash;
using test::kStart;
using test::Names;
using test::Outcomes;
using test::SnapshotTree;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace fs = std::filesystem;

// ============================================================================
// Re-entrancy.
// ============================================================================

TEST(EngineCallsTest, ProcessFromInsideAHandlerFailsWithFailedPrecondition) {
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  int inner_calls = 0;
  auto inner = [&](const Message&, Txn&) {
    ++inner_calls;
    return absl::OkStatus();
  };
  absl::Status nested_process;
  absl::Status nested_batch;
  auto outer = [&](const Message& m, Txn& txn) {
    nested_process = engine->Process({.id = "inner"}, inner).status();
    const std::vector<Message> batch = {{.id = "inner2"}};
    nested_batch = engine->ProcessBatch(batch, inner).status();
    return AddOne(m, txn);
  };
  auto r = engine->Process({.id = "outer"}, outer);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outcome, Outcome::kProcessed);
  EXPECT_EQ(nested_process.code(), absl::StatusCode::kFailedPrecondition)
      << nested_process;
  EXPECT_EQ(nested_batch.code(), absl::StatusCode::kFailedPrecondition)
      << nested_batch;
  EXPECT_EQ(inner_calls, 0);
  EXPECT_TRUE(*engine->Seen("outer"));
  EXPECT_FALSE(*engine->Seen("inner"));
  EXPECT_FALSE(*engine->Seen("inner2"));
  EXPECT_EQ(*engine->GetState("counter"), std::optional<std::string>("1"));
  // The engine is usable afterwards.
  auto next = engine->Process({.id = "next"}, AddOne);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->outcome, Outcome::kProcessed);
}

TEST(EngineCallsTest, HandlerMayProcessOnADifferentEngine) {
  util::TempDir dir;
  ASSERT_OPEN(first, dir.Sub("first"), Options());
  ASSERT_OPEN(second, dir.Sub("second"), Options());
  absl::StatusOr<Result> nested;
  auto outer = [&](const Message& m, Txn& txn) {
    nested = second->Process({.id = "x"}, AddOne);
    return AddOne(m, txn);
  };
  ASSERT_TRUE(first->Process({.id = "x"}, outer).ok());
  ASSERT_TRUE(nested.ok()) << nested.status();
  EXPECT_EQ(nested->outcome, Outcome::kProcessed);
  EXPECT_TRUE(*second->Seen("x"));
}

// ============================================================================
// Forget.
// ============================================================================

TEST(EngineCallsTest, ForgetMakesNextDeliveryRunTheHandlerAgain) {
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  ASSERT_TRUE(engine->Process({.id = "a"}, AddOne).ok());
  ASSERT_TRUE(engine->Process({.id = "b"}, AddOne).ok());
  ASSERT_TRUE(engine->Forget("a").ok());
  EXPECT_FALSE(*engine->Seen("a"));
  EXPECT_TRUE(*engine->Seen("b"));
  // State writes are untouched by Forget.
  EXPECT_EQ(*engine->GetState("counter"), std::optional<std::string>("2"));
  auto r = engine->Process({.id = "a"}, AddOne);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outcome, Outcome::kProcessed);
  EXPECT_EQ(*engine->GetState("counter"), std::optional<std::string>("3"));
  auto b = engine->Process({.id = "b"}, AddOne);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->outcome, Outcome::kDuplicate);
}

TEST(EngineCallsTest, ForgetOfUnknownIdSucceeds) {
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  EXPECT_TRUE(engine->Forget("never-seen").ok());
  EXPECT_FALSE(*engine->Seen("never-seen"));
}

TEST(EngineCallsTest, ForgetPersistsAcrossReopen) {
  util::TempDir dir;
  const std::string path = dir.Sub("db");
  {
    ASSERT_OPEN(engine, path, Options());
    ASSERT_TRUE(engine->Process({.id = "a"}, AddOne).ok());
    ASSERT_TRUE(engine->Forget("a").ok());
  }
  ASSERT_OPEN(engine, path, Options());
  EXPECT_FALSE(*engine->Seen("a"));
}

// ============================================================================
// Checkpoint.
// ============================================================================

TEST(EngineCallsTest, CheckpointIsAnOpenableCopyOfTheStoreAtThatMoment) {
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  const std::vector<Message> batch = {{.id = "a", .source = "t", .offset = 1},
                                      {.id = "b", .source = "t", .offset = 2}};
  ASSERT_TRUE(engine->ProcessBatch(batch, AddOne).ok());
  const std::string copy = dir.Sub("copy");
  ASSERT_TRUE(engine->Checkpoint(copy).ok());
  // Later commits to the original do not reach the copy.
  ASSERT_TRUE(
      engine->Process({.id = "c", .source = "t", .offset = 3}, AddOne).ok());

  ASSERT_OPEN(restored, copy, Options());
  EXPECT_EQ(*restored->GetState("counter"), std::optional<std::string>("2"));
  EXPECT_TRUE(*restored->Seen("a"));
  EXPECT_TRUE(*restored->Seen("b"));
  EXPECT_FALSE(*restored->Seen("c"));
  EXPECT_EQ(*restored->CommittedOffset("t", 0), std::optional<int64_t>(2));
  auto dup = restored->Process({.id = "a"}, AddOne);
  ASSERT_TRUE(dup.ok());
  EXPECT_EQ(dup->outcome, Outcome::kDuplicate);
  EXPECT_EQ(dup->result, "done:a");
  // And commits to the copy do not reach the original.
  ASSERT_TRUE(restored->Process({.id = "d"}, AddOne).ok());
  EXPECT_FALSE(*engine->Seen("d"));
  EXPECT_EQ(*engine->GetState("counter"), std::optional<std::string>("3"));
}

TEST(EngineCallsTest,
     CheckpointIntoExistingPathIsInvalidArgumentAndTouchesNothing) {
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  ASSERT_TRUE(engine->Process({.id = "a"}, AddOne).ok());
  const std::string existing = dir.Sub("existing");
  fs::create_directory(existing);
  { std::ofstream(existing + "/keep.txt") << "keep"; }
  const auto before = SnapshotTree(existing);
  EXPECT_EQ(engine->Checkpoint(existing).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(SnapshotTree(existing) == before);

  const std::string empty = dir.Sub("empty");
  fs::create_directory(empty);
  EXPECT_EQ(engine->Checkpoint(empty).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(fs::is_empty(empty));
}

// ============================================================================
// Dump.
// ============================================================================

TEST(EngineCallsTest, DumpVisitsDedupeThenStateThenOffsetEntries) {
  util::TempDir dir;
  ManualClock clock(kStart);
  Options options;
  options.clock = &clock;
  options.dedupe_window = absl::Hours(1);
  ASSERT_OPEN(engine, dir.Sub("db"), options);
  auto handler = [](const Message& m, Txn& txn) {
    txn.Put(absl::StrCat("key-", std::string(m.id)), std::string(m.payload));
    txn.SetResult(absl::StrCat("res-", std::string(m.id)));
    return absl::OkStatus();
  };
  const std::vector<Message> batch = {{.id = "long",
                                       .payload = "v1",
                                       .source = "t",
                                       .partition = 3,
                                       .offset = 42},
                                      {.id = "short",
                                       .payload = "v2",
                                       .source = "s",
                                       .partition = 0,
                                       .offset = 7,
                                       .ttl = absl::Minutes(10)}};
  ASSERT_TRUE(engine->ProcessBatch(batch, handler).ok());
  clock.Advance(absl::Minutes(30));

  std::vector<DumpEntry> entries;
  ASSERT_TRUE(engine
                  ->Dump([&](const DumpEntry& e) {
                    entries.push_back(e);
                    return absl::OkStatus();
                  })
                  .ok());
  ASSERT_EQ(entries.size(), 6u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(entries[i].kind, DumpEntry::Kind::kDedupe) << i;
  }
  for (int i = 2; i < 4; ++i) {
    EXPECT_EQ(entries[i].kind, DumpEntry::Kind::kState) << i;
  }
  for (int i = 4; i < 6; ++i) {
    EXPECT_EQ(entries[i].kind, DumpEntry::Kind::kOffset) << i;
  }
  // Dedupe entries: hex of the ID hash, in key order.
  EXPECT_LT(entries[0].key, entries[1].key);
  std::map<std::string, DumpEntry> dedupe = {{entries[0].key, entries[0]},
                                             {entries[1].key, entries[1]}};
  ASSERT_EQ(dedupe.count(HexOfIdHash("long")), 1u);
  ASSERT_EQ(dedupe.count(HexOfIdHash("short")), 1u);
  const DumpEntry& live = dedupe[HexOfIdHash("long")];
  const DumpEntry& expired = dedupe[HexOfIdHash("short")];
  EXPECT_EQ(live.value, "res-long");
  EXPECT_EQ(live.expires_at, kStart + absl::Hours(1));
  EXPECT_FALSE(live.expired);
  EXPECT_EQ(expired.value, "res-short");
  EXPECT_EQ(expired.expires_at, kStart + absl::Minutes(10));
  EXPECT_TRUE(expired.expired);
  // State entries in key order.
  EXPECT_EQ(entries[2].key, "key-long");
  EXPECT_EQ(entries[2].value, "v1");
  EXPECT_EQ(entries[3].key, "key-short");
  EXPECT_EQ(entries[3].value, "v2");
  // Offset entries in key order ("s" < "t").
  EXPECT_EQ(entries[4].key, "s");
  EXPECT_EQ(entries[4].partition, 0);
  EXPECT_EQ(entries[4].offset, 7);
  EXPECT_EQ(entries[4].value, "");
  EXPECT_EQ(entries[5].key, "t");
  EXPECT_EQ(entries[5].partition, 3);
  EXPECT_EQ(entries[5].offset, 42);
}

TEST(EngineCallsTest, DumpStopsAtAndReturnsTheVisitorsFirstError) {
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  const std::vector<Message> batch = {
      {.id = "a", .source = "t", .offset = 1}, {.id = "b"}, {.id = "c"}};
  ASSERT_TRUE(engine->ProcessBatch(batch, AddOne).ok());
  int visits = 0;
  absl::Status s = engine->Dump([&](const DumpEntry&) -> absl::Status {
    ++visits;
    if (visits == 2) return absl::CancelledError("stop here");
    if (visits > 2) return absl::InternalError("visited past the error");
    return absl::OkStatus();
  });
  EXPECT_EQ(s, absl::CancelledError("stop here"));
  EXPECT_EQ(visits, 2);
}

TEST(EngineCallsTest, DumpOfEmptyStoreVisitsNothing) {
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  int visits = 0;
  EXPECT_TRUE(engine
                  ->Dump([&](const DumpEntry&) {
                    ++visits;
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_EQ(visits, 0);
}

// ============================================================================
// Stats.
// ============================================================================

TEST(EngineCallsTest, StatsCountOutcomesAndWrittenBytes) {
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  auto initial = engine->GetStats();
  ASSERT_TRUE(initial.ok()) << initial.status();
  EXPECT_EQ(initial->processed, 0u);
  EXPECT_EQ(initial->user_bytes, 0u);
  EXPECT_EQ(initial->write_amplification, 0);

  auto handler = [](const Message& m, Txn& txn) -> absl::Status {
    if (m.payload == "fail") return absl::UnavailableError("no");
    return AddOne(m, txn);
  };
  const std::vector<Message> batch = {{.id = "a"},
                                      {.id = "b"},
                                      {.id = "a"},
                                      {.id = "c", .payload = "fail"},
                                      {.id = "d"}};
  ASSERT_TRUE(engine->ProcessBatch(batch, handler).ok());
  ASSERT_TRUE(engine->Process({.id = "b"}, handler).ok());
  ASSERT_TRUE(engine->Process({.id = "e", .payload = "fail"}, handler).ok());

  auto stats = engine->GetStats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->processed, 3u);
  EXPECT_EQ(stats->duplicates, 2u);
  EXPECT_EQ(stats->failed, 2u);
  EXPECT_GT(stats->user_bytes, 0u);
  EXPECT_GT(stats->wal_bytes, 0u);
  EXPECT_GT(stats->write_amplification, 0);
  EXPECT_DOUBLE_EQ(stats->write_amplification,
                   static_cast<double>(stats->wal_bytes + stats->flush_bytes +
                                       stats->compaction_bytes) /
                       static_cast<double>(stats->user_bytes));
}

TEST(EngineCallsTest, StatsReportRocksDbsOwnFiguresAfterAFlush) {
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  std::vector<std::string> ids;
  for (int i = 0; i < 2000; ++i) ids.push_back("id-" + std::to_string(i));
  std::vector<Message> batch;
  for (const std::string& id : ids) batch.push_back({.id = id});
  ASSERT_TRUE(engine->ProcessBatch(batch, AddOne).ok());
  auto before = engine->GetStats();
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_GT(before->memtable_bytes, 0u);
  EXPECT_EQ(before->dedupe_compaction_write_amplification, 0);  // no flush yet

  ASSERT_TRUE(engine->CompactExpired().ok());  // flush + compaction
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(engine->Seen("absent-" + std::to_string(i)).ok());
    ASSERT_TRUE(engine->Seen(ids[i]).ok());
  }
  auto after = engine->GetStats();
  ASSERT_TRUE(after.ok()) << after.status();
  // Flushed once and compacted once: W-Amp (flush + compaction) / flush.
  EXPECT_GE(after->dedupe_compaction_write_amplification, 1.0);
  EXPECT_GT(after->flush_bytes, 0u);
  EXPECT_GT(after->compaction_bytes, 0u);
  EXPECT_GT(after->table_reader_bytes + after->block_cache_bytes, 0u);
  // Most absent IDs are ruled out by the Bloom filter; present ones pass it
  // and read their data block.
  EXPECT_GT(after->bloom_filter_useful, 100u);
  EXPECT_GE(after->bloom_filter_positive, 200u);
  EXPECT_GT(after->data_blocks_read, 0u);
}

TEST(EngineCallsTest, StatsTimeEachCommitCallInTheirBuckets) {
  test::EngineHarness h(Options(),
                        test::EngineHarness::Storage::kCrashFileSystem);
  ASSERT_TRUE(h.Open().ok());
  const std::vector<Message> batch = {{.id = "a"}, {.id = "b"}, {.id = "a"}};
  ASSERT_TRUE(h.engine().ProcessBatch(batch, AddOne).ok());
  ASSERT_TRUE(h.engine().Process({.id = "c"}, AddOne).ok());
  // A slow device: this commit's WAL sync takes at least 30 ms.
  h.fs().SetWalSyncDelay(absl::Milliseconds(30));
  ASSERT_TRUE(h.engine().Process({.id = "d"}, AddOne).ok());
  h.fs().SetWalSyncDelay(absl::ZeroDuration());

  // From inside a handler (whose commit holds the store lock shared) too.
  absl::StatusOr<Stats> inside;
  ASSERT_TRUE(h.engine()
                  .Process({.id = "e"},
                           [&](const Message& m, Txn& txn) {
                             inside = h.engine().GetStats();
                             return AddOne(m, txn);
                           })
                  .ok());
  ASSERT_TRUE(inside.ok()) << inside.status();
  EXPECT_EQ(inside->commit_durations.count, 3u);

  auto stats = h.engine().GetStats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  const CommitDurations& d = stats->commit_durations;
  EXPECT_EQ(d.count, 4u);  // one per call, whatever its batch size
  uint64_t total = 0, at_least_25ms = 0;
  for (size_t i = 0; i < d.counts.size(); ++i) {
    total += d.counts[i];
    if (i > 0 && kCommitDurationBounds[i - 1] >= 25e-3) {
      at_least_25ms += d.counts[i];
    }
  }
  EXPECT_EQ(total, d.count);
  EXPECT_GE(at_least_25ms, 1u);  // the slow one (others may be slow too)
  EXPECT_GE(d.sum_seconds, 0.03);
}

// ============================================================================
// Expiry and per-message ttl.
// ============================================================================

TEST(EngineCallsTest, RecordExpiresExactlyAtTheEndOfTheWindow) {
  util::TempDir dir;
  ManualClock clock(kStart);
  Options options;
  options.clock = &clock;
  options.dedupe_window = absl::Hours(1);
  ASSERT_OPEN(engine, dir.Sub("db"), options);
  ASSERT_TRUE(engine->Process({.id = "a"}, AddOne).ok());
  clock.Advance(absl::Hours(1) - absl::Microseconds(1));
  EXPECT_TRUE(*engine->Seen("a"));
  auto dup = engine->Process({.id = "a"}, AddOne);
  ASSERT_TRUE(dup.ok());
  EXPECT_EQ(dup->outcome, Outcome::kDuplicate);
  clock.Advance(absl::Microseconds(1));
  EXPECT_FALSE(*engine->Seen("a"));
  auto again = engine->Process({.id = "a"}, AddOne);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->outcome, Outcome::kProcessed);
  EXPECT_EQ(*engine->GetState("counter"), std::optional<std::string>("2"));
}

TEST(EngineCallsTest, PerMessageTtlShorterThanWindowExpiresEarlier) {
  util::TempDir dir;
  ManualClock clock(kStart);
  Options options;
  options.clock = &clock;
  options.dedupe_window = absl::Hours(1);
  ASSERT_OPEN(engine, dir.Sub("db"), options);
  ASSERT_TRUE(
      engine->Process({.id = "short", .ttl = absl::Minutes(1)}, AddOne).ok());
  ASSERT_TRUE(engine->Process({.id = "default"}, AddOne).ok());
  clock.Advance(absl::Minutes(1));
  EXPECT_FALSE(*engine->Seen("short"));
  EXPECT_TRUE(*engine->Seen("default"));
  auto r = engine->Process({.id = "short"}, AddOne);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outcome, Outcome::kProcessed);
}

TEST(EngineCallsTest, PerMessageTtlLongerThanWindowOutlivesIt) {
  util::TempDir dir;
  ManualClock clock(kStart);
  Options options;
  options.clock = &clock;
  options.dedupe_window = absl::Hours(1);
  ASSERT_OPEN(engine, dir.Sub("db"), options);
  ASSERT_TRUE(
      engine->Process({.id = "long", .ttl = absl::Hours(3)}, AddOne).ok());
  ASSERT_TRUE(engine->Process({.id = "default"}, AddOne).ok());
  clock.Advance(absl::Hours(2));
  EXPECT_TRUE(*engine->Seen("long"));
  EXPECT_FALSE(*engine->Seen("default"));
  auto dup = engine->Process({.id = "long"}, AddOne);
  ASSERT_TRUE(dup.ok());
  EXPECT_EQ(dup->outcome, Outcome::kDuplicate);
  clock.Advance(absl::Hours(1));
  EXPECT_FALSE(*engine->Seen("long"));
}

TEST(EngineCallsTest, ReprocessedIdAfterExpiryGetsAFreshWindow) {
  util::TempDir dir;
  ManualClock clock(kStart);
  Options options;
  options.clock = &clock;
  options.dedupe_window = absl::Hours(1);
  ASSERT_OPEN(engine, dir.Sub("db"), options);
  ASSERT_TRUE(engine->Process({.id = "a"}, AddOne).ok());
  clock.Advance(absl::Hours(2));
  auto again = engine->Process({.id = "a"}, AddOne);
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->outcome, Outcome::kProcessed);
  clock.Advance(absl::Minutes(59));
  EXPECT_TRUE(*engine->Seen("a"));
}

TEST(EngineCallsTest, WindowChangeOnReopenDoesNotChangeExistingRecords) {
  util::TempDir dir;
  ManualClock clock(kStart);
  const std::string path = dir.Sub("db");
  {
    Options options;
    options.clock = &clock;
    options.dedupe_window = absl::Hours(1);
    ASSERT_OPEN(engine, path, options);
    ASSERT_TRUE(engine->Process({.id = "a"}, AddOne).ok());
  }
  Options longer;
  longer.clock = &clock;
  longer.dedupe_window = absl::Hours(10);
  ASSERT_OPEN(engine, path, longer);
  clock.Advance(absl::Hours(1));
  EXPECT_FALSE(*engine->Seen("a"));
}

TEST(EngineCallsTest,
     SubMicrosecondTtlStillSuppressesRedeliveryAtTheSameInstant) {
  // A positive ttl must remember the ID at least at the instant it was
  // committed; truncating the ttl to whole microseconds must not make the
  // record expire on arrival.
  util::TempDir dir;
  ManualClock clock(kStart);
  Options options;
  options.clock = &clock;
  ASSERT_OPEN(engine, dir.Sub("db"), options);
  ASSERT_TRUE(
      engine->Process({.id = "a", .ttl = absl::Nanoseconds(500)}, AddOne).ok());
  EXPECT_TRUE(*engine->Seen("a"));
  auto again = engine->Process({.id = "a"}, AddOne);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->outcome, Outcome::kDuplicate);
  EXPECT_EQ(*engine->GetState("counter"), std::optional<std::string>("1"));
}

TEST(EngineCallsTest, CompactExpiredDropsOnlyExpiredRecords) {
  util::TempDir dir;
  ManualClock clock(kStart);
  Options options;
  options.clock = &clock;
  options.dedupe_window = absl::Hours(1);
  ASSERT_OPEN(engine, dir.Sub("db"), options);
  const std::vector<Message> batch = {{.id = "a", .ttl = absl::Minutes(1)},
                                      {.id = "b", .ttl = absl::Minutes(1)},
                                      {.id = "keep"}};
  ASSERT_TRUE(engine->ProcessBatch(batch, AddOne).ok());
  clock.Advance(absl::Minutes(5));
  ASSERT_TRUE(engine->CompactExpired().ok());
  auto stats = engine->GetStats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->expired_dropped, 2u);
  std::vector<std::string> dedupe_keys;
  ASSERT_TRUE(engine
                  ->Dump([&](const DumpEntry& e) {
                    if (e.kind == DumpEntry::Kind::kDedupe) {
                      dedupe_keys.push_back(e.key);
                    }
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_THAT(dedupe_keys, ElementsAre(HexOfIdHash("keep")));
  EXPECT_TRUE(*engine->Seen("keep"));
  EXPECT_EQ(*engine->GetState("counter"), std::optional<std::string>("3"));
}

// ============================================================================
// Durability.
// ============================================================================

TEST(EngineCallsTest, BufferedOutcomesCarrySequencesThatWaitDurableAccepts) {
  util::TempDir dir;
  Options options;
  options.durability = Durability::kBuffered;
  ASSERT_OPEN(engine, dir.Sub("db"), options);
  auto handler = [](const Message& m, Txn& txn) -> absl::Status {
    if (m.payload == "fail") return absl::UnavailableError("no");
    return AddOne(m, txn);
  };
  auto processed = engine->Process({.id = "a"}, handler);
  ASSERT_TRUE(processed.ok()) << processed.status();
  EXPECT_EQ(processed->outcome, Outcome::kProcessed);
  EXPECT_GT(processed->sequence, 0u);

  auto duplicate = engine->Process({.id = "a"}, handler);
  ASSERT_TRUE(duplicate.ok());
  EXPECT_EQ(duplicate->outcome, Outcome::kDuplicate);
  EXPECT_GE(duplicate->sequence, processed->sequence);

  auto failed = engine->Process({.id = "b", .payload = "fail"}, handler);
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(failed->outcome, Outcome::kFailed);
  EXPECT_EQ(failed->sequence, 0u);

  auto later = engine->Process({.id = "c"}, handler);
  ASSERT_TRUE(later.ok());
  EXPECT_GT(later->sequence, processed->sequence);

  EXPECT_TRUE(engine->WaitDurable(processed->sequence).ok());
  EXPECT_TRUE(engine->WaitDurable(duplicate->sequence).ok());
  EXPECT_TRUE(engine->WaitDurable(later->sequence).ok());
  EXPECT_TRUE(engine->WaitDurable(0).ok());
  EXPECT_EQ(engine->WaitDurable(later->sequence + 1000000).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(EngineCallsTest, BufferedCommitsSurviveCloseAndReopen) {
  util::TempDir dir;
  const std::string path = dir.Sub("db");
  Options options;
  options.durability = Durability::kBuffered;
  {
    ASSERT_OPEN(engine, path, options);
    ASSERT_TRUE(
        engine->Process({.id = "a", .source = "t", .offset = 3}, AddOne).ok());
  }
  ASSERT_OPEN(engine, path, options);
  EXPECT_TRUE(*engine->Seen("a"));
  EXPECT_EQ(*engine->GetState("counter"), std::optional<std::string>("1"));
  EXPECT_EQ(*engine->CommittedOffset("t", 0), std::optional<int64_t>(3));
}

TEST(EngineCallsTest, SyncOutcomesCarrySequencesAndWaitDurableRejectsUnissued) {
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  auto r = engine->Process({.id = "a"}, AddOne);
  ASSERT_TRUE(r.ok());
  EXPECT_GT(r->sequence, 0u);
  EXPECT_TRUE(engine->WaitDurable(r->sequence).ok());
  EXPECT_EQ(engine->WaitDurable(r->sequence + 1000000).code(),
            absl::StatusCode::kInvalidArgument);
}

// Regression: these calls could wait for the commit the handler is part of;
// from inside a handler they must fail instead of deadlocking.
TEST(EngineReentrancyTest, CallsThatWaitForTheCommitFailInsideAHandler) {
  util::TempDir dir;
  auto engine = Engine::Open(dir.Sub("db"), Options());
  ASSERT_TRUE(engine.ok()) << engine.status();
  Engine& e = **engine;
  std::vector<absl::StatusCode> codes;
  auto handler = [&](const Message&, Txn&) {
    codes.push_back(e.Forget("x").code());
    codes.push_back(e.WaitDurable(0).code());
    codes.push_back(e.CompactExpired().code());
    codes.push_back(e.Checkpoint(dir.Sub("cp")).code());
    codes.push_back(e.Seen("x").status().code());  // reads are allowed
    return absl::OkStatus();
  };
  auto result = e.Process({.id = "m"}, handler);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->outcome, Outcome::kProcessed);
  EXPECT_THAT(codes,
              ::testing::ElementsAre(absl::StatusCode::kFailedPrecondition,
                                     absl::StatusCode::kFailedPrecondition,
                                     absl::StatusCode::kFailedPrecondition,
                                     absl::StatusCode::kFailedPrecondition,
                                     absl::StatusCode::kOk));
}

// Runs a handler of engines[0] that runs one of engines[1] inside it, and so
// on; the innermost handler calls `innermost`. Each handler also counts its
// message (AddOne). Returns the outermost engine's Result.
absl::StatusOr<Result> ProcessNested(absl::Span<Engine* const> engines,
                                     const std::function<void()>& innermost) {
  auto handler = [&](const Message& m, Txn& txn) -> absl::Status {
    if (engines.size() == 1) {
      innermost();
    } else {
      absl::StatusOr<Result> inner =
          ProcessNested(engines.subspan(1), innermost);
      if (!inner.ok()) return inner.status();
      if (inner->outcome != Outcome::kProcessed) {
        return absl::InternalError("the nested message was not processed");
      }
    }
    return AddOne(m, txn);
  };
  return engines.front()->Process({.id = "nested"}, handler);
}

// Every Engine call on `engine`, by name: the code it returned. `counter`
// gets GetState("counter").
std::map<std::string, absl::StatusCode> CallEveryMethod(
    Engine& engine, const std::string& checkpoint_dir,
    std::optional<std::string>* counter) {
  std::map<std::string, absl::StatusCode> codes;
  codes["Process"] = engine.Process({.id = "inner"}, AddOne).status().code();
  const std::vector<Message> batch = {{.id = "inner2"}};
  codes["ProcessBatch"] = engine.ProcessBatch(batch, AddOne).status().code();
  codes["Forget"] = engine.Forget("setup").code();
  codes["WaitDurable"] = engine.WaitDurable(0).code();
  codes["CompactExpired"] = engine.CompactExpired().code();
  codes["Checkpoint"] = engine.Checkpoint(checkpoint_dir).code();
  absl::StatusOr<std::optional<std::string>> state = engine.GetState("counter");
  codes["GetState"] = state.status().code();
  if (state.ok()) *counter = *state;
  absl::StatusOr<bool> seen = engine.Seen("setup");
  codes["Seen"] =
      seen.ok() && !*seen ? absl::StatusCode::kInternal : seen.status().code();
  absl::StatusOr<std::optional<int64_t>> offset =
      engine.CommittedOffset("t", 0);
  codes["CommittedOffset"] = offset.ok() && *offset != std::optional<int64_t>(7)
                                 ? absl::StatusCode::kInternal
                                 : offset.status().code();
  codes["GetStats"] = engine.GetStats().status().code();
  // Regression: options() took the store lock the commit holds, and Abseil's
  // deadlock detection aborted the process.
  codes["options"] = engine.options().dedupe_scope == DedupeScope::kStore
                         ? absl::StatusCode::kOk
                         : absl::StatusCode::kInternal;
  codes["Dump"] =
      engine.Dump([](const DumpEntry&) { return absl::OkStatus(); }).code();
  return codes;
}

// What CallEveryMethod must see from inside a handler of `engine` (however
// deep): calls that wait for the commit fail, reads are served.
std::map<std::string, absl::StatusCode> ExpectedFromInsideAHandler() {
  constexpr absl::StatusCode kRejected = absl::StatusCode::kFailedPrecondition;
  constexpr absl::StatusCode kOk = absl::StatusCode::kOk;
  return {{"Process", kRejected},
          {"ProcessBatch", kRejected},
          {"Forget", kRejected},
          {"WaitDurable", kRejected},
          {"CompactExpired", kRejected},
          {"Checkpoint", kRejected},
          {"GetState", kOk},
          {"Seen", kOk},
          {"CommittedOffset", kOk},
          {"GetStats", kOk},
          {"options", kOk},
          {"Dump", kOk}};
}

// Regression: a handler of engine A calling engine B, whose handler calls
// back into A, aborted the process (a re-entrant lock of A's store), since
// only the innermost running handler was remembered.
void CheckCallsBackIntoTheOutermostEngine(int depth) {
  util::TempDir dir;
  std::vector<std::unique_ptr<Engine>> owned;
  std::vector<Engine*> engines;
  for (int i = 0; i < depth; ++i) {
    auto engine = Engine::Open(dir.Sub(absl::StrCat("db", i)), Options());
    ASSERT_TRUE(engine.ok()) << engine.status();
    engines.push_back(engine->get());
    owned.push_back(std::move(*engine));
  }
  Engine& first = *engines.front();
  ASSERT_TRUE(
      first.Process({.id = "setup", .source = "t", .offset = 7}, AddOne).ok());

  std::map<std::string, absl::StatusCode> codes;
  std::optional<std::string> counter;
  absl::StatusOr<Result> result = ProcessNested(engines, [&] {
    codes = CallEveryMethod(first, dir.Sub("checkpoint"), &counter);
  });
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->outcome, Outcome::kProcessed);
  EXPECT_EQ(codes, ExpectedFromInsideAHandler());
  // The committed value, not the outer handler's pending write.
  EXPECT_EQ(counter, std::optional<std::string>("1"));
  // Every level committed its message; nothing the rejected calls carried.
  EXPECT_EQ(*first.GetState("counter"), std::optional<std::string>("2"));
  EXPECT_TRUE(*first.Seen("setup"));
  EXPECT_FALSE(*first.Seen("inner"));
  EXPECT_FALSE(*first.Seen("inner2"));
  for (int i = 1; i < depth; ++i) {
    EXPECT_EQ(*engines[i]->GetState("counter"), std::optional<std::string>("1"))
        << "engine " << i;
    EXPECT_TRUE(*engines[i]->Seen("nested")) << "engine " << i;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.Sub("checkpoint")));
}

TEST(EngineReentrancyTest,
     HandlerOfANestedEngineCallingBackIsRejectedOrServed) {
  CheckCallsBackIntoTheOutermostEngine(2);  // A -> B -> A
}

TEST(EngineReentrancyTest, ThreeEnginesDeepCallingBackIsRejectedOrServed) {
  CheckCallsBackIntoTheOutermostEngine(3);  // A -> B -> C -> A
}

TEST(EngineReentrancyTest, EveryCallFromADirectHandlerIsRejectedOrServed) {
  CheckCallsBackIntoTheOutermostEngine(1);  // A -> A
}

}  // namespace
}  // namespace idem
