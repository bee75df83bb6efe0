// MergedScan: a scan of state keys through a stack of layers
// (engine/state_layer.h), newest first, over a RocksDB iterator of the
// store: every key any of them holds in the range, in order, with its value
// as the layers leave it (deleted keys hidden, merges folded over the
// value below), as a point read through the same layers would see it.
//
// A free function; thread-safe as far as its arguments are not shared.

#ifndef IDEM_ENGINE_MERGED_SCAN_H_
#define IDEM_ENGINE_MERGED_SCAN_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/state_layer.h"
#include "engine/state_value.h"
#include "idem/txn.h"
#include "rocksdb/iterator.h"

namespace idem {

// The part of a scan's range that it read: [begin, end), `end` empty for
// no upper bound. A scan that stopped early read up to its last key.
struct ScanExtent {
  std::string begin;
  std::string end;
};

// kInvalidArgument unless `begin` and `end` bound a scan: `end` empty or
// not below `begin`, and neither longer than a key may be.
absl::Status ValidateScanRange(std::string_view begin, std::string_view end);

// Scans [begin, end) (`end` empty: no upper bound) through `layers`, newest
// first, over `store` (null: an empty store), calling `visit` as
// Txn::Scan does. `store` must not see keys outside the range (its
// iterate_lower_bound and iterate_upper_bound set to it). Returns what it
// read, or the store iterator's error. Values expired at `time` (the
// store's decoded as engine/state_value.h says) are hidden like deleted
// ones. REQUIRES: ValidateScanRange is OK.
absl::StatusOr<ScanExtent> MergedScan(
    absl::Span<const StateLayer* const> layers, rocksdb::Iterator* store,
    std::string_view begin, std::string_view end, const ScanOptions& options,
    ScanVisitor visit, const StateReadTime& time = StateReadTime());

}  // namespace idem

#endif  // IDEM_ENGINE_MERGED_SCAN_H_
