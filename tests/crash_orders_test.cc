// The "orders" crash-test workload (crash/orders_workload.cc) under kills,
// power losses and both: concurrent threads open, close and count orders
// with prefix scans and bump counters with merges; every recorded count
// equals a serial replay's in commit order, every counter its merges. And
// the same run catches an engine that does not validate scanned ranges.

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "idem/crash/harness.h"
#include "tests/testing/crash_report.h"
#include "util/temp_dir.h"

namespace idem::crash {
namespace {

using ::testing::HasSubstr;

CrashTestOptions OrdersRun(const util::TempDir& dir, CrashMode mode) {
  CrashTestOptions options;
  options.dir = dir.Sub("run");
  options.cycles = 6;
  options.mode = mode;
  options.durability = Durability::kBuffered;
  options.messages = 2000;
  options.threads = 4;
  options.seed = 31;
  return options;
}

class CrashOrdersTest : public ::testing::TestWithParam<CrashMode> {};

TEST_P(CrashOrdersTest, ScansAndMergesMatchASerialReplayAcrossCrashes) {
  util::TempDir dir;
  auto workload = NewOrdersWorkload();
  absl::StatusOr<CrashTestReport> report =
      RunCrashTest(OrdersRun(dir, GetParam()), *workload);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->passed()) << test::FailedInvariants(*report);
  EXPECT_GT(report->acknowledged, 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Modes, CrashOrdersTest,
    ::testing::Values(CrashMode::kKill, CrashMode::kPowerLoss,
                      CrashMode::kMixed),
    [](const ::testing::TestParamInfo<CrashMode>& info) -> std::string {
      switch (info.param) {
        case CrashMode::kKill:
          return "Kill";
        case CrashMode::kPowerLoss:
          return "PowerLoss";
        case CrashMode::kKillPoint:
          return "KillPoint";
        case CrashMode::kMixed:
          return "Mixed";
      }
      return "Unknown";
    });

TEST(CrashOrdersBrokenVariantTest, ReportsPhantomsWithoutRangeValidation) {
  util::TempDir dir;
  auto workload = NewOrdersWorkload();
  CrashTestOptions options = OrdersRun(dir, CrashMode::kKill);
  options.self_test = SelfTest::kSkipRangeValidation;
  options.threads = 1;
  EXPECT_EQ(RunCrashTest(options, *workload).status().code(),
            absl::StatusCode::kInvalidArgument);  // needs threads >= 2
  options.threads = 4;
  absl::StatusOr<CrashTestReport> report = RunCrashTest(options, *workload);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->passed());
  EXPECT_THAT(test::FailedInvariants(*report),
              HasSubstr("a serial run in commit order counts"));
}

}  // namespace
}  // namespace idem::crash
