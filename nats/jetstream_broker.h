// JetStreamBroker is the NATS JetStream side of idem::nats::Consumer: the
// brokers::Broker (fetch, ack, nak, publish) the shared delivery loop drives,
// over one nats.c connection (which reconnects by itself) and one durable
// pull subscription. Not thread-safe.

#ifndef IDEM_NATS_JETSTREAM_BROKER_H_
#define IDEM_NATS_JETSTREAM_BROKER_H_

#include <nats/nats.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "idem/brokers/delivery_loop.h"
#include "idem/nats/consumer.h"

namespace idem::nats {

class JetStreamBroker : public brokers::Broker {
 public:
  explicit JetStreamBroker(const ConsumerOptions& options);
  ~JetStreamBroker() override;
  JetStreamBroker(const JetStreamBroker&) = delete;
  JetStreamBroker& operator=(const JetStreamBroker&) = delete;

  // Connects, creates the stream if asked, creates the durable consumer if
  // it does not exist (from `start_sequence` when set, else the stream's
  // start) and binds a pull subscription to it.
  absl::Status Start(std::optional<uint64_t> start_sequence);
  // Destroys the subscription (the durable consumer stays) and the
  // connection. Idempotent.
  void Close();

  // One fetch of up to `max` messages; none when `timeout` passes first.
  absl::StatusOr<std::vector<brokers::Delivery>> Receive(
      int max, absl::Duration timeout) override;
  // "+ACK" to each message's reply subject, then a flush: the server has
  // them when it returns.
  absl::Status Ack(absl::Span<const brokers::Delivery> deliveries) override;
  // "-NAK" to each: redelivered at once.
  absl::Status Nack(absl::Span<const brokers::Delivery> deliveries) override;
  // A JetStream publish to entry.destination with Nats-Msg-Id =
  // entry.message_id, the entry's headers and, when not empty, its key as
  // header Idem-Key; returns once the stream stored it.
  absl::Status Publish(const OutboxEntry& entry) override;

  int64_t redelivered() const { return redelivered_; }

 private:
  absl::Status Connect();
  absl::Status CreateStream();
  absl::Status CreateConsumer(std::optional<uint64_t> start_sequence);
  absl::Status Reply(absl::Span<const brokers::Delivery> deliveries,
                     std::string_view verb);
  brokers::Delivery MakeDelivery(natsMsg* msg);

  const ConsumerOptions& options_;
  natsConnection* connection_ = nullptr;
  jsCtx* js_ = nullptr;
  natsSubscription* subscription_ = nullptr;
  int64_t redelivered_ = 0;
};

}  // namespace idem::nats

#endif  // IDEM_NATS_JETSTREAM_BROKER_H_
