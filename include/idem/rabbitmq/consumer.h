// idem::rabbitmq::Consumer consumes a RabbitMQ queue (AMQP 0-9-1, rabbitmq-c)
// with manual acks and exactly-once effects: every batch goes through the
// shared delivery loop (idem/brokers/delivery_loop.h), so each message's
// dedupe record and the handler's state writes commit in one write, and the
// batch is acknowledged (basic.ack with multiple) only once that write is
// durable.
//
// - Up to `prefetch` unacknowledged messages are in flight (basic.qos),
//   by default two batches.
// - The queue is declared passive unless declare_queues (then with
//   queue_arguments: quorum type, single active consumer, dead letter
//   exchange, TTL).
// - Heartbeats (`heartbeat`) detect a dead or paused peer; the server's
//   consumer cancel notification (a queue deleted, a node failover) ends
//   the connection like a loss: the next poll reconnects and resumes (or
//   reports the queue missing, kNotFound).
// - ID: the message_id property, else the id_header header. A message with
//   neither has no ID that survives redelivery (a delivery tag is per
//   channel and changes on redelivery), so it is dead-lettered at once with
//   reason "id" rather than deduplicated by a guess.
// - No offset is stored: a queue has no positions.
// - A batch the loop cannot decide is nacked with requeue; a lost
//   connection is reopened by the next poll, and RabbitMQ requeues what the
//   old one held: redelivered to a consumer on the same store (the same
//   Engine), those are duplicates; taken by a consumer with a store of its
//   own, they are applied again. Only consumers sharing one store are
//   deduplicated against each other: see "Competing consumers" in
//   docs/brokers.md. Subscribing to a queue that has other consumers and
//   is not single-active warns once (delivery.logger) and counts in
//   LoopStats::competing_consumers.
// - rabbitmq-c sends with MSG_NOSIGNAL: a write to a cut socket fails
//   (kUnavailable), it never ends the process with SIGPIPE.
// - Names: a queue (and a relay destination) is 1 to 255 bytes, not in
//   "amq."; the message_id property at most 255 bytes (longer IDs travel in
//   id_header).
// - The outbox (Txn::Emit, dead letters) is relayed on a second connection
//   with publisher confirms and `mandatory`: a persistent message to the
//   default exchange, routing key = the destination queue, message_id =
//   the entry's message ID. An output no queue takes comes back
//   (basic.return) and is dead-lettered, never lost.
//
// Requires the optional idem::rabbitmq library (built when librabbitmq is
// found). A Consumer is not thread-safe (only Stop may be called from any
// thread) and borrows its Engine, as brokers::BrokerConsumer says.

#ifndef IDEM_RABBITMQ_CONSUMER_H_
#define IDEM_RABBITMQ_CONSUMER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "idem/brokers/consumer.h"
#include "idem/brokers/delivery_loop.h"
#include "idem/engine.h"

namespace idem::rabbitmq {

// A message as a handler sees it: `id` the dedupe ID, `payload` the body,
// `source` the queue, `receipt` the delivery tag in decimal, `headers` the
// message's string headers in order.
using Delivery = brokers::Delivery;
using Handler = brokers::Handler;

struct ConsumerOptions {
  // ---- Where from ----

  // The server and credentials. Default: 127.0.0.1:5672, vhost "/",
  // guest/guest.
  std::string host = "127.0.0.1";
  int port = 5672;
  std::string vhost = "/";
  std::string user = "guest";
  std::string password = "guest";
  // Connect with TLS (rabbitmq-c's OpenSSL socket), verifying the server's
  // certificate against the CA certificates in tls_ca_file (PEM; required
  // with tls) and against `host`. With tls_cert_file and tls_key_file (PEM,
  // both or neither), present that client certificate, for a server that
  // asks for one. A handshake that fails (a server without TLS, a
  // certificate not trusted or not naming the host): kUnavailable naming
  // the server; a file that cannot be loaded: kInvalidArgument naming it.
  // Point `port` at the server's TLS listener (5671 by convention).
  // Default: false.
  bool tls = false;
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  // The queue. Required: 1 to 255 bytes (an AMQP short string), not
  // starting with "amq." (the server's).
  std::string queue;

  // ---- Declaring ----

  // false: the queue is declared passive (it must exist, as an operator
  // declared it, with whatever arguments and policies: quorum type, dead
  // letter exchange, TTL): Create fails with kNotFound naming a missing
  // one. The relay declares no destination queue either: an output no
  // queue takes comes back (mandatory) and is dead-lettered.
  // true: the queue is declared durable with `queue_arguments` (a queue
  // that exists with other arguments: kFailedPrecondition), and each
  // destination queue durable without arguments. Default: false.
  bool declare_queues = false;
  // The arguments the queue is declared with (declare_queues), to match an
  // operator's policy.
  struct QueueArguments {
    // x-queue-type: "classic", "quorum" or "stream"; empty: the server's
    // default.
    std::string queue_type;
    // x-single-active-consumer: the server delivers to one consumer of the
    // queue at a time and hands the queue to the next when it goes: the
    // way to run several instances on one queue (docs/brokers.md,
    // "Competing consumers", for what a handover after a crash needs).
    // Also what a consumer of a queue declared passive takes the queue to
    // be: with it off, other consumers found on the queue at a
    // subscription are competing ones (a warning, counted in
    // LoopStats::competing_consumers).
    bool single_active_consumer = false;
    // x-dead-letter-exchange and x-dead-letter-routing-key; empty: none.
    // (idem dead-letters through its own outbox, atomically with the
    // record; the queue's own dead-lettering catches what expires.)
    std::string dead_letter_exchange;
    std::string dead_letter_routing_key;
    // x-message-ttl in milliseconds; 0: none.
    int64_t message_ttl_ms = 0;
  };
  QueueArguments queue_arguments;

  // ---- Messages ----

  // The header read when a message has no message_id property. The
  // property is an AMQP short string (at most 255 bytes): longer IDs can
  // only travel in this header. Default: "message-id".
  std::string id_header = "message-id";
  // Unacknowledged messages the server sends ahead (basic.qos); 0: twice
  // delivery.max_batch (the batch processed and the next one), at most
  // 65535. Otherwise must be >= delivery.max_batch and <= 65535.
  // Default: 0.
  int prefetch = 0;

  // ---- Connection ----

  // Connect and reply timeout. Must be > 0. Default: 5 s.
  absl::Duration io_timeout = absl::Seconds(5);
  // The AMQP heartbeat asked of the server (whole seconds; the server may
  // lower it): a connection that brings no frame for two of them is taken
  // for dead (a peer paused, a network gone silent) and the next poll
  // reconnects. A handler that keeps the consumer from the library for
  // more than two (no heartbeat is sent meanwhile) loses its connection
  // too: its batch is requeued and comes back as duplicates. Zero: no
  // heartbeats (a dead peer is never noticed). Must be >= 0 and < 65536 s.
  // Default: 30 s.
  absl::Duration heartbeat = absl::Seconds(30);
  // Run's pause after a lost connection before polling (and reconnecting)
  // again. Must be >= 0. Default: 200 ms.
  absl::Duration reconnect_backoff = absl::Milliseconds(200);

  // ---- The delivery loop ----

  // Batch size, the wait for a first message (receive_timeout), retries,
  // the dead letter queue (dead_letter_destination) and relaying: see
  // idem/brokers/delivery_loop.h.
  brokers::LoopOptions delivery;
};

// Totals since Create: the delivery loop's, and the adapter's own.
struct ConsumerStats : brokers::LoopStats {
  int64_t redelivered = 0;  // messages with the redelivered flag
  int64_t connects = 0;     // consuming connections opened
  // Consumer cancel notifications (basic.cancel) received.
  int64_t cancelled = 0;
};

// A RabbitMQ queue's consumer: the contract of brokers::BrokerConsumer
// (idem/brokers/consumer.h), with the queue's own: PollBatch acknowledges a
// batch with one basic.ack (multiple); a lost connection's unacknowledged
// messages are requeued by RabbitMQ; Close closes both connections (the
// consuming one and the relay's).
class Consumer : public brokers::BrokerConsumer<ConsumerStats> {
 public:
  // Validates the options (kInvalidArgument naming the field and the rule:
  // queue names of 1 to 255 bytes outside "amq."), connects, declares the
  // queue and starts consuming. kUnavailable if the server cannot be
  // reached; kUnauthenticated for a user or password it refuses;
  // kPermissionDenied for a user without access to the vhost or queue;
  // kNotFound for a missing vhost or (passive declaration) queue;
  // kFailedPrecondition if the queue exists with other arguments than
  // declare_queues asks for. Each names the server's reason. `engine` is
  // borrowed.
  static absl::StatusOr<std::unique_ptr<Consumer>> Create(
      Engine* engine, const ConsumerOptions& options);
};

}  // namespace idem::rabbitmq

#endif  // IDEM_RABBITMQ_CONSUMER_H_
