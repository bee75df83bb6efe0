// The engine's info log: RocksDB's lines reach Options::logger (warnings and
// above), a throwing logger cannot throw into RocksDB, and without a logger
// the lines go to the store's LOG file, best effort (read-only opens write
// nothing). The engine's own events (a reopen after a failed write, expiry
// bucket drops) go the same way.

#include "engine/info_log.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/clock.h"
#include "idem/engine.h"
#include "tests/testing/engine_test_util.h"
#include "tests/testing/recording_logger.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

namespace fs = std::filesystem;
using test::kStart;
using test::RecordingLogger;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

class ThrowingLogger : public Logger {
 public:
  void Log(LogSeverity, std::string_view) override {
    throw std::runtime_error("logger failed");
  }
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(InfoLogTest, PassesWarningsAndAboveToTheUserLogger) {
  RecordingLogger user;
  std::shared_ptr<rocksdb::Logger> log = MakeInfoLog(&user, "", nullptr);
  rocksdb::Info(log.get(), "an info line %d", 1);
  rocksdb::Warn(log.get(), "a warning %d\n", 2);
  rocksdb::Error(log.get(), "an error %s", "three");
  EXPECT_THAT(user.lines(),
              ElementsAre(Pair(LogSeverity::kWarning, "a warning 2"),
                          Pair(LogSeverity::kError, "an error three")));
}

TEST(InfoLogTest, AThrowingLoggerLosesTheLineAndNothingElse) {
  ThrowingLogger user;
  std::shared_ptr<rocksdb::Logger> log = MakeInfoLog(&user, "", nullptr);
  rocksdb::Warn(log.get(), "dropped");  // must not throw
  SUCCEED();
}

TEST(InfoLogTest, WithoutAUserLoggerLinesGoToTheFileWithTimeAndSeverity) {
  util::TempDir dir;
  ManualClock clock(kStart);
  std::shared_ptr<rocksdb::Logger> log =
      MakeInfoLog(nullptr, dir.Sub("LOG"), &clock);
  rocksdb::Warn(log.get(), "disk %s", "full");
  rocksdb::Info(log.get(), "not written");
  EXPECT_EQ(ReadFile(dir.Sub("LOG")),
            "2023-11-14T22:13:20.000000Z warning: disk full\n");
}

TEST(InfoLogTest, AnUnwritableFileDropsLinesWithoutFailing) {
  util::TempDir dir;
  std::shared_ptr<rocksdb::Logger> log =
      MakeInfoLog(nullptr, dir.Sub("no/such/dir/LOG"), nullptr);
  rocksdb::Warn(log.get(), "dropped");
  EXPECT_FALSE(fs::exists(dir.Sub("no")));
}

TEST(InfoLogTest, WritableOpensLogToTheStoreAndReadOnlyOpensDoNot) {
  util::TempDir dir;
  const std::string path = dir.Sub("db");
  { ASSERT_OPEN(engine, path, Options()); }
  EXPECT_TRUE(fs::exists(path + "/LOG"));
  fs::remove(path + "/LOG");
  Options read_only;
  read_only.read_only = true;
  { ASSERT_OPEN(engine, path, read_only); }
  EXPECT_FALSE(fs::exists(path + "/LOG"));
}

TEST(InfoLogTest, AUserLoggerReplacesTheLogFile) {
  util::TempDir dir;
  const std::string path = dir.Sub("db");
  RecordingLogger user;
  Options options;
  options.logger = &user;
  { ASSERT_OPEN(engine, path, options); }
  EXPECT_FALSE(fs::exists(path + "/LOG"));
}

// ---- The engine's own events ----

Options BucketOptions(Clock* clock) {
  Options options;
  options.clock = clock;
  options.dedupe_window = absl::Hours(1);
  options.expiry_buckets = 2;
  return options;
}

TEST(EngineEventLogTest, BucketDropsReachTheLogger) {
  util::TempDir dir;
  ManualClock clock(kStart);
  RecordingLogger user;
  Options options = BucketOptions(&clock);
  options.logger = &user;
  ASSERT_OPEN(engine, dir.Sub("db"), options);
  ASSERT_TRUE(engine->Process({.id = "a"}, test::AddOne).ok());
  clock.Advance(absl::Hours(3));  // every record of a's bucket expired
  ASSERT_TRUE(engine->Process({.id = "b"}, test::AddOne).ok());
  EXPECT_TRUE(user.Has(LogSeverity::kInfo,
                       "idem: dropped 1 expiry bucket(s) whose records had all "
                       "expired"));
}

// A partition's import (a restore from a changelog or a snapshot) is
// logged with what it replaced the partition with.
TEST(EngineEventLogTest, PartitionImportsReachTheLogger) {
  util::TempDir dir;
  RecordingLogger user;
  Options options;
  options.logger = &user;
  ASSERT_OPEN(engine, dir.Sub("db"), options);
  PartitionSnapshot snapshot;
  snapshot.source = "orders";
  snapshot.partition = 3;
  snapshot.offset = 41;
  snapshot.entries = {{"total", "7"}};
  ASSERT_TRUE(engine->ImportPartition(snapshot).ok());
  EXPECT_TRUE(user.Has(LogSeverity::kInfo,
                       "idem: imported partition orders/3 at offset 41: 1 "
                       "state entries, 0 dedupe records"));
}

TEST(EngineEventLogTest, WithoutALoggerEventsGoToTheStoresLogFile) {
  util::TempDir dir;
  ManualClock clock(kStart);
  const std::string path = dir.Sub("db");
  ASSERT_OPEN(engine, path, BucketOptions(&clock));
  ASSERT_TRUE(engine->Process({.id = "a"}, test::AddOne).ok());
  clock.Advance(absl::Hours(3));
  ASSERT_TRUE(engine->Process({.id = "b"}, test::AddOne).ok());
  EXPECT_THAT(ReadFile(path + "/LOG"),
              HasSubstr("info: idem: dropped 1 expiry bucket(s)"));
}

TEST(EngineEventLogTest, AReopenAfterAFailedWriteIsLogged) {
  RecordingLogger user;
  Options options;
  options.logger = &user;
  test::EngineHarness h(options,
                        test::EngineHarness::Storage::kCrashFileSystem);
  ASSERT_TRUE(h.Open().ok());
  ASSERT_TRUE(h.engine().Process({.id = "a"}, test::AddOne).ok());
  h.fs().SetFault(absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(h.engine().Process({.id = "b"}, test::AddOne).ok());
  // The next commit reopens the store, which fails while the fault lasts.
  EXPECT_FALSE(h.engine().Process({.id = "b"}, test::AddOne).ok());
  EXPECT_TRUE(user.Has(LogSeverity::kWarning,
                       "idem: reopening the store after a failed write or "
                       "sync"));
  EXPECT_TRUE(user.Has(LogSeverity::kError, "idem: "));
  h.fs().SetFault(absl::StatusCode::kOk);
  ASSERT_TRUE(h.engine().Process({.id = "b"}, test::AddOne).ok());
  EXPECT_TRUE(
      user.Has(LogSeverity::kInfo, "idem: reopened the store; commits go on"));
}

}  // namespace
}  // namespace idem
