// FaultyFileSystem wraps a RocksDB FileSystem and, while told to, fails
// writes and syncs of chosen files with an I/O error or "no space", the way a
// failing disk or a full one would. Use it through NewFaultyEnv as
// idem::Options::env. Thread-safe: the fault switch is atomic.

#ifndef IDEM_TESTS_TESTING_FAULTY_ENV_H_
#define IDEM_TESTS_TESTING_FAULTY_ENV_H_

#include <atomic>
#include <memory>
#include <string>

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
  // (kNone: stop failing).
  void SetFault(Fault fault, FaultTarget target = FaultTarget::kWal);

  // Number of operations failed so far.
  int failures() const { return failures_.load(); }

  // The failure to return for an operation on `fname`, or OK.
  rocksdb::IOStatus MaybeFail(const std::string& fname);

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
};

// An Env whose file system is `fs` (kept alive by the Env).
std::unique_ptr<rocksdb::Env> NewFaultyEnv(
    std::shared_ptr<FaultyFileSystem> fs);

}  // namespace idem::testing

#endif  // IDEM_TESTS_TESTING_FAULTY_ENV_H_
