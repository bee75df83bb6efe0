// Test-only: creates an idem::rabbitmq::Consumer whose delivery loop runs with
// deliberately broken hooks (brokers::LoopHooks), for the tests that show a
// check catches what the real consumer prevents.

#ifndef IDEM_RABBITMQ_CONSUMER_HOOKS_H_
#define IDEM_RABBITMQ_CONSUMER_HOOKS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "idem/brokers/delivery_loop.h"
#include "idem/rabbitmq/consumer.h"

namespace idem::rabbitmq {

// The adapter's own broken variants.
struct RabbitMqHooks {
  // From the next connection on, log in without asking for consumer cancel
  // notifications: a consumer the server cancels (its queue deleted) waits
  // on, receiving nothing, and never resubscribes.
  bool no_cancel_notify = false;
};

absl::StatusOr<std::unique_ptr<Consumer>> CreateConsumerWithHooks(
    Engine* engine, const ConsumerOptions& options,
    const brokers::LoopHooks& hooks, const RabbitMqHooks& rabbitmq_hooks = {});

}  // namespace idem::rabbitmq

#endif  // IDEM_RABBITMQ_CONSUMER_HOOKS_H_
