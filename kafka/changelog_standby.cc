#include "kafka/changelog_standby.h"

#include <utility>

namespace idem::kafka {

absl::Status StandbyCopies::Read(StandbyCopy& copy, int32_t partition,
                                 absl::Duration timeout) {
  if (absl::Status s = reader_->Read(
          target_->changelog_topic, partition, copy.changelog_next, timeout,
          [&](const LogRecord& r) {
            copy.changelog_next = r.record.offset + 1;
            return copy.builder.AddChangelogRecord(r);
          });
      !s.ok()) {
    return s;
  }
  return reader_->Read(target_->dedupe_topic, partition, copy.dedupe_next,
                       timeout, [&](const LogRecord& r) {
                         copy.dedupe_next = r.record.offset + 1;
                         return copy.builder.AddDedupeRecord(r);
                       });
}

absl::StatusOr<int64_t> StandbyCopies::CatchUp(const std::string& topic,
                                               int32_t partition,
                                               absl::Duration timeout) {
  std::unique_ptr<StandbyCopy>& copy = copies_[partition];
  if (copy == nullptr) copy = std::make_unique<StandbyCopy>();
  absl::Status status = Read(*copy, partition, timeout);
  ChangelogChanges changes;
  if (status.ok()) {
    changes = TakeChanges(*copy);
    status = Apply(topic, partition, *copy, changes);
  }
  if (!status.ok()) {
    copies_.erase(partition);
    return status;
  }
  return changes.records_read;
}

absl::Status StandbyCopies::Apply(const std::string& topic, int32_t partition,
                                  StandbyCopy& copy,
                                  const ChangelogChanges& changes) {
  // Until the changelog holds a complete commit there is nothing to copy,
  // and the engine's copy (perhaps from before changelog mode) stays.
  if (!changes.last.has_value()) return absl::OkStatus();
  std::optional<int64_t> offset;
  if (changes.last->offset >= 0) offset = changes.last->offset;
  if (!copy.applied) {
    // Cold: the whole changelog replaces the engine's copy.
    PartitionSnapshot snapshot;
    snapshot.source = topic;
    snapshot.partition = partition;
    snapshot.offset = offset;
    for (const auto& [key, value] : changes.writes) {
      if (value.has_value()) snapshot.entries.emplace_back(key, *value);
    }
    snapshot.records = changes.records;
    if (absl::Status s =
            engine_->ImportPartition(snapshot, {.allow_rewind = true});
        !s.ok()) {
      return s;
    }
    // An import of the same snapshot before (the partition was then taken
    // over here, and given back) writes nothing: drop that epoch, which
    // would make the copy look like this member's own.
    PartitionChanges no_epoch;
    no_epoch.source = topic;
    no_epoch.partition = partition;
    no_epoch.writes.emplace_back(std::string(kEpochStateKey), std::nullopt);
    if (absl::Status s = engine_->ApplyPartitionChanges(no_epoch, {});
        !s.ok()) {
      return s;
    }
    copy.applied = true;
    copy.applied_offset = offset;
    return absl::OkStatus();
  }
  if (changes.writes.empty() && changes.records.empty() &&
      offset == copy.applied_offset) {
    return absl::OkStatus();
  }
  PartitionChanges apply;
  apply.source = topic;
  apply.partition = partition;
  apply.offset = offset;
  apply.writes.assign(changes.writes.begin(), changes.writes.end());
  apply.records = changes.records;
  if (absl::Status s =
          engine_->ApplyPartitionChanges(apply, {.allow_rewind = true});
      !s.ok()) {
    return s;
  }
  copy.applied_offset = offset;
  return absl::OkStatus();
}

ChangelogChanges StandbyCopies::TakeChanges(StandbyCopy& copy) {
  ChangelogChanges changes = copy.builder.TakeChanges(clock_->Now());
  if (without_dedupe_) changes.records.clear();
  return changes;
}

std::unique_ptr<StandbyCopy> StandbyCopies::Take(int32_t partition) {
  auto it = copies_.find(partition);
  if (it == copies_.end()) return nullptr;
  std::unique_ptr<StandbyCopy> copy = std::move(it->second);
  copies_.erase(it);
  return copy;
}

}  // namespace idem::kafka
