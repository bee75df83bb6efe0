// ThreadSanitizer and Debian's Abseil: absl::Mutex keeps its state in atomic
// words inside libabsl_synchronization, which Debian builds without
// -fsanitize=thread, so TSan sees none of its locks and would report every
// access a Mutex guards as a race. Abseil's own TSan build annotates its
// Mutex with TSan's mutex interface (absl/base/internal/
// tsan_mutex_interface.h). This file does the same from outside: linked into
// the TSan test binaries only (IDEM_TSAN), it defines the Mutex entry points
// idem uses, so the binaries call these; each tells TSan about the lock or
// unlock and calls the library's own function (found with dlsym). Accesses
// between a pre and a post annotation (the conditions Abseil evaluates while
// it locks, unlocks or waits) are ignored, as in Abseil's TSan build.
//
// The symbol names are those of Debian 12's Abseil (inline namespace
// debian3); a missing one aborts with its name.

#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>

#include "absl/synchronization/mutex.h"

namespace {

template <typename F>
F Real(const char* name) {
  void* f = dlsym(RTLD_NEXT, name);
  if (f == nullptr) {
    std::fprintf(stderr, "absl_mutex_annotations: no %s in Abseil\n", name);
    std::abort();
  }
  return reinterpret_cast<F>(f);
}

#define IDEM_ABSL_MUTEX(name) "_ZN4absl7debian35Mutex" name

constexpr unsigned kRead = __tsan_mutex_read_lock;

// Abseil's functions call each other through the same interposable names
// (LockWhenWithTimeout calls LockWhenWithDeadline): only the outermost call
// on a thread annotates.
thread_local int depth = 0;

class Nesting {
 public:
  Nesting() : outer_(depth++ == 0) {}
  Nesting(const Nesting&) = delete;
  Nesting& operator=(const Nesting&) = delete;
  ~Nesting() { --depth; }
  bool outer() const { return outer_; }

 private:
  const bool outer_;
};

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  static auto real = Real<void (*)(Mutex*)>(IDEM_ABSL_MUTEX("4LockEv"));
  Nesting n;
  if (n.outer()) __tsan_mutex_pre_lock(this, 0);
  real(this);
  if (n.outer()) __tsan_mutex_post_lock(this, 0, 0);
}

void Mutex::Unlock() {
  static auto real = Real<void (*)(Mutex*)>(IDEM_ABSL_MUTEX("6UnlockEv"));
  Nesting n;
  if (n.outer()) __tsan_mutex_pre_unlock(this, 0);
  real(this);
  if (n.outer()) __tsan_mutex_post_unlock(this, 0);
}

void Mutex::ReaderLock() {
  static auto real = Real<void (*)(Mutex*)>(IDEM_ABSL_MUTEX("10ReaderLockEv"));
  Nesting n;
  if (n.outer()) __tsan_mutex_pre_lock(this, kRead);
  real(this);
  if (n.outer()) __tsan_mutex_post_lock(this, kRead, 0);
}

void Mutex::ReaderUnlock() {
  static auto real =
      Real<void (*)(Mutex*)>(IDEM_ABSL_MUTEX("12ReaderUnlockEv"));
  Nesting n;
  if (n.outer()) __tsan_mutex_pre_unlock(this, kRead);
  real(this);
  if (n.outer()) __tsan_mutex_post_unlock(this, kRead);
}

bool Mutex::TryLock() {
  static auto real = Real<bool (*)(Mutex*)>(IDEM_ABSL_MUTEX("7TryLockEv"));
  Nesting n;
  if (n.outer()) __tsan_mutex_pre_lock(this, __tsan_mutex_try_lock);
  const bool locked = real(this);
  if (n.outer())
    __tsan_mutex_post_lock(
        this,
        __tsan_mutex_try_lock | (locked ? 0 : __tsan_mutex_try_lock_failed), 0);
  return locked;
}

void Mutex::LockWhen(const Condition& cond) {
  static auto real = Real<void (*)(Mutex*, const Condition&)>(
      IDEM_ABSL_MUTEX("8LockWhenERKNS0_9ConditionE"));
  Nesting n;
  if (n.outer()) __tsan_mutex_pre_lock(this, 0);
  real(this, cond);
  if (n.outer()) __tsan_mutex_post_lock(this, 0, 0);
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  static auto real = Real<void (*)(Mutex*, const Condition&)>(
      IDEM_ABSL_MUTEX("14ReaderLockWhenERKNS0_9ConditionE"));
  Nesting n;
  if (n.outer()) __tsan_mutex_pre_lock(this, kRead);
  real(this, cond);
  if (n.outer()) __tsan_mutex_post_lock(this, kRead, 0);
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, absl::Duration timeout) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, absl::Duration)>(
      IDEM_ABSL_MUTEX("19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE"));
  Nesting n;
  if (n.outer()) __tsan_mutex_pre_lock(this, 0);
  const bool met = real(this, cond, timeout);
  if (n.outer()) __tsan_mutex_post_lock(this, 0, 0);
  return met;
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, absl::Time deadline) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, absl::Time)>(
      IDEM_ABSL_MUTEX("20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE"));
  Nesting n;
  if (n.outer()) __tsan_mutex_pre_lock(this, 0);
  const bool met = real(this, cond, deadline);
  if (n.outer()) __tsan_mutex_post_lock(this, 0, 0);
  return met;
}

// Await releases the (exclusively held) lock while it waits and holds it
// again when it returns.
void Mutex::Await(const Condition& cond) {
  static auto real = Real<void (*)(Mutex*, const Condition&)>(
      IDEM_ABSL_MUTEX("5AwaitERKNS0_9ConditionE"));
  Nesting n;
  if (n.outer()) __tsan_mutex_pre_unlock(this, 0);
  if (n.outer()) __tsan_mutex_post_unlock(this, 0);
  if (n.outer()) __tsan_mutex_pre_lock(this, 0);
  real(this, cond);
  if (n.outer()) __tsan_mutex_post_lock(this, 0, 0);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, absl::Duration timeout) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, absl::Duration)>(
      IDEM_ABSL_MUTEX("16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE"));
  Nesting n;
  if (n.outer()) __tsan_mutex_pre_unlock(this, 0);
  if (n.outer()) __tsan_mutex_post_unlock(this, 0);
  if (n.outer()) __tsan_mutex_pre_lock(this, 0);
  const bool met = real(this, cond, timeout);
  if (n.outer()) __tsan_mutex_post_lock(this, 0, 0);
  return met;
}

ABSL_NAMESPACE_END
}  // namespace absl
