// idem-kafka-demo --failover, run as the binary it is (its member A is a
// separate process of the same binary, SIGKILLed mid-stream): member B
// restores the partitions from the changelog, its totals are exact and a
// late producer duplicate is caught; and the same run with member B out of
// changelog mode (a deliberately broken variant) fails its checks.

#include <sys/wait.h>

#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/run_shell.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

using ::idem::test::RunShell;

constexpr char kSmallRun[] =
    " --failover --messages=3000 --duplicate_every=7 --batch=250 --json";

nlohmann::json ParseReport(const std::string& out) {
  return nlohmann::json::parse(out, /*cb=*/nullptr,
                               /*allow_exceptions=*/false);
}

TEST(KafkaFailoverDemoTest, ChangelogRestoreAfterKillKeepsTotals) {
  util::TempDir dir;
  int status = 0;
  const std::string out = RunShell(
      std::string(IDEM_KAFKA_DEMO) + kSmallRun + " 2>" + dir.Sub("stderr"),
      &status);
  ASSERT_EQ(status, 0) << out;
  const nlohmann::json report = ParseReport(out);
  ASSERT_TRUE(report.is_object()) << out;
  EXPECT_EQ(report.at("passed"), true) << out;
  // Member A was killed in mid-stream: after some records, before the end.
  const int64_t at_kill = report.at("committed_at_kill");
  EXPECT_GT(at_kill, 0) << out;
  EXPECT_LT(at_kill, 3000) << out;
  // Member B restored partitions, with state and dedupe records in them.
  EXPECT_GT(report.at("restored_partitions").get<int64_t>(), 0) << out;
  int64_t state_entries = 0;
  int64_t dedupe_records = 0;
  for (const nlohmann::json& r : report.at("restores")) {
    state_entries += r.at("state_entries").get<int64_t>();
    dedupe_records += r.at("dedupe_records").get<int64_t>();
    // Member B keeps no standby copies: every restore reads the changelog.
    EXPECT_EQ(r.at("from_standby"), false) << out;
  }
  EXPECT_GT(state_entries, 0) << out;
  EXPECT_GT(dedupe_records, 0) << out;
  // The late re-publication of a payment member A processed was caught.
  EXPECT_EQ(report.at("late_duplicate_caught"), true) << out;
  EXPECT_EQ(report.at("balances").at("mismatched_accounts"), 0) << out;
  EXPECT_EQ(report.at("balances").at("actual_total"),
            report.at("balances").at("expected_total"))
      << out;
}

// Member B without changelog mode starts from the group's committed offsets
// with none of member A's state: the demo must notice and exit 1.
TEST(KafkaFailoverDemoTest, RestoreBrokenVariantWithoutChangelogFails) {
  util::TempDir dir;
  int status = 0;
  const std::string out =
      RunShell(std::string(IDEM_KAFKA_DEMO) + kSmallRun +
                   " --failover_without_changelog 2>" + dir.Sub("stderr"),
               &status);
  ASSERT_TRUE(WIFEXITED(status)) << out;
  EXPECT_EQ(WEXITSTATUS(status), 1) << out;
  const nlohmann::json report = ParseReport(out);
  ASSERT_TRUE(report.is_object()) << out;
  EXPECT_EQ(report.at("passed"), false) << out;
  EXPECT_EQ(report.at("restored_partitions"), 0) << out;
  EXPECT_GT(report.at("balances").at("mismatched_accounts").get<int>(), 0)
      << out;
  EXPECT_NE(report.at("balances").at("actual_total"),
            report.at("balances").at("expected_total"))
      << out;
}

TEST(KafkaFailoverDemoTest, FailoverRejectsAStoreFlag) {
  util::TempDir dir;
  int status = 0;
  RunShell(std::string(IDEM_KAFKA_DEMO) +
               " --failover --store=" + dir.Sub("s") + " 2>/dev/null",
           &status);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
}

}  // namespace
}  // namespace idem
