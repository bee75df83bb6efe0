// StoreClaim: this process's claim on a store directory for one writable
// store. RocksDB's LOCK file keeps a second writable open out of another
// process, but within one process its lock is keyed on the path string, and
// fcntl locks never conflict inside a process: a store reached under another
// name that canonicalization cannot see through (a bind mount of its
// directory) would open twice, and every message would be processed twice.
// Claims are keyed on the directory's identity, its (device, inode), which
// every name of it shares.
//
// Claim is thread-safe (one process-wide registry behind a mutex). A claim
// is move-only and releases the directory when destroyed.

#ifndef IDEM_ENGINE_STORE_CLAIM_H_
#define IDEM_ENGINE_STORE_CLAIM_H_

#include <sys/types.h>

#include <string>

#include "absl/status/statusor.h"

namespace idem {

class StoreClaim {
 public:
  // Claims the directory `dir` (`shown`: the caller's name for it, for
  // errors). kFailedPrecondition if a writable store of this process holds
  // the same directory, under any name. A directory that the real file
  // system does not show (stat fails) gets a claim that holds nothing:
  // nothing else can name it either, and RocksDB's own lock still applies.
  static absl::StatusOr<StoreClaim> Claim(const std::string& dir,
                                          const std::string& shown);

  StoreClaim() = default;
  StoreClaim(StoreClaim&& other) noexcept;
  StoreClaim& operator=(StoreClaim&& other) noexcept;
  StoreClaim(const StoreClaim&) = delete;
  StoreClaim& operator=(const StoreClaim&) = delete;
  ~StoreClaim();

 private:
  StoreClaim(dev_t device, ino_t inode)
      : device_(device), inode_(inode), held_(true) {}
  void Release();

  dev_t device_ = 0;
  ino_t inode_ = 0;
  bool held_ = false;
};

}  // namespace idem

#endif  // IDEM_ENGINE_STORE_CLAIM_H_
