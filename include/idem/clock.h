// idem::Clock is the engine's only source of time: record expiry, duplicate
// checks and the TTL compaction filter all read it, never the wall clock
// directly. Implementations must be safe for concurrent access from multiple
// threads without external synchronization.
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

  // Returns the current time. May be called from any thread, including
  // RocksDB's compaction threads.
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

  // Moves the clock forward by `d` (backward if `d` is negative).
  void Advance(absl::Duration d);

  // Sets the clock to `t`.
  void Set(absl::Time t);

 private:
  absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace idem

#endif  // IDEM_CLOCK_H_
