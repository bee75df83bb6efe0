#include "idem/brokers/delivery_loop.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "brokers/batch_run.h"
#include "brokers/dead_letters.h"

namespace idem::brokers {
namespace {

// How often a paused loop looks at the outbox again.
constexpr absl::Duration kOutboxRoomPoll = absl::Milliseconds(5);

// Measures the wall time of a scope into `*total`.
class Timed {
 public:
  explicit Timed(absl::Duration* total) : total_(total), start_(absl::Now()) {}
  ~Timed() { *total_ += absl::Now() - start_; }

 private:
  absl::Duration* total_;
  absl::Time start_;
};

}  // namespace

bool RefusedForGood(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
      return true;
    default:
      return false;
  }
}

std::optional<std::string_view> Delivery::Header(std::string_view name) const {
  std::optional<std::string_view> value;
  for (const auto& [header, header_value] : headers) {
    if (header == name) value = header_value;
  }
  return value;
}

absl::Status DeliveryLoop::Validate(const LoopOptions& options) {
  auto invalid = [](std::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LoopOptions::", absl::string_view(what.data(), what.size())));
  };
  if (options.max_batch < 1) return invalid("max_batch must be >= 1");
  if (options.receive_timeout < absl::ZeroDuration() ||
      options.receive_timeout == absl::InfiniteDuration()) {
    return invalid("receive_timeout must be >= 0 and finite");
  }
  if (options.ttl < absl::ZeroDuration() ||
      options.ttl == absl::InfiniteDuration()) {
    return invalid("ttl must be >= 0 and finite");
  }
  if (options.max_attempts < 1) return invalid("max_attempts must be >= 1");
  if (options.retry_backoff < absl::ZeroDuration() ||
      options.retry_backoff == absl::InfiniteDuration()) {
    return invalid("retry_backoff must be >= 0 and finite");
  }
  if (options.dead_letter_destination.size() > kMaxSourceBytes) {
    return invalid("dead_letter_destination is longer than kMaxSourceBytes");
  }
  if (options.relay_batch < 1) return invalid("relay_batch must be >= 1");
  if (options.max_outbox_pending < 0) {
    return invalid("max_outbox_pending must be >= 0");
  }
  return absl::OkStatus();
}

DeliveryLoop::DeliveryLoop(Engine* engine, Broker* broker, LoopOptions options,
                           LoopHooks hooks)
    : engine_(engine),
      broker_(broker),
      options_(std::move(options)),
      hooks_(hooks) {
  if (options_.timer_handler) {
    timer_pump_ =
        std::make_unique<TimerPump>(engine_, options_.timer_handler,
                                    static_cast<size_t>(options_.max_batch));
  }
}

absl::StatusOr<BatchReport> DeliveryLoop::PollBatch(Handler handler) {
  BatchReport report;
  absl::Duration engine_time;
  absl::Duration broker_time;
  absl::Duration fetch_time;
  absl::Duration paused_time;
  absl::StatusOr<std::vector<Delivery>> batch;
  absl::Status status = [&]() -> absl::Status {
    // Step 0: backpressure: no fetch while the outbox is over its bound.
    absl::StatusOr<bool> room;
    {
      Timed timed(&paused_time);
      room = WaitForOutboxRoom(report);
    }
    if (!room.ok()) return room.status();
    if (!*room) return absl::OkStatus();
    paused_time = absl::ZeroDuration();  // room: not paused
    // Step 1: receive.
    {
      Timed timed(&fetch_time);
      batch = broker_->Receive(options_.max_batch, options_.receive_timeout);
    }
    broker_time += fetch_time;
    if (!batch.ok()) return BrokerError(batch.status());
    report.received = static_cast<int64_t>(batch->size());
    if (hooks_.ack_on_receive && !batch->empty()) {
      Timed timed(&broker_time);
      if (absl::Status s = broker_->Ack(*batch); !s.ok()) return BrokerError(s);
    }
    // Step 2: process, retry, dead-letter, wait until durable.
    absl::Status run;
    if (!batch->empty()) {
      Timed timed(&engine_time);
      run = RunBatch(*engine_, *broker_, *batch, options_, hooks_, handler,
                     report);
    }
    if (!run.ok()) {
      // Undecided: give everything back; what was committed comes back as
      // duplicates.
      Timed timed(&broker_time);
      if (absl::Status s = broker_->Nack(*batch); s.ok()) {
        report.nacked = report.received;
      } else {
        BrokerError(s).IgnoreError();  // counted; the run's error matters
      }
      return run;
    }
    // Step 3: acknowledge exactly the durable outcomes: all of them now.
    if (!batch->empty() && !hooks_.skip_acks && !hooks_.ack_on_receive) {
      Timed timed(&broker_time);
      if (absl::Status s = broker_->Ack(*batch); !s.ok()) return BrokerError(s);
      report.acked = report.received;
    }
    // Step 4: fire the due timers, whose emits go with the batch's.
    if (timer_pump_ != nullptr) {
      for (const Delivery& delivery : *batch) {
        if (!delivery.source.empty()) {
          timer_partitions_.emplace(delivery.source, delivery.partition);
        }
      }
      Timed timed(&engine_time);
      FireTimers(report);
    }
    // Step 5: publish what the batch (or an earlier one) emitted; the
    // batch is handled whatever the relay does.
    if (options_.relay_outbox) report.outbox_error = Relay(report);
    return absl::OkStatus();
  }();
  // Step 6: the batch's memory goes back to the broker.
  if (batch.ok()) broker_->Recycle(std::move(*batch));
  Count(report, engine_time, broker_time, fetch_time);
  if (report.paused) {
    absl::MutexLock lock(&mu_);
    ++stats_.paused_polls;
    stats_.paused_time += paused_time;
  }
  if (!status.ok()) return status;
  return report;
}

absl::StatusOr<bool> DeliveryLoop::WaitForOutboxRoom(BatchReport& report) {
  const int64_t bound = options_.max_outbox_pending;
  if (bound == 0) return true;
  auto room = [&]() -> absl::StatusOr<bool> {
    absl::StatusOr<uint64_t> pending = engine_->OutboxPending();
    if (!pending.ok()) return pending.status();
    return *pending <= static_cast<uint64_t>(bound);
  };
  absl::StatusOr<bool> has_room = room();
  if (!has_room.ok() || *has_room) {
    paused_ = false;
    return has_room;
  }
  if (!paused_) {
    paused_ = true;
    absl::MutexLock lock(&mu_);
    ++stats_.backpressure_pauses;
  }
  // Drain it ourselves, or wait for another relay to.
  if (options_.relay_outbox) report.outbox_error = Relay(report);
  const absl::Time deadline = absl::Now() + options_.receive_timeout;
  while (true) {
    has_room = room();
    if (!has_room.ok()) return has_room;
    if (*has_room) {
      paused_ = false;
      return true;
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    absl::SleepFor(std::min(left, kOutboxRoomPoll));
  }
  report.paused = true;
  return false;
}

absl::StatusOr<int64_t> DeliveryLoop::RelayOutbox() {
  BatchReport report;
  absl::Status status = Relay(report);
  Count(report, absl::ZeroDuration(), absl::ZeroDuration());
  if (!status.ok()) return status;
  return report.outbox_published;
}

absl::Status DeliveryLoop::Relay(BatchReport& report) {
  while (true) {
    absl::StatusOr<std::vector<OutboxEntry>> entries =
        engine_->ReadOutbox(static_cast<size_t>(options_.relay_batch));
    if (!entries.ok()) return entries.status();
    if (entries->empty()) return absl::OkStatus();
    uint64_t last = 0;
    absl::Status publish_error;
    for (const OutboxEntry& entry : *entries) {
      publish_error = PublishOrDeadLetter(entry, report);
      if (!publish_error.ok()) break;
      last = entry.position;
    }
    if (last > 0) {
      if (absl::Status s = engine_->AckOutbox(last); !s.ok()) return s;
    }
    if (!publish_error.ok()) return publish_error;
  }
}

absl::Status DeliveryLoop::PublishOrDeadLetter(const OutboxEntry& entry,
                                               BatchReport& report) {
  absl::Status refusal = broker_->CheckDestination(entry.destination);
  if (refusal.ok()) {
    refusal = broker_->Publish(entry);
    if (refusal.ok()) {
      ++report.outbox_published;
      return absl::OkStatus();
    }
    BrokerError(refusal).IgnoreError();  // counted; handled below
    if (!RefusedForGood(refusal)) return refusal;
  }
  if (hooks_.hold_refused_entries) return refusal;
  const std::string& destination = options_.dead_letter_destination;
  auto not_dead_lettered = [&](std::string_view why) {
    return absl::FailedPreconditionError(absl::StrCat(
        "outbox entry ", entry.position, " (message ID ", entry.message_id,
        ") was refused for good by ", entry.destination, ": ",
        refusal.ToString(), "; ", absl::string_view(why.data(), why.size())));
  };
  if (destination.empty()) {
    return not_dead_lettered(
        "it stays in the outbox: set LoopOptions::dead_letter_destination to "
        "dead-letter such entries");
  }
  // An entry for the dead-letter destination is a dead letter already: only
  // its smaller versions are left to try.
  const bool is_dead_letter = entry.destination == destination;
  const OutboxEntry dead =
      is_dead_letter ? entry : DeadLetterOfRefused(entry, refusal, destination);
  absl::Status last = refusal;
  for (int level = is_dead_letter ? 1 : 0; level <= kShrinkLevels; ++level) {
    last = broker_->Publish(level == 0 ? dead : Shrunk(dead, level));
    if (last.ok()) {
      ++report.outbox_dead_lettered;
      return absl::OkStatus();
    }
    BrokerError(last).IgnoreError();  // counted
    if (!RefusedForGood(last)) return last;
  }
  return not_dead_lettered(
      absl::StrCat("so was its dead letter, even without its headers and "
                   "value: ",
                   last.ToString()));
}

void DeliveryLoop::FireTimers(BatchReport& report) {
  for (const auto& [source, partition] : timer_partitions_) {
    TimerPump::Pumped pumped =
        timer_pump_->Pump(source, partition, absl::Now());
    report.timers_fired += pumped.fired;
    report.timer_failures += pumped.failures;
    if (pumped.fired > 0)
      report.timer_lag = std::max(report.timer_lag, pumped.lag);
  }
}

LoopStats DeliveryLoop::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

absl::Status DeliveryLoop::BrokerError(absl::Status status) {
  absl::MutexLock lock(&mu_);
  ++stats_.broker_errors;
  stats_.last_broker_error = status.ToString();
  return status;
}

void DeliveryLoop::Count(const BatchReport& report, absl::Duration engine_time,
                         absl::Duration broker_time,
                         absl::Duration fetch_time) {
  const int64_t reconnects = broker_->Reconnects();
  const int64_t competing = broker_->CompetingConsumers();
  absl::MutexLock lock(&mu_);
  stats_.competing_consumers = competing;
  if (report.received > 0) {
    ++stats_.fetches;
    stats_.fetch_time += fetch_time;
  }
  stats_.reconnects = reconnects;
  if (report.received > 0) ++stats_.batches;
  stats_.received += report.received;
  stats_.processed += report.processed;
  stats_.duplicates += report.duplicates;
  stats_.dead_lettered += report.dead_lettered;
  stats_.retries += report.retries;
  stats_.non_retriable += report.non_retriable;
  stats_.acked += report.acked;
  stats_.nacked += report.nacked;
  stats_.outbox_published += report.outbox_published;
  stats_.outbox_dead_lettered += report.outbox_dead_lettered;
  stats_.timers_fired += report.timers_fired;
  stats_.timer_failures += report.timer_failures;
  stats_.timer_lag_sum += report.timer_lag;
  stats_.engine_time += engine_time;
  stats_.broker_time += broker_time;
}

}  // namespace idem::brokers
