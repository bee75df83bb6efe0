// idem::nats::Consumer consumes a NATS JetStream stream through a durable
// pull consumer with explicit acks, with exactly-once effects: every batch
// goes through the shared delivery loop (idem/brokers/delivery_loop.h), so
// each message's dedupe record, the handler's state writes and the message's
// stream sequence commit in one write, and the message is acknowledged only
// once that write is durable.
//
// - ID: the id_header (default Nats-Msg-Id), else "<stream>/<stream
//   sequence>" (which suppresses redeliveries but not producer duplicates).
// - The stream sequence is the offset committed with the state
//   (Engine::CommittedOffset(stream, 0)). When the durable consumer does not
//   exist yet and the engine has an offset for the stream, the consumer is
//   created to start at that offset + 1, so a consumer recreated on the
//   server resumes where the state is.
// - A message not acknowledged within ack_wait is redelivered by the server,
//   to this or another consumer on the same durable. If it was processed
//   before the ack was lost, a consumer on the same store (the same Engine)
//   finds it a duplicate; a consumer with a store of its own does not, and
//   applies it again (as it does a message whose handler outlasted
//   ack_wait). Only consumers sharing one store are deduplicated against
//   each other: see "Competing consumers" in docs/brokers.md for the
//   deployments that are safe. Binding a durable on which another client's
//   pull requests wait warns once (delivery.logger) and counts in
//   LoopStats::competing_consumers.
// - nats.c sets SIGPIPE to SIG_IGN for the whole process when it opens its
//   first connection, so a write to a cut socket fails instead of ending
//   the process; the application inherits that setting.
// - Header values are C strings in nats.c: a NUL byte ends one, and a
//   header with an empty value does not reach the consumer (an empty
//   id_header arrives as none: the message is named by its sequence).
// - The outbox (Txn::Emit, dead letters) is relayed with a JetStream publish
//   to the destination subject, with Nats-Msg-Id = the entry's message ID,
//   so the destination stream's duplicate window drops relay retries, and a
//   downstream idem consumer drops any that get past it.
//
// Requires the optional idem::nats library (built when libnats is found).
// A Consumer is not thread-safe (only Stop may be called from any thread)
// and borrows its Engine, as brokers::BrokerConsumer says.

#ifndef IDEM_NATS_CONSUMER_H_
#define IDEM_NATS_CONSUMER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "idem/brokers/consumer.h"
#include "idem/brokers/delivery_loop.h"
#include "idem/engine.h"

namespace idem::nats {

// A JetStream message as a handler sees it: `id` the dedupe ID, `payload`
// the data, `source` the stream, `offset` the stream sequence, `receipt`
// the message's reply (ack) subject, `headers` its headers in order.
using Delivery = brokers::Delivery;
using Handler = brokers::Handler;

struct ConsumerOptions {
  // ---- Where from ----

  // The server. Default: nats://127.0.0.1:4222.
  std::string url = "nats://127.0.0.1:4222";
  // Credentials: a user and password, or a token (not both); the url's own
  // ("nats://user:password@host:port") work too. Refused by the server:
  // kUnauthenticated naming it. Default: none.
  std::string user;
  std::string password;
  std::string token;
  // Or an NKey: `nkey` the user's public key ("U...", as the server's
  // `authorization { users = [ { nkey: ... } ] }` names it) and
  // `nkey_seed_file` the file holding its seed ("SU..."), with which the
  // client signs the server's challenge. Both or neither.
  std::string nkey;
  std::string nkey_seed_file;
  // Or a credentials file (.creds: a user JWT and its NKey seed, as `nsc`
  // writes it) for a server in operator (JWT) mode.
  // user, token, nkey and credentials_file exclude each other. A seed or
  // credentials file that cannot be read: kInvalidArgument naming it.
  std::string credentials_file;
  // Connect with TLS, verifying the server's certificate against the CA
  // certificates in tls_ca_file (PEM; empty: the system's). A handshake
  // that fails (a server without TLS, a certificate not trusted):
  // kUnavailable naming the server; a CA file that cannot be read:
  // kInvalidArgument naming it. Default: false.
  bool tls = false;
  std::string tls_ca_file;
  // The stream and the subject (filter) the consumer reads. Required; the
  // stream's name without '.', '*', '>', '/', '\' or whitespace.
  std::string stream;
  std::string subject;
  // The durable consumer's name (the stream name's rules); processes
  // sharing it share its messages: see "Competing consumers" in the
  // header's opening.
  // Created if the server does not have it: explicit acks, `ack_wait`, and
  // MaxAckPending at least delivery.max_batch, twice that with `prefetch`
  // (the server's default, 1,000, would cap larger batches and make each
  // fetch wait out its timeout), `max_deliver` and `backoff`. An existing
  // one is bound as it is, never deleted and recreated (that would skip its
  // unacknowledged messages); if its settings differ from these (filter
  // subject, explicit acks, AckWait, MaxDeliver, BackOff, a MaxAckPending
  // below the batches'), Create fails with kFailedPrecondition naming each
  // difference. Required.
  std::string durable;
  // Create the stream (file storage, capturing `subject`) if it does not
  // exist. Default: true.
  bool create_stream = true;
  // The created stream's duplicate window (Nats-Msg-Id). Must be > 0.
  // Default: 2 min (JetStream's).
  absl::Duration duplicate_window = absl::Minutes(2);

  // ---- Messages ----

  // The header holding the message ID; empty: every message's ID is
  // "<stream>/<stream sequence>". Default: "Nats-Msg-Id".
  std::string id_header = "Nats-Msg-Id";

  // Fetch the next batch while the current one is processed (one batch
  // ahead, as a RabbitMQ prefetch window or librdkafka's fetch queue does):
  // the server's sending and the client's parsing overlap the handler and
  // the engine's commit. Prefetched messages are unacknowledged until
  // their own batch is durable; Close NAKs those no PollBatch took, so the
  // server redelivers them at once. Default: true.
  bool prefetch = true;

  // ---- Redeliveries ----

  // The durable consumer's AckWait when this consumer creates it: how long
  // the server waits for an ack before redelivering. Must be > 0.
  // Default: 30 s.
  absl::Duration ack_wait = absl::Seconds(30);
  // The durable consumer's MaxDeliver when this consumer creates it: the
  // server delivers a message at most this many times. The delivery that
  // reaches it is dead-lettered (reason max_deliveries) without running the
  // handler, unless the store processed the message already: the server
  // would never deliver it again, so a crash while handling it (a message
  // that crashes the process) would lose it. 0: no limit. Must be 0 or at
  // least 2, and more than backoff.size(). Default: 10.
  int64_t max_deliver = 10;
  // The durable consumer's BackOff when this consumer creates it: the wait
  // before the first, second, ... redelivery of an unacknowledged message
  // (the last one repeats). nats-server then takes its first entry as the
  // AckWait, and ack_wait is not used. Each must be > 0. Default: empty
  // (every redelivery after ack_wait).
  std::vector<absl::Duration> backoff;
  // Send "+WPI" (in progress: the server restarts the ack timer) for every
  // message of a batch held longer than half the shortest ack wait
  // (ack_wait or a backoff entry), from a thread of the consumer's own, so
  // a batch whose handler outlasts the ack wait is not redelivered while
  // it runs (to this or another process). Default: true.
  bool in_progress_acks = true;

  // ---- Connection ----

  // Connect, request and flush timeout. Must be > 0. Default: 5 s.
  absl::Duration io_timeout = absl::Seconds(5);
  // Run's pause after a lost connection before polling again (the client
  // reconnects by itself meanwhile). Must be >= 0. Default: 200 ms.
  absl::Duration reconnect_backoff = absl::Milliseconds(200);

  // ---- The delivery loop ----

  // Batch size, the fetch wait (receive_timeout), retries, the dead letter
  // subject (dead_letter_destination) and relaying: see
  // idem/brokers/delivery_loop.h.
  brokers::LoopOptions delivery;
};

// Totals since Create: the delivery loop's, and the adapter's own.
struct ConsumerStats : brokers::LoopStats {
  // Messages the server delivered more than once (its delivery count).
  int64_t redelivered = 0;
  // "+WPI" (in progress) messages sent.
  int64_t in_progress_sent = 0;
};

// A JetStream consumer: the contract of brokers::BrokerConsumer
// (idem/brokers/consumer.h), with the stream's own. PollBatch fetches (the
// next batch is fetched ahead with `prefetch`). Close waits for the fetch
// running ahead, if any (at most delivery.receive_timeout), and NAKs what
// it brought; confirms the last acks; unsubscribes (the durable consumer
// stays on the server) and closes the connection.
class Consumer : public brokers::BrokerConsumer<ConsumerStats> {
 public:
  // Validates the options (kInvalidArgument naming the field and the rule:
  // stream and durable names without '.', '*', '>', '/', '\' or
  // whitespace; a dead-letter subject a message can be published to),
  // connects, creates the stream if asked and binds the durable pull
  // consumer (creating it, from the engine's offset + 1 if it has one).
  // kUnavailable if the server cannot be reached (or JetStream is not
  // enabled); kNotFound for a missing stream (create_stream off);
  // kFailedPrecondition for another JetStream error (a subject clash).
  // `engine` is borrowed.
  static absl::StatusOr<std::unique_ptr<Consumer>> Create(
      Engine* engine, const ConsumerOptions& options);
};

}  // namespace idem::nats

#endif  // IDEM_NATS_CONSUMER_H_
