// The defaults of Txn's calls that Txn implementations outside idem need
// not provide (idem/txn.h).

#include "idem/txn.h"

#include <string>
#include <vector>

#include "engine/merged_scan.h"
#include "engine/record.h"
#include "engine/state_value.h"

namespace idem {

absl::Status Txn::Put(std::string_view key, std::string_view value,
                      const PutOptions& options) {
  if (absl::Status s = ValidateTtl(options.ttl, "Put: ttl"); !s.ok()) {
    return s;
  }
  if (options.ttl != absl::InfiniteDuration()) {
    return absl::UnimplementedError("this Txn cannot write values that expire");
  }
  Put(key, value);
  return absl::OkStatus();
}

absl::Status Txn::Scan(std::string_view, std::string_view, ScanVisitor,
                       const ScanOptions&) {
  return absl::UnimplementedError("this Txn does not support scans");
}

absl::Status Txn::ScanPrefix(std::string_view prefix, ScanVisitor visit,
                             const ScanOptions& options) {
  return Scan(prefix, KeyRangeEnd(prefix), visit, options);
}

absl::Status Txn::Merge(std::string_view key, MergeOp op,
                        std::string_view operand) {
  if (absl::Status s = ValidateMerge(op, operand); !s.ok()) return s;
  absl::StatusOr<std::optional<std::string>> value = Get(key);
  if (!value.ok()) return value.status();
  Put(key, ApplyMerge(*value, op, operand));
  return absl::OkStatus();
}

absl::Status Txn::DeleteRange(std::string_view begin, std::string_view end) {
  if (end.empty()) {
    return absl::InvalidArgumentError("DeleteRange: end must not be empty");
  }
  if (absl::Status s = ValidateScanRange(begin, end); !s.ok()) return s;
  std::vector<std::string> keys;
  absl::Status scanned =
      Scan(begin, end, [&](std::string_view key, std::string_view) {
        keys.emplace_back(key);
        return true;
      });
  if (!scanned.ok()) return scanned;
  for (const std::string& key : keys) Delete(key);
  return absl::OkStatus();
}

absl::Status Txn::SetTimer(std::string_view, TimeDomain, absl::Time,
                           std::string_view) {
  return absl::UnimplementedError("this Txn does not support timers");
}

absl::Status Txn::CancelTimer(std::string_view) {
  return absl::UnimplementedError("this Txn does not support timers");
}

}  // namespace idem
