// idem::Clock is the engine's only source of time: record expiry, duplicate
// checks and the TTL compaction filter all read it, never the wall clock
// directly. Implementations must be safe for concurrent access from multiple
// threads without external synchronization.
//
// What the engine does with a clock's answer (its "engine time"):
//   - A non-finite time (absl::InfiniteFuture(), absl::InfinitePast()) or
//     one beyond the int64 microseconds since the epoch a record stores
//     fails the call that read it with kFailedPrecondition; nothing is
//     committed.
//   - An exception thrown by Now() never leaves the engine: the call fails
//     with kUnavailable and commits nothing; the TTL filter keeps every
//     record while the clock cannot be read.
//   - A clock that goes backwards does not take the engine with it: engine
//     time is the latest time the engine has read so far, so a record found
//     expired once stays expired, whichever dedupe layout holds it. This
//     lasts while the Engine is open; an Engine opened later starts from its
//     clock again.
//
// SystemClock() is the real clock. ManualClock moves only when told to, so
// tests and simulations cover whole dedupe windows without sleeping.

#ifndef IDEM_CLOCK_H_
#define IDEM_CLOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace idem {

// A source of absolute time. Thread-safe.
class Clock {
 public:
  virtual ~Clock();

  // Returns the current time, finite. May be called from any thread,
  // including RocksDB's compaction threads. Should not throw (see above).
  virtual absl::Time Now() = 0;
};

// Returns the process-wide real-time clock. Never deleted; do not delete it.
Clock* SystemClock();

// A clock that only moves when Advance or Set is called. Safe for concurrent
// access from multiple threads without external synchronization.
class ManualClock : public Clock {
 public:
  explicit ManualClock(absl::Time start);

  absl::Time Now() override;

  // Moves the clock forward by `d` (backward if `d` is negative; an engine's
  // time stays at the latest time it read, see above).
  void Advance(absl::Duration d);

  // Sets the clock to `t` (earlier than before: as for a negative Advance).
  void Set(absl::Time t);

 private:
  absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace idem

#endif  // IDEM_CLOCK_H_
