#include "idem/timer_pump.h"

#include <algorithm>

namespace idem {

TimerPump::Pumped TimerPump::Pump(std::string_view source, int32_t partition,
                                  absl::Time now) {
  Pumped pumped;
  pumped.lag = absl::ZeroDuration();
  absl::StatusOr<absl::Time> stream = engine_->StreamTime(source, partition);
  if (!stream.ok()) {
    ++pumped.failures;
    return pumped;
  }
  absl::Time& fired_at =
      fired_at_
          .try_emplace(std::make_pair(std::string(source), partition),
                       absl::InfinitePast())
          .first->second;
  for (TimeDomain domain : {TimeDomain::kEvent, TimeDomain::kProcessing}) {
    const bool event = domain == TimeDomain::kEvent;
    if (event && (*stream == absl::InfinitePast() || *stream <= fired_at)) {
      continue;  // no batch moved it since
    }
    const absl::Time domain_now = event ? *stream : now;
    absl::StatusOr<size_t> fired = engine_->FireTimers(
        source, partition, domain, absl::InfiniteFuture(), max_per_call_,
        [&](const TimerFire& fire, Txn& txn) {
          pumped.lag = std::max(pumped.lag, domain_now - fire.fire_at);
          return handler_(fire, txn);
        });
    if (!fired.ok()) {
      ++pumped.failures;
      continue;
    }
    pumped.fired += static_cast<int64_t>(*fired);
    // Fired up to the stream time (unless max stopped it: then again).
    if (event && *fired < max_per_call_) fired_at = *stream;
  }
  return pumped;
}

void TimerPump::Forget(std::string_view source, int32_t partition) {
  fired_at_.erase(std::make_pair(std::string(source), partition));
}

}  // namespace idem
