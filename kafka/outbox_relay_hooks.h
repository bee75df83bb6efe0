// Seams of the outbox relay: for tests, a stop between publishing and
// acknowledging (or before a transaction's commit), as a crash there would
// leave it, and a deliberately broken order of the two; for a Consumer, the
// group offsets its transactions carry. A plain value type.

#ifndef IDEM_KAFKA_OUTBOX_RELAY_HOOKS_H_
#define IDEM_KAFKA_OUTBOX_RELAY_HOOKS_H_

#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "idem/engine.h"
#include "idem/kafka/outbox_relay.h"
#include "kafka/transactional_producer.h"

namespace idem::kafka {

struct OutboxRelayHooks {
  // Called between a round's two steps (publishing, then acknowledging); a
  // non-OK status ends the round there and RelayOnce returns it.
  std::function<absl::Status()> between_publish_and_ack;
  // Acknowledges a round's entries before publishing them: a stop in
  // between loses them (breaks at-least-once publishing).
  bool ack_before_publish = false;
  // With transactional_id: called before a round's transaction commits
  // (its records produced); a non-OK status ends the round there, the
  // transaction left open, and RelayOnce returns it.
  std::function<absl::Status()> before_transaction_commit;
  // With transactional_id, broken: the relay does not read its progress
  // when it starts, so a crash between a transaction's commit and its
  // acknowledgement publishes that transaction's entries again.
  bool ignore_progress = false;
  // With transactional_id, broken: the entries a round read ahead while its
  // transaction committed are kept when the commit failed, so the next
  // round publishes them and acknowledges the failed round's entries
  // unpublished.
  bool keep_read_ahead_of_failed_commit = false;
  // With transactional_id, broken: a retriable or abortable transactional
  // error (REBALANCE_IN_PROGRESS from the group coordinator) counts as
  // fenced: the round fails with kAborted and the producer is created
  // again, rather than the round being aborted and run again.
  bool retriable_errors_fence = false;
  // With transactional_id on a sharded engine, broken: every shard's relay
  // is created with transactional_id itself rather than its shard's
  // (ShardTransactionalId), so the shards' progress records overwrite each
  // other and a restarted relay takes another shard's progress for its own.
  bool one_transactional_id_for_every_shard = false;
  // With transactional_id, set by a Consumer in changelog mode: whether an
  // entry is the last of an engine commit (its changelog mark). A round then
  // ends only after such an entry, or where the outbox ends (a commit
  // always ends there), reading past max_batch if it must, so a transaction
  // never carries part of a commit: a commit's outputs, dedupe records,
  // state and mark reach read_committed readers together or not at all.
  std::function<bool(const OutboxEntry&)> round_ends_after;
  // With transactional_id, set by a Consumer (transactional_output): the
  // offsets and group metadata each round's transaction commits, so the
  // brokers refuse the transaction of a member no longer in the group
  // (KIP-447). An error aborts the round.
  std::function<absl::StatusOr<GroupOffsets>()> transaction_offsets;
  // Set by a Consumer in changelog mode (its checkpoints): called after
  // each round with the entries the round published (delivered and
  // acknowledged; with transactional_id, in its committed transaction),
  // dead letters and skipped entries left out. `complete` is false after a
  // round that failed: what reached the brokers is then not known.
  // `transaction`: the round was a Kafka transaction.
  std::function<void(absl::Span<const OutboxEntry* const> published,
                     bool complete, bool transaction)>
      after_round;
};

// OutboxRelay::Create with hooks; OutboxRelay::Create is this with {}.
absl::StatusOr<std::unique_ptr<OutboxRelay>> CreateOutboxRelayWithHooks(
    Engine* engine, const OutboxRelayOptions& options,
    const OutboxRelayHooks& hooks);

}  // namespace idem::kafka

#endif  // IDEM_KAFKA_OUTBOX_RELAY_HOOKS_H_
