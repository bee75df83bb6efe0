// PlainMutex: a std::mutex that clang's thread-safety analysis checks like
// an absl::Mutex.
//
// Debian's build of Abseil checks every absl::Mutex acquisition for lock
// cycles: a graph lookup under a process-wide spinlock, about 420
// instructions per Lock and Unlock pair with nothing contended. The ordering
// lock (EngineImpl::order_mu_), taken once per commit, and the commit lock
// (EngineImpl::commit_mu_) use this instead (docs/performance.md, "Per-call
// costs and the hashed memtable"); every other lock, and every lock that
// needs absl::Condition or shared holders, stays an absl::Mutex.

#ifndef IDEM_ENGINE_PLAIN_MUTEX_H_
#define IDEM_ENGINE_PLAIN_MUTEX_H_

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
