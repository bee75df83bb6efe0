// RunRounds is the retry and dead-letter machine both consumers share: the
// Kafka adapter's ProcessRecords (kafka/batch_processor.h) and the broker
// delivery loop's RunBatch (brokers/batch_run.h). It runs a batch of items
// through Engine::ProcessBatch in rounds: the first round runs every item,
// each later one what the round before left to do. A failed item is retried,
// RetryPolicy::backoff after its round, up to RetryPolicy::max_attempts
// attempts; one whose error has a non-retriable code, or is a
// PermanentError (idem/message.h), is given up on at once. An item given up
// on goes to its adapter's dead-letter route (RetryItems::RouteDeadLetter)
// and from then on is committed under its dead-letter ID, which moves its
// partition's offset past it; through the outbox, its dead letter is
// emitted in that same commit. Last, it waits until the batch is durable.
//
// The adapter (RetryItems) says what an item is: its ID, its Message, its
// handler, its dead-letter route and dead letter. The machine knows nothing
// of Kafka or of acknowledgements. Thread-compatible: one RunRounds call
// uses its RetryItems from the calling thread only.

#ifndef IDEM_RETRY_RETRY_ROUNDS_H_
#define IDEM_RETRY_RETRY_ROUNDS_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "idem/engine.h"

namespace idem::retry {

// Stored as the result of a dead-lettered item's marker commit.
inline constexpr std::string_view kDeadLetteredResult = "idem.dead-lettered";

// How RunRounds treats failures. Borrowed views: what they point to must
// outlive the call.
struct RetryPolicy {
  // Attempts at a failing item before it is given up on (at least 1).
  int max_attempts = 3;
  // The pause before a round that retries an item.
  absl::Duration backoff;
  // Handler error codes that are given up on at their first attempt.
  absl::Span<const absl::StatusCode> non_retriable_codes;
  // Once an item fails, the later items of its partition (its Message's
  // source and partition) wait for it: in that round they do not run (they
  // are deferred, which is not an attempt) and they run again in the next.
  // Without it every item stands alone.
  bool keep_partition_order = false;
  // Whether an item dead-lettered for a conflict (Outcome::kConflict) counts
  // in RetryCounts::non_retriable.
  bool conflicts_count_as_non_retriable = false;
  // Whether to wait until the batch is durable (Engine::WaitDurable).
  bool wait_durable = true;
  // If set, checked before each handler call: once it is true no more
  // handlers run, and RunRounds returns kCancelled after the round's commit.
  const std::atomic<bool>* cancelled = nullptr;
};

// What a batch's items came to.
struct RetryCounts {
  int64_t processed = 0;      // the handler ran and committed
  int64_t duplicates = 0;     // suppressed: the ID was seen
  int64_t dead_lettered = 0;  // given up on and dead-lettered
  int64_t retries = 0;        // extra attempts of failed items
  // Of dead_lettered: a non-retriable code or a PermanentError (and a
  // conflict, under RetryPolicy::conflicts_count_as_non_retriable).
  int64_t non_retriable = 0;
};

// What RunRounds filled in, also as far as it got when it failed.
struct RoundsResult {
  RetryCounts counts;
  // The highest commit sequence of the batch (Result::sequence); 0 if none.
  uint64_t max_sequence = 0;
};

// The policy set by an adapter's options that name its fields as both
// consumers' do (max_attempts, retry_backoff, non_retriable_codes:
// kafka::ConsumerOptions, brokers::LoopOptions); the rest as RetryPolicy's
// defaults. `options` must outlive the policy.
template <typename AdapterOptions>
RetryPolicy PolicyFrom(const AdapterOptions& options) {
  RetryPolicy policy;
  policy.max_attempts = options.max_attempts;
  policy.backoff = options.retry_backoff;
  policy.non_retriable_codes = options.non_retriable_codes;
  return policy;
}

// Adds `counts` (RetryCounts, or a report) to an adapter's report that
// names its fields as RetryCounts does (kafka::BatchReport,
// brokers::BatchReport).
template <typename Counts, typename Report>
void AddCounts(const Counts& counts, Report& report) {
  report.processed += counts.processed;
  report.duplicates += counts.duplicates;
  report.dead_lettered += counts.dead_lettered;
  report.retries += counts.retries;
  report.non_retriable += counts.non_retriable;
}

// What the machine knows of one item; the adapter reads it.
struct ItemState {
  // What the item is committed under: its ID, its dead-letter ID
  // (RetryItems::DeadLetterId) once it is dead-lettered.
  std::string id;
  // Why it has no usable ID (RetryItems::Id's error); OK otherwise.
  absl::Status id_error;
  // Why it was given up on, when its dead letter goes through the outbox
  // (emitted in its marker's commit); OK otherwise.
  absl::Status dead_letter_error;
  // Its usable ID, once it is dead-lettered through the outbox.
  std::string source_id;
  // Why it was given up on (a dead letter's idem.reason): "id",
  // "attempts", "non_retriable", "permanent", "conflict", or the adapter's
  // own (RetryItems::Screen).
  std::string_view reason;
  int attempts = 0;
  bool permanent = false;  // its handler returned a PermanentError
  bool dead_lettered = false;
  bool deferred = false;  // in this round it waited behind its partition
  bool counted = false;   // its outcome is in RetryCounts
};

// Where an item given up on went.
enum class DeadLetterRoute {
  kOutbox,    // its dead letter is emitted in its marker's commit
  kHandedOn,  // the adapter passed it on already (a dead-letter function)
};

// Why an item is given up on before it runs (RetryItems::Screen).
struct EarlyGiveUp {
  absl::Status error;
  std::string_view reason;  // must outlive the RunRounds call
};

// The adapter's side of RunRounds: item `i` is the i-th of the batch, 0 to
// size() - 1.
class RetryItems {
 public:
  virtual ~RetryItems() = default;

  virtual size_t size() const = 0;
  // Item i's ID, or why it has none (it is given up on with reason "id").
  virtual absl::StatusOr<std::string> Id(size_t i) = 0;
  // Whether item i, which has a usable ID, is given up on before it runs.
  // An error fails the batch. Default: it runs.
  virtual absl::StatusOr<std::optional<EarlyGiveUp>> Screen(size_t i);
  // Item i's Message; its id is set by the machine (ItemState::id). Its
  // views must stay valid until RunRounds returns.
  virtual Message MessageOf(size_t i) const = 0;
  // Runs the user's handler on item i.
  virtual absl::Status Handle(size_t i, const ItemState& state, Txn& txn) = 0;
  // Passes item i, given up on for `error` with `reason`, to the dead-letter
  // path: through the outbox, or on (by a call). An error (kAborted when
  // there is no dead-letter path) fails the batch.
  virtual absl::StatusOr<DeadLetterRoute> RouteDeadLetter(
      size_t i, const absl::Status& error, std::string_view reason) = 0;
  // The ID item i is committed under once dead-lettered.
  virtual std::string DeadLetterId(size_t i) const = 0;
  // Emits item i's dead letter (DeadLetterRoute::kOutbox) into `txn`.
  virtual void EmitDeadLetter(size_t i, const ItemState& state, Txn& txn) = 0;
  // The error item i is dead-lettered with when the engine reports a
  // conflict (its ID was processed before with other content).
  virtual absl::Status ConflictError(size_t i,
                                     const ItemState& state) const = 0;
};

// Runs `items` with `policy` (see the top of this file); fills `result` as it
// goes. On OK every item's outcome (processed, duplicate or dead-lettered) is
// committed and, under policy.wait_durable, durable. Otherwise returns the
// engine's error, RouteDeadLetter's or Screen's error, kCancelled
// (policy.cancelled), or kInternal for a dead-letter marker whose commit
// failed; items before the error may be committed (the engine deduplicates
// them when they run again).
absl::Status RunRounds(Engine& engine, RetryItems& items,
                       const RetryPolicy& policy, RoundsResult& result);

}  // namespace idem::retry

#endif  // IDEM_RETRY_RETRY_ROUNDS_H_
