// EngineClock is an engine's time: every read of time by the engine (the
// commit path, Seen, Forget, expiry-bucket maintenance, CompactExpired, Dump
// and the TTL compaction filter) goes through the engine's one EngineClock,
// which reads the idem::Clock from Options and
//
//   - checks its answer: a non-finite time (absl::InfiniteFuture() or
//     absl::InfinitePast()), or one outside the int64 microseconds a record
//     stores, fails the read with kFailedPrecondition;
//   - catches what the clock throws: the read fails with kUnavailable;
//   - never goes backwards: it returns max(clock, the highest time it has
//     returned), the high-water mark. So a record judged expired once stays
//     expired, in every dedupe layout: an expiry bucket dropped at engine
//     time T (T >= its end) held only records that are expired at every
//     later engine time, exactly as the TTL filter's kRemove, and as the
//     reads that compare a stored expiry with the time.
//
// A caller that fails a read does not use the time at all (a commit commits
// nothing; the TTL filter keeps every record).
//
// The high-water mark lives in memory, per engine: it survives the engine's
// own reopen after an I/O error, but not closing and reopening the Engine.
// Keeping it across opens would mean writing it with every commit (or
// holding the TTL filter back to a lagging stored mark), for a clock that
// was set back while no engine was open. After such a reopen, a record whose
// expiry lies between the clock and the previous engine's latest time is
// live again if still stored, and gone if its bucket was dropped or the
// filter removed it; whichever it is, it was removed only once expired by
// the time the engine that removed it used.
//
// Thread-safe: safe for concurrent access from multiple threads without
// external synchronization (RocksDB's compaction threads read it through the
// TTL filter factory).

#ifndef IDEM_ENGINE_ENGINE_CLOCK_H_
#define IDEM_ENGINE_ENGINE_CLOCK_H_

#include <atomic>
#include <cstdint>
#include <limits>

#include "absl/status/statusor.h"
#include "idem/clock.h"

namespace idem {

class EngineClock {
 public:
  // `clock` is borrowed and must outlive the EngineClock. `monotonic` is
  // false only for EngineHooks::engine_time_follows_clock, a deliberately
  // broken variant whose time follows the clock backwards.
  explicit EngineClock(Clock* clock, bool monotonic = true);
  EngineClock(const EngineClock&) = delete;
  EngineClock& operator=(const EngineClock&) = delete;

  // Engine time in microseconds since the Unix epoch: the clock's time, or
  // the highest time already returned if that is later.
  // kFailedPrecondition if the clock returned a non-finite time or one out
  // of range; kUnavailable if it threw. A failed read changes nothing.
  absl::StatusOr<int64_t> NowMicros();

 private:
  Clock* const clock_;
  const bool monotonic_;
  // The highest time returned so far.
  std::atomic<int64_t> high_water_{std::numeric_limits<int64_t>::min()};
};

}  // namespace idem

#endif  // IDEM_ENGINE_ENGINE_CLOCK_H_
