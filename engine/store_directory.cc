#include "engine/store_directory.h"

#include <filesystem>
#include <string_view>
#include <system_error>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/status_util.h"

namespace idem {
namespace {

namespace fs = std::filesystem;

// How much of an OPTIONS or MANIFEST file is searched for the format marker:
// both name every column family near their start.
constexpr size_t kMarkerSearchBytes = size_t{4} << 20;

std::string Join(const std::string& dir, std::string_view name) {
  return absl::StrCat(dir, "/", absl::string_view(name.data(), name.size()));
}

// The names in `dir` other than "." and "..".
absl::StatusOr<std::vector<std::string>> ListNames(rocksdb::Env* env,
                                                   const std::string& dir) {
  std::vector<std::string> children;
  rocksdb::Status s = env->GetChildren(dir, &children);
  if (!s.ok()) return FromRocksStatus(s, "listing " + dir);
  std::vector<std::string> names;
  for (std::string& child : children) {
    if (child != "." && child != "..") names.push_back(std::move(child));
  }
  return names;
}

// Whether the first kMarkerSearchBytes of `file` mention a format marker.
bool MentionsFormatMarker(rocksdb::Env* env, const std::string& file) {
  std::unique_ptr<rocksdb::SequentialFile> in;
  if (!env->NewSequentialFile(file, &in, rocksdb::EnvOptions()).ok()) {
    return false;
  }
  std::string scratch(kMarkerSearchBytes, '\0');
  rocksdb::Slice data;
  if (!in->Read(scratch.size(), &data, scratch.data()).ok()) return false;
  return absl::StrContains(absl::string_view(data.data(), data.size()),
                           "idem.format.");
}

// A write-ahead log file: digits, then ".log".
bool IsWalName(std::string_view name) {
  if (!absl::EndsWith(absl::string_view(name.data(), name.size()), ".log") ||
      name.size() == 4) {
    return false;
  }
  for (char c : name.substr(0, name.size() - 4)) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

// Removes the files in `dir`, then `dir`.
absl::Status RemoveFlatDirectory(rocksdb::Env* env, const std::string& dir) {
  absl::StatusOr<std::vector<std::string>> names = ListNames(env, dir);
  if (!names.ok()) return names.status();
  for (const std::string& name : *names) {
    rocksdb::Status s = env->DeleteFile(Join(dir, name));
    if (!s.ok() && !s.IsNotFound()) {
      return FromRocksStatus(s, "removing " + Join(dir, name));
    }
  }
  rocksdb::Status s = env->DeleteDir(dir);
  if (!s.ok() && !s.IsNotFound()) {
    return FromRocksStatus(s, "removing " + dir);
  }
  return absl::OkStatus();
}

// Moves every file of the marked staging directory up into `dir`, CURRENT
// last, then removes the staging directory.
absl::Status MoveStagedStore(rocksdb::Env* env, const std::string& dir) {
  const std::string staging = Join(dir, kStagingDirName);
  absl::StatusOr<std::vector<std::string>> names = ListNames(env, staging);
  if (!names.ok()) return names.status();
  for (const std::string& name : *names) {
    // RocksDB's LOCK stays behind; the database creates its own.
    if (name == kCreatedMarkName || name == "CURRENT" || name == "LOCK") {
      continue;
    }
    rocksdb::Status s = env->RenameFile(Join(staging, name), Join(dir, name));
    if (!s.ok()) return FromRocksStatus(s, "moving the new store into " + dir);
  }
  if (absl::Status s = SyncDirectory(env, dir); !s.ok()) return s;
  rocksdb::Status s =
      env->RenameFile(Join(staging, "CURRENT"), Join(dir, "CURRENT"));
  if (!s.ok()) return FromRocksStatus(s, "moving the new store into " + dir);
  if (absl::Status s = SyncDirectory(env, dir); !s.ok()) return s;
  RemoveFinishedStaging(env, dir);
  return absl::OkStatus();
}

}  // namespace

absl::Status SyncDirectory(rocksdb::Env* env, const std::string& dir) {
  std::unique_ptr<rocksdb::Directory> handle;
  rocksdb::Status s = env->NewDirectory(dir, &handle);
  if (s.ok()) s = handle->Fsync();
  return FromRocksStatus(s, "syncing the directory " + dir);
}

absl::StatusOr<DirectoryState> InspectStoreDirectory(rocksdb::Env* env,
                                                     const std::string& dir,
                                                     const std::string& shown) {
  DirectoryState state;
  rocksdb::Status exists = env->FileExists(dir);
  if (exists.IsNotFound()) return state;  // kMissing
  if (!exists.ok()) return FromRocksStatus(exists, "checking " + shown);
  bool is_dir = false;
  rocksdb::Status s = env->IsDirectory(dir, &is_dir);
  if (!s.ok()) return FromRocksStatus(s, "checking " + shown);
  if (!is_dir) {
    state.kind = DirectoryKind::kOther;
    return state;
  }
  absl::StatusOr<std::vector<std::string>> names = ListNames(env, dir);
  if (!names.ok()) return names.status();
  bool has_current = false;
  std::vector<std::string> others;
  for (const std::string& name : *names) {
    if (name == "CURRENT") has_current = true;
    if (name == kStagingDirName) {
      state.has_staging = true;
    } else if (name != kCreationLockName) {
      others.push_back(name);
    }
  }

  if (has_current) {
    std::string current;
    s = rocksdb::ReadFileToString(env, Join(dir, "CURRENT"), &current);
    if (!s.ok())
      return FromRocksStatus(s, "reading the CURRENT file of " + shown);
    while (!current.empty() && current.back() == '\n') current.pop_back();
    if (current.empty() || current.find('/') != std::string::npos ||
        !env->FileExists(Join(dir, current)).ok()) {
      return absl::DataLossError(absl::StrCat(
          shown, " is a damaged store: its CURRENT file names '", current,
          "', which is missing (restore the store from a checkpoint)"));
    }
    for (const std::string& name : others) {
      if (!IsWalName(name)) continue;
      uint64_t size = 0;
      s = env->GetFileSize(Join(dir, name), &size);
      if (!s.ok()) return FromRocksStatus(s, "checking " + Join(shown, name));
      if (size > 0) state.has_wal_data = true;
    }
    state.kind = DirectoryKind::kStore;
    return state;
  }
  if (state.has_staging) {
    // Files are moved up only once the staging directory is marked
    // complete; before that, anything beside it is not ours.
    if (!others.empty() &&
        !env->FileExists(Join(Join(dir, kStagingDirName), kCreatedMarkName))
             .ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          shown, " holds an unfinished store creation (", kStagingDirName,
          ") and other files (", absl::StrJoin(others, ", "),
          "); remove them, or the directory, and open again"));
    }
    state.kind = DirectoryKind::kInterruptedCreation;
    return state;
  }
  if (others.empty()) {
    state.kind = DirectoryKind::kEmpty;
    return state;
  }
  // No CURRENT: a store that lost it, or something else.
  for (const std::string& name : others) {
    if ((absl::StartsWith(name, "OPTIONS-") ||
         absl::StartsWith(name, "MANIFEST-")) &&
        MentionsFormatMarker(env, Join(dir, name))) {
      return absl::DataLossError(absl::StrCat(
          shown, " is a damaged idem store: its CURRENT file is missing ",
          "(restore the store from a checkpoint)"));
    }
  }
  state.kind = DirectoryKind::kOther;
  return state;
}

absl::Status EnsureStoreDirectory(rocksdb::Env* env, const std::string& path) {
  if (env->FileExists(path).ok()) return absl::OkStatus();
  fs::path p = fs::path(path).lexically_normal();
  if (!p.has_filename()) p = p.parent_path();  // "dir/" names "dir"
  std::string parent = p.parent_path().string();
  if (parent.empty()) parent = ".";
  rocksdb::Status s = env->FileExists(parent);
  if (s.IsNotFound()) {
    return absl::NotFoundError(
        absl::StrCat("cannot create the store directory ", path,
                     ": its parent ", parent, " does not exist"));
  }
  s = env->CreateDirIfMissing(path);
  if (!s.ok()) {
    return FromRocksStatus(s, "creating the store directory " + path);
  }
  return SyncDirectory(env, parent);
}

std::string CanonicalStorePath(const std::string& path) {
  std::error_code ec;
  fs::path canonical = fs::canonical(path, ec);
  return ec ? path : canonical.string();
}

absl::Status CreateStoreInDirectory(
    rocksdb::Env* env, const std::string& dir, const std::string& shown,
    absl::FunctionRef<absl::Status(const std::string& staging)> build) {
  const std::string lock_path = Join(dir, kCreationLockName);
  rocksdb::FileLock* lock = nullptr;
  rocksdb::Status s = env->LockFile(lock_path, &lock);
  if (!s.ok()) {
    absl::Status status = FromRocksStatus(s, "locking " + lock_path);
    if (absl::IsFailedPrecondition(status)) {
      return absl::FailedPreconditionError(
          absl::StrCat("another engine is creating the store at ", shown,
                       "; open it once that has finished"));
    }
    return status;
  }
  bool created = false;
  absl::Cleanup unlock = [&] {
    // Deleted only once the store exists: a later creator that locks a new
    // file then finds CURRENT and creates nothing.
    if (created) env->DeleteFile(lock_path).PermitUncheckedError();
    env->UnlockFile(lock).PermitUncheckedError();
  };

  absl::StatusOr<DirectoryState> state = InspectStoreDirectory(env, dir, shown);
  if (!state.ok()) return state.status();
  const std::string staging = Join(dir, kStagingDirName);
  switch (state->kind) {
    case DirectoryKind::kStore:
      created = true;  // another opener finished it meanwhile
      return absl::OkStatus();
    case DirectoryKind::kMissing:
      return absl::NotFoundError(
          absl::StrCat("the store directory ", shown, " disappeared"));
    case DirectoryKind::kOther:
      return absl::FailedPreconditionError(absl::StrCat(
          shown,
          " is not empty and not an idem store; refusing to create "
          "one in it"));
    case DirectoryKind::kInterruptedCreation:
      if (env->FileExists(Join(staging, kCreatedMarkName)).ok()) {
        // Complete but not yet moved into place: finish the move.
        absl::Status moved = MoveStagedStore(env, dir);
        created = moved.ok();
        return moved;
      }
      // Incomplete, so nothing was moved yet: start again.
      if (absl::Status removed = RemoveFlatDirectory(env, staging);
          !removed.ok()) {
        return removed;
      }
      break;
    case DirectoryKind::kEmpty:
      break;
  }

  s = env->CreateDir(staging);
  if (!s.ok()) return FromRocksStatus(s, "creating the store in " + shown);
  if (absl::Status built = build(staging); !built.ok()) return built;
  s = rocksdb::WriteStringToFile(env, "", Join(staging, kCreatedMarkName),
                                 /*should_sync=*/true);
  if (!s.ok()) return FromRocksStatus(s, "creating the store in " + shown);
  if (absl::Status synced = SyncDirectory(env, staging); !synced.ok()) {
    return synced;
  }
  absl::Status moved = MoveStagedStore(env, dir);
  created = moved.ok();
  return moved;
}

void RemoveFinishedStaging(rocksdb::Env* env, const std::string& dir) {
  const std::string staging = Join(dir, kStagingDirName);
  if (!env->FileExists(staging).ok()) return;
  // Best effort: a leftover is removed again by the next writable open.
  RemoveFlatDirectory(env, staging).IgnoreError();
  SyncDirectory(env, dir).IgnoreError();
}

}  // namespace idem
