// CrashFileSystem and ApplyPowerLoss: synced lengths are journaled, a
// simulated power loss cuts every file back to them (or tears the tail), and
// faults and kill points fire at the chosen operation.

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "idem/crash/file_system.h"
#include "rocksdb/file_system.h"
#include "util/temp_dir.h"

namespace idem::crash {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class CrashFsTest : public ::testing::Test {
 protected:
  std::shared_ptr<CrashFileSystem> MakeFs(CrashFsOptions options = {}) {
    options.journal_path = journal_;
    auto fs = std::make_shared<CrashFileSystem>(rocksdb::FileSystem::Default(),
                                                options);
    EXPECT_TRUE(fs->status().ok()) << fs->status();
    return fs;
  }

  std::unique_ptr<rocksdb::FSWritableFile> NewFile(CrashFileSystem& fs,
                                                   const std::string& path) {
    std::unique_ptr<rocksdb::FSWritableFile> file;
    EXPECT_TRUE(
        fs.NewWritableFile(path, rocksdb::FileOptions(), &file, nullptr).ok());
    return file;
  }

  static rocksdb::IOStatus Append(rocksdb::FSWritableFile& f,
                                  const std::string& data) {
    return f.Append(data, rocksdb::IOOptions(), nullptr);
  }
  static rocksdb::IOStatus Sync(rocksdb::FSWritableFile& f) {
    return f.Sync(rocksdb::IOOptions(), nullptr);
  }

  util::TempDir dir_;
  const std::string journal_ = dir_.Sub("journal");
};

TEST_F(CrashFsTest, PowerLossCutsFilesBackToTheirSyncedLength) {
  auto fs = MakeFs();
  const std::string path = dir_.Sub("wal");
  auto file = NewFile(*fs, path);
  ASSERT_TRUE(Append(*file, "synced-").ok());
  ASSERT_TRUE(Sync(*file).ok());
  ASSERT_TRUE(Append(*file, "unsynced").ok());
  ASSERT_TRUE(file->Flush(rocksdb::IOOptions(), nullptr).ok());
  EXPECT_EQ(ReadFile(path), "synced-unsynced");  // written through at once

  absl::StatusOr<PowerLossReport> report = ApplyPowerLoss(journal_);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(ReadFile(path), "synced-");
  EXPECT_EQ(report->files_cut, 1u);
  EXPECT_EQ(report->bytes_dropped, 8u);
}

TEST_F(CrashFsTest, NeverSyncedFileIsEmptiedAndUntouchedFilesAreKept) {
  const std::string old_path = dir_.Sub("old");
  std::ofstream(old_path) << "from an earlier run";
  auto fs = MakeFs();
  const std::string path = dir_.Sub("new");
  auto file = NewFile(*fs, path);
  ASSERT_TRUE(Append(*file, "lost").ok());
  ASSERT_TRUE(file->Close(rocksdb::IOOptions(), nullptr).ok());  // not a sync
  ASSERT_TRUE(ApplyPowerLoss(journal_).ok());
  EXPECT_EQ(ReadFile(path), "");
  EXPECT_EQ(ReadFile(old_path), "from an earlier run");
}

TEST_F(CrashFsTest, RenameCarriesTheSyncedLengthAndDeleteForgetsIt) {
  auto fs = MakeFs();
  auto file = NewFile(*fs, dir_.Sub("tmp"));
  ASSERT_TRUE(Append(*file, "abc").ok());
  ASSERT_TRUE(Sync(*file).ok());
  ASSERT_TRUE(Append(*file, "def").ok());
  ASSERT_TRUE(file->Close(rocksdb::IOOptions(), nullptr).ok());
  ASSERT_TRUE(fs->RenameFile(dir_.Sub("tmp"), dir_.Sub("CURRENT"),
                             rocksdb::IOOptions(), nullptr)
                  .ok());
  auto gone = NewFile(*fs, dir_.Sub("gone"));
  ASSERT_TRUE(Append(*gone, "x").ok());
  ASSERT_TRUE(gone->Close(rocksdb::IOOptions(), nullptr).ok());
  ASSERT_TRUE(
      fs->DeleteFile(dir_.Sub("gone"), rocksdb::IOOptions(), nullptr).ok());
  ASSERT_TRUE(ApplyPowerLoss(journal_).ok());
  EXPECT_EQ(ReadFile(dir_.Sub("CURRENT")), "abc");
  EXPECT_FALSE(std::filesystem::exists(dir_.Sub("gone")));
}

TEST_F(CrashFsTest, TornWriteKeepsAPrefixOfTheUnsyncedTail) {
  bool kept_some = false;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    auto fs = MakeFs();
    const std::string path = dir_.Sub("torn");
    auto file = NewFile(*fs, path);
    ASSERT_TRUE(Append(*file, "12345").ok());
    ASSERT_TRUE(Sync(*file).ok());
    ASSERT_TRUE(Append(*file, "abcdefghij").ok());
    ASSERT_TRUE(file->Close(rocksdb::IOOptions(), nullptr).ok());
    ASSERT_TRUE(ApplyPowerLoss(journal_, seed).ok());
    const std::string left = ReadFile(path);
    ASSERT_GE(left.size(), 5u);
    EXPECT_EQ(std::string("12345abcdefghij").substr(0, left.size()), left);
    if (left.size() > 5 && left.size() < 15) kept_some = true;
  }
  EXPECT_TRUE(kept_some);
}

TEST_F(CrashFsTest, ApplyingTwiceIsHarmlessBecauseTheJournalIsReset) {
  auto fs = MakeFs();
  auto file = NewFile(*fs, dir_.Sub("f"));
  ASSERT_TRUE(Append(*file, "abc").ok());
  ASSERT_TRUE(Sync(*file).ok());
  ASSERT_TRUE(ApplyPowerLoss(journal_).ok());
  // The file survived the first crash: it now counts as synced.
  ASSERT_TRUE(Append(*file, "def").ok());
  ASSERT_TRUE(file->Close(rocksdb::IOOptions(), nullptr).ok());
  ASSERT_TRUE(ApplyPowerLoss(journal_).ok());
  EXPECT_EQ(ReadFile(dir_.Sub("f")), "abcdef");
}

TEST_F(CrashFsTest, FailsTheNthAppendWithTheChosenCodeUntilCleared) {
  CrashFsOptions options;
  options.fail_at = 3;
  options.fail_op = FsOp::kAppend;
  options.fail_code = absl::StatusCode::kResourceExhausted;
  auto fs = MakeFs(options);
  auto file = NewFile(*fs, dir_.Sub("f"));
  EXPECT_TRUE(Append(*file, "1").ok());
  EXPECT_TRUE(Append(*file, "2").ok());
  rocksdb::IOStatus third = Append(*file, "3");
  EXPECT_TRUE(third.IsNoSpace()) << third.ToString();
  EXPECT_FALSE(Append(*file, "4").ok());
  fs->ClearFault();
  EXPECT_TRUE(Append(*file, "5").ok());
  EXPECT_TRUE(Sync(*file).ok());
  EXPECT_EQ(ReadFile(dir_.Sub("f")), "125");
  EXPECT_EQ(fs->count(FsOp::kAppend), 5u);
  EXPECT_EQ(fs->count(FsOp::kSync), 1u);
}

TEST_F(CrashFsTest, FailsSyncsWithAnIoError) {
  CrashFsOptions options;
  options.fail_at = 1;
  options.fail_op = FsOp::kSync;
  auto fs = MakeFs(options);
  auto file = NewFile(*fs, dir_.Sub("f"));
  ASSERT_TRUE(Append(*file, "abc").ok());
  rocksdb::IOStatus s = Sync(*file);
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  // A failed sync is not journaled: a power loss drops the data.
  ASSERT_TRUE(ApplyPowerLoss(journal_).ok());
  EXPECT_EQ(ReadFile(dir_.Sub("f")), "");
}

TEST_F(CrashFsTest, KillPointKillsTheProcessBeforeTheNthSync) {
  const std::string path = dir_.Sub("f");
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    CrashFsOptions options;
    options.journal_path = journal_;
    options.kill_at = 2;
    options.kill_op = FsOp::kSync;
    CrashFileSystem fs(rocksdb::FileSystem::Default(), options);
    std::unique_ptr<rocksdb::FSWritableFile> file;
    if (!fs.NewWritableFile(path, rocksdb::FileOptions(), &file, nullptr)
             .ok()) {
      _exit(10);
    }
    (void)file->Append("first", rocksdb::IOOptions(), nullptr);
    (void)file->Sync(rocksdb::IOOptions(), nullptr);
    (void)file->Append("second", rocksdb::IOOptions(), nullptr);
    (void)file->Sync(rocksdb::IOOptions(), nullptr);  // killed here
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  EXPECT_EQ(ReadFile(path), "firstsecond");  // the kill alone loses nothing
  ASSERT_TRUE(ApplyPowerLoss(journal_).ok());
  EXPECT_EQ(ReadFile(path), "first");  // the power loss drops the unsynced
}

TEST_F(CrashFsTest, SetFaultFailsOnlyWalFilesUntilCleared) {
  auto fs = MakeFs();
  auto wal = NewFile(*fs, dir_.Sub("000001.log"));
  auto sst = NewFile(*fs, dir_.Sub("000002.sst"));
  fs->SetFault(absl::StatusCode::kUnavailable);
  EXPECT_TRUE(Append(*wal, "w").IsIOError());
  EXPECT_TRUE(Sync(*wal).IsIOError());
  EXPECT_TRUE(wal->Flush(rocksdb::IOOptions(), nullptr).IsIOError());
  EXPECT_TRUE(Append(*sst, "s").ok());
  EXPECT_TRUE(Sync(*sst).ok());
  EXPECT_EQ(fs->failures(), 3);
  fs->SetFault(absl::StatusCode::kOk);
  EXPECT_TRUE(Append(*wal, "w").ok());
  EXPECT_TRUE(Sync(*wal).ok());
  EXPECT_EQ(ReadFile(dir_.Sub("000001.log")), "w");
  EXPECT_EQ(fs->failures(), 3);
}

TEST_F(CrashFsTest, SetFaultOnAllFilesFailsEveryFileWithNoSpace) {
  auto fs = MakeFs();
  auto sst = NewFile(*fs, dir_.Sub("MANIFEST-000001"));
  fs->SetFault(absl::StatusCode::kResourceExhausted, FaultTarget::kAllFiles);
  EXPECT_TRUE(Append(*sst, "m").IsNoSpace());
  EXPECT_TRUE(Sync(*sst).IsNoSpace());
  EXPECT_EQ(fs->failures(), 2);
}

TEST_F(CrashFsTest, FailAfterAppendsLetsTheFirstAppendsThroughThenFails) {
  auto fs = MakeFs();
  auto wal = NewFile(*fs, dir_.Sub("000001.log"));
  auto sst = NewFile(*fs, dir_.Sub("000002.sst"));
  fs->FailAfterAppends(2, absl::StatusCode::kUnavailable);
  EXPECT_TRUE(Append(*sst, "not counted").ok());
  EXPECT_TRUE(Append(*wal, "1").ok());
  EXPECT_TRUE(Sync(*wal).ok());
  EXPECT_TRUE(Append(*wal, "2").ok());
  EXPECT_TRUE(Append(*wal, "3").IsIOError());
  EXPECT_TRUE(Sync(*wal).IsIOError());  // tripped: like SetFault now
  fs->SetFault(absl::StatusCode::kOk);
  EXPECT_TRUE(Append(*wal, "4").ok());
  EXPECT_EQ(ReadFile(dir_.Sub("000001.log")), "124");
}

TEST_F(CrashFsTest, CountsWalSyncsAndDelaysThemOnASlowDevice) {
  auto fs = MakeFs();
  auto wal = NewFile(*fs, dir_.Sub("000001.log"));
  auto sst = NewFile(*fs, dir_.Sub("000002.sst"));
  fs->SetWalSyncDelay(absl::Milliseconds(20));
  ASSERT_TRUE(Append(*wal, "w").ok());
  const absl::Time start = absl::Now();
  EXPECT_TRUE(Sync(*wal).ok());
  EXPECT_TRUE(wal->Fsync(rocksdb::IOOptions(), nullptr).ok());
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(40));
  EXPECT_TRUE(Sync(*sst).ok());  // not a log: neither delayed nor counted
  fs->SetFault(absl::StatusCode::kUnavailable);
  EXPECT_FALSE(Sync(*wal).ok());  // failed syncs are not counted
  EXPECT_EQ(fs->wal_syncs(), 2);
}

TEST_F(CrashFsTest, DurableImageCutsLogsToTheirSyncedLength) {
  const std::string db = dir_.Sub("db");
  ASSERT_TRUE(std::filesystem::create_directory(db));
  auto fs = MakeFs();
  auto wal = NewFile(*fs, db + "/000001.log");
  auto sst = NewFile(*fs, db + "/000002.sst");
  ASSERT_TRUE(Append(*wal, "synced").ok());
  ASSERT_TRUE(Sync(*wal).ok());
  ASSERT_TRUE(Append(*wal, "+lost").ok());
  ASSERT_TRUE(Append(*sst, "table").ok());  // not a log: copied whole

  ASSERT_TRUE(fs->CopyDurableImage(db, dir_.Sub("image")).ok());
  EXPECT_EQ(ReadFile(dir_.Sub("image") + "/000001.log"), "synced");
  EXPECT_EQ(ReadFile(dir_.Sub("image") + "/000002.sst"), "table");
  EXPECT_EQ(ReadFile(db + "/000001.log"), "synced+lost");  // untouched
  EXPECT_EQ(fs->CopyDurableImage(db, dir_.Sub("image")).code(),
            absl::StatusCode::kInvalidArgument);

  ASSERT_TRUE(fs->DropUnsyncedWalData(db).ok());
  EXPECT_EQ(ReadFile(db + "/000001.log"), "synced");
  EXPECT_EQ(ReadFile(db + "/000002.sst"), "table");
}

TEST_F(CrashFsTest, MissingJournalPathIsAnInvalidArgument) {
  CrashFileSystem fs(rocksdb::FileSystem::Default(), CrashFsOptions());
  EXPECT_EQ(fs.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace idem::crash
