// The OutboxRelay of an engine with shards (Options::shards > 1): each
// shard has its own outbox and positions, so the relay is one relay per
// shard (OutboxRelay over engine->shard(i)), each with its own producer,
// run one after another on the caller's thread. A message's outputs sit in
// the outbox of its partition's shard in commit order, and that shard's
// relay publishes them in that order, so the outputs of one input partition
// keep their order; outputs of partitions in different shards have no order
// between them (as two partitions' never do). With a transactional_id each
// shard's relay is its own transactional producer with its own progress
// record: ShardTransactionalId names it. Not thread-safe, as OutboxRelay.

#ifndef IDEM_KAFKA_SHARDED_OUTBOX_RELAY_H_
#define IDEM_KAFKA_SHARDED_OUTBOX_RELAY_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "idem/engine.h"
#include "idem/kafka/outbox_relay.h"
#include "kafka/outbox_relay_hooks.h"

namespace idem::kafka {

// The transactional.id of shard `shard`'s relay, for a relay given
// `transactional_id`: "<transactional_id>-shard-NNN", NNN the shard's index
// in three digits (shards are at most 256). Deterministic, so a restarted
// relay fences its own older instance and finds its own progress.
std::string ShardTransactionalId(const std::string& transactional_id,
                                 int shard);

// The hooks of shard `shard`'s relay.
using ShardRelayHooks = std::function<OutboxRelayHooks(int shard)>;

// Creates one relay per shard of `engine` (each as OutboxRelay::Create on
// engine->shard(i), with ShardTransactionalId when options.transactional_id
// is set) and the relay that runs them. RelayOnce and Drain give every
// shard its round(s), then return the first shard's error if one failed
// (the shards that succeeded acknowledged their entries), else the sum of
// their reports; last_position is then the position (in that shard's
// outbox) the highest-numbered shard that acknowledged anything reached.
// stats() sums the shards'. Errors of Create as OutboxRelay::Create, naming
// the shard. REQUIRES: engine->shard_count() > 1.
absl::StatusOr<std::unique_ptr<OutboxRelay>> CreateShardedOutboxRelay(
    Engine* engine, const OutboxRelayOptions& options,
    const ShardRelayHooks& hooks);

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_SHARDED_OUTBOX_RELAY_H_
