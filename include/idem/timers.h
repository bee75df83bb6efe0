// Durable timers (docs/state.md, "Time and timers"): the time domains a
// timer fires in, what the engine hands a timer's handler when it fires,
// and the handler's type. A handler sets a timer with Txn::SetTimer and the
// timer fires through Engine::FireTimers, its handler's writes and emits
// committed in the same write as the timer's deletion. Plain value types:
// not thread-safe.

#ifndef IDEM_TIMERS_H_
#define IDEM_TIMERS_H_

#include <cstdint>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/time/time.h"

namespace idem {

class Txn;

// The clock a timer follows.
enum class TimeDomain : uint8_t {
  // The partition's stream time (Engine::StreamTime): the timer fires once
  // the partition's committed messages carry an event time at or past it.
  kEvent = 0,
  // The engine's clock (Options::clock): the timer fires once that clock
  // reaches it, also on the first FireTimers call after a restart if it
  // came due while the engine was down.
  kProcessing = 1,
};

// A timer as it fires (or as Engine::NextTimer finds it). Owns its bytes.
struct TimerFire {
  // The partition the timer belongs to: that of the message whose handler
  // set it.
  std::string source;
  int32_t partition = 0;
  TimeDomain domain = TimeDomain::kEvent;
  // The key the handler gave Txn::SetTimer: one timer per key per
  // partition.
  std::string timer_key;
  // When it was due, in its domain's time.
  absl::Time fire_at = absl::InfinitePast();
  // The bytes the handler gave Txn::SetTimer.
  std::string payload;
};

// User code run once per timer that fires (Engine::FireTimers). Return OK to
// commit the Txn's writes and emits with the timer's deletion; a transient
// failure (any other status, or a thrown exception) discards them and keeps
// the timer, which fires again on a later call; a permanent failure
// (PermanentError, idem/message.h) discards them too but deletes the timer
// and records it as dead-lettered (Stats::timers_dead_lettered). Like a
// Handler it may run more than once for one fire (a concurrent commit
// changed what it read, or the timer): keep side effects in the Txn.
using TimerHandler = absl::FunctionRef<absl::Status(const TimerFire&, Txn&)>;

// An event time further than this ahead of the engine's clock when its
// message commits does not advance the partition's stream time: the handler
// still sees Message::event_time as it is, but the message counts for stream
// time as one without an event time, so a producer whose clock runs ahead
// cannot close every window at once (docs/state.md).
inline constexpr absl::Duration kMaxEventTimeAhead = absl::Minutes(15);

}  // namespace idem

#endif  // IDEM_TIMERS_H_
