// OffsetTracker computes, for one commit, the offset to record per (source,
// partition): the highest offset of a processed or duplicate message that is
// below the partition's lowest failed offset in the commit. A consumer that
// resumes at recorded offset + 1 therefore redelivers every failed message.
// Not thread-safe; one per commit.

#ifndef IDEM_ENGINE_OFFSET_TRACKER_H_
#define IDEM_ENGINE_OFFSET_TRACKER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "idem/message.h"

namespace idem {

class OffsetTracker {
 public:
  OffsetTracker() = default;
  // Not copyable: PartitionOf keeps a pointer into partitions_.
  OffsetTracker(const OffsetTracker&) = delete;
  OffsetTracker& operator=(const OffsetTracker&) = delete;

  // Records the outcome of `message`; messages without a position (empty
  // source or negative offset) are ignored.
  void Add(const Message& message, Outcome outcome);

  // Calls `fn(offset_key, offset)` for each partition with an offset to
  // record (offset_key as in engine/record.h).
  void ForEach(absl::FunctionRef<void(const std::string&, int64_t)> fn) const;

  // The offset keys of the partitions `messages` carry a position in, each
  // once, in order of first appearance: every key ForEach may report for a
  // commit of `messages`.
  static std::vector<std::string> OffsetKeys(
      absl::Span<const Message> messages);

 private:
  // Whether `message` carries a position (non-empty source, offset >= 0).
  static bool HasPosition(const Message& message);

  struct Partition {
    std::optional<int64_t> lowest_failed;  // nullopt: nothing failed
    std::vector<int64_t> succeeded;
  };
  // The entry of `message`'s (source, partition), created if new.
  Partition& PartitionOf(const Message& message);

  absl::flat_hash_map<std::string, Partition> partitions_;
  // The entry PartitionOf returned last, and its source and partition.
  Partition* last_ = nullptr;
  std::string last_source_;
  int32_t last_partition_ = 0;
};

}  // namespace idem

#endif  // IDEM_ENGINE_OFFSET_TRACKER_H_
