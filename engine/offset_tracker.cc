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
  Partition& p = PartitionOf(message);
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

OffsetTracker::Partition& OffsetTracker::PartitionOf(const Message& message) {
  // A batch's messages mostly come from one partition: its key is encoded
  // and looked up once per run of them. No insert has happened since `last_`
  // was taken, so it still points into partitions_.
  if (last_ == nullptr || message.partition != last_partition_ ||
      message.source != last_source_) {
    last_ = &partitions_[EncodeOffsetKey(message.source, message.partition)];
    last_source_.assign(message.source.data(), message.source.size());
    last_partition_ = message.partition;
  }
  return *last_;
}

std::vector<std::string> OffsetTracker::OffsetKeys(
    absl::Span<const Message> messages) {
  std::vector<std::string> keys;
  absl::flat_hash_set<std::string> seen;
  const Message* previous = nullptr;
  for (const Message& message : messages) {
    if (!HasPosition(message)) continue;
    // A run of messages of one partition has one key.
    if (previous != nullptr && message.partition == previous->partition &&
        message.source == previous->source) {
      continue;
    }
    previous = &message;
    std::string key = EncodeOffsetKey(message.source, message.partition);
    if (seen.insert(key).second) keys.push_back(std::move(key));
  }
  return keys;
}

}  // namespace idem
