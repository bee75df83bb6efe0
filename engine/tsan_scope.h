// RocksWriteScope: under ThreadSanitizer, the calling thread's memory
// accesses are not checked until the scope ends; in any other build it does
// nothing. For calls into RocksDB's write path only: Debian builds RocksDB
// without -fsanitize=thread, so TSan cannot see how RocksDB's write group
// orders one writer's reads of another's WriteBatch (a leader copies every
// follower's batch into the log record), yet it sees those copies when
// they run through libstdc++ code that the instrumented binary interposes.
// idem's own accesses stay checked everywhere else (scripts/tsan.sh).
// Not copyable; lives on the stack of the thread that calls RocksDB.

#ifndef IDEM_ENGINE_TSAN_SCOPE_H_
#define IDEM_ENGINE_TSAN_SCOPE_H_

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define IDEM_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define IDEM_TSAN 1
#endif

#ifdef IDEM_TSAN
// The ThreadSanitizer runtime's own entry points (not in clang 14's
// sanitizer/tsan_interface.h).
extern "C" void __tsan_ignore_thread_begin();
extern "C" void __tsan_ignore_thread_end();
#endif

namespace idem {

class RocksWriteScope {
 public:
#ifdef IDEM_TSAN
  RocksWriteScope() { __tsan_ignore_thread_begin(); }
  ~RocksWriteScope() { __tsan_ignore_thread_end(); }
#else
  // User-provided, so that an unused scope draws no warning.
  RocksWriteScope() {}
  ~RocksWriteScope() {}
#endif
  RocksWriteScope(const RocksWriteScope&) = delete;
  RocksWriteScope& operator=(const RocksWriteScope&) = delete;
};

}  // namespace idem

#endif  // IDEM_ENGINE_TSAN_SCOPE_H_
