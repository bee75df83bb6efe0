// Conversion of RocksDB statuses into absl::Status codes, following the
// project's conventions: corruption is kDataLoss, a full disk is
// kResourceExhausted, other I/O errors are kUnavailable (retry-able), and a
// lock held by another open store is kFailedPrecondition. Thread-safe.

#ifndef IDEM_ENGINE_STATUS_UTIL_H_
#define IDEM_ENGINE_STATUS_UTIL_H_

#include <string_view>

#include "absl/status/status.h"
#include "rocksdb/status.h"

namespace idem {

// Returns OK for an OK status; otherwise an error whose message starts with
// `context` (what the engine was doing) followed by RocksDB's message.
absl::Status FromRocksStatus(const rocksdb::Status& status,
                             std::string_view context);

}  // namespace idem

#endif  // IDEM_ENGINE_STATUS_UTIL_H_
