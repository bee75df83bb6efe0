#include "engine/commit_time_watermark.h"

#include <algorithm>

namespace idem {

CommitTimeWatermark::CommitTimeWatermark(EngineClock* clock,
                                         bool ignore_in_flight)
    : clock_(clock), ignore_in_flight_(ignore_in_flight) {}

absl::StatusOr<int64_t> CommitTimeWatermark::InFlight::Start() {
  CommitTimeWatermark& w = *watermark_;
  PlainMutexLock lock(&w.mu_);
  absl::StatusOr<int64_t> now = w.clock_->NowMicros();
  if (!now.ok()) return now.status();
  time_ = std::max(*now, w.floor_);
  registered_ = true;
  prev_ = w.last_;
  next_ = nullptr;
  (w.last_ != nullptr ? w.last_->next_ : w.first_) = this;
  w.last_ = this;
  ++w.count_;
  return time_;
}

void CommitTimeWatermark::InFlight::End() {
  // Only this InFlight's thread writes it.
  if (!registered_) return;
  CommitTimeWatermark& w = *watermark_;
  PlainMutexLock lock(&w.mu_);
  (prev_ != nullptr ? prev_->next_ : w.first_) = next_;
  (next_ != nullptr ? next_->prev_ : w.last_) = prev_;
  prev_ = next_ = nullptr;
  registered_ = false;
  --w.count_;
}

absl::StatusOr<int64_t> CommitTimeWatermark::Horizon() {
  PlainMutexLock lock(&mu_);
  absl::StatusOr<int64_t> now = clock_->NowMicros();
  if (!now.ok()) return now.status();
  int64_t horizon = *now;
  if (!ignore_in_flight_) {
    // The first is the oldest while the engine time does not go back; all
    // are read in case it did.
    for (const InFlight* c = first_; c != nullptr; c = c->next_) {
      horizon = std::min(horizon, c->time_);
    }
  }
  floor_ = std::max(floor_, horizon);
  return horizon;
}

size_t CommitTimeWatermark::in_flight() const {
  PlainMutexLock lock(&mu_);
  return count_;
}

}  // namespace idem
