#include "rabbitmq/queue_broker.h"

#include <sys/time.h>

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "brokers/reserved_headers.h"

namespace idem::rabbitmq {
namespace {

std::string ToString(amqp_bytes_t bytes) {
  return std::string(static_cast<const char*>(bytes.bytes), bytes.len);
}

amqp_bytes_t Bytes(const std::string& s) {
  amqp_bytes_t bytes;
  bytes.len = s.size();
  bytes.bytes = const_cast<char*>(s.data());
  return bytes;
}

}  // namespace

int Prefetch(const ConsumerOptions& options) {
  if (options.prefetch > 0) return options.prefetch;
  return std::min(2 * options.delivery.max_batch, kMaxPrefetch);
}

QueueBroker::QueueBroker(const ConsumerOptions& options)
    : options_(options),
      consume_(options),
      publish_(options),
      competing_(options.delivery.logger) {}

void QueueBroker::Close() {
  consume_.Close();
  publish_.Close();
}

absl::Status QueueBroker::Subscribe() {
  if (consume_.open()) return absl::OkStatus();
  if (absl::Status s = consume_.Open(); !s.ok()) return s;
  ++connects_;
  uint32_t consumers = 0;
  if (absl::Status s =
          consume_.DeclareQueue(options_.queue,
                                /*with_arguments=*/true, &consumers);
      !s.ok()) {
    return s;
  }
  // Others consume the queue, and the server does not keep them apart.
  if (consumers > 0 && !options_.queue_arguments.single_active_consumer) {
    competing_.Saw(absl::StrCat("queue ", options_.queue, " has ", consumers,
                                " other consumer(s) and is not declared "
                                "single-active"));
  }
  amqp_basic_qos(consume_.state(), AmqpConnection::kChannel, 0,
                 static_cast<uint16_t>(Prefetch(options_)), 0);
  if (absl::Status s = consume_.RpcStatus("basic.qos"); !s.ok()) return s;
  amqp_basic_consume(consume_.state(), AmqpConnection::kChannel,
                     amqp_cstring_bytes(options_.queue.c_str()),
                     amqp_empty_bytes, /*no_local=*/0, /*no_ack=*/0,
                     /*exclusive=*/0, amqp_empty_table);
  return consume_.RpcStatus("basic.consume");
}

absl::StatusOr<std::vector<brokers::Delivery>> QueueBroker::Receive(
    int max, absl::Duration timeout) {
  if (absl::Status s = Subscribe(); !s.ok()) return s;
  std::vector<brokers::Delivery> out;
  timeval wait = absl::ToTimeval(timeout);
  while (static_cast<int>(out.size()) < max) {
    amqp_maybe_release_buffers(consume_.state());
    amqp_envelope_t envelope;
    amqp_rpc_reply_t reply =
        amqp_consume_message(consume_.state(), &envelope, &wait, 0);
    if (reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION &&
        reply.library_error == AMQP_STATUS_TIMEOUT) {
      break;
    }
    if (reply.reply_type != AMQP_RESPONSE_NORMAL) return ConsumingEnded(reply);
    out.push_back(MakeDelivery(envelope));
    amqp_destroy_envelope(&envelope);
    wait = timeval{0, 0};  // the rest of the batch: what is already here
  }
  return out;
}

brokers::Delivery QueueBroker::MakeDelivery(const amqp_envelope_t& envelope) {
  brokers::Delivery delivery;
  delivery.source = options_.queue;
  delivery.receipt = absl::StrCat(envelope.delivery_tag);
  delivery.payload = ToString(envelope.message.body);
  if (envelope.redelivered) ++redelivered_;
  const amqp_basic_properties_t& properties = envelope.message.properties;
  if (properties._flags & AMQP_BASIC_HEADERS_FLAG) {
    for (int i = 0; i < properties.headers.num_entries; ++i) {
      const amqp_table_entry_t& entry = properties.headers.entries[i];
      if (entry.value.kind != AMQP_FIELD_KIND_UTF8 &&
          entry.value.kind != AMQP_FIELD_KIND_BYTES) {
        continue;
      }
      delivery.headers.emplace_back(ToString(entry.key),
                                    ToString(entry.value.value.bytes));
    }
  }
  // The publisher's timestamp property: seconds since the epoch.
  if ((properties._flags & AMQP_BASIC_TIMESTAMP_FLAG) &&
      properties.timestamp > 0) {
    delivery.event_time =
        absl::FromUnixSeconds(static_cast<int64_t>(properties.timestamp));
  }
  if (properties._flags & AMQP_BASIC_MESSAGE_ID_FLAG) {
    delivery.id = ToString(properties.message_id);
  } else if (auto id = delivery.Header(options_.id_header); id.has_value()) {
    delivery.id = std::string(*id);
  }
  return delivery;
}

absl::Status QueueBroker::ConsumingEnded(const amqp_rpc_reply_t& reply) {
  std::string why = "the server closed the channel";
  if (reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION) {
    why = amqp_error_string2(reply.library_error);
    // The frame that came instead of a delivery, which rabbitmq-c put back.
    amqp_frame_t frame;
    timeval now{0, 0};
    if (reply.library_error == AMQP_STATUS_UNEXPECTED_STATE &&
        amqp_simple_wait_frame_noblock(consume_.state(), &frame, &now) ==
            AMQP_STATUS_OK &&
        frame.frame_type == AMQP_FRAME_METHOD) {
      if (frame.payload.method.id == AMQP_BASIC_CANCEL_METHOD) {
        ++cancelled_;
        why =
            absl::StrCat("the server cancelled the consumer of queue ",
                         options_.queue, " (the queue deleted, or a failover)");
      } else if (frame.payload.method.id == AMQP_CHANNEL_CLOSE_METHOD ||
                 frame.payload.method.id == AMQP_CONNECTION_CLOSE_METHOD) {
        why = AmqpConnection::CloseStatus(frame.payload.method, "consuming")
                  .ToString();
      }
    }
  }
  // Start over: the server requeues what this connection held, and the
  // next poll reconnects (a heartbeat timeout, a lost connection) and
  // subscribes again (a cancel: kNotFound if the queue is gone).
  consume_.Close();
  return absl::UnavailableError(absl::StrCat("amqp: consuming: ", why));
}

uint64_t QueueBroker::LastTag(absl::Span<const brokers::Delivery> deliveries) {
  uint64_t last = 0;
  for (const brokers::Delivery& d : deliveries) {
    uint64_t tag = 0;
    if (absl::SimpleAtoi(d.receipt, &tag) && tag > last) last = tag;
  }
  return last;
}

absl::Status QueueBroker::Ack(absl::Span<const brokers::Delivery> deliveries) {
  if (!consume_.open()) {
    return absl::UnavailableError("amqp: ack: the connection was lost");
  }
  return consume_.LibraryStatus(
      amqp_basic_ack(consume_.state(), AmqpConnection::kChannel,
                     LastTag(deliveries), /*multiple=*/1),
      "basic.ack");
}

absl::Status QueueBroker::Nack(absl::Span<const brokers::Delivery> deliveries) {
  if (!consume_.open()) return absl::OkStatus();
  return consume_.LibraryStatus(
      amqp_basic_nack(consume_.state(), AmqpConnection::kChannel,
                      LastTag(deliveries), /*multiple=*/1, /*requeue=*/1),
      "basic.nack");
}

absl::Status QueueBroker::OpenPublisher() {
  if (publish_.open()) return absl::OkStatus();
  if (absl::Status s = publish_.Open(); !s.ok()) return s;
  amqp_confirm_select(publish_.state(), AmqpConnection::kChannel);
  return publish_.RpcStatus("confirm.select");
}

absl::Status QueueBroker::Publish(const OutboxEntry& entry) {
  if (absl::Status s = CheckQueueName(entry.destination); !s.ok()) return s;
  if (absl::Status s = OpenPublisher(); !s.ok()) return s;
  if (options_.declare_queues) {
    if (absl::Status s = publish_.DeclareQueue(entry.destination); !s.ok()) {
      return s;
    }
  }
  std::vector<std::pair<std::string, std::string>> headers;
  for (const auto& header : entry.headers) {
    if (!brokers::IsReservedHeader(header.first, {"idem-key"})) {
      headers.push_back(header);
    }
  }
  if (!entry.key.empty()) headers.emplace_back("idem-key", entry.key);
  std::vector<amqp_table_entry_t> table(headers.size());
  for (size_t i = 0; i < headers.size(); ++i) {
    table[i].key = Bytes(headers[i].first);
    table[i].value.kind = AMQP_FIELD_KIND_UTF8;
    table[i].value.value.bytes = Bytes(headers[i].second);
  }
  amqp_basic_properties_t properties{};
  properties._flags = AMQP_BASIC_MESSAGE_ID_FLAG |
                      AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_HEADERS_FLAG;
  properties.message_id = Bytes(entry.message_id);
  properties.delivery_mode = 2;  // persistent
  properties.headers.num_entries = static_cast<int>(table.size());
  properties.headers.entries = table.data();
  if (absl::Status s = CheckFitsFrame(entry.message_id, headers); !s.ok()) {
    return s;
  }
  const int rc = amqp_basic_publish(publish_.state(), AmqpConnection::kChannel,
                                    amqp_empty_bytes, Bytes(entry.destination),
                                    /*mandatory=*/1, /*immediate=*/0,
                                    &properties, Bytes(entry.value));
  if (absl::Status s = publish_.LibraryStatus(rc, "basic.publish"); !s.ok()) {
    return s;
  }
  return WaitForConfirm(entry.destination);
}

absl::Status QueueBroker::CheckFitsFrame(
    const std::string& message_id,
    const std::vector<std::pair<std::string, std::string>>& headers) const {
  // The content header frame: frame header and end (8), class, weight, body
  // size and flags (14), delivery mode (1), message_id (1 + its bytes) and
  // the table (4, and per entry 1 + name + 1 (kind) + 4 + value).
  size_t bytes = 8 + 14 + 1 + 1 + message_id.size() + 4;
  for (const auto& [name, value] : headers) {
    bytes += 1 + name.size() + 1 + 4 + value.size();
  }
  const int frame_max = amqp_get_frame_max(publish_.state());
  if (frame_max > 0 && bytes > static_cast<size_t>(frame_max)) {
    return absl::OutOfRangeError(
        absl::StrCat("amqp: the message ID and headers take ", bytes,
                     " bytes, over the connection's frame_max of ", frame_max,
                     " (AMQP 0-9-1 sends the properties in one frame)"));
  }
  for (const auto& [name, value] : headers) {
    if (name.size() > 255) {
      return absl::OutOfRangeError(
          absl::StrCat("amqp: a header name of ", name.size(),
                       " bytes: at most 255 (a short string)"));
    }
  }
  if (message_id.size() > 255) {
    return absl::OutOfRangeError(
        absl::StrCat("amqp: a message_id of ", message_id.size(),
                     " bytes: at most 255 (a short string)"));
  }
  return absl::OkStatus();
}

absl::Status QueueBroker::WaitForConfirm(const std::string& destination) {
  const timeval wait = absl::ToTimeval(options_.io_timeout);
  // A basic.return (no queue took the message: mandatory) comes before the
  // confirm, which then says only that the server is done with it.
  std::string returned;
  while (true) {
    amqp_frame_t frame;
    const int rc =
        amqp_simple_wait_frame_noblock(publish_.state(), &frame, &wait);
    if (absl::Status s = publish_.LibraryStatus(rc, "waiting for a confirm");
        !s.ok()) {
      return s;
    }
    if (frame.frame_type != AMQP_FRAME_METHOD) continue;
    switch (frame.payload.method.id) {
      case AMQP_BASIC_RETURN_METHOD: {
        auto* r =
            static_cast<amqp_basic_return_t*>(frame.payload.method.decoded);
        returned = absl::StrCat(r->reply_code, " ", ToString(r->reply_text));
        continue;
      }
      case AMQP_BASIC_ACK_METHOD:
        if (returned.empty()) return absl::OkStatus();
        return absl::NotFoundError(
            absl::StrCat("amqp: no queue takes routing key ", destination,
                         " (basic.return: ", returned, ")"));
      case AMQP_BASIC_NACK_METHOD:
        return absl::UnavailableError("amqp: the server nacked a publish");
      case AMQP_CHANNEL_CLOSE_METHOD:
      case AMQP_CONNECTION_CLOSE_METHOD: {
        // E.g. 406 for a message over the server's max_message_size.
        absl::Status status =
            AmqpConnection::CloseStatus(frame.payload.method, "publishing");
        publish_.Close();
        return status;
      }
      default:
        continue;
    }
  }
}

}  // namespace idem::rabbitmq
