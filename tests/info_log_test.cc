// The engine's info log: RocksDB's lines reach Options::logger (warnings and
// above), a throwing logger cannot throw into RocksDB, and without a logger
// the lines go to the store's LOG file, best effort (read-only opens write
// nothing).

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
#include "util/temp_dir.h"

namespace idem {
namespace {

namespace fs = std::filesystem;
using test::kStart;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

class RecordingLogger : public Logger {
 public:
  void Log(LogSeverity severity, std::string_view message) override {
    std::lock_guard<std::mutex> lock(mu_);
    lines_.emplace_back(severity, std::string(message));
  }
  std::vector<std::pair<LogSeverity, std::string>> lines() {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<LogSeverity, std::string>> lines_;
};

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

}  // namespace
}  // namespace idem
