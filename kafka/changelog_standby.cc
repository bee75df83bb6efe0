#include "kafka/changelog_standby.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"

namespace idem::kafka {

absl::Status StandbyCopies::Read(const std::string& topic, int32_t partition,
                                 StandbyCopy& copy, absl::Duration timeout,
                                 CopyReadEnd end_at) {
  absl::StatusOr<bool> read = ReadStep(topic, partition, copy, /*limit=*/0,
                                       timeout, /*read=*/nullptr, end_at);
  return read.ok() ? absl::OkStatus() : read.status();
}

absl::StatusOr<bool> StandbyCopies::ReadStep(
    const std::string& topic, int32_t partition, StandbyCopy& copy,
    int64_t limit, absl::Duration timeout, int64_t* read, CopyReadEnd end_at) {
  const int64_t chunk = hooks_->restore_chunk_records > 0
                            ? hooks_->restore_chunk_records
                            : kChunkRecords;
  copy.builder.set_epochs_end(!hooks_->changelog_restore_ignores_epochs);
  int64_t visited = 0;
  absl::Cleanup report_read = [&] {
    if (read != nullptr) *read = visited;
  };
  auto count = [&]() -> absl::Status {
    ++visited;
    if (++copy.unapplied < chunk) return absl::OkStatus();
    if (absl::Status s = Apply(topic, partition, copy, std::nullopt); !s.ok()) {
      return s;
    }
    if (hooks_->restore_step && copy.applied) hooks_->restore_step("chunk");
    return absl::OkStatus();
  };
  auto read_some = [&](const std::string& from_topic, int64_t from, bool whole,
                       int64_t most,
                       absl::FunctionRef<absl::Status(const LogRecord&)> visit)
      -> absl::StatusOr<ReadProgress> {
    absl::StatusOr<ReadProgress> progress =
        end_at == CopyReadEnd::kStable
            ? reader_->ReadSomeToStable(from_topic, partition, from, whole,
                                        most, timeout, visit)
            : reader_->ReadSome(from_topic, partition, from, whole, most,
                                timeout, visit);
    if (progress.ok() && progress->at_end && hooks_->standby_takes_log_end &&
        end_at == CopyReadEnd::kStable) {
      progress->next = std::max(progress->next, progress->log_end);
    }
    return progress;
  };
  // The changelog must be whole from where the copy stands (a compacted
  // topic keeps every key's last record; retention would drop some), but
  // the dedupe topic's records older than the window expire by design.
  absl::StatusOr<ReadProgress> changelog = read_some(
      target_->changelog_topic, copy.changelog_next,
      /*whole=*/!hooks_->changelog_restore_reads_truncated, limit,
      [&](const LogRecord& r) {
        if (absl::Status s = copy.builder.AddChangelogRecord(r); !s.ok()) {
          return s;
        }
        return count();
      });
  if (!changelog.ok()) return changelog.status();
  copy.changelog_next = changelog->next;
  if (!changelog->at_end) return false;
  copy.changelog_end = changelog->high;
  if (limit > 0 && visited == limit) return false;
  absl::StatusOr<ReadProgress> dedupe = read_some(
      target_->dedupe_topic, copy.dedupe_next, /*whole=*/false,
      limit > 0 ? limit - visited : 0, [&](const LogRecord& r) {
        if (absl::Status s = copy.builder.AddDedupeRecord(r); !s.ok()) {
          return s;
        }
        return count();
      });
  if (!dedupe.ok()) return dedupe.status();
  copy.dedupe_next = dedupe->next;
  return dedupe->at_end;
}

std::vector<TimerFire> StandbyCopies::SetTimers(
    const std::string& topic, int32_t partition,
    const absl::btree_map<std::string, std::optional<ChangelogTimer>>& timers) {
  std::vector<TimerFire> set;
  for (const auto& [key, timer] : timers) {
    if (!timer.has_value()) continue;
    set.push_back(TimerFire{.source = topic,
                            .partition = partition,
                            .domain = timer->domain,
                            .timer_key = key,
                            .fire_at = timer->fire_at,
                            .payload = timer->payload});
  }
  std::sort(set.begin(), set.end(), [](const TimerFire& a, const TimerFire& b) {
    return std::tie(a.domain, a.fire_at, a.timer_key) <
           std::tie(b.domain, b.fire_at, b.timer_key);
  });
  return set;
}

absl::Status StandbyCopies::Apply(const std::string& topic, int32_t partition,
                                  StandbyCopy& copy,
                                  std::optional<int64_t> epoch) {
  copy.unapplied = 0;
  ChangelogChanges changes = copy.builder.TakeChanges(clock_->Now());
  if (hooks_->standby_without_dedupe) changes.records.clear();
  copy.records_read += changes.records_read;
  copy.bytes_read += changes.bytes_read;
  // Until the changelog holds a complete commit there is nothing to copy,
  // and the engine's copy (perhaps from before changelog mode) stays.
  if (!changes.last.has_value() && !epoch.has_value()) {
    return absl::OkStatus();
  }
  std::optional<int64_t> offset;
  if (changes.last.has_value() && changes.last->offset >= 0) {
    offset = changes.last->offset;
  }
  std::optional<std::string> epoch_value;
  if (epoch.has_value()) epoch_value = absl::StrCat(*epoch);
  if (!copy.applied) {
    // The first time: the copy replaces the engine's.
    PartitionSnapshot snapshot;
    snapshot.source = topic;
    snapshot.partition = partition;
    snapshot.offset = offset;
    if (epoch_value.has_value()) {
      snapshot.entries.emplace_back(std::string(kEpochStateKey), *epoch_value);
    }
    for (auto& [key, value] : changes.writes) {
      if (value.has_value()) snapshot.entries.emplace_back(key, *value);
    }
    snapshot.expires_at.insert(changes.expires_at.begin(),
                               changes.expires_at.end());
    snapshot.stream_time = changes.stream_time.value_or(absl::InfinitePast());
    snapshot.timers = SetTimers(topic, partition, changes.timers);
    snapshot.records = std::move(changes.records);
    // A rewinding import replaces the partition every time, also a repeat
    // of an earlier one (the partition was taken over here and given back
    // since): no epoch of this member's survives it unless `epoch` sets one.
    if (absl::Status s =
            engine_->ImportPartition(snapshot, {.allow_rewind = true});
        !s.ok()) {
      return s;
    }
    copy.writes_applied += static_cast<int64_t>(snapshot.entries.size()) -
                           (epoch_value.has_value() ? 1 : 0);
    copy.records_applied += static_cast<int64_t>(snapshot.records.size());
  } else {
    if (changes.writes.empty() && changes.records.empty() &&
        changes.timers.empty() && changes.stream_time == copy.stream_time &&
        offset == copy.applied_offset && !epoch.has_value()) {
      return absl::OkStatus();
    }
    PartitionChanges apply;
    apply.source = topic;
    apply.partition = partition;
    apply.offset = offset;
    apply.writes.assign(changes.writes.begin(), changes.writes.end());
    if (epoch_value.has_value()) {
      apply.writes.emplace_back(std::string(kEpochStateKey), epoch_value);
    }
    apply.records = std::move(changes.records);
    apply.stream_time = changes.stream_time;
    apply.expires_at.insert(changes.expires_at.begin(),
                            changes.expires_at.end());
    for (auto& [key, timer] : changes.timers) {
      std::optional<TimerFire>& fire =
          apply.timers.emplace_back(key, std::nullopt).second;
      if (timer.has_value()) {
        fire = TimerFire{.source = topic,
                         .partition = partition,
                         .domain = timer->domain,
                         .timer_key = key,
                         .fire_at = timer->fire_at,
                         .payload = std::move(timer->payload)};
      }
    }
    if (absl::Status s =
            engine_->ApplyPartitionChanges(apply, {.allow_rewind = true});
        !s.ok()) {
      return s;
    }
    copy.writes_applied += static_cast<int64_t>(changes.writes.size());
    copy.records_applied += static_cast<int64_t>(apply.records.size());
  }
  copy.applied = true;
  copy.applied_offset = offset;
  copy.stream_time = changes.stream_time;
  return absl::OkStatus();
}

absl::StatusOr<int64_t> StandbyCopies::CatchUp(const std::string& topic,
                                               int32_t partition,
                                               absl::Duration timeout) {
  std::unique_ptr<StandbyCopy>& copy = copies_[partition];
  if (copy == nullptr) copy = std::make_unique<StandbyCopy>();
  const int64_t read_before = copy->records_read;
  absl::Status status =
      Read(topic, partition, *copy, timeout, CopyReadEnd::kStable);
  if (status.ok()) status = Apply(topic, partition, *copy, std::nullopt);
  if (!status.ok()) {
    copies_.erase(partition);
    return status;
  }
  return copy->records_read - read_before;
}

std::unique_ptr<StandbyCopy> StandbyCopies::Take(int32_t partition) {
  auto it = copies_.find(partition);
  if (it == copies_.end()) return nullptr;
  std::unique_ptr<StandbyCopy> copy = std::move(it->second);
  copies_.erase(it);
  return copy;
}

}  // namespace idem::kafka
