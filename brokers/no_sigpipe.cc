#include "brokers/no_sigpipe.h"

#include <errno.h>
#include <pthread.h>
#include <time.h>

namespace idem::brokers {
namespace {

sigset_t SigpipeSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPIPE);
  return set;
}

bool SigpipePending() {
  sigset_t pending;
  sigemptyset(&pending);
  return sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
}

}  // namespace

NoSigpipe::NoSigpipe() {
  const sigset_t pipe = SigpipeSet();
  pthread_sigmask(SIG_BLOCK, &pipe, &old_mask_);
  was_pending_ = SigpipePending();
}

bool NoSigpipe::Swallowed() const { return !was_pending_ && SigpipePending(); }

NoSigpipe::~NoSigpipe() {
  if (Swallowed()) {
    // Take the SIGPIPE our own write raised; a zero timeout never waits.
    const sigset_t pipe = SigpipeSet();
    const timespec zero = {0, 0};
    while (sigtimedwait(&pipe, nullptr, &zero) == -1 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

}  // namespace idem::brokers
