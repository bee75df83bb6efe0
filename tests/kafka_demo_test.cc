#include "cli/kafka_demo.h"

#include <filesystem>
#include <sstream>
#include <string>

#include "cli/exit_codes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "util/directory.h"
#include "util/temp_dir.h"

namespace idem::cli {
namespace {

using ::testing::HasSubstr;

KafkaDemoOptions Small(const util::TempDir& dir) {
  KafkaDemoOptions options;
  options.messages = 1000;
  options.duplicate_every = 5;
  options.batch = 100;
  options.store = dir.Sub("store");
  return options;
}

TEST(KafkaDemoTest, RunOnTheMockClusterPassesItsChecksAndReportsJson) {
  util::TempDir dir;
  std::ostringstream progress;
  absl::StatusOr<KafkaDemoReport> r = RunKafkaDemo(Small(dir), progress);
  ASSERT_TRUE(r.ok()) << r.status() << "\n" << progress.str();
  EXPECT_TRUE(r->passed);
  EXPECT_EQ(r->applied_once, r->unique_payments);
  EXPECT_EQ(r->applied_wrongly, 0);
  EXPECT_EQ(r->actual_total, r->expected_total);
  EXPECT_EQ(r->dead_letter_records, 1);
  EXPECT_GT(r->injected_duplicates, 0);
  EXPECT_EQ(r->first.duplicates + r->second.duplicates, r->injected_duplicates);
  // The restarted consumer resumed every partition from the engine.
  ASSERT_EQ(r->second.starts.size(), 4u);
  for (const std::string& start : r->second.starts) {
    EXPECT_THAT(start, HasSubstr("resuming at"));
  }
  EXPECT_THAT(progress.str(), HasSubstr("phase 2: assigned partition"));

  std::ostringstream json;
  PrintKafkaDemoReport(*r, /*json=*/true, json);
  const nlohmann::json parsed = nlohmann::json::parse(
      json.str(), /*cb=*/nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(parsed.is_object()) << "not a JSON object:\n" << json.str();
  ASSERT_TRUE(parsed.contains("passed"));
  EXPECT_EQ(parsed.at("passed"), true);
  ASSERT_TRUE(parsed.contains("second"));
  ASSERT_TRUE(parsed.at("second").contains("records_per_second"));
}

TEST(KafkaDemoTest, KeepKeepsTheScratchDirectoryWithTheStore) {
  KafkaDemoOptions options;
  options.messages = 200;
  options.batch = 100;
  options.keep = true;
  std::ostringstream out, err;
  ASSERT_EQ(RunKafkaDemoTool(options, /*json=*/true, out, err), kExitOk)
      << err.str();
  const nlohmann::json report = nlohmann::json::parse(
      out.str(), /*cb=*/nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(report.is_object()) << out.str();
  // The paths are named on stderr; the store is in the scratch directory.
  const std::string marker = "the scratch directory is kept at ";
  const size_t at = err.str().find(marker);
  ASSERT_NE(at, std::string::npos) << err.str();
  const std::string scratch = err.str().substr(
      at + marker.size(), err.str().find('\n', at) - at - marker.size());
  EXPECT_THAT(err.str(), HasSubstr("the store is kept at " + scratch));
  EXPECT_TRUE(std::filesystem::exists(scratch + "/store/CURRENT")) << scratch;
  util::RemoveTree(scratch);
}

TEST(KafkaDemoTest, RemovesItsScratchDirectoryAndKeepsTheStoreItWasGiven) {
  util::TempDir dir;
  KafkaDemoOptions options = Small(dir);
  options.messages = 200;
  std::ostringstream progress;
  absl::StatusOr<KafkaDemoReport> r = RunKafkaDemo(options, progress);
  ASSERT_TRUE(r.ok()) << r.status() << "\n" << progress.str();
  EXPECT_TRUE(r->passed);
  EXPECT_EQ(r->store, options.store);
  EXPECT_TRUE(std::filesystem::exists(options.store + "/CURRENT"));
  ASSERT_FALSE(r->scratch.empty());
  EXPECT_FALSE(std::filesystem::exists(r->scratch)) << r->scratch;
}

TEST(KafkaDemoTest, BadOptionsAreUsageErrors) {
  util::TempDir dir;
  KafkaDemoOptions options = Small(dir);
  options.messages = 3;
  std::ostringstream out, err;
  EXPECT_EQ(RunKafkaDemoTool(options, false, out, err), kExitUsage);
  EXPECT_THAT(err.str(), HasSubstr("--messages"));
}

}  // namespace
}  // namespace idem::cli
