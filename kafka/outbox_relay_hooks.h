// Test seams of the outbox relay: a stop between publishing and
// acknowledging, as a crash there would leave it, and a deliberately broken
// order of the two. Never set outside tests. A plain value type.

#ifndef IDEM_KAFKA_OUTBOX_RELAY_HOOKS_H_
#define IDEM_KAFKA_OUTBOX_RELAY_HOOKS_H_

#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "idem/engine.h"
#include "idem/kafka/outbox_relay.h"

namespace idem::kafka {

struct OutboxRelayHooks {
  // Called between a round's two steps (publishing, then acknowledging); a
  // non-OK status ends the round there and RelayOnce returns it.
  std::function<absl::Status()> between_publish_and_ack;
  // Acknowledges a round's entries before publishing them: a stop in
  // between loses them (breaks at-least-once publishing).
  bool ack_before_publish = false;
};

// OutboxRelay::Create with hooks; OutboxRelay::Create is this with {}.
absl::StatusOr<std::unique_ptr<OutboxRelay>> CreateOutboxRelayWithHooks(
    Engine* engine, const OutboxRelayOptions& options,
    const OutboxRelayHooks& hooks);

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_OUTBOX_RELAY_HOOKS_H_
