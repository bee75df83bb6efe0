#include "engine/offset_tracker.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "engine/record.h"

namespace idem {

bool OffsetTracker::HasPosition(const Message& message) {
  return !message.source.empty() && message.offset >= 0;
}

void OffsetTracker::Add(const Message& message, Outcome outcome) {
  if (!HasPosition(message)) return;
  Partition& p =
      partitions_[EncodeOffsetKey(message.source, message.partition)];
  if (outcome == Outcome::kFailed) {
    p.lowest_failed =
        std::min(p.lowest_failed.value_or(message.offset), message.offset);
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

std::vector<std::string> OffsetTracker::OffsetKeys(
    absl::Span<const Message> messages) {
  std::vector<std::string> keys;
  absl::flat_hash_set<std::string> seen;
  for (const Message& message : messages) {
    if (!HasPosition(message)) continue;
    std::string key = EncodeOffsetKey(message.source, message.partition);
    if (seen.insert(key).second) keys.push_back(std::move(key));
  }
  return keys;
}

}  // namespace idem
