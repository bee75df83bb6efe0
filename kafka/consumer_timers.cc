// ConsumerImpl::FireDueTimers: the durable timers of the assigned
// partitions (ConsumerOptions::timer_handler), fired through a TimerPump on
// the polling thread after each batch, before the outbox is published. A
// failed fire never fails the batch: its timer stays, and a later call
// fires it.

#include "absl/time/clock.h"
#include "kafka/consumer_impl.h"

namespace idem::kafka {

void ConsumerImpl::FireDueTimers() {
  const absl::Time engine_before = absl::Now();
  bool fired_any = false;
  absl::Duration lag = absl::ZeroDuration();
  for (const TopicPartition& partition : assignment_) {
    if (restoring_.contains(partition)) continue;
    TimerPump::Pumped pumped =
        timer_pump_->Pump(partition.first, partition.second, absl::Now());
    stats_.timers_fired += pumped.fired;
    stats_.timer_failures += pumped.failures;
    if (pumped.fired > 0) {
      fired_any = true;
      lag = std::max(lag, pumped.lag);
    }
  }
  if (fired_any) stats_.timer_lag = lag;
  stats_.engine_time += absl::Now() - engine_before;
}

}  // namespace idem::kafka
