// StreamBroker is the Redis Streams side of idem::redis::Consumer: the
// brokers::Broker (receive, ack, nack, publish) the shared delivery loop
// drives, over one Connection. Not thread-safe.

#ifndef IDEM_REDIS_STREAM_BROKER_H_
#define IDEM_REDIS_STREAM_BROKER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "idem/brokers/delivery_loop.h"
#include "idem/redis/consumer.h"
#include "redis/connection.h"

namespace idem::redis {

class StreamBroker : public brokers::Broker {
 public:
  explicit StreamBroker(const ConsumerOptions& options);

  // XGROUP CREATE ... MKSTREAM; an existing group is OK.
  absl::Status CreateGroup();
  // Connects and checks that the stream and its group exist (XINFO
  // GROUPS): kUnavailable if the server cannot be reached, kNotFound for a
  // missing stream or group.
  absl::Status CheckGroup();
  // Drops the connection (the next command would connect again).
  void Close() { connection_.Close(); }

  // Own pending entries first, then claimed ones (every claim_interval),
  // then new ones.
  absl::StatusOr<std::vector<brokers::Delivery>> Receive(
      int max, absl::Duration timeout) override;
  // XACK of the entries.
  absl::Status Ack(absl::Span<const brokers::Delivery> deliveries) override;
  // Redis has no nack: the entries stay pending on this consumer, and the
  // next Receive reads its pending entries again.
  absl::Status Nack(absl::Span<const brokers::Delivery> deliveries) override;
  // XADD to entry.destination (with MAXLEN ~ output_max_len, but for the
  // dead letter stream): id_field = the message ID, payload_field = the
  // value, "key" = the key when not empty, then the entry's headers but
  // those named like one of these three fields (brokers/reserved_headers.h).
  // kResourceExhausted when the server is over its maxmemory (OOM).
  // Refused for good (Connection::Command): kFailedPrecondition for a
  // destination key of another type (WRONGTYPE), kOutOfRange for a value or
  // header over the server's proto-max-bulk-len.
  absl::Status Publish(const OutboxEntry& entry) override;

  // ConsumerStats::claimed, reclaimed and connects.
  void CountInto(ConsumerStats* stats) const {
    stats->claimed = claimed_;
    stats->reclaimed = reclaimed_;
    stats->connects = connects();
  }
  int64_t connects() const { return connection_.connects(); }
  int64_t Reconnects() const override {
    return connects() > 0 ? connects() - 1 : 0;
  }

  // Test-only (RedisHooks).
  void set_let_sigpipe_through(bool let) {
    connection_.set_let_sigpipe_through(let);
  }

 private:
  absl::StatusOr<std::vector<brokers::Delivery>> ReadOwnPending(int max);
  absl::StatusOr<std::vector<brokers::Delivery>> Claim(int max);
  // Parses an array of [entry ID, [field, value, ...]] entries; an entry
  // whose fields are gone (deleted from the stream) is acknowledged and
  // skipped.
  absl::StatusOr<std::vector<brokers::Delivery>> ParseEntries(
      const redisReply* entries);
  brokers::Delivery MakeDelivery(std::string entry_id,
                                 const redisReply* fields) const;
  // Runs a command; a lost connection makes the next Receive start over
  // with the consumer's own pending entries.
  absl::StatusOr<Reply> Run(const std::vector<std::string>& argv,
                            absl::Duration extra_wait = absl::ZeroDuration());

  const ConsumerOptions& options_;
  Connection connection_;
  // Own pending entries are read from after this ID; empty once done.
  std::string pending_cursor_ = "0";
  // XAUTOCLAIM's cursor; "0-0" when a scan is complete.
  std::string claim_cursor_ = "0-0";
  absl::Time next_claim_ = absl::InfinitePast();
  int64_t claimed_ = 0;
  int64_t reclaimed_ = 0;
};

}  // namespace idem::redis

#endif  // IDEM_REDIS_STREAM_BROKER_H_
