// CrashFileSystem is a rocksdb::FileSystem wrapper for crash testing: it
// records, in a journal outside the store, how far each file written through
// it has been synced, so that after the process is killed a power loss can be
// simulated by cutting every file back to its synced length (ApplyPowerLoss),
// optionally keeping a random part of the unsynced tail (a torn write). It
// can also fail the Nth write or sync with an I/O error or "no space", and
// kill the process at the Nth append, sync or rename (deterministic kill
// points).
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
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "rocksdb/file_system.h"

namespace idem::crash {

// Which file operations a fault or kill point counts.
enum class FsOp { kAppend, kSync, kRename };

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
};

// What ApplyPowerLoss did.
struct PowerLossReport {
  uint64_t files_cut = 0;       // files shortened
  uint64_t bytes_dropped = 0;   // unsynced bytes removed
  uint64_t bytes_torn_kept = 0; // unsynced bytes kept by torn writes
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
