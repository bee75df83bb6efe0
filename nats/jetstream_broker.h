// JetStreamBroker is the NATS JetStream side of idem::nats::Consumer: the
// brokers::Broker (fetch, ack, nak, publish) the shared delivery loop drives,
// over one nats.c connection (which reconnects by itself) and one durable
// pull subscription. Not thread-safe.

#ifndef IDEM_NATS_JETSTREAM_BROKER_H_
#define IDEM_NATS_JETSTREAM_BROKER_H_

#include <nats/nats.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "brokers/background_call.h"
#include "brokers/competing_consumers.h"
#include "idem/brokers/delivery_loop.h"
#include "idem/nats/consumer.h"
#include "nats/in_progress.h"

namespace idem::nats {

// OK if `subject` is one a message can be published to, or
// kInvalidArgument naming the rule it breaks: not empty, no whitespace or
// NUL, tokens separated by single dots (no empty token: no leading or
// trailing dot, no ".."), and no wildcard token ("*" or ">").
absl::Status CheckSubject(std::string_view subject);

// OK if `name` can name a JetStream stream or durable consumer, or
// kInvalidArgument naming the rule: not empty, and none of '.', '*', '>',
// '/', '\', whitespace or control characters (nats-server's rule; a dot
// would make the name part of the API subjects it appears in).
absl::Status CheckStreamName(std::string_view name);

// How many messages a fetch of up to `max` on `subscription` may ask for:
// `max`, or 1 while messages wait in the subscription already (late
// deliveries of an earlier pull request whose fetch timed out). Debian
// 12's nats.c 3.4.1 (memcheck places it in its _fetch) writes past the end of
// the list a fetch returns when the fetch starts with messages waiting and
// takes more than half its batch from them: it then waits for more than it
// asked the server for. A fetch of one cannot; it takes one waiting message, or
// asks for one. That is rare: a fetch that timed out while the server was still
// delivering.
int SafeFetchSize(natsSubscription* subscription, int max);

class JetStreamBroker : public brokers::Broker {
 public:
  explicit JetStreamBroker(const ConsumerOptions& options);
  ~JetStreamBroker() override;
  JetStreamBroker(const JetStreamBroker&) = delete;
  JetStreamBroker& operator=(const JetStreamBroker&) = delete;

  // Connects, creates the stream if asked, creates the durable consumer if
  // it does not exist (from `start_sequence` when set, else the stream's
  // start), or checks the settings of the one that exists
  // (kFailedPrecondition listing what differs), and binds a pull
  // subscription to it. With options.in_progress_acks, starts sending +WPI
  // for batches held longer than half the shortest ack wait.
  absl::Status Start(std::optional<uint64_t> start_sequence);
  // Destroys the subscription (the durable consumer stays) and the
  // connection. Idempotent.
  void Close();

  // One fetch of up to `max` messages; none when `timeout` passes first.
  // With options.prefetch, the fetch after it starts before this returns
  // and runs while the caller processes these: the next Receive takes its
  // messages (waiting for them if they have not come yet).
  absl::StatusOr<std::vector<brokers::Delivery>> Receive(
      int max, absl::Duration timeout) override;
  // "+ACK" to each message's reply subject, without waiting for the server
  // to process them: it does that while the caller processes the next
  // batch. The next Ack or Nack, and Close, first confirm them (a flush:
  // one round trip), so an ack the connection lost is reported one call
  // late; either way such messages come back as duplicates.
  absl::Status Ack(absl::Span<const brokers::Delivery> deliveries) override;
  // "-NAK" to each, then a flush: redelivered at once.
  absl::Status Nack(absl::Span<const brokers::Delivery> deliveries) override;
  // A JetStream publish to entry.destination with Nats-Msg-Id =
  // entry.message_id, the entry's headers and, when not empty, its key as
  // header Idem-Key; returns once the stream stored it. Refused for good:
  // kInvalidArgument for a subject CheckSubject rejects; kOutOfRange for a
  // message (data and headers) over the server's max_payload or the
  // stream's size limits; kNotFound when no stream captures the subject
  // (JetStream answers, but nothing takes the message); another JetStream
  // error kFailedPrecondition.
  absl::Status Publish(const OutboxEntry& entry) override;
  // Keeps `batch` (at most two) to fill a later fetch's deliveries in place.
  void Recycle(std::vector<brokers::Delivery> batch) override;
  // CheckSubject.
  absl::Status CheckDestination(std::string_view destination) const override {
    return CheckSubject(destination);
  }

  // ConsumerStats::redelivered and in_progress_sent (+WPI messages sent).
  void CountInto(ConsumerStats* stats) const {
    stats->redelivered = redelivered_.load();
    stats->in_progress_sent =
        in_progress_ != nullptr ? in_progress_->sent() : 0;
  }
  // nats.c's reconnects of the connection.
  int64_t Reconnects() const override;
  // 1 if, when Start bound the existing durable consumer, another client's
  // pull requests were waiting on it (its NumWaiting); else 0.
  int64_t CompetingConsumers() const override { return competing_.seen(); }

  // Test-only (NatsHooks): no more +WPI.
  void StopInProgress();
  // Test-only (NatsHooks): Close keeps the prefetched batch unacknowledged.
  void set_keep_prefetched_on_close(bool keep) {
    keep_prefetched_on_close_ = keep;
  }

 private:
  // What one fetch brought: its deliveries, and its error if it failed.
  struct Fetched {
    absl::Status status;
    std::vector<brokers::Delivery> deliveries;
    // The batch Fetch was given to fill, when nothing came to fill it with.
    std::vector<brokers::Delivery> unused;
  };

  // One fetch, its deliveries filled in place in `batch` (a recycled one,
  // or empty); with in-progress acks, its messages are held in `slot`.
  Fetched Fetch(int max, absl::Duration timeout, InProgress::Slot slot,
                std::vector<brokers::Delivery> batch);
  // A recycled batch to fill, or an empty one.
  std::vector<brokers::Delivery> TakeSpare();
  // Runs Fetch(max, timeout) on prefetch_'s thread (kept from one batch to
  // the next); if no thread can be had, the next Receive fetches itself.
  void StartPrefetch(int max, absl::Duration timeout);
  // Waits for the prefetch in flight, if any, and NAKs what it brought, so
  // the server redelivers those messages at once.
  void ReturnPrefetched();
  absl::Status Connect();
  absl::Status CreateStream();
  absl::Status CreateConsumer(std::optional<uint64_t> start_sequence);
  // OK if the existing durable consumer's settings are those the options
  // would create it with, else kFailedPrecondition naming each difference.
  absl::Status CheckExistingConsumer(const jsConsumerConfig& config);
  // Publishes `verb` to each delivery's reply subject; leaves them
  // unconfirmed.
  absl::Status Reply(absl::Span<const brokers::Delivery> deliveries,
                     std::string_view verb);
  // A flush, if replies were sent since the last one: returns once the
  // server has processed them.
  absl::Status ConfirmReplies(std::string_view what);
  // Fills `delivery` (a default one, or one of a recycled batch: every
  // field is set, its strings' memory reused) from `msg`.
  void MakeDelivery(natsMsg* msg, brokers::Delivery& delivery);
  // The error of a JetStream publish to `subject` that got no responders:
  // kNotFound if JetStream answers (so no stream captures the subject),
  // kUnavailable if it does not (a server restarting).
  absl::Status NoResponders(const std::string& subject);

  const ConsumerOptions& options_;
  natsConnection* connection_ = nullptr;
  jsCtx* js_ = nullptr;
  natsSubscription* subscription_ = nullptr;
  // The fetch running ahead (options_.prefetch), on its own thread; it
  // alone uses subscription_ while it runs.
  brokers::BackgroundCall<Fetched> prefetch_;
  // Batches the loop is done with (Recycle), for Fetch to fill again.
  std::vector<std::vector<brokers::Delivery>> spare_;
  // Replies were sent and not yet confirmed by a flush.
  bool unconfirmed_replies_ = false;
  bool keep_prefetched_on_close_ = false;
  std::atomic<int64_t> redelivered_{0};
  // The bound durable consumer's MaxDeliver; 0: no limit.
  int64_t max_deliver_ = 0;
  // Sends +WPI for held batches (options_.in_progress_acks).
  std::unique_ptr<InProgress> in_progress_;
  brokers::CompetingConsumers competing_;
};

}  // namespace idem::nats

#endif  // IDEM_NATS_JETSTREAM_BROKER_H_
