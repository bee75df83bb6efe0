// Damage inside the write-ahead log: records that follow the damage make
// Open fail with kDataLoss (recovery would otherwise stop at the damage and
// silently drop every later commit, acknowledged ones included), while a
// torn tail, as a power loss leaves it, still recovers to a prefix.

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/engine.h"
#include "tests/testing/engine_test_util.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

namespace fs = std::filesystem;
using test::AddOne;
using test::SnapshotTree;
using ::testing::HasSubstr;

constexpr int kCommits = 500;
constexpr int kPerCommit = 10;

// A kSync store holding kCommits commits of kPerCommit messages, all in its
// write-ahead log (closed without a flush).
std::string MakeWalStore(const util::TempDir& dir) {
  const std::string path = dir.Sub("db");
  auto engine = Engine::Open(path, Options());
  EXPECT_TRUE(engine.ok()) << engine.status();
  for (int c = 0; c < kCommits && engine.ok(); ++c) {
    std::vector<std::string> ids;
    std::vector<Message> batch;
    for (int i = 0; i < kPerCommit; ++i) {
      ids.push_back("m-" + std::to_string(c * kPerCommit + i));
    }
    for (const std::string& id : ids) batch.push_back({.id = id});
    auto results = (*engine)->ProcessBatch(batch, AddOne);
    EXPECT_TRUE(results.ok()) << results.status();
  }
  return path;
}

// The store's one non-empty write-ahead log file.
std::string WalOf(const std::string& path) {
  std::string wal;
  for (const auto& entry : fs::directory_iterator(path)) {
    if (entry.path().extension() == ".log" && entry.file_size() > 0) {
      EXPECT_TRUE(wal.empty())
          << "more than one WAL: " << wal << ", " << entry.path();
      wal = entry.path().string();
    }
  }
  EXPECT_FALSE(wal.empty());
  return wal;
}

void FlipBytes(const std::string& file, uint64_t at, int count) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  for (int i = 0; i < count; ++i) {
    f.seekg(static_cast<std::streamoff>(at + i));
    char c = 0;
    f.get(c);
    f.seekp(static_cast<std::streamoff>(at + i));
    f.put(static_cast<char>(c ^ 0x5a));
  }
}

int64_t Counter(Engine& engine) {
  auto value = engine.GetState("counter");
  EXPECT_TRUE(value.ok()) << value.status();
  if (!value.ok() || !value->has_value()) return 0;
  return std::stoll(**value);
}

TEST(WalDamageTest, DamageFollowedByValidRecordsIsDataLossAndChangesNothing) {
  util::TempDir dir;
  const std::string path = MakeWalStore(dir);
  const std::string wal = WalOf(path);
  FlipBytes(wal, fs::file_size(wal) / 2, 4);
  const auto before = SnapshotTree(path);
  for (bool read_only : {false, true}) {
    SCOPED_TRACE(read_only ? "read-only" : "writable");
    Options options;
    options.read_only = read_only;
    auto engine = Engine::Open(path, options);
    EXPECT_EQ(engine.status().code(), absl::StatusCode::kDataLoss)
        << engine.status();
    EXPECT_THAT(engine.status().message(), HasSubstr("write-ahead log"));
  }
  EXPECT_TRUE(SnapshotTree(path) == before);
}

TEST(WalDamageTest, DamageNearTheStartIsDataLoss) {
  util::TempDir dir;
  const std::string path = MakeWalStore(dir);
  const std::string wal = WalOf(path);
  FlipBytes(wal, 100, 4);
  EXPECT_EQ(Engine::Open(path, Options()).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(WalDamageTest, TornTailRecoversThePrefixBeforeIt) {
  util::TempDir dir;
  const std::string path = MakeWalStore(dir);
  const std::string wal = WalOf(path);
  // Cut inside the last commit's record, as a power loss during its write
  // would.
  fs::resize_file(wal, fs::file_size(wal) - 20);
  ASSERT_OPEN(engine, path, Options());
  EXPECT_EQ(Counter(*engine), (kCommits - 1) * kPerCommit);
  // The engine goes on from there.
  auto r = engine->Process({.id = "after"}, AddOne);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outcome, Outcome::kProcessed);
}

TEST(WalDamageTest, UndamagedLogReplaysEveryCommit) {
  util::TempDir dir;
  const std::string path = MakeWalStore(dir);
  ASSERT_OPEN(engine, path, Options());
  EXPECT_EQ(Counter(*engine), kCommits * kPerCommit);
}

}  // namespace
}  // namespace idem
