// FromRocksStatus (engine/status_util.h): RocksDB statuses become the
// project's codes, whatever status class carries the cause.

#include "engine/status_util.h"

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rocksdb/status.h"

namespace idem {
namespace {

using ::testing::HasSubstr;

// Regression: the sync of a store reopened on a full disk failed with
// "Result incomplete: ... No space left on device", which came back as
// kUnavailable instead of kResourceExhausted.
TEST(StatusUtilTest, NoSpaceIsResourceExhaustedInAnyStatusClass) {
  const rocksdb::Status statuses[] = {
      rocksdb::Status::Incomplete("While fdatasync: 000012.log",
                                  "No space left on device"),
      rocksdb::Status::IOError("While appending to file: 000012.log",
                               "No space left on device"),
      rocksdb::Status::NoSpace("injected"),
  };
  for (const rocksdb::Status& s : statuses) {
    const absl::Status converted = FromRocksStatus(s, "syncing");
    EXPECT_EQ(converted.code(), absl::StatusCode::kResourceExhausted)
        << s.ToString();
    EXPECT_THAT(converted.message(), HasSubstr("syncing: "));
  }
}

TEST(StatusUtilTest, WrongPathsAndLocksAreFailedPrecondition) {
  EXPECT_EQ(FromRocksStatus(
                rocksdb::Status::IOError("While mkdir if missing: /tmp/file/db",
                                         "Not a directory"),
                "creating")
                .code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(FromRocksStatus(rocksdb::Status::IOError(
                                "lock hold by current process, acquire time "
                                "1 acquiring thread 2: /tmp/db/LOCK",
                                "No locks available"),
                            "opening")
                .code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(StatusUtilTest, OtherFailuresKeepTheirCodes) {
  EXPECT_TRUE(FromRocksStatus(rocksdb::Status::OK(), "x").ok());
  EXPECT_EQ(FromRocksStatus(rocksdb::Status::IOError("Input/output error"), "x")
                .code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(
      FromRocksStatus(rocksdb::Status::Incomplete("shutting down"), "x").code(),
      absl::StatusCode::kUnavailable);
  EXPECT_EQ(
      FromRocksStatus(rocksdb::Status::Corruption("bad block"), "x").code(),
      absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace idem
