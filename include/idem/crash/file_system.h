// CrashFileSystem is a rocksdb::FileSystem wrapper for crash testing: it
// records, in a journal outside the store, how far each file written through
// it has been synced, so that after the process is killed a power loss can be
// simulated by cutting every file back to its synced length (ApplyPowerLoss),
// optionally keeping a random part of the unsynced tail (a torn write). It
// can also fail the Nth write or sync with an I/O error or "no space", and
// kill the process at the Nth append, sync or rename (deterministic kill
// points).
//
// Unit tests use it as their fault-injecting file system too: while told to
// (SetFault, FailAfterAppends) it fails writes and syncs of the write-ahead
// logs or of every file, it can make write-ahead log syncs slow (a slow
// device) and counts them, and it shows in process what a power loss would
// leave (CopyDurableImage) or drops unsynced log data in place
// (DropUnsyncedWalData).
//
// Use it through idem::Options::env:
//   auto fs = std::make_shared<idem::crash::CrashFileSystem>(
//       rocksdb::FileSystem::Default(), crash_options);
//   std::unique_ptr<rocksdb::Env> env = rocksdb::NewCompositeEnv(fs);
//   options.env = env.get();
//
// Data is written through to the real files at once (so reads work); only
// the journal decides what a simulated power loss keeps. Not simulated: lost
// directory entries (a created, renamed or deleted name is kept even if the
// directory was never fsynced) and reordering of synced writes.
//
// Safe for concurrent access from multiple threads without external
// synchronization.

#ifndef IDEM_CRASH_FILE_SYSTEM_H_
#define IDEM_CRASH_FILE_SYSTEM_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "rocksdb/file_system.h"

namespace idem::crash {

// Which file operations a fault or kill point counts.
enum class FsOp { kAppend, kSync, kRename };

// Which files SetFault and FailAfterAppends fail: the write-ahead logs
// (*.log), every file written through the file system, or only the syncs of
// the write-ahead logs (their appends succeed: a commit's record reaches the
// log but not the disk).
enum class FaultTarget { kWal, kAllFiles, kWalSyncs };

struct CrashFsOptions {
  // Path of the journal: one line per file creation, sync, rename and
  // deletion, appended with write(2) so it survives a kill. Must not be
  // inside a directory that a power loss is applied to. Required.
  std::string journal_path;

  // Fail operation number `fail_at` (1-based, counted over `fail_op`
  // operations) and every later one until ClearFault, with `fail_code`
  // (kUnavailable: an I/O error; kResourceExhausted: no space).
  // 0: never. Default: 0.
  uint64_t fail_at = 0;
  FsOp fail_op = FsOp::kAppend;
  absl::StatusCode fail_code = absl::StatusCode::kUnavailable;

  // Kill the process with SIGKILL just before operation number `kill_at`
  // (1-based, counted over `kill_op` operations). 0: never. Default: 0.
  uint64_t kill_at = 0;
  FsOp kill_op = FsOp::kAppend;
};

class CrashFileSystem : public rocksdb::FileSystemWrapper {
 public:
  // Opens (appends to) the journal. Check status() before use.
  CrashFileSystem(std::shared_ptr<rocksdb::FileSystem> base,
                  CrashFsOptions options);
  ~CrashFileSystem() override;

  static const char* kClassName() { return "idem.CrashFileSystem"; }
  const char* Name() const override { return kClassName(); }

  // OK unless the journal could not be opened.
  const absl::Status& status() const { return status_; }

  // Stops failing operations (the kill point stays armed).
  void ClearFault();

  // Operations of each kind seen so far.
  uint64_t count(FsOp op) const;

  // From now on Append/Flush/Sync/Fsync/RangeSync of `target` files fail
  // with `code` (kUnavailable: an I/O error; kResourceExhausted: no space;
  // kOk: stop failing). Also disarms FailAfterAppends. Independent of
  // CrashFsOptions.fail_at and ClearFault.
  void SetFault(absl::StatusCode code, FaultTarget target = FaultTarget::kWal);

  // Arms a delayed fault: the next `n` Appends to `target` files succeed
  // (other operations are unaffected meanwhile); the Append after them fails
  // with `code`, and from then on the file system behaves as after
  // SetFault(code, target). SetFault disarms it.
  // REQUIRES: n >= 0 and code != kOk.
  void FailAfterAppends(int n, absl::StatusCode code,
                        FaultTarget target = FaultTarget::kWal);

  // Operations failed so far by SetFault or FailAfterAppends.
  int failures() const { return failures_.load(); }

  // Successful Sync/Fsync calls on write-ahead logs so far.
  int wal_syncs() const { return wal_syncs_.load(); }

  // From now on every Sync/Fsync of a write-ahead log first sleeps `delay`
  // (a slow device). Zero: no delay.
  void SetWalSyncDelay(absl::Duration delay) {
    wal_sync_delay_us_.store(absl::ToInt64Microseconds(delay));
  }

  // Copies the regular files of directory `from` into directory `to` (which
  // must not exist) as a power loss now would leave them: every write-ahead
  // log (*.log) written through this file system is cut to the bytes it held
  // when it was last synced; other files are copied whole. The store may be
  // open on `from` if no write is in progress. Returns kInvalidArgument if
  // `to` exists, kInternal if a file cannot be listed or copied.
  absl::Status CopyDurableImage(const std::string& from, const std::string& to);

  // Simulates the OS losing unsynced data without a crash (as Linux may
  // after a writeback error): cuts, in place, every write-ahead log in `dir`
  // written through this file system to the bytes it held when last synced.
  // REQUIRES: no write to those files is in progress.
  absl::Status DropUnsyncedWalData(const std::string& dir);

  // The bytes of an open file written through this file system: all of
  // them, and those covered by its last successful sync. Used by the file
  // wrappers. Lock order: the file system's sizes_mu_, then `mu`.
  struct FileSizes {
    explicit FileSizes(uint64_t synced_size)
        : written(synced_size), synced(synced_size) {}
    absl::Mutex mu;
    uint64_t written ABSL_GUARDED_BY(mu);
    uint64_t synced ABSL_GUARDED_BY(mu);
  };
  std::shared_ptr<FileSizes> TrackFile(const std::string& fname,
                                       uint64_t synced_size);
  void NoteAppend(FileSizes& file, uint64_t offset, uint64_t bytes);
  void NoteTruncate(FileSizes& file, uint64_t size);
  // Marks everything written to `file` as synced and journals it.
  void NoteSync(const std::string& fname, FileSizes& file);

  // The failure SetFault/FailAfterAppends chose for an operation on `fname`
  // (`append`: an Append, which counts down FailAfterAppends), or OK.
  // `sync`: a Sync, Fsync or RangeSync.
  rocksdb::IOStatus MaybeFail(const std::string& fname, bool append,
                              bool sync = false);
  // Called around each Sync/Fsync of `fname`: the slow-device delay, and
  // counting successful write-ahead log syncs.
  void BeforeSync(const std::string& fname);
  void AfterSync(const std::string& fname, bool ok);

  // Journals `fname` as fully synced at `size` bytes, then returns the kill
  // or fault decision for one `op` operation. Used by the file wrappers.
  rocksdb::IOStatus Before(FsOp op);
  void JournalSync(const std::string& fname, uint64_t size);
  void JournalCreate(const std::string& fname, uint64_t synced_size);

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
  rocksdb::IOStatus RenameFile(const std::string& src,
                               const std::string& target,
                               const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* dbg) override;
  rocksdb::IOStatus DeleteFile(const std::string& fname,
                               const rocksdb::IOOptions& options,
                               rocksdb::IODebugContext* dbg) override;

 private:
  void Journal(const std::string& line);

  const CrashFsOptions options_;
  absl::Status status_;
  int journal_fd_ = -1;
  std::atomic<uint64_t> counts_[3] = {};
  std::atomic<bool> fault_cleared_{false};

  // SetFault / FailAfterAppends.
  std::atomic<absl::StatusCode> fault_{absl::StatusCode::kOk};
  std::atomic<FaultTarget> target_{FaultTarget::kWal};
  std::atomic<int> failures_{0};
  std::atomic<int> wal_syncs_{0};
  std::atomic<int64_t> wal_sync_delay_us_{0};
  // FailAfterAppends: appends left before the armed fault trips; -1: none.
  std::atomic<int> appends_left_{-1};
  std::atomic<absl::StatusCode> armed_fault_{absl::StatusCode::kOk};
  std::atomic<FaultTarget> armed_target_{FaultTarget::kWal};

  absl::Mutex sizes_mu_;
  // Normalised file name -> its sizes (each guarded by its own mutex).
  std::map<std::string, std::shared_ptr<FileSizes>> sizes_
      ABSL_GUARDED_BY(sizes_mu_);
};

// What ApplyPowerLoss did.
struct PowerLossReport {
  uint64_t files_cut = 0;        // files shortened
  uint64_t bytes_dropped = 0;    // unsynced bytes removed
  uint64_t bytes_torn_kept = 0;  // unsynced bytes kept by torn writes
};

// Simulates a power loss after the process that wrote `journal_path` died:
// every file the journal created or synced is cut back to its last synced
// length. With `torn_seed` != 0, each cut file instead keeps a pseudo-random
// part of its unsynced tail (chosen from the seed), as a torn write would.
// Then truncates the journal, so the next run starts with every file synced.
// REQUIRES: no process is writing through a CrashFileSystem with this
// journal.
absl::StatusOr<PowerLossReport> ApplyPowerLoss(const std::string& journal_path,
                                               uint64_t torn_seed = 0);

}  // namespace idem::crash

#endif  // IDEM_CRASH_FILE_SYSTEM_H_
