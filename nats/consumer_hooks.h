// Test-only: creates an idem::nats::Consumer whose delivery loop runs with
// deliberately broken hooks (brokers::LoopHooks), for the tests that show a
// check catches what the real consumer prevents.

#ifndef IDEM_NATS_CONSUMER_HOOKS_H_
#define IDEM_NATS_CONSUMER_HOOKS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "idem/brokers/delivery_loop.h"
#include "idem/nats/consumer.h"

namespace idem::nats {

// The adapter's own broken variants.
struct NatsHooks {
  // Close leaves the prefetched batch unacknowledged instead of NAKing it:
  // those messages then wait out AckWait before any process gets them.
  bool keep_prefetched_on_close = false;
  // No "+WPI": a batch held longer than the ack wait is redelivered while
  // it is processed.
  bool no_in_progress_acks = false;
};

absl::StatusOr<std::unique_ptr<Consumer>> CreateConsumerWithHooks(
    Engine* engine, const ConsumerOptions& options,
    const brokers::LoopHooks& hooks, const NatsHooks& nats_hooks = {});

}  // namespace idem::nats

#endif  // IDEM_NATS_CONSUMER_HOOKS_H_
