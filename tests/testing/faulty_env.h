// FaultyFileSystem wraps a RocksDB FileSystem and, while told to, fails
// writes and syncs of chosen files with an I/O error or "no space", the way a
// failing disk or a full one would. Use it through NewFaultyEnv as
// idem::Options::env. Thread-safe: the fault switch is atomic.
//
// It can also arm a fault that trips after a number of successful appends
// (to fail the second of two writes), and it remembers how much of each
// write-ahead log was synced, so CopyDurableImage can show what a power loss
// would leave on disk and DropUnsyncedWalData can make the OS "lose" it.

#ifndef IDEM_TESTS_TESTING_FAULTY_ENV_H_
#define IDEM_TESTS_TESTING_FAULTY_ENV_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rocksdb/env.h"
#include "rocksdb/file_system.h"

namespace idem::testing {

enum class Fault { kNone, kIoError, kNoSpace };
enum class FaultTarget { kWal, kAllFiles };

class FaultyFileSystem : public rocksdb::FileSystemWrapper {
 public:
  explicit FaultyFileSystem(std::shared_ptr<rocksdb::FileSystem> base);

  static const char* kClassName() { return "idem.FaultyFileSystem"; }
  const char* Name() const override { return kClassName(); }

  // From now on, Append/Flush/Sync/Fsync of target files fail with `fault`
  // (kNone: stop failing). Also disarms FailAfterAppends.
  void SetFault(Fault fault, FaultTarget target = FaultTarget::kWal);

  // Arms a delayed fault: the next `n` Appends to target files succeed (other
  // operations are unaffected meanwhile); the Append after them fails, and
  // from then on the file system behaves as after SetFault(fault, target).
  // SetFault disarms it. REQUIRES: n >= 0 and fault != kNone.
  void FailAfterAppends(int n, Fault fault,
                        FaultTarget target = FaultTarget::kWal);

  // Copies the regular files of directory `from` into directory `to` (which
  // must not exist) as a power loss would leave them: every write-ahead log
  // (*.log) written through this file system is cut to the bytes it held
  // when it was last synced (Sync or Fsync); other files are copied whole.
  // May be called while a database is open on `from` if no write is in
  // progress.
  absl::Status CopyDurableImage(const std::string& from,
                                const std::string& to);

  // Simulates the OS losing unsynced data without a crash (as Linux may
  // after a writeback error): cuts, in place, every write-ahead log in `dir`
  // written through this file system to the bytes it held when last synced.
  // REQUIRES: no write to those files is in progress.
  absl::Status DropUnsyncedWalData(const std::string& dir);

  // Number of operations failed so far.
  int failures() const { return failures_.load(); }

  // Successful Sync/Fsync calls on write-ahead logs so far.
  int wal_syncs() const { return wal_syncs_.load(); }

  // From now on every Sync/Fsync of a write-ahead log first sleeps `delay`
  // (a slow device). Zero: no delay.
  void SetWalSyncDelay(absl::Duration delay) {
    wal_sync_delay_us_.store(absl::ToInt64Microseconds(delay));
  }

  // Called by the wrapped files before and after each Sync/Fsync of `fname`.
  void BeforeSync(const std::string& fname);
  void AfterSync(const std::string& fname, bool ok);

  // The failure to return for an operation on `fname`, or OK.
  rocksdb::IOStatus MaybeFail(const std::string& fname);
  // The same for an Append (counts down an armed FailAfterAppends).
  rocksdb::IOStatus MaybeFailAppend(const std::string& fname);

  // Bookkeeping for CopyDurableImage, called by the wrapped files: a file
  // opened with `initial_size` bytes (taken as synced), `bytes` appended to
  // it, everything appended so far synced.
  struct FileSizes {
    uint64_t appended = 0;
    uint64_t synced = 0;
  };
  std::shared_ptr<FileSizes> TrackFile(const std::string& fname,
                                       uint64_t initial_size);
  void NoteAppend(FileSizes& file, uint64_t bytes);
  void NoteSync(FileSizes& file);

  rocksdb::IOStatus NewWritableFile(
      const std::string& fname, const rocksdb::FileOptions& options,
      std::unique_ptr<rocksdb::FSWritableFile>* result,
      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReopenWritableFile(
      const std::string& fname, const rocksdb::FileOptions& options,
      std::unique_ptr<rocksdb::FSWritableFile>* result,
      rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus ReuseWritableFile(
      const std::string& fname, const std::string& old_fname,
      const rocksdb::FileOptions& options,
      std::unique_ptr<rocksdb::FSWritableFile>* result,
      rocksdb::IODebugContext* dbg) override;

 private:
  std::atomic<Fault> fault_{Fault::kNone};
  std::atomic<FaultTarget> target_{FaultTarget::kWal};
  std::atomic<int> failures_{0};
  std::atomic<int> wal_syncs_{0};
  std::atomic<int64_t> wal_sync_delay_us_{0};
  // FailAfterAppends: appends left before the armed fault trips; -1: none.
  std::atomic<int> appends_left_{-1};
  std::atomic<Fault> armed_fault_{Fault::kNone};
  std::atomic<FaultTarget> armed_target_{FaultTarget::kWal};

  absl::Mutex sizes_mu_;
  // File name -> its sizes (the FileSizes fields are guarded by sizes_mu_).
  std::map<std::string, std::shared_ptr<FileSizes>> sizes_
      ABSL_GUARDED_BY(sizes_mu_);
};

// An Env whose file system is `fs` (kept alive by the Env).
std::unique_ptr<rocksdb::Env> NewFaultyEnv(
    std::shared_ptr<FaultyFileSystem> fs);

}  // namespace idem::testing

#endif  // IDEM_TESTS_TESTING_FAULTY_ENV_H_
