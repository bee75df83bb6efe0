// The deprecated header paths (idem/crash_fs.h, idem/crash_harness.h,
// idem/kafka_*.h) forward to the new ones, so code written against them
// still builds: the crash file system's old names in namespace idem name the
// same things as idem::crash's.

#include <type_traits>

#include "gtest/gtest.h"
#include "idem/crash_fs.h"
#include "idem/crash_fs.h"  // twice: the forwarding headers have no guard
#include "idem/crash_harness.h"
#include "idem/kafka_consumer.h"
#include "idem/kafka_mock_cluster.h"
#include "idem/kafka_producer.h"
#include "util/temp_dir.h"

namespace {

static_assert(
    std::is_same_v<idem::CrashFileSystem, idem::crash::CrashFileSystem>);
static_assert(
    std::is_same_v<idem::CrashFsOptions, idem::crash::CrashFsOptions>);
static_assert(std::is_same_v<idem::FsOp, idem::crash::FsOp>);
static_assert(
    std::is_same_v<idem::PowerLossReport, idem::crash::PowerLossReport>);
static_assert(std::is_class_v<idem::crash::Workload>);
static_assert(std::is_class_v<idem::kafka::Consumer>);
static_assert(std::is_class_v<idem::kafka::Producer>);
static_assert(std::is_class_v<idem::kafka::MockCluster>);

TEST(DeprecatedHeadersTest, OldCrashFileSystemNamesStillWork) {
  idem::util::TempDir dir;
  idem::CrashFsOptions options;
  options.journal_path = dir.Sub("journal");
  options.fail_op = idem::FsOp::kSync;
  {
    idem::CrashFileSystem fs(rocksdb::FileSystem::Default(), options);
    ASSERT_TRUE(fs.status().ok()) << fs.status();
  }
  absl::StatusOr<idem::PowerLossReport> report =
      idem::ApplyPowerLoss(options.journal_path);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->files_cut, 0u);
}

}  // namespace
