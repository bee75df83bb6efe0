// idem::brokers::BrokerConsumer<Stats> is the interface every broker
// adapter's Consumer (idem::redis::Consumer, idem::nats::Consumer,
// idem::rabbitmq::Consumer) has: poll a batch through the shared delivery
// loop (idem/brokers/delivery_loop.h), run until stopped, close, and read the
// totals. Each adapter's Consumer derives from it with its own ConsumerStats
// (a LoopStats with the adapter's counters) and adds Create; its header says
// what its broker adds to the contract stated here.
//
// A consumer is not thread-safe: call it from one thread at a time; only
// Stop may be called from any thread at any time. The Engine it was created
// with is borrowed and must outlive it.

#ifndef IDEM_BROKERS_CONSUMER_H_
#define IDEM_BROKERS_CONSUMER_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "idem/brokers/delivery_loop.h"

namespace idem::brokers {

template <typename Stats>
class BrokerConsumer {
 public:
  BrokerConsumer() = default;
  BrokerConsumer(const BrokerConsumer&) = delete;
  BrokerConsumer& operator=(const BrokerConsumer&) = delete;
  virtual ~BrokerConsumer() = default;

  // Receives up to delivery.max_batch messages (waiting up to
  // delivery.receive_timeout), processes them with `handler`, acknowledges
  // them once their outcomes are durable and relays the outbox. Errors: see
  // DeliveryLoop::PollBatch; kUnavailable when the connection is lost or
  // down (polling again goes on once the server is back; what was not
  // acknowledged comes back from the broker); kFailedPrecondition after
  // Close.
  virtual absl::StatusOr<BatchReport> PollBatch(Handler handler) = 0;

  // Calls PollBatch until Stop. A kUnavailable error (of the poll, or of its
  // relay in BatchReport::outbox_error), or a relay's kResourceExhausted (a
  // broker out of memory; the entry stays in the outbox), is followed by the
  // options' reconnect_backoff, and polling goes on. Returns OK after Stop,
  // or PollBatch's first other error. Does not close the consumer.
  virtual absl::Status Run(Handler handler) = 0;

  // Makes Run return after its current batch. Safe from any thread and from
  // signal handlers.
  virtual void Stop() = 0;

  // Closes the broker connections (what happens to messages still held, if
  // any, the adapter's header says). Idempotent.
  virtual absl::Status Close() = 0;

  // Totals since Create: the delivery loop's and the adapter's own.
  virtual Stats stats() const = 0;
};

}  // namespace idem::brokers

#endif  // IDEM_BROKERS_CONSUMER_H_
