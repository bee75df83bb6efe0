// idem::TimerPump fires the due durable timers (idem/timers.h) of the
// partitions a consumer loop handles: after each batch, the event-time
// timers of each partition whose stream time moved since its last pump,
// and on every call the processing-time ones, so that timers fire on idle
// partitions too. The Kafka consumer (ConsumerOptions::timer_handler) and
// the broker delivery loop (LoopOptions::timer_handler) use it.
//
// Not thread-safe: one loop's thread uses it. The engine is borrowed and
// must outlive it.

#ifndef IDEM_TIMER_PUMP_H_
#define IDEM_TIMER_PUMP_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "idem/engine.h"
#include "idem/timers.h"
#include "idem/txn.h"

namespace idem {

class TimerPump {
 public:
  using Handler = std::function<absl::Status(const TimerFire&, Txn&)>;

  // What Pump did.
  struct Pumped {
    // Timers fired (Engine::FireTimers' counts), and calls that failed (a
    // handler's transient failure or a storage error: the timers stay and
    // fire on a later pump).
    int64_t fired = 0;
    int64_t failures = 0;
    // The largest lag of a timer fired: its domain's time when it fired
    // minus its fire_at (zero when none fired).
    absl::Duration lag;
  };

  // Up to `max_per_call` timers per partition and domain per Pump.
  // REQUIRES: max_per_call >= 1.
  TimerPump(Engine* engine, Handler handler, size_t max_per_call)
      : engine_(engine),
        handler_(std::move(handler)),
        max_per_call_(max_per_call) {}

  // Fires the due timers of (source, partition): the event-time ones if
  // its stream time moved since the last Pump of it, the processing-time
  // ones always (`now`, the loop's clock, measures their lag).
  Pumped Pump(std::string_view source, int32_t partition, absl::Time now);

  // Forgets (source, partition) (revoked): its next Pump fires its
  // event-time timers whatever its stream time.
  void Forget(std::string_view source, int32_t partition);

 private:
  Engine* const engine_;
  const Handler handler_;
  const size_t max_per_call_;
  // Each partition's stream time when its event-time timers last fired.
  absl::flat_hash_map<std::pair<std::string, int32_t>, absl::Time> fired_at_;
};

}  // namespace idem

#endif  // IDEM_TIMER_PUMP_H_
