#include "engine/status_util.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace idem {
namespace {

absl::StatusCode CodeFor(const rocksdb::Status& status) {
  // ENOSPC, whatever status carries it: RocksDB also wraps it in an
  // Incomplete ("Result incomplete") or a plain IOError on some paths, such
  // as the sync of a store reopened after a failure.
  const std::string text = status.ToString();
  if (absl::StrContains(text, "No space left on device")) {
    return absl::StatusCode::kResourceExhausted;
  }
  if (status.IsNotFound()) return absl::StatusCode::kNotFound;
  if (status.IsCorruption()) return absl::StatusCode::kDataLoss;
  if (status.IsInvalidArgument()) return absl::StatusCode::kInvalidArgument;
  if (status.IsNotSupported()) return absl::StatusCode::kFailedPrecondition;
  // CompactionTooLarge: the SstFileManager found too little free space for a
  // compaction's output.
  if (status.IsNoSpace() || status.IsMemoryLimit() ||
      status.IsCompactionTooLarge()) {
    return absl::StatusCode::kResourceExhausted;
  }
  if (status.IsIOError()) {
    // RocksDB reports a LOCK file held by another DB as an IOError, and so
    // a path through a regular file (ENOTDIR): neither is retryable.
    if (absl::StrContains(text, "While lock file") ||
        absl::StrContains(text, "lock hold by current process") ||
        absl::StrContains(text, "Not a directory")) {
      return absl::StatusCode::kFailedPrecondition;
    }
    return absl::StatusCode::kUnavailable;
  }
  if (status.IsBusy() || status.IsTimedOut() || status.IsTryAgain() ||
      status.IsIncomplete() || status.IsShutdownInProgress()) {
    return absl::StatusCode::kUnavailable;
  }
  if (status.IsAborted()) return absl::StatusCode::kAborted;
  return absl::StatusCode::kInternal;
}

}  // namespace

absl::Status FromRocksStatus(const rocksdb::Status& status,
                             std::string_view context) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(
      CodeFor(status),
      absl::StrCat(absl::string_view(context.data(), context.size()), ": ",
                   status.ToString()));
}

}  // namespace idem
