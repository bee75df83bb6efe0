#include "kafka/changelog_checkpoint.h"

#include "absl/container/flat_hash_set.h"

namespace idem::kafka {

void CheckpointTracker::Verified(int32_t partition, int64_t end) {
  absl::MutexLock lock(&mu_);
  Coverage coverage;  // nothing counted since `end`
  coverage.from = end;
  coverage_[partition] = coverage;
}

void CheckpointTracker::NotePublished(
    absl::Span<const OutboxEntry* const> published, bool complete,
    bool transaction) {
  absl::MutexLock lock(&mu_);
  if (!complete) {
    coverage_.clear();
    return;
  }
  absl::flat_hash_set<int32_t> touched;
  for (const OutboxEntry* entry : published) {
    if (entry->destination != changelog_topic_) continue;
    auto coverage = coverage_.find(entry->partition);
    if (coverage == coverage_.end()) continue;
    ++coverage->second.records;
    touched.insert(entry->partition);
    std::optional<ChangelogKey> key = DecodeChangelogKey(entry->key);
    if (key.has_value() && key->kind == ChangelogKey::Kind::kOffset) {
      std::optional<int64_t> offset = DecodeOffsetValue(entry->value);
      if (offset.has_value()) {
        coverage->second.last_mark = ChangelogMark{key->epoch, *offset};
      }
    } else {
      coverage->second.last_mark.reset();  // a write after the last mark
    }
  }
  if (!transaction) return;
  for (int32_t partition : touched) ++coverage_[partition].transactions;
}

std::optional<ChangelogCheckpoint> CheckpointTracker::Checkpoint(
    int32_t partition, const ChangelogMark& last, int64_t high) const {
  absl::MutexLock lock(&mu_);
  auto found = coverage_.find(partition);
  if (found == coverage_.end()) return std::nullopt;
  const Coverage& coverage = found->second;
  if (high != coverage.from + coverage.records + coverage.transactions) {
    return std::nullopt;  // records of someone else, or markers not counted
  }
  // Nothing published since the last verified point: the copy is as it was
  // there, and that point's checkpoint stands.
  if (coverage.records == 0) return std::nullopt;
  if (coverage.last_mark != last) return std::nullopt;
  return ChangelogCheckpoint{last, high};
}

void CheckpointTracker::Forget(int32_t partition) {
  absl::MutexLock lock(&mu_);
  coverage_.erase(partition);
}

}  // namespace idem::kafka
