// Reading a JetStream message's reply (ack) subject in place: its delivery
// count, stream sequence and timestamp, for every message a consumer
// fetches. nats.c's natsMsg_GetMetaData says the same, but allocates the
// metadata and copies its names for every message. Functions only;
// thread-compatible.

#ifndef IDEM_NATS_ACK_SUBJECT_H_
#define IDEM_NATS_ACK_SUBJECT_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace idem::nats {

// What a JetStream message's reply (ack) subject says of its delivery.
struct AckSubject {
  uint64_t delivered = 0;        // deliveries so far, this one included
  uint64_t stream_sequence = 0;  // the message's sequence in the stream
  int64_t timestamp = 0;         // when the stream stored it, ns since epoch
};

// Parses `reply` in place: "$JS.ACK.<stream>.<consumer>.<delivered>.<stream
// sequence>.<consumer sequence>.<timestamp>.<pending>", or with
// "<domain>.<account hash>" after "ACK" and up to two trailing tokens
// (servers 2.9 on: 11 to 13 tokens). nullopt for any other subject, and
// when the delivered count, stream sequence or timestamp is not a decimal
// number of 1 to 20 digits (digits only) that fits its field.
std::optional<AckSubject> ParseAckSubject(std::string_view reply);

}  // namespace idem::nats

#endif  // IDEM_NATS_ACK_SUBJECT_H_
