// idem::brokers::DeliveryLoop is the delivery loop every broker adapter
// (idem/redis/, idem/nats/, ...) shares: it receives a batch from a Broker,
// runs it through Engine::ProcessBatch, waits until the outcomes are durable
// (Engine::WaitDurable), then acknowledges exactly those deliveries whose
// outcome is durable: processed, duplicate or dead-lettered. A transient
// handler failure is retried with backoff up to LoopOptions::max_attempts; a
// delivery given up on is dead-lettered through the engine's outbox, in the
// same commit that records it as handled, so a crash can neither lose nor
// repeat a dead letter. After each batch the loop publishes the outbox
// (handler emits and dead letters) through Broker::Publish.
//
// A broker adapter implements Broker (receive, ack, nack, publish) and
// nothing else; docs/brokers.md describes the contract.
//
// A DeliveryLoop is not thread-safe: call PollBatch and RelayOutbox from one
// thread at a time. stats() may be called from any thread at any time. The
// Engine and the Broker are borrowed and must outlive the loop.

#ifndef IDEM_BROKERS_DELIVERY_LOOP_H_
#define IDEM_BROKERS_DELIVERY_LOOP_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "idem/engine.h"
#include "idem/logger.h"
#include "idem/outbox.h"
#include "idem/timer_pump.h"
#include "idem/txn.h"

namespace idem::brokers {

// One message as a broker delivered it. The adapter's Receive fills it in;
// the loop and the handler only read it. Owns its bytes.
struct Delivery {
  // The dedupe ID: the broker's message ID (or a business key). Empty, or
  // longer than kMaxIdBytes: the delivery is dead-lettered at once
  // (reason "id"), as retrying cannot repair it.
  std::string id;
  std::string payload;
  // Where it came from (stream, subject or queue name): Message::source,
  // and the dead letter's idem.source header.
  std::string source;
  // Message::partition and Message::offset: the position stored with the
  // state in the same commit (Engine::CommittedOffset), or offset -1 when the
  // broker has no position that fits an int64.
  int32_t partition = 0;
  int64_t offset = -1;
  // Message::event_time: the broker's timestamp of the message where it has
  // one (a NATS JetStream message's metadata timestamp, a Redis stream
  // entry ID's milliseconds, a RabbitMQ timestamp property);
  // absl::InfinitePast() for none.
  absl::Time event_time = absl::InfinitePast();
  // The broker's fields or headers, in order (names may repeat).
  std::vector<std::pair<std::string, std::string>> headers;
  // The broker's handle for Ack and Nack (a stream entry ID, a reply
  // subject, a delivery tag). When `id` is empty, source + "/" + receipt
  // names the dead letter, so it should not change on redelivery where the
  // broker allows.
  std::string receipt;
  // Set by an adapter when its broker will not deliver this message again
  // (NATS: the delivery that reaches the durable consumer's MaxDeliver):
  // unless the store has processed its ID already (then it is a duplicate
  // as usual), it is dead-lettered at once with reason "max_deliveries",
  // without running the handler, as a crash while handling it would lose
  // it for good.
  bool final_delivery = false;

  // The value of the last header named `name`, or nullopt.
  std::optional<std::string_view> Header(std::string_view name) const;
};

// What an adapter implements. Called from the loop's thread only.
class Broker {
 public:
  virtual ~Broker() = default;

  // Up to `max` deliveries, waiting at most `timeout` for the first; an empty
  // vector when none arrived. A delivery not acknowledged must eventually be
  // delivered again (an ack timeout, a pending-entries list, a requeue).
  // kUnavailable when the connection is lost (the next call reconnects).
  virtual absl::StatusOr<std::vector<Delivery>> Receive(
      int max, absl::Duration timeout) = 0;

  // Acknowledges `deliveries`: the broker must not deliver them again.
  // The loop calls it only once their outcomes are durable. An error leaves
  // them unacknowledged: redelivered later, they are duplicates.
  virtual absl::Status Ack(absl::Span<const Delivery> deliveries) = 0;

  // Gives `deliveries` back for redelivery (the loop could not decide them:
  // a storage error, or a delivery given up on without a dead-letter
  // destination). A broker that cannot nack may return OK and let its
  // redelivery timeout bring them back.
  virtual absl::Status Nack(absl::Span<const Delivery> deliveries) = 0;

  // Publishes one outbox entry to entry.destination carrying
  // entry.message_id as its message ID (a field, a header or a property), so
  // a downstream idem consumer drops republished copies. Returns once the
  // broker has it (confirmed, durable as the broker is configured).
  // kUnavailable (or kDeadlineExceeded, kResourceExhausted, ...) for what
  // publishing again can fix (a lost connection, a server restarting): the
  // relay leaves the entry in the outbox and tries again later. A refusal
  // that publishing the same entry again cannot overcome (the entry is
  // refused for good: see RefusedForGood) is kInvalidArgument (a name the
  // broker's rules reject), kOutOfRange (over a size limit),
  // kPermissionDenied, kNotFound (nothing there takes it) or
  // kFailedPrecondition (e.g. a key of another type): the relay
  // dead-letters the entry instead (LoopOptions::dead_letter_destination).
  virtual absl::Status Publish(const OutboxEntry& entry) = 0;

  // Whether this broker can publish to `destination` at all, by its own
  // rules (a name's length, reserved prefixes, syntax): OK, or
  // kInvalidArgument naming the rule. The loop checks each emit of a
  // handler with it (a refused emit fails the handler's message with that
  // error, so nothing of it commits and it is dead-lettered as
  // non-retriable), and the relay checks each entry before Publish.
  // Default: every destination is OK.
  virtual absl::Status CheckDestination(std::string_view destination) const {
    (void)destination;
    return absl::OkStatus();
  }

  // The loop is done with `batch`, what the last Receive returned (acked,
  // nacked or left for redelivery). A broker may keep it to fill a later
  // Receive's deliveries in place, reusing their strings' memory instead of
  // allocating and freeing four or more strings per message. Default: drops
  // it.
  virtual void Recycle(std::vector<Delivery> batch) { (void)batch; }

  // Connections to the broker made again after one was lost, since the
  // broker was made (LoopStats::reconnects). Default: 0.
  virtual int64_t Reconnects() const { return 0; }

  // Times the broker told of other consumers on this consumer's own queue
  // or durable (competing consumers; see "Competing consumers" in
  // docs/brokers.md), since the broker was made
  // (LoopStats::competing_consumers). Default: 0 (the broker cannot tell).
  virtual int64_t CompetingConsumers() const { return 0; }
};

// Whether a Broker::Publish error means the broker refused the entry for
// good (kInvalidArgument, kOutOfRange, kPermissionDenied, kNotFound,
// kFailedPrecondition), rather than that publishing it again may work.
bool RefusedForGood(const absl::Status& status);

// The idem.error header of a dead letter holds at most this many bytes of
// the error's text; a longer text is cut and the dead letter carries
// idem.truncated (a comma-separated list of what was cut: "error",
// "headers", "value"). The message ID is never cut.
inline constexpr size_t kMaxDeadLetterErrorBytes = 1024;

// User code run once per new message ID, with no engine-wide lock held (see
// idem::Handler: it may run again after a conflict): return OK to commit the
// Txn's writes.
using Handler = absl::FunctionRef<absl::Status(const Delivery&, Txn&)>;

struct LoopOptions {
  // ---- Batches ----

  // Most deliveries per Receive and ProcessBatch. Must be >= 1. Default: 100.
  int max_batch = 100;
  // How long a Receive waits for the first delivery. Must be >= 0.
  // Default: 100 ms.
  absl::Duration receive_timeout = absl::Milliseconds(100);
  // Dedupe window of each delivery; zero: the engine's
  // Options::dedupe_window. Must be >= 0. Default: zero.
  absl::Duration ttl = absl::ZeroDuration();

  // ---- Failures ----

  // Attempts of a delivery whose handler fails with a retriable code before
  // it is given up on. Must be >= 1. Default: 3.
  int max_attempts = 3;
  // Pause between attempts. Must be >= 0. Default: 100 ms.
  absl::Duration retry_backoff = absl::Milliseconds(100);
  // Handler errors given up on at once, as retrying the same input cannot
  // repair them (so is an idem::PermanentError, and a kConflict outcome
  // under Options::detect_conflicts). Default: the codes Abseil documents
  // as not fixed by retrying, as the Kafka consumer's.
  std::vector<absl::StatusCode> non_retriable_codes = {
      absl::StatusCode::kInvalidArgument, absl::StatusCode::kFailedPrecondition,
      absl::StatusCode::kOutOfRange, absl::StatusCode::kUnimplemented,
      absl::StatusCode::kPermissionDenied};
  // Where deliveries given up on go: emitted there through the outbox (the
  // payload as value, the ID as key, the delivery's headers plus idem.error
  // (at most kMaxDeadLetterErrorBytes), idem.reason ("id", "attempts",
  // "non_retriable", "permanent", "conflict" or "max_deliveries"),
  // idem.source, idem.source.receipt and, if it had one, idem.source.id),
  // in the commit that records the delivery as handled under
  // "idem.dead-letter/" + its ID (or source/receipt without one). The
  // delivery's own ID is not marked seen: a corrected redelivery runs.
  // Also where the relay sends an outbox entry the broker refused for good
  // (RefusedForGood): the entry's key, value and headers under its own
  // message ID, plus idem.error, idem.reason "refused" and
  // idem.destination (where it was meant to go); the entries behind it then
  // flow (LoopStats::outbox_dead_lettered). A dead letter the broker
  // refuses for good is published again with the copied headers dropped
  // and idem.error cut short, then also without its value (idem.value.bytes
  // gives its size), each time saying so in idem.truncated; never without
  // its message ID.
  // Empty: a delivery given up on fails PollBatch with kAborted naming it,
  // and is nacked; an entry refused for good stays first in the outbox and
  // the relay reports kFailedPrecondition naming it
  // (BatchReport::outbox_error) until the cause is fixed. At most
  // kMaxSourceBytes bytes, and a destination the broker accepts
  // (Broker::CheckDestination; adapters check it at Create).
  // Default: empty.
  std::string dead_letter_destination;

  // ---- Output ----

  // After each PollBatch, publish the outbox through Broker::Publish until
  // it is drained (RelayOutbox). Turn it off when another relay drains the
  // engine. Default: true.
  bool relay_outbox = true;
  // Outbox entries read per Engine::ReadOutbox. Must be >= 1. Default: 500.
  int relay_batch = 500;

  // ---- Backpressure ----

  // PollBatch receives nothing while the engine's outbox holds more than
  // this many entries (Engine::OutboxPending): it relays first (with
  // relay_outbox) and, if the outbox is still above the bound, waits up to
  // receive_timeout for another relay to drain it, then returns with
  // BatchReport::paused set and nothing received; the broker keeps the
  // messages. Fetching resumes once the outbox is at or below the bound.
  // The bound is checked before each fetch, so one batch's emits may take
  // the outbox past it. A broker that refuses publishing for a while (down,
  // out of memory) then stops consumption instead of letting the store grow
  // without end. 0: never pause. Must be >= 0. Default: 10,000.
  int64_t max_outbox_pending = 10'000;

  // ---- Timers ----

  // Fires the durable timers the handlers set (Txn::SetTimer;
  // idem/timers.h) on the (source, partition) pairs the loop has received
  // from, through an idem::TimerPump after each PollBatch, before the
  // outbox is published: the event-time ones once a batch advanced the
  // partition's stream time, the processing-time ones on every call (so
  // also when nothing arrived), up to max_batch per partition and domain. A
  // failed fire is counted (timer_failures) and fires again later.
  // Default: unset (no timers fired).
  TimerPump::Handler timer_handler;

  // ---- Logs ----

  // Receives the adapter's warnings: the first time the broker tells of
  // competing consumers (Broker::CompetingConsumers). Borrowed; must
  // outlive the loop. nullptr: they go to stderr. Default: nullptr.
  Logger* logger = nullptr;
};

// What one PollBatch did.
struct BatchReport {
  int64_t received = 0;
  int64_t processed = 0;      // the handler ran and committed
  int64_t duplicates = 0;     // suppressed: the ID was seen
  int64_t dead_lettered = 0;  // given up on, dead letter committed
  int64_t retries = 0;        // extra attempts of failed deliveries
  int64_t non_retriable = 0;  // of dead_lettered: given up on at once
  int64_t acked = 0;          // deliveries acknowledged to the broker
  int64_t nacked = 0;         // deliveries given back to the broker
  int64_t outbox_published = 0;
  // Outbox entries the broker refused for good, published to
  // dead_letter_destination instead (not in outbox_published).
  int64_t outbox_dead_lettered = 0;
  // LoopOptions::timer_handler: timers fired, fires that failed (the timer
  // stays), and the largest lag of a timer fired (its domain's time when it
  // fired minus its fire_at).
  int64_t timers_fired = 0;
  int64_t timer_failures = 0;
  absl::Duration timer_lag;
  // Why the relay stopped, if it did (the batch itself was handled and
  // acknowledged; the entries not published stay in the outbox and the next
  // call publishes them): a Publish error that retrying can fix, an engine
  // error, or kFailedPrecondition for an entry refused for good that could
  // not be dead-lettered. OK when the outbox was drained.
  absl::Status outbox_error;
  // Nothing was received because the outbox held more than
  // LoopOptions::max_outbox_pending entries (backpressure).
  bool paused = false;
};

// Totals since the loop was made.
struct LoopStats {
  int64_t batches = 0;
  int64_t received = 0;
  int64_t processed = 0;
  int64_t duplicates = 0;
  int64_t dead_lettered = 0;
  int64_t retries = 0;
  int64_t non_retriable = 0;
  int64_t acked = 0;
  int64_t nacked = 0;
  int64_t outbox_published = 0;
  int64_t outbox_dead_lettered = 0;  // see BatchReport::outbox_dead_lettered
  int64_t timers_fired = 0;          // see BatchReport::timers_fired
  int64_t timer_failures = 0;
  // BatchReport::timer_lag summed over the calls that fired a timer.
  absl::Duration timer_lag_sum;
  // Broker calls that failed (Receive, Ack, Nack, Publish), and the last
  // one's text.
  int64_t broker_errors = 0;
  std::string last_broker_error;
  // Wall time in engine calls (and retry backoff) versus broker calls.
  absl::Duration engine_time;
  absl::Duration broker_time;
  // Receive calls that brought deliveries, and their wall time (of
  // broker_time): the fetch latency. Calls that brought none are left out,
  // as they wait out receive_timeout on an idle broker.
  int64_t fetches = 0;
  absl::Duration fetch_time;
  // The broker's Reconnects() after the last PollBatch.
  int64_t reconnects = 0;
  // The broker's CompetingConsumers() after the last PollBatch.
  int64_t competing_consumers = 0;
  // Backpressure (LoopOptions::max_outbox_pending): times fetching stopped
  // (a PollBatch that found the outbox above the bound after one that did
  // not), PollBatch calls that received nothing for it, and the wall time
  // those calls waited.
  int64_t backpressure_pauses = 0;
  int64_t paused_polls = 0;
  absl::Duration paused_time;
};

// Test-only hooks (deliberately broken variants), off by default.
struct LoopHooks {
  // Acknowledge every delivery as soon as it is received, before it is
  // processed: a crash then loses it.
  bool ack_on_receive = false;
  // Never acknowledge: as a process killed after its commits and before its
  // acks.
  bool skip_acks = false;
  // Acknowledge without Engine::WaitDurable: under Durability::kBuffered a
  // power loss then takes back outcomes the broker was told about.
  bool skip_wait_durable = false;
  // The relay leaves an outbox entry the broker refused for good where it
  // is and returns the refusal, instead of dead-lettering it: the entries
  // behind it never flow.
  bool hold_refused_entries = false;
};

class DeliveryLoop {
 public:
  // kInvalidArgument naming the field for bad options. `engine` and `broker`
  // are borrowed.
  static absl::Status Validate(const LoopOptions& options);
  DeliveryLoop(Engine* engine, Broker* broker, LoopOptions options,
               LoopHooks hooks = {});

  DeliveryLoop(const DeliveryLoop&) = delete;
  DeliveryLoop& operator=(const DeliveryLoop&) = delete;

  // Receives up to max_batch deliveries and handles them: each is processed
  // (or found a duplicate, or dead-lettered) and durable before it is
  // acknowledged. Then, with relay_outbox, publishes the outbox. While the
  // outbox holds more than max_outbox_pending entries it receives nothing
  // (BatchReport::paused; see the option). Returns
  // what it did (zero received when nothing arrived), also when the relay
  // failed: then BatchReport::outbox_error says why, and the entries not
  // published stay in the outbox for the next call. Errors: Receive's
  // (nothing was handled); the engine's, or kAborted for a delivery given up
  // on without dead_letter_destination: the batch's deliveries are nacked,
  // and those already committed are duplicates when redelivered; Ack's (the
  // outcomes stay committed; redeliveries are duplicates).
  absl::StatusOr<BatchReport> PollBatch(Handler handler);

  // Publishes every durable outbox entry, oldest first, through
  // Broker::Publish, acknowledging them in the engine as they are published
  // (or dead-lettered: see dead_letter_destination); returns how many were
  // published to their own destination. On a Publish error that retrying
  // can fix, the entries handled before it are acknowledged and the error
  // returned; the rest stay in the outbox. kFailedPrecondition for an entry
  // refused for good that could not be dead-lettered (it stays first).
  // Engine errors as Engine::ReadOutbox and AckOutbox. Counted in stats().
  absl::StatusOr<int64_t> RelayOutbox();

  LoopStats stats() const;

 private:
  // Relays the outbox until drained, counting into `report`; returns what
  // stopped it.
  absl::Status Relay(BatchReport& report);
  // Publishes `entry`, or, refused for good, its dead letter; OK once one
  // of them is published (counted into `report`).
  absl::Status PublishOrDeadLetter(const OutboxEntry& entry,
                                   BatchReport& report);
  // Backpressure: true once the outbox is at or below max_outbox_pending
  // (at once when the bound is off), false when it stayed above it for
  // receive_timeout (report.paused is then set); relays meanwhile, with
  // relay_outbox. Engine errors.
  absl::StatusOr<bool> WaitForOutboxRoom(BatchReport& report);
  absl::Status BrokerError(absl::Status status);
  // `fetch_time`: Receive's part of `broker_time`.
  void Count(const BatchReport& report, absl::Duration engine_time,
             absl::Duration broker_time,
             absl::Duration fetch_time = absl::ZeroDuration());

  // Pumps the timers of every partition received from (timer_handler).
  void FireTimers(BatchReport& report);

  // Constant after construction.
  Engine* const engine_;
  Broker* const broker_;
  const LoopOptions options_;
  const LoopHooks hooks_;

  // The loop's thread only. Null without timer_handler.
  std::unique_ptr<TimerPump> timer_pump_;
  absl::btree_set<std::pair<std::string, int32_t>> timer_partitions_;
  // Whether the last PollBatch found the outbox above max_outbox_pending.
  bool paused_ = false;

  mutable absl::Mutex mu_;
  LoopStats stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace idem::brokers

#endif  // IDEM_BROKERS_DELIVERY_LOOP_H_
