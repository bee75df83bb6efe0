// How a crash-test worker fires the timers of a workload whose handler sets
// them (Workload::fires_timers): as a consumer's TimerPump does, after each
// batch, for the partition it delivered to. Free functions; thread-safe as
// the engine is.

#ifndef IDEM_CRASH_FIRE_TIMERS_H_
#define IDEM_CRASH_FIRE_TIMERS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "idem/crash/harness.h"
#include "idem/engine.h"

namespace idem::crash {

// Fires every due event-time timer of the stream's `partition` through
// `workload.FireTimer` (Engine::FireTimers, repeated while a call fires as
// many as it may). Returns FireTimers' error, naming the partition.
absl::Status FireDue(Engine& engine, const Workload& workload,
                     int32_t partition);

// Checks, after FireDue with nothing firing or delivering meanwhile, that no
// event-time timer of `partition` is left due (kInternal naming it), or
// returns the error reading it.
absl::Status CheckNoneDue(Engine& engine, int32_t partition);

}  // namespace idem::crash

#endif  // IDEM_CRASH_FIRE_TIMERS_H_
