#include "engine/offset_tracker.h"

#include <algorithm>

#include "engine/record.h"

namespace idem {

void OffsetTracker::Add(const Message& message, Outcome outcome) {
  if (message.source.empty() || message.offset < 0) return;
  Partition& p =
      partitions_[EncodeOffsetKey(message.source, message.partition)];
  if (outcome == Outcome::kFailed) {
    p.lowest_failed = std::min(p.lowest_failed.value_or(message.offset),
                               message.offset);
  } else {
    p.succeeded.push_back(message.offset);
  }
}

void OffsetTracker::ForEach(
    absl::FunctionRef<void(const std::string&, int64_t)> fn) const {
  for (const auto& [key, p] : partitions_) {
    int64_t best = -1;
    for (int64_t offset : p.succeeded) {
      if (!p.lowest_failed.has_value() || offset < *p.lowest_failed) {
        best = std::max(best, offset);
      }
    }
    if (best >= 0) fn(key, best);
  }
}

}  // namespace idem
