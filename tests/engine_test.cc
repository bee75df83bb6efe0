// Engine behaviour through the public API: exactly-once effect per ID
// (guarantee 1), atomicity of a message's commit (2) and offsets (4).

#include "idem/engine.h"

#include <cstdint>
#include <filesystem>
#include <fstream>
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
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/crash/file_system.h"
#include "rocksdb/db.h"
#include "rocksdb/env.h"
#include "rocksdb/file_system.h"
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
// Smoke tests.
// ============================================================================

TEST(EngineSmokeTest, ProcessesOnceAndSuppressesDuplicate) {
  util::TempDir dir;
  Options options;
  auto engine = Engine::Open(dir.Sub("db"), options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  Message m{.id = "m1", .source = "t", .partition = 0, .offset = 7};
  auto r1 = (*engine)->Process(m, AddOne);
  ASSERT_TRUE(r1.ok()) << r1.status();
  EXPECT_EQ(r1->outcome, Outcome::kProcessed);
  EXPECT_EQ(r1->result, "done:m1");
  auto r2 = (*engine)->Process(m, AddOne);
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->outcome, Outcome::kDuplicate);
  EXPECT_EQ(r2->result, "done:m1");
  EXPECT_EQ(*(*engine)->GetState("counter"), std::optional<std::string>("1"));
  EXPECT_EQ(*(*engine)->CommittedOffset("t", 0), std::optional<int64_t>(7));
  EXPECT_TRUE(*(*engine)->Seen("m1"));
  auto stats = (*engine)->GetStats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->processed, 1u);
  EXPECT_EQ(stats->duplicates, 1u);
  EXPECT_GT(stats->write_amplification, 0);
}

TEST(EngineSmokeTest, CommitFailsCleanlyOnWalErrorAndRecovers) {
  util::TempDir dir;
  crash::CrashFsOptions fs_options;
  fs_options.journal_path = dir.Sub("journal");
  auto fs = std::make_shared<crash::CrashFileSystem>(
      rocksdb::FileSystem::Default(), fs_options);
  auto env = rocksdb::NewCompositeEnv(fs);
  Options options;
  options.env = env.get();
  auto engine = Engine::Open(dir.Sub("db"), options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  ASSERT_TRUE((*engine)->Process({.id = "a"}, AddOne).ok());
  fs->SetFault(absl::StatusCode::kResourceExhausted);
  auto failed = (*engine)->Process({.id = "b"}, AddOne);
  EXPECT_FALSE(failed.ok());
  std::cerr << "failed status: " << failed.status() << "\n";
  EXPECT_EQ(*(*engine)->GetState("counter"), std::optional<std::string>("1"));
  EXPECT_FALSE(*(*engine)->Seen("b"));
  fs->SetFault(absl::StatusCode::kOk);
  auto again = (*engine)->Process({.id = "b"}, AddOne);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->outcome, Outcome::kProcessed);
  EXPECT_EQ(*(*engine)->GetState("counter"), std::optional<std::string>("2"));
}

// ============================================================================
// Guarantee 1: exactly-once effect per ID within the window.
// ============================================================================

TEST(EngineTest, DuplicateReturnsStoredResultAndRunsNoHandler) {
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  int calls = 0;
  auto handler = [&](const Message& m, Txn& txn) {
    ++calls;
    txn.Put("k", std::string(m.payload));
    txn.SetResult(absl::StrCat("result-of-", std::string(m.payload)));
    return absl::OkStatus();
  };
  auto first = engine->Process({.id = "m1", .payload = "first"}, handler);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->outcome, Outcome::kProcessed);
  EXPECT_EQ(first->result, "result-of-first");
  EXPECT_TRUE(first->error.ok());

  // A redelivery (even with a different payload) runs nothing.
  auto again = engine->Process({.id = "m1", .payload = "second"}, handler);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->outcome, Outcome::kDuplicate);
  EXPECT_EQ(again->result, "result-of-first");
  EXPECT_TRUE(again->error.ok());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(*engine->GetState("k"), std::optional<std::string>("first"));
}

TEST(EngineTest, DistinctIdsEachRunTheirHandlerOnce) {
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  for (const char* id : {"a", "b", "c", "a", "b", "c"}) {
    ASSERT_TRUE(engine->Process({.id = id}, AddOne).ok());
  }
  EXPECT_EQ(*engine->GetState("counter"), std::optional<std::string>("3"));
}

TEST(EngineTest, DuplicateReturnsBinaryAndEmptyResultsExactly) {
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  const std::string binary("\0r\xff\0", 4);
  auto set_binary = [&](const Message&, Txn& txn) {
    txn.SetResult("overwritten");
    txn.SetResult(binary);  // the last call wins
    return absl::OkStatus();
  };
  auto no_result = [](const Message&, Txn&) { return absl::OkStatus(); };
  ASSERT_TRUE(engine->Process({.id = "bin"}, set_binary).ok());
  ASSERT_TRUE(engine->Process({.id = "empty"}, no_result).ok());
  auto bin = engine->Process({.id = "bin"}, no_result);
  auto empty = engine->Process({.id = "empty"}, set_binary);
  ASSERT_TRUE(bin.ok() && empty.ok());
  EXPECT_EQ(bin->outcome, Outcome::kDuplicate);
  EXPECT_EQ(bin->result, binary);
  EXPECT_EQ(empty->outcome, Outcome::kDuplicate);
  EXPECT_EQ(empty->result, "");
}

TEST(EngineTest, IdsAreComparedAsExactBytes) {
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  const std::string with_nul("id\0", 3);
  ASSERT_TRUE(engine->Process({.id = "id"}, AddOne).ok());
  for (std::string_view id :
       {std::string_view(with_nul), std::string_view("ID"),
        std::string_view("id ")}) {
    auto r = engine->Process({.id = id}, AddOne);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->outcome, Outcome::kProcessed);
  }
  EXPECT_EQ(*engine->GetState("counter"), std::optional<std::string>("4"));
}

TEST(EngineTest, WithinBatchFirstOccurrenceWinsAndLaterOnesAreDuplicates) {
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  int calls = 0;
  auto handler = [&](const Message& m, Txn& txn) {
    ++calls;
    return AddOne(m, txn);
  };
  const std::vector<Message> batch = {
      {.id = "a"}, {.id = "b"}, {.id = "a"}, {.id = "a"}, {.id = "b"}};
  auto results = engine->ProcessBatch(batch, handler);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 5u);
  EXPECT_THAT(
      Outcomes(*results),
      ElementsAre(Outcome::kProcessed, Outcome::kProcessed, Outcome::kDuplicate,
                  Outcome::kDuplicate, Outcome::kDuplicate));
  EXPECT_EQ((*results)[2].result, "done:a");
  EXPECT_EQ((*results)[3].result, "done:a");
  EXPECT_EQ((*results)[4].result, "done:b");
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(*engine->GetState("counter"), std::optional<std::string>("2"));
}

TEST(EngineTest, BatchRunsIdAgainAfterItsFirstOccurrenceFailed) {
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  int attempts = 0;
  auto flaky = [&](const Message& m, Txn& txn) -> absl::Status {
    ++attempts;
    txn.Put("attempt", absl::StrCat(attempts));
    if (attempts == 1) return absl::UnavailableError("transient");
    txn.SetResult(absl::StrCat("ok@", attempts, ":", std::string(m.payload)));
    return absl::OkStatus();
  };
  const std::vector<Message> batch = {
      {.id = "a", .payload = "1", .source = "t", .offset = 1},
      {.id = "a", .payload = "2", .source = "t", .offset = 2},
      {.id = "a", .payload = "3", .source = "t", .offset = 3}};
  auto results = engine->ProcessBatch(batch, flaky);
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_THAT(
      Outcomes(*results),
      ElementsAre(Outcome::kFailed, Outcome::kProcessed, Outcome::kDuplicate));
  EXPECT_EQ((*results)[1].result, "ok@2:2");
  EXPECT_EQ((*results)[2].result, "ok@2:2");
  EXPECT_EQ(attempts, 2);
  EXPECT_EQ(*engine->GetState("attempt"), std::optional<std::string>("2"));
  // The failure at offset 1 holds the partition's offset back.
  EXPECT_EQ(*engine->CommittedOffset("t", 0), std::nullopt);
  auto later = engine->Process({.id = "a"}, flaky);
  ASSERT_TRUE(later.ok());
  EXPECT_EQ(later->outcome, Outcome::kDuplicate);
  EXPECT_EQ(later->result, "ok@2:2");
  EXPECT_EQ(attempts, 2);
}

TEST(EngineTest, EmptyBatchReturnsNoResultsAndRunsNothing) {
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  int calls = 0;
  auto handler = [&](const Message&, Txn&) {
    ++calls;
    return absl::OkStatus();
  };
  auto results = engine->ProcessBatch({}, handler);
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_TRUE(results->empty());
  EXPECT_EQ(calls, 0);
}

// ============================================================================
// Guarantee 2: atomicity.
// ============================================================================

TEST(EngineTest, HandlerErrorCommitsNothingAndIsReportedAsFailed) {
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  auto failing = [](const Message&, Txn& txn) {
    txn.Put("k", "v");
    txn.SetResult("should not be stored");
    return absl::AbortedError("business rule said no");
  };
  const Message m{.id = "m1", .source = "t", .partition = 2, .offset = 10};
  auto r = engine->Process(m, failing);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outcome, Outcome::kFailed);
  EXPECT_EQ(r->error, absl::AbortedError("business rule said no"));
  EXPECT_EQ(r->sequence, 0u);
  EXPECT_EQ(*engine->GetState("k"), std::nullopt);
  EXPECT_FALSE(*engine->Seen("m1"));
  EXPECT_EQ(*engine->CommittedOffset("t", 2), std::nullopt);

  // The failed delivery left no record: the retry runs and commits.
  auto retry = engine->Process(m, AddOne);
  ASSERT_TRUE(retry.ok());
  EXPECT_EQ(retry->outcome, Outcome::kProcessed);
  EXPECT_EQ(*engine->CommittedOffset("t", 2), std::optional<int64_t>(10));
}

TEST(EngineTest,
     HandlerThrowingStdExceptionFailsWithInternalAndCommitsNothing) {
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  auto throwing = [](const Message&, Txn& txn) -> absl::Status {
    txn.Put("k", "v");
    throw std::runtime_error("boom");
  };
  auto r = engine->Process({.id = "m1", .source = "t", .offset = 1}, throwing);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outcome, Outcome::kFailed);
  EXPECT_EQ(r->error.code(), absl::StatusCode::kInternal) << r->error;
  EXPECT_THAT(std::string(r->error.message()), HasSubstr("boom"));
  EXPECT_EQ(*engine->GetState("k"), std::nullopt);
  EXPECT_FALSE(*engine->Seen("m1"));
  EXPECT_EQ(*engine->CommittedOffset("t", 0), std::nullopt);
}

TEST(EngineTest, HandlerThrowingNonStdExceptionFailsWithInternal) {
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  auto throwing = [](const Message&, Txn& txn) -> absl::Status {
    txn.Put("k", "v");
    throw 42;
  };
  auto r = engine->Process({.id = "m1"}, throwing);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outcome, Outcome::kFailed);
  EXPECT_EQ(r->error.code(), absl::StatusCode::kInternal) << r->error;
  EXPECT_EQ(*engine->GetState("k"), std::nullopt);
  EXPECT_FALSE(*engine->Seen("m1"));
}

TEST(EngineTest, FailedMessageLeavesRestOfBatchUnaffected) {
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  auto handler = [](const Message& m, Txn& txn) -> absl::Status {
    txn.Put(std::string(m.id), "written");
    txn.SetResult(std::string(m.id));
    if (m.payload == "fail") return absl::InvalidArgumentError("bad payload");
    if (m.payload == "throw") throw std::runtime_error("thrown");
    return absl::OkStatus();
  };
  const std::vector<Message> batch = {{.id = "a"},
                                      {.id = "b", .payload = "fail"},
                                      {.id = "c"},
                                      {.id = "d", .payload = "throw"},
                                      {.id = "e"}};
  auto results = engine->ProcessBatch(batch, handler);
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_THAT(
      Outcomes(*results),
      ElementsAre(Outcome::kProcessed, Outcome::kFailed, Outcome::kProcessed,
                  Outcome::kFailed, Outcome::kProcessed));
  EXPECT_EQ((*results)[1].error, absl::InvalidArgumentError("bad payload"));
  EXPECT_EQ((*results)[3].error.code(), absl::StatusCode::kInternal);
  EXPECT_EQ((*results)[1].sequence, 0u);
  EXPECT_GT((*results)[0].sequence, 0u);
  for (const char* id : {"a", "c", "e"}) {
    EXPECT_EQ(*engine->GetState(id), std::optional<std::string>("written"))
        << id;
    EXPECT_TRUE(*engine->Seen(id)) << id;
  }
  for (const char* id : {"b", "d"}) {
    EXPECT_EQ(*engine->GetState(id), std::nullopt) << id;
    EXPECT_FALSE(*engine->Seen(id)) << id;
  }
}

TEST(EngineTest, HandlersSeeWritesOfEarlierMessagesInTheBatch) {
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  auto handler = [](const Message& m, Txn& txn) -> absl::Status {
    absl::Status s = AddOne(m, txn);
    if (!s.ok()) return s;
    auto v = txn.Get("counter");
    if (!v.ok()) return v.status();
    txn.SetResult(v->value_or("<absent>"));
    return absl::OkStatus();
  };
  const std::vector<Message> batch = {{.id = "a"}, {.id = "b"}, {.id = "c"}};
  auto results = engine->ProcessBatch(batch, handler);
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 3u);
  EXPECT_EQ((*results)[0].result, "1");
  EXPECT_EQ((*results)[1].result, "2");
  EXPECT_EQ((*results)[2].result, "3");
  EXPECT_EQ(*engine->GetState("counter"), std::optional<std::string>("3"));
}

TEST(EngineTest, FailedMessageWritesAreInvisibleToLaterMessagesInTheBatch) {
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  auto handler = [](const Message& m, Txn& txn) -> absl::Status {
    if (m.payload == "read") {
      auto x = txn.Get("x");
      auto y = txn.Get("y");
      if (!x.ok() || !y.ok()) return absl::InternalError("read failed");
      txn.SetResult(absl::StrCat("x=", x->value_or("<absent>"),
                                 " y=", y->value_or("<absent>")));
      return absl::OkStatus();
    }
    txn.Put("x", std::string(m.payload));
    if (m.payload == "2") {
      txn.Put("y", "from-failed");
      txn.Delete("x");
      return absl::CancelledError("fails after writing");
    }
    return absl::OkStatus();
  };
  const std::vector<Message> batch = {{.id = "a", .payload = "1"},
                                      {.id = "b", .payload = "2"},
                                      {.id = "c", .payload = "read"}};
  auto results = engine->ProcessBatch(batch, handler);
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_THAT(
      Outcomes(*results),
      ElementsAre(Outcome::kProcessed, Outcome::kFailed, Outcome::kProcessed));
  EXPECT_EQ((*results)[2].result, "x=1 y=<absent>");
  EXPECT_EQ(*engine->GetState("x"), std::optional<std::string>("1"));
  EXPECT_EQ(*engine->GetState("y"), std::nullopt);
}

TEST(EngineTest, TxnGetSeesOwnWritesAndDeletes) {
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  auto seed = [](const Message&, Txn& txn) {
    txn.Put("stored", "s");
    return absl::OkStatus();
  };
  ASSERT_TRUE(engine->Process({.id = "seed"}, seed).ok());
  std::vector<std::string> seen;
  auto handler = [&](const Message&, Txn& txn) -> absl::Status {
    auto show = [&](std::string_view key) {
      auto v = txn.Get(key);
      if (!v.ok()) return std::string("<error>");
      return v->value_or("<absent>");
    };
    seen.push_back(show("stored"));
    seen.push_back(show("new"));
    txn.Put("new", "n1");
    seen.push_back(show("new"));
    txn.Put("new", "n2");
    seen.push_back(show("new"));
    txn.Delete("stored");
    seen.push_back(show("stored"));
    txn.Delete("never-existed");
    return absl::OkStatus();
  };
  auto r = engine->Process({.id = "m"}, handler);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outcome, Outcome::kProcessed);
  EXPECT_THAT(seen, ElementsAre("s", "<absent>", "n1", "n2", "<absent>"));
  EXPECT_EQ(*engine->GetState("new"), std::optional<std::string>("n2"));
  EXPECT_EQ(*engine->GetState("stored"), std::nullopt);
  EXPECT_EQ(*engine->GetState("never-existed"), std::nullopt);
}

TEST(EngineTest, StateKeysAndValuesAreArbitraryBytes) {
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  const std::string key("k\0\xff", 3);
  const std::string value("\0\0v", 3);
  auto handler = [&](const Message&, Txn& txn) {
    txn.Put(key, value);
    txn.Put("", "empty-key");
    return absl::OkStatus();
  };
  ASSERT_TRUE(engine->Process({.id = "m"}, handler).ok());
  EXPECT_EQ(*engine->GetState(key), std::optional<std::string>(value));
  EXPECT_EQ(*engine->GetState(std::string("k\0", 2)), std::nullopt);
  EXPECT_EQ(*engine->GetState(""), std::optional<std::string>("empty-key"));
}

// ============================================================================
// Guarantee 4: committed offsets.
// ============================================================================

TEST(EngineTest, CommittedOffsetIsHighestProcessedOrDuplicateOffset) {
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  EXPECT_EQ(*engine->CommittedOffset("t", 0), std::nullopt);
  const std::vector<Message> batch = {{.id = "a", .source = "t", .offset = 3},
                                      {.id = "b", .source = "t", .offset = 5},
                                      {.id = "c", .source = "t", .offset = 4}};
  ASSERT_TRUE(engine->ProcessBatch(batch, AddOne).ok());
  EXPECT_EQ(*engine->CommittedOffset("t", 0), std::optional<int64_t>(5));
  // A duplicate delivered at a higher offset moves the offset too.
  auto dup = engine->Process({.id = "a", .source = "t", .offset = 9}, AddOne);
  ASSERT_TRUE(dup.ok());
  EXPECT_EQ(dup->outcome, Outcome::kDuplicate);
  EXPECT_EQ(*engine->CommittedOffset("t", 0), std::optional<int64_t>(9));
}

TEST(EngineTest, CommittedOffsetIncludesOffsetZero) {
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  ASSERT_TRUE(
      engine->Process({.id = "a", .source = "t", .offset = 0}, AddOne).ok());
  EXPECT_EQ(*engine->CommittedOffset("t", 0), std::optional<int64_t>(0));
}

TEST(EngineTest, CommittedOffsetRecordsTheLargestValidOffset) {
  // INT64_MAX - 1 is the largest offset a consumer can resume after, and is
  // recorded like any other; INT64_MAX (no offset follows it) is refused.
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  auto refused =
      engine->Process({.id = "a", .source = "t", .offset = kMax}, AddOne);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  auto r =
      engine->Process({.id = "a", .source = "t", .offset = kMax - 1}, AddOne);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outcome, Outcome::kProcessed);
  EXPECT_EQ(*engine->CommittedOffset("t", 0), std::optional<int64_t>(kMax - 1));
}

TEST(EngineTest, CommittedOffsetNeverPassesAFailedMessageOfThePartition) {
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  auto handler = [](const Message& m, Txn& txn) -> absl::Status {
    if (m.payload == "fail") return absl::UnavailableError("try later");
    return AddOne(m, txn);
  };
  const std::vector<Message> batch = {
      {.id = "a", .source = "t", .offset = 1},
      {.id = "b", .payload = "fail", .source = "t", .offset = 2},
      {.id = "c", .source = "t", .offset = 3},
      {.id = "a", .source = "t", .offset = 4}};  // duplicate after the failure
  auto results = engine->ProcessBatch(batch, handler);
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_THAT(Outcomes(*results),
              ElementsAre(Outcome::kProcessed, Outcome::kFailed,
                          Outcome::kProcessed, Outcome::kDuplicate));
  EXPECT_EQ(*engine->CommittedOffset("t", 0), std::optional<int64_t>(1));

  // The consumer resumes at 2: b now succeeds, c is a duplicate.
  const std::vector<Message> redelivery = {
      {.id = "b", .source = "t", .offset = 2},
      {.id = "c", .source = "t", .offset = 3}};
  auto again = engine->ProcessBatch(redelivery, handler);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_THAT(Outcomes(*again),
              ElementsAre(Outcome::kProcessed, Outcome::kDuplicate));
  EXPECT_EQ(*engine->CommittedOffset("t", 0), std::optional<int64_t>(3));
}

TEST(EngineTest, CommittedOffsetDoesNotAdvancePastFailureEarlierInOffsetOrder) {
  // Batch order and offset order differ: the success at offset 7 comes
  // before the failure at offset 5. Recording 7 would skip offset 5.
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  auto handler = [](const Message& m, Txn& txn) -> absl::Status {
    if (m.payload == "fail") return absl::UnavailableError("try later");
    return AddOne(m, txn);
  };
  const std::vector<Message> batch = {
      {.id = "a", .source = "t", .offset = 7},
      {.id = "b", .payload = "fail", .source = "t", .offset = 5}};
  ASSERT_TRUE(engine->ProcessBatch(batch, handler).ok());
  EXPECT_EQ(*engine->CommittedOffset("t", 0), std::nullopt);
}

TEST(EngineTest, FailureHoldsBackOnlyItsOwnPartitionAndSource) {
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  auto handler = [](const Message& m, Txn& txn) -> absl::Status {
    if (m.payload == "fail") return absl::UnavailableError("try later");
    return AddOne(m, txn);
  };
  const std::vector<Message> batch = {
      {.id = "a",
       .payload = "fail",
       .source = "t",
       .partition = 0,
       .offset = 1},
      {.id = "b", .source = "t", .partition = 0, .offset = 2},
      {.id = "c", .source = "t", .partition = 1, .offset = 2},
      {.id = "d", .source = "u", .partition = 0, .offset = 8}};
  ASSERT_TRUE(engine->ProcessBatch(batch, handler).ok());
  EXPECT_EQ(*engine->CommittedOffset("t", 0), std::nullopt);
  EXPECT_EQ(*engine->CommittedOffset("t", 1), std::optional<int64_t>(2));
  EXPECT_EQ(*engine->CommittedOffset("u", 0), std::optional<int64_t>(8));
}

TEST(EngineTest, PartitionsAndSourcesHaveIndependentOffsets) {
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  const std::string nul_source("t\0x", 3);
  const std::vector<Message> batch = {
      {.id = "a", .source = "t", .partition = 0, .offset = 10},
      {.id = "b", .source = "t", .partition = 1, .offset = 20},
      {.id = "c", .source = "u", .partition = 0, .offset = 30},
      {.id = "d", .source = nul_source, .partition = 0, .offset = 40},
      {.id = "e", .source = "t", .partition = 2147483647, .offset = 50}};
  ASSERT_TRUE(engine->ProcessBatch(batch, AddOne).ok());
  EXPECT_EQ(*engine->CommittedOffset("t", 0), std::optional<int64_t>(10));
  EXPECT_EQ(*engine->CommittedOffset("t", 1), std::optional<int64_t>(20));
  EXPECT_EQ(*engine->CommittedOffset("u", 0), std::optional<int64_t>(30));
  EXPECT_EQ(*engine->CommittedOffset(nul_source, 0),
            std::optional<int64_t>(40));
  EXPECT_EQ(*engine->CommittedOffset("t", 2147483647),
            std::optional<int64_t>(50));
  EXPECT_EQ(*engine->CommittedOffset("t", 3), std::nullopt);
  EXPECT_EQ(*engine->CommittedOffset("u", 1), std::nullopt);
  EXPECT_EQ(*engine->CommittedOffset("tu", 0), std::nullopt);
}

TEST(EngineTest, CommittedOffsetNeverMovesBackwardsOnRedelivery) {
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  ASSERT_TRUE(
      engine->Process({.id = "a", .source = "t", .offset = 10}, AddOne).ok());
  // A rewound consumer redelivers older offsets: a duplicate and a new ID.
  const std::vector<Message> older = {{.id = "a", .source = "t", .offset = 3},
                                      {.id = "z", .source = "t", .offset = 4}};
  auto results = engine->ProcessBatch(older, AddOne);
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_THAT(Outcomes(*results),
              ElementsAre(Outcome::kDuplicate, Outcome::kProcessed));
  EXPECT_EQ(*engine->CommittedOffset("t", 0), std::optional<int64_t>(10));
  ASSERT_TRUE(
      engine->Process({.id = "y", .source = "t", .offset = 9}, AddOne).ok());
  EXPECT_EQ(*engine->CommittedOffset("t", 0), std::optional<int64_t>(10));
}

TEST(EngineTest, MessagesWithoutAPositionRecordNoOffset) {
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  const std::vector<Message> batch = {
      {.id = "a", .source = "", .offset = 5},
      {.id = "b", .source = "t", .offset = -1},
      {.id = "c", .source = "t", .partition = -1, .offset = -1}};
  auto results = engine->ProcessBatch(batch, AddOne);
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_THAT(Outcomes(*results),
              ElementsAre(Outcome::kProcessed, Outcome::kProcessed,
                          Outcome::kProcessed));
  EXPECT_EQ(*engine->CommittedOffset("t", 0), std::nullopt);
  int offsets = 0;
  ASSERT_TRUE(engine
                  ->Dump([&](const DumpEntry& e) {
                    if (e.kind == DumpEntry::Kind::kOffset) ++offsets;
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_EQ(offsets, 0);
}

TEST(EngineTest, CommittedOffsetRejectsBadSourceOrPartition) {
  util::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  EXPECT_EQ(engine->CommittedOffset("", 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine->CommittedOffset("t", -1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine->CommittedOffset(std::string(kMaxSourceBytes + 1, 's'), 0)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(
      engine->CommittedOffset(std::string(kMaxSourceBytes, 's'), 0).ok());
}
}  // namespace
}  // namespace idem
