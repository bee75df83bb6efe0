// CommitTimeWatermark: the engine times of the commits in flight, and from
// them a time every earlier commit has reached: the removal horizon of
// Engine::CompactExpired (StateTtlFilter, engine/ttl_filter.h).
//
// A commit's time is the engine time (engine/engine_clock.h) it reads once,
// before its handlers run, and stamps on what it writes: the expiries of its
// values and the times of its merge operands (engine/merge_operator.h).
// The contract:
//
//   - A commit registers with InFlight::Start, which reads the engine time
//     and records it as one step, under the watermark's lock: no commit
//     holds a time the watermark does not see.
//   - It stays registered until its InFlight ends (End, or its destructor,
//     so an exception ends it too). The commit path ends it only once the
//     commit's write has landed in the memtable, or failed, or the commit
//     wrote nothing.
//   - Horizon() returns min(the engine time now, the oldest time of a
//     commit in flight), under the same lock. So when it returns, every
//     commit whose time is below the horizon has ended (landed, failed or
//     written nothing), and every commit that registers later gets a time
//     at or above it: Start returns max(the engine time, the highest
//     horizon returned). The engine time never goes backwards, so that
//     clamp changes no time; it keeps the guarantee where the time does
//     (EngineHooks::engine_time_follows_clock).
//
// A commit in flight only lowers the horizon; nothing waits for it. The
// commits in flight are an intrusive list of their InFlight objects, which
// live on the committing threads' stacks: registering and ending take the
// lock for a few instructions and allocate nothing; Horizon walks the list
// (one entry per commit in flight).
//
// Thread-safe: safe for concurrent access from multiple threads without
// external synchronization. An InFlight is used by one thread.

#ifndef IDEM_ENGINE_COMMIT_TIME_WATERMARK_H_
#define IDEM_ENGINE_COMMIT_TIME_WATERMARK_H_

#include <cstddef>
#include <cstdint>
#include <limits>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "engine/engine_clock.h"
#include "engine/plain_mutex.h"

namespace idem {

class CommitTimeWatermark {
 public:
  // `clock` is borrowed and must outlive the watermark. `ignore_in_flight`
  // is true only for EngineHooks::watermark_ignores_in_flight, a
  // deliberately broken variant whose Horizon is the engine time alone.
  explicit CommitTimeWatermark(EngineClock* clock,
                               bool ignore_in_flight = false);
  CommitTimeWatermark(const CommitTimeWatermark&) = delete;
  CommitTimeWatermark& operator=(const CommitTimeWatermark&) = delete;
  // REQUIRES: no commit in flight.
  ~CommitTimeWatermark() = default;

  // One commit's registration, for its scope. Neither copied nor moved:
  // the watermark links to it.
  class InFlight {
   public:
    explicit InFlight(CommitTimeWatermark* watermark) : watermark_(watermark) {}
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;
    ~InFlight() { End(); }

    // Reads the engine time and registers the commit at it, as one step;
    // returns the time. A failed read (EngineClock::NowMicros's codes)
    // registers nothing. REQUIRES: not registered.
    absl::StatusOr<int64_t> Start();
    // Unregisters the commit; a no-op if it is not registered.
    void End();

   private:
    friend class CommitTimeWatermark;
    CommitTimeWatermark* const watermark_;
    // Written by its thread only, under watermark_->mu_.
    bool registered_ = false;
    // Guarded by watermark_->mu_.
    int64_t time_ = 0;
    InFlight* prev_ = nullptr;
    InFlight* next_ = nullptr;
  };

  // min(the engine time now, the oldest time of a commit in flight); the
  // engine time now if none is. A failed read of the engine time fails it
  // with EngineClock::NowMicros's codes.
  absl::StatusOr<int64_t> Horizon();

  // The commits in flight now.
  size_t in_flight() const;

 private:
  EngineClock* const clock_;
  const bool ignore_in_flight_;
  mutable PlainMutex mu_;
  // The commits in flight, in the order they registered.
  InFlight* first_ ABSL_GUARDED_BY(mu_) = nullptr;
  InFlight* last_ ABSL_GUARDED_BY(mu_) = nullptr;
  size_t count_ ABSL_GUARDED_BY(mu_) = 0;
  // The highest horizon returned: no commit registers below it.
  int64_t floor_ ABSL_GUARDED_BY(mu_) = std::numeric_limits<int64_t>::min();
};

}  // namespace idem

#endif  // IDEM_ENGINE_COMMIT_TIME_WATERMARK_H_
