#include "idem/crash/file_system.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace idem::crash {
namespace {

// A writable file that reports its synced length to the journal.
class JournaledWritableFile : public rocksdb::FSWritableFileOwnerWrapper {
 public:
  JournaledWritableFile(std::unique_ptr<rocksdb::FSWritableFile> file,
                        std::string fname, uint64_t size, CrashFileSystem* fs)
      : FSWritableFileOwnerWrapper(std::move(file)),
        fname_(std::move(fname)),
        size_(size),
        fs_(fs) {}

  rocksdb::IOStatus Append(const rocksdb::Slice& data,
                           const rocksdb::IOOptions& options,
                           rocksdb::IODebugContext* dbg) override {
    if (rocksdb::IOStatus s = fs_->Before(FsOp::kAppend); !s.ok()) return s;
    rocksdb::IOStatus s = FSWritableFileOwnerWrapper::Append(data, options, dbg);
    if (s.ok()) size_ += data.size();
    return s;
  }
  rocksdb::IOStatus Append(const rocksdb::Slice& data,
                           const rocksdb::IOOptions& options,
                           const rocksdb::DataVerificationInfo& info,
                           rocksdb::IODebugContext* dbg) override {
    if (rocksdb::IOStatus s = fs_->Before(FsOp::kAppend); !s.ok()) return s;
    rocksdb::IOStatus s =
        FSWritableFileOwnerWrapper::Append(data, options, info, dbg);
    if (s.ok()) size_ += data.size();
    return s;
  }
  rocksdb::IOStatus PositionedAppend(const rocksdb::Slice& data,
                                     uint64_t offset,
                                     const rocksdb::IOOptions& options,
                                     rocksdb::IODebugContext* dbg) override {
    if (rocksdb::IOStatus s = fs_->Before(FsOp::kAppend); !s.ok()) return s;
    rocksdb::IOStatus s =
        FSWritableFileOwnerWrapper::PositionedAppend(data, offset, options, dbg);
    if (s.ok()) size_ = std::max<uint64_t>(size_, offset + data.size());
    return s;
  }
  rocksdb::IOStatus Truncate(uint64_t size, const rocksdb::IOOptions& options,
                             rocksdb::IODebugContext* dbg) override {
    rocksdb::IOStatus s = FSWritableFileOwnerWrapper::Truncate(size, options, dbg);
    if (s.ok()) size_ = size;
    return s;
  }
  rocksdb::IOStatus Sync(const rocksdb::IOOptions& options,
                         rocksdb::IODebugContext* dbg) override {
    if (rocksdb::IOStatus s = fs_->Before(FsOp::kSync); !s.ok()) return s;
    rocksdb::IOStatus s = FSWritableFileOwnerWrapper::Sync(options, dbg);
    if (s.ok()) fs_->JournalSync(fname_, size_);
    return s;
  }
  rocksdb::IOStatus Fsync(const rocksdb::IOOptions& options,
                          rocksdb::IODebugContext* dbg) override {
    if (rocksdb::IOStatus s = fs_->Before(FsOp::kSync); !s.ok()) return s;
    rocksdb::IOStatus s = FSWritableFileOwnerWrapper::Fsync(options, dbg);
    if (s.ok()) fs_->JournalSync(fname_, size_);
    return s;
  }

 private:
  const std::string fname_;
  uint64_t size_;  // bytes in the real file (written through)
  CrashFileSystem* const fs_;
};

rocksdb::IOStatus ToIOStatus(absl::StatusCode code) {
  if (code == absl::StatusCode::kResourceExhausted) {
    return rocksdb::IOStatus::NoSpace("injected by CrashFileSystem");
  }
  return rocksdb::IOStatus::IOError("injected by CrashFileSystem");
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
    status_ = absl::InvalidArgumentError("CrashFsOptions.journal_path is empty");
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
    *result = std::make_unique<JournaledWritableFile>(std::move(*result),
                                                      fname, 0, this);
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
    *result = std::make_unique<JournaledWritableFile>(std::move(*result),
                                                      fname, size, this);
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
    *result = std::make_unique<JournaledWritableFile>(std::move(*result),
                                                      fname, 0, this);
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
