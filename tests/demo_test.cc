#include "cli/demo.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "cli/exit_codes.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "util/temp_dir.h"

namespace idem::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

DemoOptions Small() {
  DemoOptions options;
  options.messages = 2000;
  options.duplicate_rate = 0.10;
  options.batch = 100;
  options.seed = 3;
  options.accounts = 20;
  return options;
}

// Points $TMPDIR at a fresh directory for the test's lifetime.
class ScopedTmpdir {
 public:
  ScopedTmpdir() {
    if (const char* old = std::getenv("TMPDIR")) old_ = old;
    setenv("TMPDIR", dir_.path().c_str(), /*overwrite=*/1);
  }
  ~ScopedTmpdir() {
    if (old_.has_value()) {
      setenv("TMPDIR", old_->c_str(), 1);
    } else {
      unsetenv("TMPDIR");
    }
  }
  const std::string& path() const { return dir_.path(); }

 private:
  util::TempDir dir_;
  std::optional<std::string> old_;
};

TEST(DemoTest, SmallRunPassesTheStateCheck) {
  absl::StatusOr<DemoReport> r = RunDemo(Small());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->state_ok);
  EXPECT_EQ(r->mismatched_accounts, 0);
  EXPECT_EQ(r->actual_total, r->expected_total);
  EXPECT_TRUE(r->counts_ok);
  EXPECT_TRUE(r->passed());
  EXPECT_EQ(r->delivered, 2000);
  EXPECT_EQ(r->batches, 20);
  EXPECT_EQ(r->acknowledged, 2000);
  EXPECT_EQ(r->committed_offset, 1999);
  EXPECT_GT(r->reordered, 0);
  EXPECT_GT(r->stats.write_amplification, 0);
  EXPECT_GT(r->messages_per_second, 0);
}

TEST(DemoTest, DuplicatesCountedMatchTheInjectedOnes) {
  absl::StatusOr<DemoReport> r = RunDemo(Small());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->injected_duplicates, 200);
  EXPECT_EQ(r->unique_messages, 1800);
  EXPECT_EQ(r->duplicates, 200);
  EXPECT_EQ(r->processed, 1800);
  EXPECT_EQ(r->failed, 0);
  EXPECT_EQ(r->result_mismatches, 0);
  // The engine's own counters agree with the outcomes returned.
  EXPECT_EQ(r->stats.duplicates, 200u);
  EXPECT_EQ(r->stats.processed, 1800u);
}

TEST(DemoTest, DuplicateCountsHoldForOtherRatesAndBatchSizes) {
  for (double rate : {0.0, 0.3, 0.6}) {
    for (int batch : {3, 64, 1000}) {
      DemoOptions options = Small();
      options.messages = 200;
      options.duplicate_rate = rate;
      options.batch = batch;
      absl::StatusOr<DemoReport> r = RunDemo(options);
      ASSERT_TRUE(r.ok()) << r.status();
      SCOPED_TRACE(::testing::Message()
                   << "rate " << rate << " batch " << batch);
      EXPECT_EQ(r->injected_duplicates, std::llround(200 * rate));
      EXPECT_EQ(r->duplicates, r->injected_duplicates);
      EXPECT_TRUE(r->passed());
    }
  }
}

TEST(DemoTest, SameSeedGivesTheSameStream) {
  absl::StatusOr<DemoReport> a = RunDemo(Small());
  absl::StatusOr<DemoReport> b = RunDemo(Small());
  DemoOptions other = Small();
  other.seed = 4;
  absl::StatusOr<DemoReport> c = RunDemo(other);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->expected_total, b->expected_total);
  EXPECT_EQ(a->reordered, b->reordered);
  EXPECT_NE(a->expected_total, c->expected_total);
}

TEST(DemoTest, RemovesItsTemporaryDirectory) {
  ScopedTmpdir tmpdir;
  absl::StatusOr<DemoReport> r = RunDemo(Small());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(std::filesystem::is_empty(tmpdir.path()));
}

TEST(DemoTest, KeepKeepsTheTemporaryStore) {
  ScopedTmpdir tmpdir;
  DemoOptions options = Small();
  options.keep = true;
  absl::StatusOr<DemoReport> r = RunDemo(options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->passed());
  EXPECT_EQ(r->store.rfind(tmpdir.path(), 0), 0u) << r->store;
  EXPECT_TRUE(std::filesystem::is_directory(r->store));
}

TEST(DemoTest, StoreFlagPutsTheStoreThereAndKeepsIt) {
  util::TempDir dir;
  DemoOptions options = Small();
  options.store = dir.Sub("demo-store");
  std::ostringstream out, err;
  EXPECT_EQ(RunDemoTool(options, /*json=*/false, out, err), kExitOk)
      << err.str();
  EXPECT_TRUE(std::filesystem::is_directory(options.store));
  EXPECT_THAT(err.str(), ::testing::HasSubstr(options.store));
}

TEST(DemoTest, RejectsOptionsOutOfRange) {
  DemoOptions options = Small();
  options.messages = 0;
  EXPECT_EQ(ValidateDemoOptions(options).code(),
            absl::StatusCode::kInvalidArgument);
  options = Small();
  options.duplicate_rate = 1.0;
  EXPECT_EQ(RunDemo(options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options = Small();
  options.batch = 0;
  std::ostringstream out, err;
  EXPECT_EQ(RunDemoTool(options, /*json=*/false, out, err), kExitUsage);
  EXPECT_THAT(err.str(), HasSubstr("--batch"));
  EXPECT_THAT(out.str(), IsEmpty());
}

// Regression: huge values passed the checks and aborted the tool with
// std::bad_alloc (exit 134) instead of exiting 2.
TEST(DemoTest, RejectsValuesTooLargeToHoldInMemory) {
  DemoOptions options = Small();
  options.messages = 999'999'999'999;
  std::ostringstream out, err;
  EXPECT_EQ(RunDemoTool(options, /*json=*/false, out, err), kExitUsage);
  EXPECT_THAT(err.str(), HasSubstr("--messages"));
  options = Small();
  options.batch = 2'000'000'000;
  EXPECT_EQ(ValidateDemoOptions(options).code(),
            absl::StatusCode::kInvalidArgument);
  options = Small();
  options.accounts = 2'000'000'000;
  EXPECT_THAT(ValidateDemoOptions(options).message(), HasSubstr("--accounts"));
  options = Small();
  options.messages = kMaxDemoMessages;
  options.batch = kMaxDemoBatch;
  options.accounts = kMaxDemoAccounts;
  EXPECT_TRUE(ValidateDemoOptions(options).ok());
}

TEST(DemoToolTest, PrintsTheReportForPeople) {
  std::ostringstream out, err;
  EXPECT_EQ(RunDemoTool(Small(), /*json=*/false, out, err), kExitOk);
  EXPECT_THAT(err.str(), IsEmpty());
  EXPECT_THAT(out.str(), HasSubstr("duplicates suppressed 200"));
  EXPECT_THAT(out.str(), HasSubstr("state check           PASS"));
  EXPECT_THAT(out.str(), HasSubstr("write amplification"));
  EXPECT_THAT(out.str(), HasSubstr("messages/s"));
}

TEST(DemoToolTest, PrintsTheReportAsJson) {
  std::ostringstream out, err;
  EXPECT_EQ(RunDemoTool(Small(), /*json=*/true, out, err), kExitOk);
  const nlohmann::json v = nlohmann::json::parse(out.str(), /*cb=*/nullptr,
                                                 /*allow_exceptions=*/false);
  ASSERT_TRUE(v.is_object()) << "not a JSON object: " << out.str();
  for (const char* field :
       {"delivered", "processed", "duplicates", "injected_duplicates",
        "write_amplification", "wal_bytes", "flush_bytes", "compaction_bytes",
        "user_bytes", "elapsed_seconds", "messages_per_second"}) {
    ASSERT_TRUE(v.contains(field)) << field;
    EXPECT_TRUE(v.at(field).is_number()) << field;
  }
  EXPECT_EQ(v.at("duplicates"), 200);
  EXPECT_EQ(v.value("state_check", ""), "PASS");
  EXPECT_TRUE(v.value("passed", false));
}

}  // namespace
}  // namespace idem::cli
