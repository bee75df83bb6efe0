#include "tests/testing/faulty_env.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/time/clock.h"

namespace idem::testing {
namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

class FaultyWritableFile : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  FaultyWritableFile(std::unique_ptr<rocksdb::FSWritableFile> file,
                     std::string fname, FaultyFileSystem* fs,
                     uint64_t initial_size)
      : FSWritableFileOwnerWrapper(std::move(file)),
        fname_(std::move(fname)),
        fs_(fs),
        sizes_(fs->TrackFile(fname_, initial_size)) {}

  rocksdb::IOStatus Append(const rocksdb::Slice& data,
                           const rocksdb::IOOptions& options,
                           rocksdb::IODebugContext* dbg) override {
    if (rocksdb::IOStatus s = fs_->MaybeFailAppend(fname_); !s.ok()) return s;
    rocksdb::IOStatus s = FSWritableFileOwnerWrapper::Append(data, options, dbg);
    if (s.ok()) fs_->NoteAppend(*sizes_, data.size());
    return s;
  }
  rocksdb::IOStatus Append(const rocksdb::Slice& data,
                           const rocksdb::IOOptions& options,
                           const rocksdb::DataVerificationInfo& info,
                           rocksdb::IODebugContext* dbg) override {
    if (rocksdb::IOStatus s = fs_->MaybeFailAppend(fname_); !s.ok()) return s;
    rocksdb::IOStatus s =
        FSWritableFileOwnerWrapper::Append(data, options, info, dbg);
    if (s.ok()) fs_->NoteAppend(*sizes_, data.size());
    return s;
  }
  rocksdb::IOStatus Flush(const rocksdb::IOOptions& options,
                          rocksdb::IODebugContext* dbg) override {
    if (rocksdb::IOStatus s = fs_->MaybeFail(fname_); !s.ok()) return s;
    return FSWritableFileOwnerWrapper::Flush(options, dbg);
  }
  rocksdb::IOStatus Sync(const rocksdb::IOOptions& options,
                         rocksdb::IODebugContext* dbg) override {
    if (rocksdb::IOStatus s = fs_->MaybeFail(fname_); !s.ok()) return s;
    fs_->BeforeSync(fname_);
    rocksdb::IOStatus s = FSWritableFileOwnerWrapper::Sync(options, dbg);
    fs_->AfterSync(fname_, s.ok());
    if (s.ok()) fs_->NoteSync(*sizes_);
    return s;
  }
  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& options,
                          rocksdb::IODebugContext* dbg) override {
    if (rocksdb::IOStatus s = fs_->MaybeFail(fname_); !s.ok()) return s;
    fs_->BeforeSync(fname_);
    rocksdb::IOStatus s = FSWritableFileOwnerWrapper::Fsync(options, dbg);
    fs_->AfterSync(fname_, s.ok());
    if (s.ok()) fs_->NoteSync(*sizes_);
    return s;
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
  const std::shared_ptr<FaultyFileSystem::FileSizes> sizes_;
};

bool IsTarget(const std::string& fname, FaultTarget target) {
  return target == FaultTarget::kAllFiles || EndsWith(fname, ".log");
}

}  // namespace

FaultyFileSystem::FaultyFileSystem(std::shared_ptr<rocksdb::FileSystem> base)
    : FileSystemWrapper(std::move(base)) {}

void FaultyFileSystem::SetFault(Fault fault, FaultTarget target) {
  appends_left_.store(-1);
  target_.store(target);
  fault_.store(fault);
}

void FaultyFileSystem::FailAfterAppends(int n, Fault fault,
                                        FaultTarget target) {
  fault_.store(Fault::kNone);
  armed_fault_.store(fault);
  armed_target_.store(target);
  appends_left_.store(n);
}

rocksdb::IOStatus FaultyFileSystem::MaybeFailAppend(const std::string& fname) {
  if (appends_left_.load() >= 0 && IsTarget(fname, armed_target_.load())) {
    int left = appends_left_.load();
    while (left >= 0 && !appends_left_.compare_exchange_weak(left, left - 1)) {
    }
    if (left == 0) {
      // This append trips the armed fault.
      target_.store(armed_target_.load());
      fault_.store(armed_fault_.load());
    }
  }
  return MaybeFail(fname);
}

std::shared_ptr<FaultyFileSystem::FileSizes> FaultyFileSystem::TrackFile(
    const std::string& fname, uint64_t initial_size) {
  auto sizes = std::make_shared<FileSizes>();
  sizes->appended = initial_size;
  sizes->synced = initial_size;
  absl::MutexLock lock(&sizes_mu_);
  sizes_[std::filesystem::path(fname).lexically_normal().string()] = sizes;
  return sizes;
}

void FaultyFileSystem::NoteAppend(FileSizes& file, uint64_t bytes) {
  absl::MutexLock lock(&sizes_mu_);
  file.appended += bytes;
}

void FaultyFileSystem::BeforeSync(const std::string& fname) {
  if (!IsTarget(fname, FaultTarget::kWal)) return;
  const int64_t delay_us = wal_sync_delay_us_.load();
  if (delay_us > 0) absl::SleepFor(absl::Microseconds(delay_us));
}

void FaultyFileSystem::AfterSync(const std::string& fname, bool ok) {
  if (ok && IsTarget(fname, FaultTarget::kWal)) wal_syncs_.fetch_add(1);
}

void FaultyFileSystem::NoteSync(FileSizes& file) {
  absl::MutexLock lock(&sizes_mu_);
  file.synced = file.appended;
}

absl::Status FaultyFileSystem::CopyDurableImage(const std::string& from,
                                                const std::string& to) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(to, ec)) {
    return absl::InvalidArgumentError(to + " already exists");
  }
  if (!fs::create_directories(to, ec)) {
    return absl::InternalError("cannot create " + to + ": " + ec.message());
  }
  std::vector<fs::path> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(from, ec)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  if (ec) return absl::InternalError("cannot list " + from + ": " + ec.message());
  for (const fs::path& file : files) {
    uint64_t size = fs::file_size(file, ec);
    if (ec) continue;  // deleted meanwhile (an obsolete file)
    if (EndsWith(file.string(), ".log")) {
      absl::MutexLock lock(&sizes_mu_);
      auto it = sizes_.find(file.lexically_normal().string());
      if (it != sizes_.end()) size = std::min(size, it->second->synced);
    }
    std::ifstream in(file, std::ios::binary);
    std::ofstream out(fs::path(to) / file.filename(), std::ios::binary);
    std::vector<char> buffer(size);
    if (!in.read(buffer.data(), static_cast<std::streamsize>(size)) ||
        !out.write(buffer.data(), static_cast<std::streamsize>(size))) {
      return absl::InternalError("cannot copy " + file.string());
    }
  }
  return absl::OkStatus();
}

absl::Status FaultyFileSystem::DropUnsyncedWalData(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_regular_file() && EndsWith(entry.path().string(), ".log")) {
      files.push_back(entry.path());
    }
  }
  if (ec) return absl::InternalError("cannot list " + dir + ": " + ec.message());
  absl::MutexLock lock(&sizes_mu_);
  for (const fs::path& file : files) {
    auto it = sizes_.find(file.lexically_normal().string());
    if (it == sizes_.end()) continue;
    FileSizes& sizes = *it->second;
    const uint64_t size = fs::file_size(file, ec);
    if (ec) continue;
    if (size > sizes.synced) {
      fs::resize_file(file, sizes.synced, ec);
      if (ec) {
        return absl::InternalError("cannot truncate " + file.string() + ": " +
                                   ec.message());
      }
    }
    sizes.appended = sizes.synced;
  }
  return absl::OkStatus();
}

rocksdb::IOStatus FaultyFileSystem::MaybeFail(const std::string& fname) {
  const Fault fault = fault_.load();
  if (fault == Fault::kNone) return rocksdb::IOStatus::OK();
  if (!IsTarget(fname, target_.load())) return rocksdb::IOStatus::OK();
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
                                                   this, /*initial_size=*/0);
  }
  return s;
}

rocksdb::IOStatus FaultyFileSystem::ReopenWritableFile(
    const std::string& fname, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result,
    rocksdb::IODebugContext* dbg) {
  uint64_t initial_size = 0;
  if (!target()->GetFileSize(fname, rocksdb::IOOptions(), &initial_size, dbg)
           .ok()) {
    initial_size = 0;  // a new file
  }
  rocksdb::IOStatus s =
      target()->ReopenWritableFile(fname, options, result, dbg);
  if (s.ok()) {
    *result = std::make_unique<FaultyWritableFile>(std::move(*result), fname,
                                                   this, initial_size);
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
                                                   this, /*initial_size=*/0);
  }
  return s;
}

std::unique_ptr<rocksdb::Env> NewFaultyEnv(
    std::shared_ptr<FaultyFileSystem> fs) {
  return rocksdb::NewCompositeEnv(std::move(fs));
}

}  // namespace idem::testing
