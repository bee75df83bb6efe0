// Test-only: creates an idem::redis::Consumer whose delivery loop runs with
// deliberately broken hooks (brokers::LoopHooks), for the tests that show a
// check catches what the real consumer prevents.

#ifndef IDEM_REDIS_CONSUMER_HOOKS_H_
#define IDEM_REDIS_CONSUMER_HOOKS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "idem/brokers/delivery_loop.h"
#include "idem/redis/consumer.h"

namespace idem::redis {

// The adapter's own broken variants.
struct RedisHooks {
  // Commands run with SIGPIPE as the process has it (no NoSigpipe): a
  // command on a cut socket then kills a process that did not ignore it.
  bool let_sigpipe_through = false;
};

absl::StatusOr<std::unique_ptr<Consumer>> CreateConsumerWithHooks(
    Engine* engine, const ConsumerOptions& options,
    const brokers::LoopHooks& hooks, const RedisHooks& redis_hooks = {});

}  // namespace idem::redis

#endif  // IDEM_REDIS_CONSUMER_HOOKS_H_
