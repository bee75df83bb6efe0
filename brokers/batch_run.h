// RunBatch handles one received batch for DeliveryLoop
// (idem/brokers/delivery_loop.h): it runs the deliveries through the retry
// and dead-letter machine the consumers share (retry/retry_rounds.h), which
// retries transient failures, dead-letters what is given up on through the
// outbox and waits until every outcome is durable.
// It knows nothing of acks, so it is tested through the loop with a fake
// broker. Thread-compatible.

#ifndef IDEM_BROKERS_BATCH_RUN_H_
#define IDEM_BROKERS_BATCH_RUN_H_

#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "idem/brokers/delivery_loop.h"
#include "idem/engine.h"

namespace idem::brokers {

// The ID a dead-lettered delivery is committed under: "idem.dead-letter/"
// and its ID, or its source and receipt when it has no usable ID (hashed
// when that would exceed kMaxIdBytes).
std::string DeadLetterId(const Delivery& delivery);

// Handles `deliveries` with `handler` (`hooks`: a broken variant); fills
// `report`'s processed, duplicates, dead_lettered, retries and non_retriable.
// On OK every delivery's outcome (processed, duplicate or dead-lettered) is
// committed and durable. Otherwise returns the engine's error (also of the
// check of a final delivery, Engine::Seen), kAborted for a delivery given up
// on without options.dead_letter_destination, or kInternal for a dead-letter
// marker whose commit failed; deliveries before the error may be committed
// (duplicates when redelivered).
// Each emit of the handler is checked with broker.CheckDestination: a
// refused one fails its message with that error (kInvalidArgument).
absl::Status RunBatch(Engine& engine, const Broker& broker,
                      absl::Span<const Delivery> deliveries,
                      const LoopOptions& options, const LoopHooks& hooks,
                      Handler handler, BatchReport& report);

}  // namespace idem::brokers

#endif  // IDEM_BROKERS_BATCH_RUN_H_
