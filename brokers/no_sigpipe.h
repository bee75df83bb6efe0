// NoSigpipe keeps a client library's write to a cut socket from killing the
// process with SIGPIPE. While one lives, SIGPIPE is blocked on the calling
// thread; a SIGPIPE raised meanwhile by the thread's own writes (which then
// fail with EPIPE, as the library reports) is taken off the pending set
// before the thread's signal mask is restored, so it is never delivered.
// A SIGPIPE already pending before it was made is left alone. For clients
// that write on the caller's thread and cannot be asked for MSG_NOSIGNAL
// (hiredis): wrap each call that may write. Not thread-safe: make, use and
// destroy it on one thread (it only affects that thread).

#ifndef IDEM_BROKERS_NO_SIGPIPE_H_
#define IDEM_BROKERS_NO_SIGPIPE_H_

#include <signal.h>

namespace idem::brokers {

class NoSigpipe {
 public:
  NoSigpipe();
  ~NoSigpipe();
  NoSigpipe(const NoSigpipe&) = delete;
  NoSigpipe& operator=(const NoSigpipe&) = delete;

  // Whether a SIGPIPE was raised (and swallowed) so far in this scope.
  bool Swallowed() const;

 private:
  sigset_t old_mask_;
  bool was_pending_ = false;
};

}  // namespace idem::brokers

#endif  // IDEM_BROKERS_NO_SIGPIPE_H_
