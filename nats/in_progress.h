// InProgress keeps JetStream from redelivering messages that idem holds
// longer than the durable consumer's ack wait: a thread of its own
// publishes "+WPI" (work in progress: the server restarts the message's ack
// timer) to the reply subject of each held message once it has been held
// for `interval` since its receipt or its last +WPI. Two batches are held
// at most: the one the delivery loop processes (kCurrent) and the one
// fetched ahead of it (kPrefetched). Thread-safe: Hold and Release may be
// called from any thread; nats.c's connection is thread-safe. The
// connection is borrowed and must outlive the InProgress (or Stop).

#ifndef IDEM_NATS_IN_PROGRESS_H_
#define IDEM_NATS_IN_PROGRESS_H_

#include <nats/nats.h>

#include <array>
#include <cstdint>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace idem::nats {

class InProgress {
 public:
  enum Slot { kCurrent = 0, kPrefetched = 1 };

  // Starts the thread. REQUIRES: interval > 0.
  InProgress(natsConnection* connection, absl::Duration interval);
  ~InProgress();  // Stop
  InProgress(const InProgress&) = delete;
  InProgress& operator=(const InProgress&) = delete;

  // `slot` now holds the messages with these reply subjects, received now
  // (what it held before is released). `replies`: the subjects one after
  // another, each ending with a NUL ('\0'), so that a batch is one buffer.
  void Hold(Slot slot, std::string replies);
  // Moves what kPrefetched holds to kCurrent (the prefetched batch is now
  // the one processed), keeping its timer.
  void PromotePrefetched();
  void Release(Slot slot);
  // Ends the thread; idempotent.
  void Stop();

  // +WPI messages published so far.
  int64_t sent() const;

 private:
  struct Held {
    std::string replies;  // NUL-terminated subjects, one after another
    absl::Time since;     // receipt or last +WPI
  };

  void Loop();
  // Publishes +WPI to every reply of the slots held for `interval_`.
  void PingDue() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  natsConnection* const connection_;
  const absl::Duration interval_;

  mutable absl::Mutex mu_;
  std::array<Held, 2> held_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int64_t sent_ ABSL_GUARDED_BY(mu_) = 0;

  std::thread thread_;
};

}  // namespace idem::nats

#endif  // IDEM_NATS_IN_PROGRESS_H_
