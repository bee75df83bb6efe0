// Where a store lives: one writable engine per directory whatever the path's
// spelling, creation in an existing empty directory (".", a trailing "/", a
// symlink, a mount point, a read-only parent), leftovers of interrupted
// creations, concurrent creators, and the damaged-store error codes.

#include "engine/store_directory.h"

#include <sys/mount.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/crash/file_system.h"
#include "idem/engine.h"
#include "rocksdb/env.h"
#include "rocksdb/file_system.h"
#include "tests/testing/engine_test_util.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

namespace fs = std::filesystem;
using crash::CrashFileSystem;
using crash::CrashFsOptions;
using crash::FsOp;
using test::AddOne;
using test::Names;
using test::SnapshotTree;
using ::testing::HasSubstr;
using ::testing::Not;

// Commits one message "m-<n>" and checks it was processed.
void ProcessOne(Engine& engine, int n) {
  auto r = engine.Process(
      {.id = "m-" + std::to_string(n), .source = "t", .offset = n}, AddOne);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->outcome, Outcome::kProcessed);
}

// The store at `path` opens and holds exactly `count` processed messages.
void ExpectStoreWithCount(const std::string& path, int count) {
  auto engine = Engine::Open(path, Options());
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto counter = (*engine)->GetState("counter");
  ASSERT_TRUE(counter.ok()) << counter.status();
  if (count == 0) {
    EXPECT_FALSE(counter->has_value());
  } else {
    EXPECT_EQ(*counter, std::optional<std::string>(std::to_string(count)));
  }
}

// Runs `body` with the working directory set to `dir`.
template <typename Body>
void InDirectory(const std::string& dir, Body body) {
  const fs::path previous = fs::current_path();
  fs::current_path(dir);
  body();
  fs::current_path(previous);
}

// A tmpfs mounted at a new directory for the test's lifetime; mounted() is
// false where mounting is not permitted (not root).
class ScopedTmpfs {
 public:
  explicit ScopedTmpfs(const std::string& where) : where_(where) {
    fs::create_directories(where_);
    mounted_ = ::mount("tmpfs", where_.c_str(), "tmpfs", 0, "size=64m") == 0;
  }
  ~ScopedTmpfs() {
    if (mounted_) ::umount2(where_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }

 private:
  const std::string where_;
  bool mounted_ = false;
};

// ============================================================================
// One store, one writable engine, whatever the spelling of its path.
// ============================================================================

TEST(StoreDirectoryTest, EverySpellingOfAnOpenStoreIsRefusedLikeTheSamePath) {
  util::TempDir dir;
  const std::string path = dir.Sub("db");
  ASSERT_OPEN(engine, path, Options());
  ProcessOne(*engine, 1);
  fs::create_directory_symlink(path, dir.Sub("link"));
  const std::string relative = fs::relative(path, fs::current_path()).string();
  for (const std::string& spelling :
       {path, path + "/", path + "/.", dir.path() + "//db",
        dir.path() + "/./db", dir.Sub("link"), dir.Sub("link/"), relative,
        "./" + relative}) {
    SCOPED_TRACE(spelling);
    auto second = Engine::Open(spelling, Options());
    EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition)
        << second.status();
  }
  // The first engine is unaffected, and nothing was processed twice.
  ProcessOne(*engine, 2);
  engine.reset();
  ExpectStoreWithCount(path, 2);
}

TEST(StoreDirectoryTest, AnotherSpellingOpensTheStoreOnceTheFirstIsClosed) {
  util::TempDir dir;
  const std::string path = dir.Sub("db");
  {
    ASSERT_OPEN(engine, path, Options());
    ProcessOne(*engine, 1);
  }
  fs::create_directory_symlink(path, dir.Sub("link"));
  {
    ASSERT_OPEN(engine, dir.Sub("link/"), Options());
    ProcessOne(*engine, 2);
  }
  ExpectStoreWithCount(path + "//", 2);
  EXPECT_TRUE(fs::is_symlink(dir.Sub("link")));
}

// ============================================================================
// Creation in an existing empty directory.
// ============================================================================

TEST(StoreDirectoryTest, CreatesInAnEmptyDirectoryNamedWithATrailingSlash) {
  util::TempDir dir;
  fs::create_directory(dir.Sub("db"));
  {
    ASSERT_OPEN(engine, dir.Sub("db/"), Options());
    ProcessOne(*engine, 1);
  }
  EXPECT_FALSE(fs::exists(dir.Sub("db/") + kStagingDirName));
  EXPECT_FALSE(fs::exists(dir.Sub("db/") + kCreationLockName));
  ExpectStoreWithCount(dir.Sub("db"), 1);
}

TEST(StoreDirectoryTest, CreatesInTheWorkingDirectoryNamedDot) {
  util::TempDir dir;
  fs::create_directory(dir.Sub("db"));
  InDirectory(dir.Sub("db"), [] {
    auto engine = Engine::Open(".", Options());
    ASSERT_TRUE(engine.ok()) << engine.status();
    ProcessOne(**engine, 1);
  });
  EXPECT_FALSE(fs::exists(dir.Sub("db/") + kStagingDirName));
  ExpectStoreWithCount(dir.Sub("db"), 1);
}

TEST(StoreDirectoryTest, CreatesInsideTheDirectoryASymlinkPointsTo) {
  util::TempDir dir;
  fs::create_directory(dir.Sub("target"));
  fs::create_directory_symlink(dir.Sub("target"), dir.Sub("link"));
  {
    ASSERT_OPEN(engine, dir.Sub("link"), Options());
    ProcessOne(*engine, 1);
  }
  EXPECT_TRUE(fs::is_symlink(dir.Sub("link")));
  EXPECT_TRUE(fs::exists(dir.Sub("target/CURRENT")));
  ExpectStoreWithCount(dir.Sub("target"), 1);
}

TEST(StoreDirectoryTest, CreatesInAMountPointWhoseParentIsReadOnly) {
  util::TempDir dir;
  // A read-only parent holding a writable mount point: neither a sibling
  // staging directory nor a rename of the directory itself is possible.
  ScopedTmpfs parent(dir.Sub("parent"));
  if (!parent.mounted()) GTEST_SKIP() << "mounting a tmpfs needs root";
  fs::create_directory(dir.Sub("parent/store"));
  ScopedTmpfs store(dir.Sub("parent/store"));
  ASSERT_TRUE(store.mounted());
  ASSERT_EQ(::mount(nullptr, dir.Sub("parent").c_str(), nullptr,
                    MS_REMOUNT | MS_RDONLY, nullptr),
            0);
  {
    ASSERT_OPEN(engine, dir.Sub("parent/store"), Options());
    ProcessOne(*engine, 1);
  }
  ExpectStoreWithCount(dir.Sub("parent/store/"), 1);
}

TEST(StoreDirectoryTest, MissingParentIsNotFoundNamingTheCallersPath) {
  util::TempDir dir;
  const std::string path = dir.Sub("no/such/parent/db");
  auto engine = Engine::Open(path, Options());
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kNotFound)
      << engine.status();
  EXPECT_THAT(engine.status().message(), HasSubstr(path));
  EXPECT_THAT(engine.status().message(), Not(HasSubstr(kStagingDirName)));
  EXPECT_FALSE(fs::exists(dir.Sub("no")));
}

TEST(StoreDirectoryTest,
     ReadOnlyOpenOfAMissingStoreDoesNotBlameCreateIfMissing) {
  util::TempDir dir;
  Options options;
  options.read_only = true;
  auto engine = Engine::Open(dir.Sub("db"), options);
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(engine.status().message(), HasSubstr("read-only"));
  EXPECT_THAT(engine.status().message(), Not(HasSubstr("create_if_missing")));
  EXPECT_FALSE(fs::exists(dir.Sub("db")));
}

// ============================================================================
// Interrupted creations.
// ============================================================================

// A staging directory left by the creation code of an older build (it built
// the store in "<path>.idem-creating", which for "db/" is inside db).
TEST(StoreDirectoryTest, UnmarkedStagingLeftoverIsRemovedAndCreationRestarts) {
  util::TempDir dir;
  const std::string path = dir.Sub("db");
  fs::create_directories(path + "/" + kStagingDirName);
  std::ofstream(path + "/" + kStagingDirName + "/000001.log") << "partial";
  {
    ASSERT_OPEN(engine, path, Options());
    ProcessOne(*engine, 1);
  }
  EXPECT_FALSE(fs::exists(path + "/" + kStagingDirName));
  ExpectStoreWithCount(path, 1);
}

TEST(StoreDirectoryTest, UnmarkedStagingBesideOtherFilesIsNamedInTheError) {
  util::TempDir dir;
  const std::string path = dir.Sub("db");
  fs::create_directories(path + "/" + kStagingDirName);
  std::ofstream(path + "/notes.txt") << "the user's";
  const auto before = SnapshotTree(path);
  auto engine = Engine::Open(path, Options());
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kFailedPrecondition)
      << engine.status();
  EXPECT_THAT(engine.status().message(), HasSubstr("notes.txt"));
  EXPECT_THAT(engine.status().message(), HasSubstr(kStagingDirName));
  EXPECT_EQ(Names(SnapshotTree(path)), Names(before));
}

TEST(StoreDirectoryTest,
     WithoutCreateIfMissingAnInterruptedCreationIsNotFound) {
  util::TempDir dir;
  const std::string path = dir.Sub("db");
  fs::create_directories(path + "/" + kStagingDirName);
  Options options;
  options.create_if_missing = false;
  auto engine = Engine::Open(path, options);
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kNotFound)
      << engine.status();
  EXPECT_TRUE(fs::exists(path + "/" + kStagingDirName));
}

// A creation failing at each file operation in turn (through CrashFileSystem's
// fault injection), then a clean Open: every prefix of the creation protocol
// ends in a working, empty store.
TEST(StoreDirectoryTest,
     CreationFailingAtAnyStepLeavesADirectoryThatOpensLater) {
  for (FsOp op : {FsOp::kAppend, FsOp::kSync, FsOp::kRename}) {
    for (uint64_t at = 1; at <= 12; ++at) {
      SCOPED_TRACE(::testing::Message()
                   << "op " << static_cast<int>(op) << " at " << at);
      util::TempDir dir;
      const std::string path = dir.Sub("db");
      fs::create_directory(path);
      CrashFsOptions crash_options;
      crash_options.journal_path = dir.Sub("journal");
      crash_options.fail_at = at;
      crash_options.fail_op = op;
      auto crash_fs = std::make_shared<CrashFileSystem>(
          rocksdb::FileSystem::Default(), crash_options);
      ASSERT_TRUE(crash_fs->status().ok());
      std::unique_ptr<rocksdb::Env> env = rocksdb::NewCompositeEnv(crash_fs);
      Options options;
      options.env = env.get();
      {
        auto failed = Engine::Open(path + "/", options);
        if (failed.ok()) continue;  // fewer operations than `at`
      }
      crash_fs->ClearFault();
      {
        auto engine = Engine::Open(path + "/", options);
        ASSERT_TRUE(engine.ok()) << engine.status();
        ProcessOne(**engine, 1);
      }
      EXPECT_FALSE(fs::exists(path + "/" + kStagingDirName));
      ExpectStoreWithCount(path, 1);
    }
  }
}

// ============================================================================
// Concurrent creators.
// ============================================================================

TEST(StoreDirectoryTest, ConcurrentCreatorsGetOneStoreAndClearRefusals) {
  for (int round = 0; round < 5; ++round) {
    util::TempDir dir;
    const std::string path = dir.Sub("db");
    // Odd rounds create the directory too; even ones create in it.
    if (round % 2 == 0) fs::create_directory(path);
    fs::create_directory_symlink(path, dir.Sub("link"));
    std::vector<std::string> spellings = {path, path + "/",
                                          dir.path() + "//db"};
    if (round % 2 == 0) spellings.push_back(dir.Sub("link"));
    std::vector<absl::StatusOr<std::unique_ptr<Engine>>> opened;
    for (size_t i = 0; i < spellings.size(); ++i) {
      opened.emplace_back(absl::UnknownError("not run"));
    }
    std::atomic<int> ready{0};
    std::vector<std::thread> threads;
    for (size_t i = 0; i < spellings.size(); ++i) {
      threads.emplace_back([&, i] {
        ++ready;
        while (ready.load() < static_cast<int>(spellings.size())) {
        }
        opened[i] = Engine::Open(spellings[i], Options());
      });
    }
    for (std::thread& t : threads) t.join();
    int winners = 0;
    for (const auto& engine : opened) {
      if (engine.ok()) {
        ++winners;
        continue;
      }
      EXPECT_EQ(engine.status().code(), absl::StatusCode::kFailedPrecondition)
          << engine.status();
      EXPECT_THAT(engine.status().message(), Not(HasSubstr("removing")));
    }
    EXPECT_EQ(winners, 1);
    for (auto& engine : opened) {
      if (engine.ok()) ProcessOne(**engine, 1);
    }
    opened.clear();
    ExpectStoreWithCount(path, 1);
  }
}

// ============================================================================
// Damaged stores.
// ============================================================================

// A store with one processed message, closed.
std::string MakeStore(const util::TempDir& dir) {
  const std::string path = dir.Sub("db");
  auto engine = Engine::Open(path, Options());
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (engine.ok()) ProcessOne(**engine, 1);
  return path;
}

TEST(StoreDirectoryTest, DeletedManifestIsDataLoss) {
  util::TempDir dir;
  const std::string path = MakeStore(dir);
  int removed = 0;
  for (const auto& entry : fs::directory_iterator(path)) {
    if (entry.path().filename().string().rfind("MANIFEST-", 0) == 0) {
      fs::remove(entry.path());
      ++removed;
    }
  }
  ASSERT_GT(removed, 0);
  auto engine = Engine::Open(path, Options());
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kDataLoss)
      << engine.status();
  EXPECT_THAT(engine.status().message(), HasSubstr("MANIFEST"));
}

TEST(StoreDirectoryTest, DeletedCurrentIsDataLossAndChangesNothing) {
  util::TempDir dir;
  const std::string path = MakeStore(dir);
  ASSERT_TRUE(fs::remove(path + "/CURRENT"));
  const auto before = SnapshotTree(path);
  for (bool read_only : {false, true}) {
    Options options;
    options.read_only = read_only;
    auto engine = Engine::Open(path, options);
    EXPECT_EQ(engine.status().code(), absl::StatusCode::kDataLoss)
        << engine.status();
    EXPECT_THAT(engine.status().message(), HasSubstr("CURRENT"));
  }
  EXPECT_TRUE(SnapshotTree(path) == before);
}

}  // namespace
}  // namespace idem
