#include "engine/wal_watch.h"

#include <utility>

namespace idem {
namespace {

// A write-ahead log file whose failed syncs count in `failed_syncs`.
class WatchedLog : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  WatchedLog(std::unique_ptr<rocksdb::FSWritableFile> file,
             std::atomic<uint64_t>* failed_syncs)
      : FSWritableFileOwnerWrapper(std::move(file)),
        failed_syncs_(failed_syncs) {}

  rocksdb::IOStatus Sync(const rocksdb::IOOptions& options,
                         rocksdb::IODebugContext* dbg) override {
    return Count(FSWritableFileOwnerWrapper::Sync(options, dbg));
  }
  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& options,
                          rocksdb::IODebugContext* dbg) override {
    return Count(FSWritableFileOwnerWrapper::Fsync(options, dbg));
  }
  rocksdb::IOStatus RangeSync(uint64_t offset, uint64_t nbytes,
                              const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override {
    return Count(
        FSWritableFileOwnerWrapper::RangeSync(offset, nbytes, options, dbg));
  }

 private:
  rocksdb::IOStatus Count(rocksdb::IOStatus s) {
    if (!s.ok()) failed_syncs_->fetch_add(1, std::memory_order_release);
    return s;
  }

  std::atomic<uint64_t>* const failed_syncs_;
};

}  // namespace

rocksdb::IOStatus WalWatch::Watch(
    const std::string& fname, rocksdb::IOStatus opened,
    std::unique_ptr<rocksdb::FSWritableFile>* result) {
  if (opened.ok() && IsWriteAheadLog(fname)) {
    *result = std::make_unique<WatchedLog>(std::move(*result), &failed_syncs_);
  }
  return opened;
}

rocksdb::IOStatus WalWatch::NewWritableFile(
    const std::string& fname, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result,
    rocksdb::IODebugContext* dbg) {
  return Watch(fname,
               FileSystemWrapper::NewWritableFile(fname, options, result, dbg),
               result);
}

rocksdb::IOStatus WalWatch::ReopenWritableFile(
    const std::string& fname, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result,
    rocksdb::IODebugContext* dbg) {
  return Watch(
      fname, FileSystemWrapper::ReopenWritableFile(fname, options, result, dbg),
      result);
}

rocksdb::IOStatus WalWatch::ReuseWritableFile(
    const std::string& fname, const std::string& old_fname,
    const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result,
    rocksdb::IODebugContext* dbg) {
  return Watch(fname,
               FileSystemWrapper::ReuseWritableFile(fname, old_fname, options,
                                                    result, dbg),
               result);
}

}  // namespace idem
