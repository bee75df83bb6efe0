// idem-kafka-demo --pipeline, run as the binary it is (its stage one is a
// separate process of the same binary, SIGKILLed mid-stream): it passes its
// checks, reports them as JSON, and its report shows the kill happened in
// mid-stream.

#include <sys/wait.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/run_shell.h"
#include "util/temp_dir.h"

namespace idem {
namespace {

using ::idem::test::RunShell;

TEST(KafkaPipelineDemoTest, PipelineWithAKilledStageOnePassesItsChecks) {
  util::TempDir dir;
  int status = 0;
  const std::string out = RunShell(
      std::string(IDEM_KAFKA_DEMO) +
          " --pipeline --messages=3000 --duplicate_every=7 --batch=250 "
          "--json 2>" +
          dir.Sub("stderr"),
      &status);
  ASSERT_EQ(status, 0) << out;
  const nlohmann::json report =
      nlohmann::json::parse(out, /*cb=*/nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(report.is_object()) << out;
  EXPECT_EQ(report.at("passed"), true) << out;
  const int64_t unique = report.at("unique_payments");
  EXPECT_GT(report.at("injected_duplicates").get<int64_t>(), 0);
  // Killed in mid-stream: after some records, before the end.
  const int64_t at_kill = report.at("committed_at_kill");
  EXPECT_GT(at_kill, 0) << out;
  EXPECT_LT(at_kill, 3000) << out;
  // Stage two applied one entry per payment, whatever was re-published.
  EXPECT_EQ(report.at("stage2_processed").get<int64_t>(), unique);
  for (const char* stage : {"stage1", "stage2"}) {
    EXPECT_EQ(report.at(stage).at("mismatched_accounts"), 0) << stage;
    EXPECT_EQ(report.at(stage).at("actual_total"),
              report.at(stage).at("expected_total"))
        << stage;
  }
}

TEST(KafkaPipelineDemoTest, PipelineRejectsAStoreFlag) {
  util::TempDir dir;
  int status = 0;
  RunShell(std::string(IDEM_KAFKA_DEMO) +
               " --pipeline --store=" + dir.Sub("s") + " 2>/dev/null",
           &status);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
}

}  // namespace
}  // namespace idem
