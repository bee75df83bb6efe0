#include "idem/crash/file_system.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "engine/wal_watch.h"

namespace idem::crash {
namespace {

// Whether `target` names the file `fname`.
bool TargetsFile(const std::string& fname, FaultTarget target) {
  return target == FaultTarget::kAllFiles || IsWriteAheadLog(fname);
}

// Whether a fault aimed at `target` fails an operation on `fname` (`sync`:
// the operation is a sync).
bool IsTarget(const std::string& fname, FaultTarget target, bool sync) {
  if (target == FaultTarget::kWalSyncs && !sync) return false;
  return TargetsFile(fname, target);
}

std::string Normal(const std::string& fname) {
  return std::filesystem::path(fname).lexically_normal().string();
}

// A writable file that reports its synced length to the journal and fails
// the operations its file system tells it to.
class JournaledWritableFile : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  JournaledWritableFile(std::unique_ptr<rocksdb::FSWritableFile> file,
                        std::string fname, uint64_t size, CrashFileSystem* fs)
      : FSWritableFileOwnerWrapper(std::move(file)),
        fname_(std::move(fname)),
        fs_(fs),
        sizes_(fs->TrackFile(fname_, size)) {}

  rocksdb::IOStatus Append(const rocksdb::Slice& data,
                           const rocksdb::IOOptions& options,
                           rocksdb::IODebugContext* dbg) override {
    if (rocksdb::IOStatus s = BeforeAppend(); !s.ok()) return s;
    rocksdb::IOStatus s =
        FSWritableFileOwnerWrapper::Append(data, options, dbg);
    if (s.ok()) fs_->NoteAppend(*sizes_, kAtEnd, data.size());
    return s;
  }
  rocksdb::IOStatus Append(const rocksdb::Slice& data,
                           const rocksdb::IOOptions& options,
                           const rocksdb::DataVerificationInfo& info,
                           rocksdb::IODebugContext* dbg) override {
    if (rocksdb::IOStatus s = BeforeAppend(); !s.ok()) return s;
    rocksdb::IOStatus s =
        FSWritableFileOwnerWrapper::Append(data, options, info, dbg);
    if (s.ok()) fs_->NoteAppend(*sizes_, kAtEnd, data.size());
    return s;
  }
  rocksdb::IOStatus PositionedAppend(const rocksdb::Slice& data,
                                     uint64_t offset,
                                     const rocksdb::IOOptions& options,
                                     rocksdb::IODebugContext* dbg) override {
    if (rocksdb::IOStatus s = BeforeAppend(); !s.ok()) return s;
    rocksdb::IOStatus s = FSWritableFileOwnerWrapper::PositionedAppend(
        data, offset, options, dbg);
    if (s.ok()) fs_->NoteAppend(*sizes_, offset, data.size());
    return s;
  }
  rocksdb::IOStatus Truncate(uint64_t size, const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s =
        FSWritableFileOwnerWrapper::Truncate(size, options, dbg);
    if (s.ok()) fs_->NoteTruncate(*sizes_, size);
    return s;
  }
  rocksdb::IOStatus Flush(const rocksdb::IOOptions& options,
                          rocksdb::IODebugContext* dbg) override {
    if (rocksdb::IOStatus s = fs_->MaybeFail(fname_, false); !s.ok()) return s;
    return FSWritableFileOwnerWrapper::Flush(options, dbg);
  }
  rocksdb::IOStatus RangeSync(uint64_t offset, uint64_t nbytes,
                              const rocksdb::IOOptions& options,
                              rocksdb::IODebugContext* dbg) override {
    if (rocksdb::IOStatus s = fs_->MaybeFail(fname_, false, /*sync=*/true);
        !s.ok()) {
      return s;
    }
    return FSWritableFileOwnerWrapper::RangeSync(offset, nbytes, options, dbg);
  }
  rocksdb::IOStatus Sync(const rocksdb::IOOptions& options,
                         rocksdb::IODebugContext* dbg) override {
    if (rocksdb::IOStatus s = BeforeSync(); !s.ok()) return s;
    rocksdb::IOStatus s = FSWritableFileOwnerWrapper::Sync(options, dbg);
    AfterSync(s.ok());
    return s;
  }
  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& options,
                          rocksdb::IODebugContext* dbg) override {
    if (rocksdb::IOStatus s = BeforeSync(); !s.ok()) return s;
    rocksdb::IOStatus s = FSWritableFileOwnerWrapper::Fsync(options, dbg);
    AfterSync(s.ok());
    return s;
  }

 private:
  static constexpr uint64_t kAtEnd = UINT64_MAX;

  rocksdb::IOStatus BeforeAppend() {
    if (rocksdb::IOStatus s = fs_->Before(FsOp::kAppend); !s.ok()) return s;
    return fs_->MaybeFail(fname_, true);
  }
  rocksdb::IOStatus BeforeSync() {
    if (rocksdb::IOStatus s = fs_->Before(FsOp::kSync); !s.ok()) return s;
    if (rocksdb::IOStatus s = fs_->MaybeFail(fname_, false, /*sync=*/true);
        !s.ok()) {
      return s;
    }
    fs_->BeforeSync(fname_);
    return rocksdb::IOStatus::OK();
  }
  void AfterSync(bool ok) {
    fs_->AfterSync(fname_, ok);
    if (ok) fs_->NoteSync(fname_, *sizes_);
  }

  const std::string fname_;
  CrashFileSystem* const fs_;
  const std::shared_ptr<CrashFileSystem::FileSizes> sizes_;
};

rocksdb::IOStatus ToIOStatus(absl::StatusCode code) {
  if (code == absl::StatusCode::kResourceExhausted) {
    return rocksdb::IOStatus::NoSpace(
        "injected by CrashFileSystem: no space left on device");
  }
  return rocksdb::IOStatus::IOError("injected by CrashFileSystem: I/O error");
}

uint64_t FileSizeOrZero(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_size);
}

}  // namespace

CrashFileSystem::CrashFileSystem(std::shared_ptr<rocksdb::FileSystem> base,
                                 CrashFsOptions options)
    : FileSystemWrapper(std::move(base)), options_(std::move(options)) {
  if (options_.journal_path.empty()) {
    status_ =
        absl::InvalidArgumentError("CrashFsOptions.journal_path is empty");
    return;
  }
  journal_fd_ = ::open(options_.journal_path.c_str(),
                       O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (journal_fd_ < 0) {
    status_ = absl::UnavailableError(absl::StrCat(
        "opening journal ", options_.journal_path, ": ", std::strerror(errno)));
  }
}

CrashFileSystem::~CrashFileSystem() {
  if (journal_fd_ >= 0) ::close(journal_fd_);
}

void CrashFileSystem::ClearFault() { fault_cleared_.store(true); }

uint64_t CrashFileSystem::count(FsOp op) const {
  return counts_[static_cast<int>(op)].load();
}

rocksdb::IOStatus CrashFileSystem::Before(FsOp op) {
  const uint64_t n = counts_[static_cast<int>(op)].fetch_add(1) + 1;
  if (options_.kill_at != 0 && op == options_.kill_op &&
      n == options_.kill_at) {
    ::kill(::getpid(), SIGKILL);
  }
  if (options_.fail_at != 0 && op == options_.fail_op &&
      n >= options_.fail_at && !fault_cleared_.load()) {
    return ToIOStatus(options_.fail_code);
  }
  return rocksdb::IOStatus::OK();
}

void CrashFileSystem::Journal(const std::string& line) {
  if (journal_fd_ < 0) return;
  // One write(2) per line, O_APPEND: whole lines survive a kill.
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(journal_fd_, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

void CrashFileSystem::JournalSync(const std::string& fname, uint64_t size) {
  Journal(absl::StrCat("S\t", size, "\t", fname, "\n"));
}

void CrashFileSystem::SetFault(absl::StatusCode code, FaultTarget target) {
  appends_left_.store(-1);
  target_.store(target);
  fault_.store(code);
}

void CrashFileSystem::FailAfterAppends(int n, absl::StatusCode code,
                                       FaultTarget target) {
  fault_.store(absl::StatusCode::kOk);
  armed_fault_.store(code);
  armed_target_.store(target);
  appends_left_.store(n);
}

rocksdb::IOStatus CrashFileSystem::MaybeFail(const std::string& fname,
                                             bool append, bool sync) {
  if (append && appends_left_.load() >= 0 &&
      TargetsFile(fname, armed_target_.load())) {
    int left = appends_left_.load();
    while (left >= 0 && !appends_left_.compare_exchange_weak(left, left - 1)) {
    }
    if (left == 0) {
      // This append trips the armed fault.
      target_.store(armed_target_.load());
      fault_.store(armed_fault_.load());
    }
  }
  const absl::StatusCode fault = fault_.load();
  if (fault == absl::StatusCode::kOk ||
      !IsTarget(fname, target_.load(), sync)) {
    return rocksdb::IOStatus::OK();
  }
  failures_.fetch_add(1);
  return ToIOStatus(fault);
}

void CrashFileSystem::BeforeSync(const std::string& fname) {
  if (!IsWriteAheadLog(fname)) return;
  const int64_t delay_us = wal_sync_delay_us_.load();
  if (delay_us > 0) absl::SleepFor(absl::Microseconds(delay_us));
}

void CrashFileSystem::AfterSync(const std::string& fname, bool ok) {
  if (ok && IsWriteAheadLog(fname)) wal_syncs_.fetch_add(1);
}

std::shared_ptr<CrashFileSystem::FileSizes> CrashFileSystem::TrackFile(
    const std::string& fname, uint64_t synced_size) {
  auto sizes = std::make_shared<FileSizes>(synced_size);
  absl::MutexLock lock(&sizes_mu_);
  sizes_[Normal(fname)] = sizes;
  return sizes;
}

void CrashFileSystem::NoteAppend(FileSizes& file, uint64_t offset,
                                 uint64_t bytes) {
  absl::MutexLock lock(&file.mu);
  if (offset == UINT64_MAX) {
    file.written += bytes;
  } else {
    file.written = std::max<uint64_t>(file.written, offset + bytes);
  }
}

void CrashFileSystem::NoteTruncate(FileSizes& file, uint64_t size) {
  absl::MutexLock lock(&file.mu);
  file.written = size;
  file.synced = std::min(file.synced, size);
}

void CrashFileSystem::NoteSync(const std::string& fname, FileSizes& file) {
  uint64_t size = 0;
  {
    absl::MutexLock lock(&file.mu);
    file.synced = file.written;
    size = file.synced;
  }
  JournalSync(fname, size);
}

absl::Status CrashFileSystem::CopyDurableImage(const std::string& from,
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
  if (ec) {
    return absl::InternalError("cannot list " + from + ": " + ec.message());
  }
  for (const fs::path& file : files) {
    uint64_t size = fs::file_size(file, ec);
    if (ec) continue;  // deleted meanwhile (an obsolete file)
    if (IsWriteAheadLog(file.string())) {
      absl::MutexLock lock(&sizes_mu_);
      auto it = sizes_.find(file.lexically_normal().string());
      if (it != sizes_.end()) {
        absl::MutexLock file_lock(&it->second->mu);
        size = std::min(size, it->second->synced);
      }
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

absl::Status CrashFileSystem::DropUnsyncedWalData(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> files;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_regular_file() && IsWriteAheadLog(entry.path().string())) {
      files.push_back(entry.path());
    }
  }
  if (ec)
    return absl::InternalError("cannot list " + dir + ": " + ec.message());
  absl::MutexLock lock(&sizes_mu_);
  for (const fs::path& file : files) {
    auto it = sizes_.find(file.lexically_normal().string());
    if (it == sizes_.end()) continue;
    FileSizes& sizes = *it->second;
    absl::MutexLock file_lock(&sizes.mu);
    const uint64_t size = fs::file_size(file, ec);
    if (ec) continue;
    if (size > sizes.synced) {
      fs::resize_file(file, sizes.synced, ec);
      if (ec) {
        return absl::InternalError("cannot truncate " + file.string() + ": " +
                                   ec.message());
      }
    }
    sizes.written = sizes.synced;
  }
  return absl::OkStatus();
}

void CrashFileSystem::JournalCreate(const std::string& fname,
                                    uint64_t synced_size) {
  Journal(absl::StrCat("C\t", synced_size, "\t", fname, "\n"));
}

rocksdb::IOStatus CrashFileSystem::NewWritableFile(
    const std::string& fname, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result,
    rocksdb::IODebugContext* dbg) {
  JournalCreate(fname, 0);
  rocksdb::IOStatus s = target()->NewWritableFile(fname, options, result, dbg);
  if (s.ok()) {
    *result = std::make_unique<JournaledWritableFile>(std::move(*result), fname,
                                                      0, this);
  }
  return s;
}

rocksdb::IOStatus CrashFileSystem::ReopenWritableFile(
    const std::string& fname, const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result,
    rocksdb::IODebugContext* dbg) {
  // What the file holds now survived earlier crashes: count it as synced.
  const uint64_t size = FileSizeOrZero(fname);
  JournalCreate(fname, size);
  rocksdb::IOStatus s =
      target()->ReopenWritableFile(fname, options, result, dbg);
  if (s.ok()) {
    *result = std::make_unique<JournaledWritableFile>(std::move(*result), fname,
                                                      size, this);
  }
  return s;
}

rocksdb::IOStatus CrashFileSystem::ReuseWritableFile(
    const std::string& fname, const std::string& old_fname,
    const rocksdb::FileOptions& options,
    std::unique_ptr<rocksdb::FSWritableFile>* result,
    rocksdb::IODebugContext* dbg) {
  Journal(absl::StrCat("D\t0\t", old_fname, "\n"));
  JournalCreate(fname, 0);
  rocksdb::IOStatus s =
      target()->ReuseWritableFile(fname, old_fname, options, result, dbg);
  if (s.ok()) {
    *result = std::make_unique<JournaledWritableFile>(std::move(*result), fname,
                                                      0, this);
  }
  return s;
}

rocksdb::IOStatus CrashFileSystem::RenameFile(const std::string& src,
                                              const std::string& target_name,
                                              const rocksdb::IOOptions& options,
                                              rocksdb::IODebugContext* dbg) {
  if (rocksdb::IOStatus s = Before(FsOp::kRename); !s.ok()) return s;
  rocksdb::IOStatus s = target()->RenameFile(src, target_name, options, dbg);
  if (s.ok()) Journal(absl::StrCat("R\t0\t", src, "\t", target_name, "\n"));
  return s;
}

rocksdb::IOStatus CrashFileSystem::DeleteFile(const std::string& fname,
                                              const rocksdb::IOOptions& options,
                                              rocksdb::IODebugContext* dbg) {
  rocksdb::IOStatus s = target()->DeleteFile(fname, options, dbg);
  if (s.ok()) Journal(absl::StrCat("D\t0\t", fname, "\n"));
  return s;
}

absl::StatusOr<PowerLossReport> ApplyPowerLoss(const std::string& journal_path,
                                               uint64_t torn_seed) {
  std::ifstream in(journal_path);
  if (!in) {
    // No journal: nothing was written through a CrashFileSystem.
    return PowerLossReport();
  }
  // Files touched since the journal was last reset -> synced length.
  std::map<std::string, uint64_t> synced;
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f = absl::StrSplit(line, '\t');
    uint64_t n = 0;
    if (f.size() < 3 || f[0].size() != 1 || !absl::SimpleAtoi(f[1], &n)) {
      // A torn last line: the process died while journaling it.
      continue;
    }
    switch (f[0][0]) {
      case 'C':
      case 'S':
        synced[f[2]] = n;
        break;
      case 'D':
        synced.erase(f[2]);
        break;
      case 'R':
        if (f.size() < 4) break;
        if (auto it = synced.find(f[2]); it != synced.end()) {
          synced[f[3]] = it->second;
          synced.erase(f[2]);
        } else {
          synced.erase(f[3]);  // replaced by a file older than the journal
        }
        break;
      default:
        break;
    }
  }
  in.close();

  PowerLossReport report;
  std::mt19937_64 rng(torn_seed);
  for (const auto& [path, length] : synced) {
    const uint64_t size = FileSizeOrZero(path);
    if (size <= length) continue;
    uint64_t keep = length;
    if (torn_seed != 0) {
      const uint64_t tail = size - length;
      const uint64_t kept = rng() % (tail + 1);
      keep += kept;
      report.bytes_torn_kept += kept;
    }
    if (keep >= size) continue;
    if (::truncate(path.c_str(), static_cast<off_t>(keep)) != 0) {
      return absl::UnavailableError(
          absl::StrCat("truncating ", path, ": ", std::strerror(errno)));
    }
    ++report.files_cut;
    report.bytes_dropped += size - keep;
  }
  if (::truncate(journal_path.c_str(), 0) != 0) {
    return absl::UnavailableError(absl::StrCat(
        "resetting journal ", journal_path, ": ", std::strerror(errno)));
  }
  return report;
}

}  // namespace idem::crash
