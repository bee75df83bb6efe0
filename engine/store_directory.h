// The store directory on disk, before RocksDB opens it: what a path holds
// (nothing, an empty directory, a store, a damaged store, an interrupted
// creation, something else), its canonical name, and crash-safe creation of
// a store inside an existing directory.
//
// Creation builds the database in a staging directory inside the store
// directory (<dir>/.idem-creating), marks it complete (a synced file
// IDEM-CREATED in it), then moves its files up into <dir>, CURRENT last,
// and removes the staging directory. Until CURRENT arrives <dir> is not a
// store; a crash before the mark leaves a staging directory that the next
// creation removes, a crash after it one that the next creation finishes.
// Working inside <dir> (never renaming it) makes creation work in "."
// (or a path ending in "/"), a mount point, a symlink to a directory, and a
// directory whose parent is read-only. Concurrent creators serialize on a
// lock file, <dir>/.idem-creating.lock; a loser gets kFailedPrecondition.
//
// All file operations go through the given rocksdb::Env, so crash tests see
// them. Functions only; thread-safe.

#ifndef IDEM_ENGINE_STORE_DIRECTORY_H_
#define IDEM_ENGINE_STORE_DIRECTORY_H_

#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "rocksdb/env.h"

namespace idem {

inline constexpr char kStagingDirName[] = ".idem-creating";
inline constexpr char kCreationLockName[] = ".idem-creating.lock";
inline constexpr char kCreatedMarkName[] = "IDEM-CREATED";

enum class DirectoryKind {
  kMissing,              // nothing at the path
  kEmpty,                // an empty directory (or one with a stale lock)
  kInterruptedCreation,  // a staging directory, no CURRENT yet
  kStore,                // a RocksDB database (CURRENT and its MANIFEST)
  kOther,                // a file, or a directory of something else
};

struct DirectoryState {
  DirectoryKind kind = DirectoryKind::kMissing;
  // kStore: some write-ahead log file is not empty (recovery will replay).
  bool has_wal_data = false;
  // kStore: a finished creation's staging directory is still there.
  bool has_staging = false;
};

// Syncs `dir`'s entries (names created, renamed or removed in it).
absl::Status SyncDirectory(rocksdb::Env* env, const std::string& dir);

// Looks at `dir` without changing anything. kDataLoss for a store missing
// its CURRENT file (an OPTIONS or MANIFEST file names idem's format marker)
// or whose CURRENT names a missing MANIFEST; kFailedPrecondition, naming
// them, for files beside an unfinished creation that cannot be its own.
// `shown` names the path in errors.
absl::StatusOr<DirectoryState> InspectStoreDirectory(rocksdb::Env* env,
                                                     const std::string& dir,
                                                     const std::string& shown);

// Creates the directory `path` if it is missing. kNotFound, naming `path`,
// if its parent does not exist.
absl::Status EnsureStoreDirectory(rocksdb::Env* env, const std::string& path);

// `path` with symlinks, ".", ".." and repeated or trailing "/" resolved (so
// that every spelling of one directory gives one name), or `path` itself if
// it cannot be resolved (it does not exist on the real file system).
std::string CanonicalStorePath(const std::string& path);

// Creates a store in the existing directory `dir` as described above, unless
// one appeared there meanwhile (then OK). `build(staging)` must create a
// complete database in the directory `staging` and close it. kDataLoss or
// kFailedPrecondition as InspectStoreDirectory; kFailedPrecondition if
// another opener is creating the store.
absl::Status CreateStoreInDirectory(
    rocksdb::Env* env, const std::string& dir, const std::string& shown,
    absl::FunctionRef<absl::Status(const std::string& staging)> build);

// Removes the staging directory of a finished creation (best effort).
void RemoveFinishedStaging(rocksdb::Env* env, const std::string& dir);

}  // namespace idem

#endif  // IDEM_ENGINE_STORE_DIRECTORY_H_
