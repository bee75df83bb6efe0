// WalWatch: the file system a store's database writes through, wrapped so
// that the engine learns when a sync of a write-ahead log fails. A commit
// whose write fails at the WAL's append wrote nothing; one whose append
// reached the log but whose sync failed may still be recovered by the next
// reopen (RocksDB replays the log), so its outcome is unknown. RocksDB
// reports both as an IOError; this wrapper tells them apart. It forwards
// every call and only counts; it changes no behaviour.
//
// Thread-safe: the counter is atomic; the wrapped files are used as RocksDB
// uses any writable file.

#ifndef IDEM_ENGINE_WAL_WATCH_H_
#define IDEM_ENGINE_WAL_WATCH_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "rocksdb/file_system.h"

namespace idem {

// Whether `fname` names a write-ahead log file (RocksDB's "<number>.log").
inline bool IsWriteAheadLog(std::string_view fname) {
  return fname.ends_with(".log");
}

class WalWatch : public rocksdb::FileSystemWrapper {
 public:
  explicit WalWatch(const std::shared_ptr<rocksdb::FileSystem>& base)
      : FileSystemWrapper(base) {}

  static const char* kClassName() { return "idem.WalWatch"; }
  const char* Name() const override { return kClassName(); }

  // How many syncs of write-ahead log files have failed since construction.
  uint64_t failed_syncs() const {
    return failed_syncs_.load(std::memory_order_acquire);
  }

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
  // Wraps `result` if `fname` is a write-ahead log and the open succeeded.
  rocksdb::IOStatus Watch(const std::string& fname, rocksdb::IOStatus opened,
                          std::unique_ptr<rocksdb::FSWritableFile>* result);

  std::atomic<uint64_t> failed_syncs_{0};
};

}  // namespace idem

#endif  // IDEM_ENGINE_WAL_WATCH_H_
