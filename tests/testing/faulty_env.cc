#include "tests/testing/faulty_env.h"

#include <utility>

namespace idem::testing {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

class FaultyWritableFile : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  FaultyWritableFile(std::unique_ptr<rocksdb::FSWritableFile> file,
                     std::string fname, FaultyFileSystem* fs)
      : FSWritableFileOwnerWrapper(std::move(file)),
        fname_(std::move(fname)),
        fs_(fs) {}

  rocksdb::IOStatus Append(const rocksdb::Slice& data,
                           const rocksdb::IOOptions& options,
                           rocksdb::IODebugContext* dbg) override {
    if (rocksdb::IOStatus s = fs_->MaybeFail(fname_); !s.ok()) return s;
    return FSWritableFileOwnerWrapper::Append(data, options, dbg);
  }
  rocksdb::IOStatus Append(const rocksdb::Slice& data,
                           const rocksdb::IOOptions& options,
                           const rocksdb::DataVerificationInfo& info,
                           rocksdb::IODebugContext* dbg) override {
    if (rocksdb::IOStatus s = fs_->MaybeFail(fname_); !s.ok()) return s;
    return FSWritableFileOwnerWrapper::Append(data, options, info, dbg);
  }
  rocksdb::IOStatus Flush(const rocksdb::IOOptions& options,
                          rocksdb::IODebugContext* dbg) override {
    if (rocksdb::IOStatus s = fs_->MaybeFail(fname_); !s.ok()) return s;
    return FSWritableFileOwnerWrapper::Flush(options, dbg);
  }
  rocksdb::IOStatus Sync(const rocksdb::IOOptions& options,
                         rocksdb::IODebugContext* dbg) override {
    if (rocksdb::IOStatus s = fs_->MaybeFail(fname_); !s.ok()) return s;
    return FSWritableFileOwnerWrapper::Sync(options, dbg);
  }
  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& options,
                          rocksdb::IODebugContext* dbg) override {
    if (rocksdb::IOStatus s = fs_->MaybeFail(fname_); !s.ok()) return s;
    return FSWritableFileOwnerWrapper::Fsync(options, dbg);
  }
  rocksdb::IOStatus RangeSync(uint64_t offset, uint64_t nbytes,
                              const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override {
    if (rocksdb::IOStatus s = fs_->MaybeFail(fname_); !s.ok()) return s;
    return FSWritableFileOwnerWrapper::RangeSync(offset, nbytes, options, dbg);
  }

 private:
  const std::string fname_;
  FaultyFileSystem* const fs_;
};

}  // namespace

FaultyFileSystem::FaultyFileSystem(std::shared_ptr<rocksdb::FileSystem> base)
    : FileSystemWrapper(std::move(base)) {}

void FaultyFileSystem::SetFault(Fault fault, FaultTarget target) {
  target_.store(target);
  fault_.store(fault);
}

rocksdb::IOStatus FaultyFileSystem::MaybeFail(const std::string& fname) {
  const Fault fault = fault_.load();
  if (fault == Fault::kNone) return rocksdb::IOStatus::OK();
  if (target_.load() == FaultTarget::kWal && !EndsWith(fname, ".log")) {
    return rocksdb::IOStatus::OK();
  }
  failures_.fetch_add(1);
  if (fault == Fault::kNoSpace) {
    return rocksdb::IOStatus::NoSpace("injected: no space left on device");
  }
  return rocksdb::IOStatus::IOError("injected: I/O error");
}

rocksdb::IOStatus FaultyFileSystem::NewWritableFile(
    const std::string& fname, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result,
    rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = target()->NewWritableFile(fname, options, result, dbg);
  if (s.ok()) {
    *result = std::make_unique<FaultyWritableFile>(std::move(*result), fname,
                                                   this);
  }
  return s;
}

rocksdb::IOStatus FaultyFileSystem::ReopenWritableFile(
    const std::string& fname, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result,
    rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s =
      target()->ReopenWritableFile(fname, options, result, dbg);
  if (s.ok()) {
    *result = std::make_unique<FaultyWritableFile>(std::move(*result), fname,
                                                   this);
  }
  return s;
}

rocksdb::IOStatus FaultyFileSystem::ReuseWritableFile(
    const std::string& fname, const std::string& old_fname,
    const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result,
    rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s =
      target()->ReuseWritableFile(fname, old_fname, options, result, dbg);
  if (s.ok()) {
    *result = std::make_unique<FaultyWritableFile>(std::move(*result), fname,
                                                   this);
  }
  return s;
}

std::unique_ptr<rocksdb::Env> NewFaultyEnv(
    std::shared_ptr<FaultyFileSystem> fs) {
  return rocksdb::NewCompositeEnv(std::move(fs));
}

}  // namespace idem::testing
