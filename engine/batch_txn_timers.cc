// BatchTxn's timers and stream time (engine/timer_writes.h): a timer's index
// entry is read through the same layers as a state key, and noted for
// validation in the timers' own StateVersions.

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/absl_view.h"
#include "engine/batch_txn.h"
#include "engine/coding.h"
#include "engine/status_util.h"

namespace idem {

const std::string& BatchTxn::TimerPartition() const {
  if (!timers_->partition_key.empty()) return timers_->partition_key;
  if (timer_partition_.empty() && !timers_->source.empty()) {
    timer_partition_ = TimerPartitionKey(timers_->source, timers_->partition);
  }
  return timer_partition_;
}

absl::Status BatchTxn::CheckTimers() const {
  if (timers_ == nullptr || timers_->family == nullptr) {
    return absl::FailedPreconditionError(
        "timers need a store opened writable by a build that has them");
  }
  if (TimerPartition().empty()) {
    return absl::FailedPreconditionError(
        "timers belong to a (source, partition): this message has no source");
  }
  return absl::OkStatus();
}

absl::Time BatchTxn::stream_time() const {
  if (timers_ == nullptr || TimerPartition().empty()) {
    return absl::InfinitePast();
  }
  int64_t micros = std::max(timers_->event_micros,
                            timers_->batch->StreamTime(TimerPartition()));
  if (timers_->family != nullptr) {
    absl::StatusOr<int64_t> base =
        timers_->stream_times->Load(db_, timers_->family, TimerPartition());
    if (!base.ok()) {
      // Kept: the commit fails on it (read_error) whatever the handler does.
      NoteReadError(base.status()).IgnoreError();
    } else {
      micros = std::max(micros, *base);
    }
  }
  return micros == kNoStreamTime ? absl::InfinitePast()
                                 : absl::FromUnixMicros(micros);
}

absl::StatusOr<std::optional<TimerIndex>> BatchTxn::ReadTimer(
    std::string_view timer_key) {
  if (absl::Status s = CheckTimers(); !s.ok()) return s;
  const std::string key = TimerIndexKey(TimerPartition(), timer_key);
  LayeredRead read;
  std::optional<std::string> value;
  if (read.Take(timer_writes_.index().Find(key)) ||
      read.Take(timers_->batch->index().Find(key))) {
    value = read.value();
  } else {
    StateVersions::Read in_flight =
        timers_->versions->ReadKey(key, *timers_->reads);
    timers_->reads->Add(key, in_flight.version);
    if (in_flight.in_flight.has_value()) {
      value = *in_flight.in_flight;
    } else {
      std::string stored;
      rocksdb::Status s =
          db_->Get(rocksdb::ReadOptions(), timers_->family, key, &stored);
      if (!s.ok() && !s.IsNotFound()) {
        return NoteReadError(FromRocksStatus(s, "reading a timer"));
      }
      if (s.ok()) value = std::move(stored);
    }
  }
  if (!value.has_value()) return std::nullopt;
  std::optional<TimerIndex> index = DecodeTimerIndex(*value);
  if (!index.has_value()) {
    return NoteReadError(absl::DataLossError(
        absl::StrCat("undecodable timer index entry of timer key \"",
                     AbslView(timer_key), "\"")));
  }
  return index;
}

absl::Status BatchTxn::SetTimer(std::string_view timer_key, TimeDomain domain,
                                absl::Time fire_at, std::string_view payload) {
  absl::Status invalid;
  if (!ValidTimeDomain(domain)) {
    invalid = absl::InvalidArgumentError(absl::StrCat(
        "SetTimer: domain ", static_cast<int>(domain), " is not a TimeDomain"));
  } else if (fire_at == absl::InfinitePast() ||
             fire_at == absl::InfiniteFuture()) {
    invalid = absl::InvalidArgumentError("SetTimer: fire_at must be finite");
  }
  if (!invalid.ok()) {
    if (emit_error_.ok()) emit_error_ = invalid;
    return invalid;
  }
  if (absl::Status s = CheckTimers(); !s.ok()) return s;
  const int64_t fire_micros = absl::ToUnixMicros(fire_at);
  if (domain == TimeDomain::kEvent) {
    const absl::Time now = stream_time();
    if (!read_error_.ok()) return read_error_;
    if (now != absl::InfinitePast() && fire_at <= now) {
      return absl::OutOfRangeError(
          absl::StrCat("SetTimer: event time ", absl::FormatTime(fire_at),
                       " is not after the partition's stream time ",
                       absl::FormatTime(now), " (that time has passed)"));
    }
  }
  absl::StatusOr<std::optional<TimerIndex>> current = ReadTimer(timer_key);
  if (!current.ok()) return current.status();
  const std::string& partition = TimerPartition();
  if (current->has_value()) {
    timer_writes_.DeleteQueued(TimerQueueKey(
        partition, (*current)->domain, (*current)->fire_at_micros, timer_key));
  }
  timer_writes_.PutQueued(
      TimerQueueKey(partition, domain, fire_micros, timer_key),
      std::string(payload));
  timer_writes_.index().Put(TimerIndexKey(partition, timer_key),
                            EncodeTimerIndex(domain, fire_micros));
  if (domain == TimeDomain::kEvent) {
    timer_writes_.NoteEventTimer(partition, fire_micros);
  }
  return absl::OkStatus();
}

absl::Status BatchTxn::CancelTimer(std::string_view timer_key) {
  if (absl::Status s = CheckTimers(); !s.ok()) return s;
  absl::StatusOr<std::optional<TimerIndex>> current = ReadTimer(timer_key);
  if (!current.ok()) return current.status();
  if (!current->has_value()) return absl::OkStatus();
  const std::string& partition = TimerPartition();
  timer_writes_.DeleteQueued(TimerQueueKey(
      partition, (*current)->domain, (*current)->fire_at_micros, timer_key));
  timer_writes_.index().Delete(TimerIndexKey(partition, timer_key));
  return absl::OkStatus();
}

}  // namespace idem
