#include "idem/engine.h"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rocksdb/db.h"
#include "rocksdb/options.h"
#include "tests/testing/faulty_env.h"
#include "tests/testing/temp_dir.h"

namespace idem {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace fs = std::filesystem;

// Opens an engine or fails the test; `var` is a std::unique_ptr<Engine>.
#define ASSERT_OPEN(var, path, options)                          \
  auto var##_or = Engine::Open((path), (options));               \
  ASSERT_TRUE(var##_or.ok()) << var##_or.status();               \
  std::unique_ptr<Engine> var = std::move(*var##_or)

const absl::Time kStart = absl::FromUnixSeconds(1700000000);

absl::Status AddOne(const Message& m, Txn& txn) {
  auto v = txn.Get("counter");
  if (!v.ok()) return v.status();
  int n = 0;
  if (v->has_value() && !absl::SimpleAtoi(**v, &n)) {
    return absl::InternalError("bad counter");
  }
  txn.Put("counter", absl::StrCat(n + 1));
  txn.SetResult(absl::StrCat("done:", std::string(m.id)));
  return absl::OkStatus();
}

std::vector<Outcome> Outcomes(const std::vector<Result>& results) {
  std::vector<Outcome> out;
  for (const Result& r : results) out.push_back(r.outcome);
  return out;
}

// Every file under `root` (relative path -> contents and modification time),
// to show that an operation left a directory byte-for-byte unchanged.
struct FileSnapshot {
  std::string contents;
  fs::file_time_type mtime;
  bool operator==(const FileSnapshot& o) const {
    return contents == o.contents && mtime == o.mtime;
  }
};
std::map<std::string, FileSnapshot> SnapshotTree(const std::string& root) {
  std::map<std::string, FileSnapshot> out;
  if (fs::is_regular_file(root)) {
    std::ifstream in(root, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    out[""] = {ss.str(), fs::last_write_time(root)};
    return out;
  }
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    const std::string rel = fs::relative(entry.path(), root).string();
    if (entry.is_directory()) {
      out[rel + "/"] = {"", fs::last_write_time(entry.path())};
      continue;
    }
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    out[rel] = {ss.str(), fs::last_write_time(entry.path())};
  }
  return out;
}

std::vector<std::string> Names(const std::map<std::string, FileSnapshot>& s) {
  std::vector<std::string> names;
  for (const auto& [name, unused] : s) names.push_back(name);
  return names;
}

// Creates a plain RocksDB database at `path` with `column_families` and a
// key in the default column family, then closes it.
void CreateRocksDb(const std::string& path,
                   const std::vector<std::string>& column_families) {
  rocksdb::DBOptions db_options;
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  std::vector<rocksdb::ColumnFamilyDescriptor> descriptors;
  for (const std::string& name : column_families) {
    descriptors.emplace_back(name, rocksdb::ColumnFamilyOptions());
  }
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s =
      rocksdb::DB::Open(db_options, path, descriptors, &handles, &db);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), "user-key", "user-value").ok());
  ASSERT_TRUE(db->Flush(rocksdb::FlushOptions()).ok());
  for (rocksdb::ColumnFamilyHandle* h : handles) {
    ASSERT_TRUE(db->DestroyColumnFamilyHandle(h).ok());
  }
  ASSERT_TRUE(db->Close().ok());
  delete db;
}

std::string HexOfIdHash(std::string_view id) {
  const XXH128_hash_t h = XXH3_128bits(id.data(), id.size());
  std::string hex;
  for (uint64_t half : {h.high64, h.low64}) {
    for (int shift = 60; shift >= 0; shift -= 4) {
      hex.push_back("0123456789abcdef"[(half >> shift) & 0xf]);
    }
  }
  return hex;
}

// ============================================================================
// Smoke tests.
// ============================================================================

TEST(EngineSmokeTest, ProcessesOnceAndSuppressesDuplicate) {
  testing::TempDir dir;
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
  testing::TempDir dir;
  auto fs = std::make_shared<testing::FaultyFileSystem>(
      rocksdb::FileSystem::Default());
  auto env = testing::NewFaultyEnv(fs);
  Options options;
  options.env = env.get();
  auto engine = Engine::Open(dir.Sub("db"), options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  ASSERT_TRUE((*engine)->Process({.id = "a"}, AddOne).ok());
  fs->SetFault(testing::Fault::kNoSpace);
  auto failed = (*engine)->Process({.id = "b"}, AddOne);
  EXPECT_FALSE(failed.ok());
  std::cerr << "failed status: " << failed.status() << "\n";
  EXPECT_EQ(*(*engine)->GetState("counter"), std::optional<std::string>("1"));
  EXPECT_FALSE(*(*engine)->Seen("b"));
  fs->SetFault(testing::Fault::kNone);
  auto again = (*engine)->Process({.id = "b"}, AddOne);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->outcome, Outcome::kProcessed);
  EXPECT_EQ(*(*engine)->GetState("counter"), std::optional<std::string>("2"));
}

// ============================================================================
// Guarantee 1: exactly-once effect per ID within the window.
// ============================================================================

TEST(EngineTest, DuplicateReturnsStoredResultAndRunsNoHandler) {
  testing::TempDir dir;
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
  testing::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  for (const char* id : {"a", "b", "c", "a", "b", "c"}) {
    ASSERT_TRUE(engine->Process({.id = id}, AddOne).ok());
  }
  EXPECT_EQ(*engine->GetState("counter"), std::optional<std::string>("3"));
}

TEST(EngineTest, DuplicateReturnsBinaryAndEmptyResultsExactly) {
  testing::TempDir dir;
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
  testing::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  const std::string with_nul("id\0", 3);
  ASSERT_TRUE(engine->Process({.id = "id"}, AddOne).ok());
  for (std::string_view id : {std::string_view(with_nul), std::string_view("ID"),
                              std::string_view("id ")}) {
    auto r = engine->Process({.id = id}, AddOne);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->outcome, Outcome::kProcessed);
  }
  EXPECT_EQ(*engine->GetState("counter"), std::optional<std::string>("4"));
}

TEST(EngineTest, WithinBatchFirstOccurrenceWinsAndLaterOnesAreDuplicates) {
  testing::TempDir dir;
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
  EXPECT_THAT(Outcomes(*results),
              ElementsAre(Outcome::kProcessed, Outcome::kProcessed,
                          Outcome::kDuplicate, Outcome::kDuplicate,
                          Outcome::kDuplicate));
  EXPECT_EQ((*results)[2].result, "done:a");
  EXPECT_EQ((*results)[3].result, "done:a");
  EXPECT_EQ((*results)[4].result, "done:b");
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(*engine->GetState("counter"), std::optional<std::string>("2"));
}

TEST(EngineTest, BatchRunsIdAgainAfterItsFirstOccurrenceFailed) {
  testing::TempDir dir;
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
  EXPECT_THAT(Outcomes(*results),
              ElementsAre(Outcome::kFailed, Outcome::kProcessed,
                          Outcome::kDuplicate));
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
  testing::TempDir dir;
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
  testing::TempDir dir;
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

TEST(EngineTest, HandlerThrowingStdExceptionFailsWithInternalAndCommitsNothing) {
  testing::TempDir dir;
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
  testing::TempDir dir;
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
  testing::TempDir dir;
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
  EXPECT_THAT(Outcomes(*results),
              ElementsAre(Outcome::kProcessed, Outcome::kFailed,
                          Outcome::kProcessed, Outcome::kFailed,
                          Outcome::kProcessed));
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
  testing::TempDir dir;
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
  testing::TempDir dir;
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
  EXPECT_THAT(Outcomes(*results),
              ElementsAre(Outcome::kProcessed, Outcome::kFailed,
                          Outcome::kProcessed));
  EXPECT_EQ((*results)[2].result, "x=1 y=<absent>");
  EXPECT_EQ(*engine->GetState("x"), std::optional<std::string>("1"));
  EXPECT_EQ(*engine->GetState("y"), std::nullopt);
}

TEST(EngineTest, TxnGetSeesOwnWritesAndDeletes) {
  testing::TempDir dir;
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
  testing::TempDir dir;
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
  testing::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  EXPECT_EQ(*engine->CommittedOffset("t", 0), std::nullopt);
  const std::vector<Message> batch = {
      {.id = "a", .source = "t", .offset = 3},
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
  testing::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  ASSERT_TRUE(
      engine->Process({.id = "a", .source = "t", .offset = 0}, AddOne).ok());
  EXPECT_EQ(*engine->CommittedOffset("t", 0), std::optional<int64_t>(0));
}

TEST(EngineTest, CommittedOffsetRecordsTheLargestPossibleOffset) {
  // Regression guard: INT64_MAX is a valid offset (>= 0) and must be
  // recorded like any other.
  testing::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  auto r = engine->Process({.id = "a", .source = "t", .offset = kMax}, AddOne);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outcome, Outcome::kProcessed);
  EXPECT_EQ(*engine->CommittedOffset("t", 0), std::optional<int64_t>(kMax));
}

TEST(EngineTest, CommittedOffsetNeverPassesAFailedMessageOfThePartition) {
  testing::TempDir dir;
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
  testing::TempDir dir;
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
  testing::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  auto handler = [](const Message& m, Txn& txn) -> absl::Status {
    if (m.payload == "fail") return absl::UnavailableError("try later");
    return AddOne(m, txn);
  };
  const std::vector<Message> batch = {
      {.id = "a", .payload = "fail", .source = "t", .partition = 0,
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
  testing::TempDir dir;
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
  testing::TempDir dir;
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
  testing::TempDir dir;
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
  testing::TempDir dir;
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

// ============================================================================
// Guarantee 7: persistence and format.
// ============================================================================

TEST(EngineTest, ReopenSeesStateRecordsAndOffsets) {
  testing::TempDir dir;
  const std::string path = dir.Sub("db");
  {
    ASSERT_OPEN(engine, path, Options());
    const std::vector<Message> batch = {
        {.id = "a", .source = "t", .partition = 0, .offset = 4},
        {.id = "b", .source = "t", .partition = 1, .offset = 8}};
    ASSERT_TRUE(engine->ProcessBatch(batch, AddOne).ok());
  }  // closes the store
  ASSERT_OPEN(engine, path, Options());
  EXPECT_EQ(*engine->GetState("counter"), std::optional<std::string>("2"));
  EXPECT_TRUE(*engine->Seen("a"));
  EXPECT_TRUE(*engine->Seen("b"));
  EXPECT_FALSE(*engine->Seen("c"));
  EXPECT_EQ(*engine->CommittedOffset("t", 0), std::optional<int64_t>(4));
  EXPECT_EQ(*engine->CommittedOffset("t", 1), std::optional<int64_t>(8));
  int calls = 0;
  auto r = engine->Process({.id = "a"}, [&](const Message& m, Txn& txn) {
    ++calls;
    return AddOne(m, txn);
  });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outcome, Outcome::kDuplicate);
  EXPECT_EQ(r->result, "done:a");
  EXPECT_EQ(calls, 0);
  // Counters start at zero with each open.
  auto stats = engine->GetStats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->processed, 0u);
  EXPECT_EQ(stats->duplicates, 1u);
}

TEST(EngineTest, OpenCreatesStoreInAnEmptyDirectory) {
  testing::TempDir dir;
  const std::string path = dir.Sub("empty");
  fs::create_directory(path);
  ASSERT_OPEN(engine, path, Options());
  EXPECT_TRUE(engine->Process({.id = "a"}, AddOne).ok());
}

TEST(EngineTest, OpenWithoutCreateIfMissingOnMissingPathIsNotFound) {
  testing::TempDir dir;
  Options options;
  options.create_if_missing = false;
  const std::string path = dir.Sub("missing");
  auto engine = Engine::Open(path, options);
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kNotFound)
      << engine.status();
  EXPECT_FALSE(fs::exists(path));
}

TEST(EngineTest, OpenWithoutCreateIfMissingOnEmptyDirectoryIsNotFound) {
  testing::TempDir dir;
  Options options;
  options.create_if_missing = false;
  const std::string path = dir.Sub("empty");
  fs::create_directory(path);
  auto engine = Engine::Open(path, options);
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kNotFound)
      << engine.status();
  EXPECT_TRUE(fs::is_empty(path));
}

TEST(EngineTest, OpenWithoutCreateIfMissingOpensAnExistingStore) {
  testing::TempDir dir;
  const std::string path = dir.Sub("db");
  {
    ASSERT_OPEN(engine, path, Options());
    ASSERT_TRUE(engine->Process({.id = "a"}, AddOne).ok());
  }
  Options options;
  options.create_if_missing = false;
  ASSERT_OPEN(engine, path, options);
  EXPECT_TRUE(*engine->Seen("a"));
}

TEST(EngineTest, OpenRejectsForeignDirectoryAndLeavesItUnchanged) {
  testing::TempDir dir;
  const std::string path = dir.Sub("foreign");
  fs::create_directories(path + "/sub");
  {
    std::ofstream(path + "/notes.txt") << "precious user data\n";
    std::ofstream(path + "/sub/more.bin") << std::string("\0\1\2", 3);
  }
  const auto before = SnapshotTree(path);
  auto engine = Engine::Open(path, Options());
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kFailedPrecondition)
      << engine.status();
  const auto after = SnapshotTree(path);
  EXPECT_EQ(Names(after), Names(before));
  EXPECT_TRUE(after == before);
}

TEST(EngineTest, OpenRejectsPlainRocksDbDatabaseAndLeavesItUnchanged) {
  testing::TempDir dir;
  const std::string path = dir.Sub("rocks");
  ASSERT_NO_FATAL_FAILURE(
      CreateRocksDb(path, {rocksdb::kDefaultColumnFamilyName, "users"}));
  const auto before = SnapshotTree(path);
  auto engine = Engine::Open(path, Options());
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kFailedPrecondition)
      << engine.status();
  const auto after = SnapshotTree(path);
  EXPECT_EQ(Names(after), Names(before));
  EXPECT_TRUE(after == before);
}

TEST(EngineTest, OpenRejectsRegularFileAndLeavesItUnchanged) {
  testing::TempDir dir;
  const std::string path = dir.Sub("file");
  { std::ofstream(path) << "not a database"; }
  const auto before = SnapshotTree(path);
  auto engine = Engine::Open(path, Options());
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kFailedPrecondition)
      << engine.status();
  EXPECT_TRUE(fs::is_regular_file(path));
  EXPECT_TRUE(SnapshotTree(path) == before);
}

TEST(EngineTest, OpenRejectsStoreOfNewerFormatAndLeavesItUnchanged) {
  testing::TempDir dir;
  const std::string path = dir.Sub("newer");
  ASSERT_NO_FATAL_FAILURE(CreateRocksDb(
      path, {rocksdb::kDefaultColumnFamilyName, "idem.dedupe", "idem.state",
             "idem.offsets", "idem.format.2"}));
  const auto before = SnapshotTree(path);
  auto engine = Engine::Open(path, Options());
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kFailedPrecondition)
      << engine.status();
  const auto after = SnapshotTree(path);
  EXPECT_EQ(Names(after), Names(before));
  EXPECT_TRUE(after == before);
}

TEST(EngineTest, OpenRejectsStoreAlreadyOpenByAnotherEngine) {
  testing::TempDir dir;
  const std::string path = dir.Sub("db");
  ASSERT_OPEN(engine, path, Options());
  ASSERT_TRUE(engine->Process({.id = "a"}, AddOne).ok());
  auto second = Engine::Open(path, Options());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition)
      << second.status();
  // The first engine is unaffected.
  auto r = engine->Process({.id = "b"}, AddOne);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outcome, Outcome::kProcessed);
  EXPECT_EQ(*engine->GetState("counter"), std::optional<std::string>("2"));
}

// ============================================================================
// Bad input.
// ============================================================================

TEST(EngineTest, OpenRejectsNonPositiveOrInfiniteDedupeWindowAndCreatesNothing) {
  testing::TempDir dir;
  const std::string path = dir.Sub("db");
  for (absl::Duration window : {absl::ZeroDuration(), -absl::Seconds(1),
                                absl::InfiniteDuration()}) {
    Options options;
    options.dedupe_window = window;
    auto engine = Engine::Open(path, options);
    EXPECT_EQ(engine.status().code(), absl::StatusCode::kInvalidArgument)
        << window;
    EXPECT_FALSE(fs::exists(path)) << window;
  }
}

TEST(EngineTest, OpenRejectsOutOfRangePerformanceOptions) {
  testing::TempDir dir;
  const std::string path = dir.Sub("db");
  Options bloom;
  bloom.bloom_bits_per_key = 65;
  Options jobs;
  jobs.max_background_jobs = 0;
  for (const Options& options : {bloom, jobs}) {
    EXPECT_EQ(Engine::Open(path, options).status().code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_FALSE(fs::exists(path));
  }
}

TEST(EngineTest, ProcessRejectsBadMessagesAndRunsNothing) {
  testing::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  int calls = 0;
  auto handler = [&](const Message&, Txn& txn) {
    ++calls;
    txn.Put("k", "v");
    return absl::OkStatus();
  };
  const std::string long_id(kMaxIdBytes + 1, 'x');
  const std::string long_source(kMaxSourceBytes + 1, 's');
  const std::vector<Message> bad = {
      {.id = ""},
      {.id = long_id},
      {.id = "m", .ttl = -absl::Seconds(1)},
      {.id = "m", .ttl = absl::InfiniteDuration()},
      {.id = "m", .source = "t", .partition = -1, .offset = 0},
      {.id = "m", .source = long_source, .offset = 0}};
  for (size_t i = 0; i < bad.size(); ++i) {
    auto r = engine->Process(bad[i], handler);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument)
        << "case " << i << ": " << r.status();
  }
  EXPECT_EQ(calls, 0);
  EXPECT_EQ(*engine->GetState("k"), std::nullopt);
  EXPECT_FALSE(*engine->Seen("m"));
  EXPECT_EQ(*engine->CommittedOffset("t", 0), std::nullopt);
  auto stats = engine->GetStats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->processed + stats->duplicates + stats->failed, 0u);
}

TEST(EngineTest, ProcessAcceptsIdOfExactlyTheLimit) {
  testing::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  const std::string id(kMaxIdBytes, 'x');
  auto r = engine->Process({.id = id}, AddOne);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outcome, Outcome::kProcessed);
  EXPECT_TRUE(*engine->Seen(id));
}

TEST(EngineTest, BatchWithOneInvalidMessageIsRejectedWholeAndRunsNoHandler) {
  testing::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  int calls = 0;
  auto handler = [&](const Message& m, Txn& txn) {
    ++calls;
    return AddOne(m, txn);
  };
  const std::vector<Message> batch = {
      {.id = "a", .source = "t", .offset = 1},
      {.id = "b", .source = "t", .offset = 2},
      {.id = "", .source = "t", .offset = 3},
      {.id = "c", .source = "t", .offset = 4}};
  auto results = engine->ProcessBatch(batch, handler);
  EXPECT_EQ(results.status().code(), absl::StatusCode::kInvalidArgument)
      << results.status();
  EXPECT_EQ(calls, 0);
  EXPECT_FALSE(*engine->Seen("a"));
  EXPECT_FALSE(*engine->Seen("b"));
  EXPECT_EQ(*engine->GetState("counter"), std::nullopt);
  EXPECT_EQ(*engine->CommittedOffset("t", 0), std::nullopt);
}

TEST(EngineTest, SeenAndForgetRejectBadIds) {
  testing::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  const std::string long_id(kMaxIdBytes + 1, 'x');
  EXPECT_EQ(engine->Seen("").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine->Seen(long_id).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine->Forget("").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine->Forget(long_id).code(),
            absl::StatusCode::kInvalidArgument);
}

// ============================================================================
// Re-entrancy.
// ============================================================================

TEST(EngineTest, ProcessFromInsideAHandlerFailsWithFailedPrecondition) {
  testing::TempDir dir;
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

TEST(EngineTest, HandlerMayProcessOnADifferentEngine) {
  testing::TempDir dir;
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

TEST(EngineTest, ForgetMakesNextDeliveryRunTheHandlerAgain) {
  testing::TempDir dir;
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

TEST(EngineTest, ForgetOfUnknownIdSucceeds) {
  testing::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  EXPECT_TRUE(engine->Forget("never-seen").ok());
  EXPECT_FALSE(*engine->Seen("never-seen"));
}

TEST(EngineTest, ForgetPersistsAcrossReopen) {
  testing::TempDir dir;
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

TEST(EngineTest, CheckpointIsAnOpenableCopyOfTheStoreAtThatMoment) {
  testing::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  const std::vector<Message> batch = {
      {.id = "a", .source = "t", .offset = 1},
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

TEST(EngineTest, CheckpointIntoExistingPathIsInvalidArgumentAndTouchesNothing) {
  testing::TempDir dir;
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

TEST(EngineTest, DumpVisitsDedupeThenStateThenOffsetEntries) {
  testing::TempDir dir;
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
  const std::vector<Message> batch = {
      {.id = "long", .payload = "v1", .source = "t", .partition = 3,
       .offset = 42},
      {.id = "short", .payload = "v2", .source = "s", .partition = 0,
       .offset = 7, .ttl = absl::Minutes(10)}};
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

TEST(EngineTest, DumpStopsAtAndReturnsTheVisitorsFirstError) {
  testing::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  const std::vector<Message> batch = {{.id = "a", .source = "t", .offset = 1},
                                      {.id = "b"},
                                      {.id = "c"}};
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

TEST(EngineTest, DumpOfEmptyStoreVisitsNothing) {
  testing::TempDir dir;
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

TEST(EngineTest, StatsCountOutcomesAndWrittenBytes) {
  testing::TempDir dir;
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
  EXPECT_DOUBLE_EQ(
      stats->write_amplification,
      static_cast<double>(stats->wal_bytes + stats->flush_bytes +
                          stats->compaction_bytes) /
          static_cast<double>(stats->user_bytes));
}

// ============================================================================
// Expiry and per-message ttl.
// ============================================================================

TEST(EngineTest, RecordExpiresExactlyAtTheEndOfTheWindow) {
  testing::TempDir dir;
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

TEST(EngineTest, PerMessageTtlShorterThanWindowExpiresEarlier) {
  testing::TempDir dir;
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

TEST(EngineTest, PerMessageTtlLongerThanWindowOutlivesIt) {
  testing::TempDir dir;
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

TEST(EngineTest, ReprocessedIdAfterExpiryGetsAFreshWindow) {
  testing::TempDir dir;
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

TEST(EngineTest, WindowChangeOnReopenDoesNotChangeExistingRecords) {
  testing::TempDir dir;
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

TEST(EngineTest, SubMicrosecondTtlStillSuppressesRedeliveryAtTheSameInstant) {
  // A positive ttl must remember the ID at least at the instant it was
  // committed; truncating the ttl to whole microseconds must not make the
  // record expire on arrival.
  testing::TempDir dir;
  ManualClock clock(kStart);
  Options options;
  options.clock = &clock;
  ASSERT_OPEN(engine, dir.Sub("db"), options);
  ASSERT_TRUE(
      engine->Process({.id = "a", .ttl = absl::Nanoseconds(500)}, AddOne)
          .ok());
  EXPECT_TRUE(*engine->Seen("a"));
  auto again = engine->Process({.id = "a"}, AddOne);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->outcome, Outcome::kDuplicate);
  EXPECT_EQ(*engine->GetState("counter"), std::optional<std::string>("1"));
}

TEST(EngineTest, CompactExpiredDropsOnlyExpiredRecords) {
  testing::TempDir dir;
  ManualClock clock(kStart);
  Options options;
  options.clock = &clock;
  options.dedupe_window = absl::Hours(1);
  ASSERT_OPEN(engine, dir.Sub("db"), options);
  const std::vector<Message> batch = {
      {.id = "a", .ttl = absl::Minutes(1)},
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

TEST(EngineTest, BufferedOutcomesCarrySequencesThatWaitDurableAccepts) {
  testing::TempDir dir;
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

TEST(EngineTest, BufferedCommitsSurviveCloseAndReopen) {
  testing::TempDir dir;
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

TEST(EngineTest, SyncOutcomesCarrySequencesAndWaitDurableRejectsUnissued) {
  testing::TempDir dir;
  ASSERT_OPEN(engine, dir.Sub("db"), Options());
  auto r = engine->Process({.id = "a"}, AddOne);
  ASSERT_TRUE(r.ok());
  EXPECT_GT(r->sequence, 0u);
  EXPECT_TRUE(engine->WaitDurable(r->sequence).ok());
  EXPECT_EQ(engine->WaitDurable(r->sequence + 1000000).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace idem

namespace idem {
namespace {

// Regression: these calls wait for the commit lock the handler runs under;
// from inside a handler they must fail instead of deadlocking.
TEST(EngineReentrancyTest, CallsThatWaitForTheCommitFailInsideAHandler) {
  testing::TempDir dir;
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
  EXPECT_THAT(codes, ::testing::ElementsAre(
                         absl::StatusCode::kFailedPrecondition,
                         absl::StatusCode::kFailedPrecondition,
                         absl::StatusCode::kFailedPrecondition,
                         absl::StatusCode::kFailedPrecondition,
                         absl::StatusCode::kOk));
}

}  // namespace
}  // namespace idem
