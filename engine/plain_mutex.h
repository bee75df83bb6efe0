// PlainMutex: a std::mutex that clang's thread-safety analysis checks like
// an absl::Mutex.
//
// Debian's build of Abseil checks every absl::Mutex acquisition for lock
// cycles: a graph lookup under a process-wide spinlock, about 420
// instructions per Lock and Unlock pair with nothing contended. The ordering
// lock (EngineImpl::order_mu_), taken once per commit, and the commit lock
// (EngineImpl::commit_mu_) use this instead (docs/performance.md, "Per-call
// costs and the hashed memtable"), and so do the locks of
// engine/state_versions.h (three or four times a commit) and
// engine/inflight_ids.h (twice), the commit queue's (engine/commit_queue.h,
// three times) and the commit-duration histogram's (once), whose waits use
// Await with a condition variable; every other lock, and every lock that
// needs shared holders, stays an absl::Mutex.

#ifndef IDEM_ENGINE_PLAIN_MUTEX_H_
#define IDEM_ENGINE_PLAIN_MUTEX_H_

#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"

namespace idem {

// Exclusive only, not recursive. Thread-safe.
class ABSL_LOCKABLE PlainMutex {
 public:
  PlainMutex() = default;
  PlainMutex(const PlainMutex&) = delete;
  PlainMutex& operator=(const PlainMutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }

  // Waits, releasing the mutex meanwhile, until `ready()` holds; each
  // change that can make it hold must notify `changed`. REQUIRES: held by
  // the caller (`ready` runs with it held).
  template <typename Ready>
  void Await(std::condition_variable& changed, Ready ready) {
    std::unique_lock<std::mutex> held(mu_, std::adopt_lock);
    changed.wait(held, ready);
    held.release();  // still held, by the caller
  }

 private:
  std::mutex mu_;
};

// Holds a PlainMutex for its scope.
class ABSL_SCOPED_LOCKABLE PlainMutexLock {
 public:
  explicit PlainMutexLock(PlainMutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu)
      : mu_(mu) {
    mu_->Lock();
  }
  PlainMutexLock(const PlainMutexLock&) = delete;
  PlainMutexLock& operator=(const PlainMutexLock&) = delete;
  ~PlainMutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }

 private:
  PlainMutex* const mu_;
};

}  // namespace idem

#endif  // IDEM_ENGINE_PLAIN_MUTEX_H_
