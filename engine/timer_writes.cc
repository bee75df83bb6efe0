#include "engine/timer_writes.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/absl_view.h"
#include "engine/coding.h"
#include "engine/status_util.h"
#include "engine/timer_record.h"

namespace idem {

void TimerWrites::PutQueued(std::string key, std::string payload) {
  queue_.insert_or_assign(std::move(key), std::move(payload));
}

void TimerWrites::DeleteQueued(std::string key) {
  queue_.insert_or_assign(std::move(key), std::nullopt);
}

void TimerWrites::PutDead(std::string key, std::string value) {
  dead_.emplace_back(std::move(key), std::move(value));
}

void TimerWrites::AdvanceStreamTime(std::string_view partition_key,
                                    int64_t micros) {
  // Looked up first: a batch's messages mostly advance one partition, whose
  // key then need not be copied again.
  if (auto it = stream_times_.find(AbslView(partition_key));
      it != stream_times_.end()) {
    it->second = std::max(it->second, micros);
    return;
  }
  stream_times_.emplace(std::string(partition_key), micros);
}

int64_t TimerWrites::StreamTime(std::string_view partition_key) const {
  auto it = stream_times_.find(AbslView(partition_key));
  return it == stream_times_.end() ? kNoStreamTime : it->second;
}

void TimerWrites::NoteEventTimer(std::string_view partition_key,
                                 int64_t fire_at_micros) {
  event_timers_.emplace_back(std::string(partition_key), fire_at_micros);
}

void TimerWrites::Absorb(TimerWrites&& newer) {
  index_.Absorb(std::move(newer.index_));
  for (auto& [key, payload] : newer.queue_) {
    queue_.insert_or_assign(key, std::move(payload));
  }
  for (auto& dead : newer.dead_) dead_.push_back(std::move(dead));
  for (const auto& [partition, micros] : newer.stream_times_) {
    AdvanceStreamTime(partition, micros);
  }
  for (auto& timer : newer.event_timers_) {
    event_timers_.push_back(std::move(timer));
  }
  newer = TimerWrites();
}

bool TimerWrites::empty() const {
  return index_.empty() && queue_.empty() && dead_.empty() &&
         stream_times_.empty();
}

bool TimerWrites::Stale(const StreamTimes& stream_times,
                        bool event_timers) const {
  for (const auto& [partition, fire_at] : event_timers_) {
    std::optional<int64_t> latest = stream_times.Latest(partition);
    if (!latest.has_value() || (event_timers && fire_at <= *latest)) {
      return true;
    }
  }
  for (const auto& [partition, micros] : stream_times_) {
    if (!stream_times.Latest(partition).has_value()) return true;
  }
  return false;
}

absl::Status TimerWrites::Build(rocksdb::ColumnFamilyHandle* family,
                                StreamTimes& stream_times,
                                rocksdb::WriteBatch& batch) const {
  if (empty()) return absl::OkStatus();
  if (family == nullptr) {
    return absl::InternalError("timer writes, but the store has no timers");
  }
  rocksdb::Status s;
  for (const auto& [key, payload] : queue_) {
    s = payload.has_value() ? batch.Put(family, key, *payload)
                            : batch.Delete(family, key);
    if (!s.ok()) return FromRocksStatus(s, "building the commit");
  }
  for (const auto& [key, write] : index_.points()) {
    s = write.kind == StateWrite::Kind::kDelete
            ? batch.Delete(family, key)
            : batch.Put(family, key, write.value);
    if (!s.ok()) return FromRocksStatus(s, "building the commit");
  }
  for (const auto& [key, value] : dead_) {
    s = batch.Put(family, key, value);
    if (!s.ok()) return FromRocksStatus(s, "building the commit");
  }
  for (const auto& [partition, micros] : stream_times_) {
    std::optional<int64_t> latest = stream_times.Latest(partition);
    if (latest.has_value() && *latest >= micros) continue;
    s = batch.Put(family, StreamTimeKey(partition), EncodeStreamTime(micros));
    if (!s.ok()) return FromRocksStatus(s, "building the commit");
    stream_times.Advance(partition, micros);
  }
  return absl::OkStatus();
}

std::vector<std::string> TimerWrites::QueuedPuts() const {
  std::vector<std::string> keys;
  for (const auto& [key, payload] : queue_) {
    if (payload.has_value()) keys.push_back(key);
  }
  return keys;
}

absl::StatusOr<int64_t> StreamTimes::Load(rocksdb::DB* db,
                                          rocksdb::ColumnFamilyHandle* family,
                                          std::string_view partition_key) {
  if (std::optional<int64_t> latest = Latest(partition_key)) return *latest;
  int64_t stored = kNoStreamTime;
  if (family != nullptr) {
    std::string value;
    rocksdb::Status s = db->Get(rocksdb::ReadOptions(), family,
                                StreamTimeKey(partition_key), &value);
    if (!s.ok() && !s.IsNotFound()) {
      return FromRocksStatus(s, "reading a stream time");
    }
    if (s.ok()) {
      std::optional<int64_t> decoded = DecodeStreamTime(value);
      if (!decoded.has_value()) {
        return absl::DataLossError(absl::StrCat(
            "undecodable stored stream time (", value.size(), " bytes)"));
      }
      stored = *decoded;
    }
  }
  absl::MutexLock lock(&mu_);
  // A commit queued meanwhile may have advanced it further.
  auto [it, inserted] = times_.try_emplace(std::string(partition_key), stored);
  if (!inserted) it->second = std::max(it->second, stored);
  return it->second;
}

std::optional<int64_t> StreamTimes::Latest(
    std::string_view partition_key) const {
  absl::MutexLock lock(&mu_);
  auto it = times_.find(AbslView(partition_key));
  if (it == times_.end()) return std::nullopt;
  return it->second;
}

void StreamTimes::Advance(std::string_view partition_key, int64_t micros) {
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = times_.try_emplace(std::string(partition_key), micros);
  if (!inserted) it->second = std::max(it->second, micros);
}

void StreamTimes::Forget(std::string_view partition_key) {
  absl::MutexLock lock(&mu_);
  times_.erase(AbslView(partition_key));
}

void StreamTimes::Clear() {
  absl::MutexLock lock(&mu_);
  times_.clear();
}

std::string_view TimerCursors::QueueStartOf(std::string_view key) {
  // 'Q', the source's length (2 bytes), the source, the partition (4), the
  // domain (1).
  if (key.size() < 3) return key;
  const size_t source_bytes =
      (static_cast<uint8_t>(key[1]) << 8) | static_cast<uint8_t>(key[2]);
  return key.substr(0, std::min(key.size(), 1 + 2 + source_bytes + 4 + 1));
}

TimerCursors::Cursor TimerCursors::Get(const std::string& queue_start) const {
  absl::MutexLock lock(&mu_);
  auto it = cursors_.find(queue_start);
  if (it == cursors_.end()) return Cursor{queue_start, epochs_};
  return it->second;
}

void TimerCursors::Advance(const std::string& queue_start, const Cursor& cursor,
                           std::string_view key) {
  std::string next(key);
  next.push_back('\0');  // the smallest key after `key`
  absl::MutexLock lock(&mu_);
  auto it = cursors_.find(queue_start);
  const uint64_t epoch = it == cursors_.end() ? cursor.epoch : it->second.epoch;
  if (epoch != cursor.epoch) return;  // a timer was put meanwhile
  if (it == cursors_.end()) {
    // No Lower since the read (it makes an entry).
    cursors_.emplace(queue_start, Cursor{std::move(next), cursor.epoch});
    return;
  }
  if (next > it->second.key) it->second.key = std::move(next);
}

void TimerCursors::Lower(std::string_view key) {
  const std::string_view start = QueueStartOf(key);
  absl::MutexLock lock(&mu_);
  auto it = cursors_.find(AbslView(start));
  if (it == cursors_.end()) {
    // No cursor: seeks start at the beginning, below `key` already. Mark the
    // queue so a fire that read before this does not advance.
    cursors_.emplace(std::string(start), Cursor{std::string(start), ++epochs_});
    return;
  }
  if (key < it->second.key) it->second = Cursor{std::string(key), ++epochs_};
}

void TimerCursors::Clear() {
  absl::MutexLock lock(&mu_);
  cursors_.clear();
}

}  // namespace idem
