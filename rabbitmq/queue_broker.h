// QueueBroker is the RabbitMQ side of idem::rabbitmq::Consumer: the
// brokers::Broker (consume, ack, nack, publish with confirms) the shared
// delivery loop drives, over one consuming connection and one publishing
// connection, each reopened after a failure. Not thread-safe.

#ifndef IDEM_RABBITMQ_QUEUE_BROKER_H_
#define IDEM_RABBITMQ_QUEUE_BROKER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "brokers/competing_consumers.h"
#include "idem/brokers/delivery_loop.h"
#include "idem/rabbitmq/consumer.h"
#include "rabbitmq/amqp_connection.h"

namespace idem::rabbitmq {

// basic.qos's prefetch-count is a short (16 bits).
constexpr int kMaxPrefetch = 65535;

// The prefetch window asked for: options.prefetch, or when 0 twice
// delivery.max_batch (at most kMaxPrefetch).
int Prefetch(const ConsumerOptions& options);

class QueueBroker : public brokers::Broker {
 public:
  explicit QueueBroker(const ConsumerOptions& options);

  // Opens the consuming connection if needed: declares the queue, sets the
  // prefetch window and starts consuming with manual acks.
  absl::Status Subscribe();
  // Closes both connections. Idempotent.
  void Close();
  // Closes the consuming connection; the next Receive subscribes again.
  void CloseConsuming() { consume_.Close(); }

  absl::StatusOr<std::vector<brokers::Delivery>> Receive(
      int max, absl::Duration timeout) override;
  // basic.ack of the batch's highest delivery tag with `multiple`: every
  // delivery of the batch (the loop acks all it received).
  absl::Status Ack(absl::Span<const brokers::Delivery> deliveries) override;
  // basic.nack with requeue of the batch's highest tag, `multiple`. On a
  // closed connection the server has requeued them already: OK.
  absl::Status Nack(absl::Span<const brokers::Delivery> deliveries) override;
  // A persistent, mandatory message to the default exchange, routing key =
  // entry.destination (declared durable with options.declare_queues),
  // message_id = entry.message_id, the entry's headers (but one named
  // idem-key) and, when not empty, its key as header idem-key; returns once
  // the server confirmed it. Refused for good: kInvalidArgument for a
  // destination CheckQueueName rejects; kOutOfRange for properties (message
  // ID and headers) that do not fit one frame (frame_max); kNotFound when
  // no queue takes it (basic.return); the server's refusals as
  // AmqpConnection::CloseStatus.
  absl::Status Publish(const OutboxEntry& entry) override;
  // CheckQueueName.
  absl::Status CheckDestination(std::string_view destination) const override {
    return CheckQueueName(destination);
  }

  // ConsumerStats::redelivered, connects and cancelled.
  void CountInto(ConsumerStats* stats) const {
    stats->redelivered = redelivered_;
    stats->connects = connects_;
    stats->cancelled = cancelled_;
  }
  // Consuming connections opened after the first.
  int64_t Reconnects() const override {
    return connects_ > 0 ? connects_ - 1 : 0;
  }
  // Subscriptions that found other consumers on a queue not known to be
  // single-active (queue_arguments.single_active_consumer).
  int64_t CompetingConsumers() const override { return competing_.seen(); }

  // Test-only (RabbitMqHooks): see AmqpConnection::set_ask_cancel_notify.
  void set_ask_cancel_notify(bool ask) { consume_.set_ask_cancel_notify(ask); }

 private:
  brokers::Delivery MakeDelivery(const amqp_envelope_t& envelope);
  absl::Status OpenPublisher();
  // Waits for the confirm of a publish to `destination`.
  absl::Status WaitForConfirm(const std::string& destination);
  // Why consuming stopped (`reply` not normal): a lost connection, a
  // heartbeat timeout, a channel closed, a cancel notification
  // (basic.cancel, counted); closes the connection, kUnavailable.
  absl::Status ConsumingEnded(const amqp_rpc_reply_t& reply);
  // kOutOfRange if the properties would not fit one frame of the
  // publishing connection, or a short string would be over 255 bytes.
  absl::Status CheckFitsFrame(
      const std::string& message_id,
      const std::vector<std::pair<std::string, std::string>>& headers) const;
  // The highest delivery tag of `deliveries`.
  static uint64_t LastTag(absl::Span<const brokers::Delivery> deliveries);

  const ConsumerOptions& options_;
  AmqpConnection consume_;
  AmqpConnection publish_;
  int64_t redelivered_ = 0;
  int64_t connects_ = 0;
  int64_t cancelled_ = 0;
  brokers::CompetingConsumers competing_;
};

}  // namespace idem::rabbitmq

#endif  // IDEM_RABBITMQ_QUEUE_BROKER_H_
