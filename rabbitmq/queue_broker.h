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
#include "idem/brokers/delivery_loop.h"
#include "idem/rabbitmq/consumer.h"
#include "rabbitmq/amqp_connection.h"

namespace idem::rabbitmq {

class QueueBroker : public brokers::Broker {
 public:
  explicit QueueBroker(const ConsumerOptions& options);

  // Opens the consuming connection if needed: declares the queue, sets the
  // prefetch window and starts consuming with manual acks.
  absl::Status Subscribe();
  // Closes both connections. Idempotent.
  void Close();

  absl::StatusOr<std::vector<brokers::Delivery>> Receive(
      int max, absl::Duration timeout) override;
  // basic.ack of the batch's highest delivery tag with `multiple`: every
  // delivery of the batch (the loop acks all it received).
  absl::Status Ack(absl::Span<const brokers::Delivery> deliveries) override;
  // basic.nack with requeue of the batch's highest tag, `multiple`. On a
  // closed connection the server has requeued them already: OK.
  absl::Status Nack(absl::Span<const brokers::Delivery> deliveries) override;
  // A persistent message to the default exchange, routing key =
  // entry.destination (declared durable), message_id = entry.message_id,
  // the entry's headers and, when not empty, its key as header idem-key;
  // returns once the server confirmed it. Refused for good:
  // kInvalidArgument for a destination CheckQueueName rejects; kOutOfRange
  // for properties (message ID and headers) that do not fit one frame
  // (frame_max); the server's refusals as AmqpConnection::CloseStatus.
  absl::Status Publish(const OutboxEntry& entry) override;
  // CheckQueueName.
  absl::Status CheckDestination(std::string_view destination) const override {
    return CheckQueueName(destination);
  }

  int64_t redelivered() const { return redelivered_; }
  int64_t connects() const { return connects_; }

 private:
  brokers::Delivery MakeDelivery(const amqp_envelope_t& envelope);
  absl::Status OpenPublisher();
  absl::Status WaitForConfirm();
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
};

}  // namespace idem::rabbitmq

#endif  // IDEM_RABBITMQ_QUEUE_BROKER_H_
