// idem::redis::Consumer consumes a Redis stream through a consumer group with
// exactly-once effects: every batch goes through the shared delivery loop
// (idem/brokers/delivery_loop.h), so each entry's dedupe record and the
// handler's state writes commit in one write, and the entry is XACKed only
// once that write is durable.
//
// - Reads with XREADGROUP as ConsumerOptions::consumer_name. After a start
//   (or a reconnect, or a failed batch) it first re-reads its own pending
//   entries (XREADGROUP ... 0): those it received and never acknowledged.
// - Entries other consumers left pending for longer than claim_idle (a
//   consumer that died, or one whose handler outlasts claim_idle) are taken
//   over with XAUTOCLAIM. If they were processed before the ack was lost,
//   the engine finds them duplicates only when the consumer that left them
//   shares this consumer's store (the same Engine); a consumer with a store
//   of its own applies them again. Only consumers sharing one store are
//   deduplicated against each other: see "Competing consumers" in
//   docs/brokers.md for the deployments that are safe.
// - hiredis writes with write(2): every command blocks SIGPIPE on the
//   calling thread and swallows the one a cut socket raises, so a lost
//   connection is kUnavailable, never the end of the process.
// - ID: the entry's id_field, else "<stream>/<entry ID>" (which suppresses
//   redeliveries but not producer duplicates).
// - No offset is stored with the state: an entry ID is two 64-bit numbers
//   ("<ms>-<seq>"), which no int64 offset holds, and the group itself keeps
//   the resume position (its last-delivered ID and pending entries list);
//   entries are only acknowledged after their outcome is durable, so the
//   group never gets ahead of the state.
// - The outbox (Txn::Emit, dead letters) is relayed with XADD to the
//   destination stream, with the entry's message ID in the id_field, so a
//   downstream idem consumer drops republished copies.
//
// Requires the optional idem::redis library (built when hiredis is found).
// A Consumer is not thread-safe (only Stop may be called from any thread)
// and borrows its Engine, as brokers::BrokerConsumer says.

#ifndef IDEM_REDIS_CONSUMER_H_
#define IDEM_REDIS_CONSUMER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "idem/brokers/consumer.h"
#include "idem/brokers/delivery_loop.h"
#include "idem/engine.h"

namespace idem::redis {

// A stream entry as a handler sees it: `id` the dedupe ID, `payload` the
// payload_field's value, `source` the stream, `receipt` the entry ID,
// `headers` the entry's other fields in order.
using Delivery = brokers::Delivery;
using Handler = brokers::Handler;

struct ConsumerOptions {
  // ---- Where from ----

  // The server. Default: 127.0.0.1:6379.
  std::string host = "127.0.0.1";
  int port = 6379;
  // Credentials: with a password, each connection starts with AUTH [user]
  // password (an empty user: the default user). A password the server
  // refuses, or none where it wants one: kUnauthenticated naming the
  // server. Default: none.
  std::string user;
  std::string password;
  // Connect with TLS (through OpenSSL: Debian 12's hiredis has none),
  // verifying the server's certificate against the CA certificates in
  // tls_ca_file (PEM; empty: the system's) and against `host` (its IP
  // address, or its DNS name). With tls_cert_file and tls_key_file (PEM,
  // both or neither), present that client certificate, for a server that
  // asks for one (tls-auth-clients). A handshake that fails (a server
  // without TLS, a certificate not trusted or not naming the host):
  // kUnavailable naming the server; a file that cannot be loaded:
  // kInvalidArgument naming it. Default: false.
  bool tls = false;
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  // The stream, the consumer group and this consumer's name in it.
  // Required. Keep the name stable across restarts of the same process, so
  // it takes its own pending entries back at once instead of after
  // claim_idle.
  std::string stream;
  std::string group;
  std::string consumer_name;
  // Create the group (XGROUP CREATE ... MKSTREAM) at group_start_id if it
  // does not exist; false: Create fails with kNotFound unless the stream
  // and the group exist. Default: true, from "0" (the stream's first
  // entry).
  bool create_group = true;
  std::string group_start_id = "0";

  // ---- Entries ----

  // The field holding the message ID; empty: every entry's ID is
  // "<stream>/<entry ID>". Also the field the relay writes the outbox
  // entry's message ID to (then "message-id"). Default: "message-id".
  std::string id_field = "message-id";
  // The field holding the payload (also for the relay). An entry without it
  // has an empty payload. Must not be empty. Default: "payload".
  std::string payload_field = "payload";

  // ---- Outputs ----

  // The relay's XADD trims each stream it writes to about this many entries
  // (MAXLEN ~: whole macro nodes go, so a stream keeps at least this many
  // and at most about one node, stream-node-max-entries, more). The dead
  // letter stream (delivery.dead_letter_destination) is never trimmed.
  // Trimming drops the oldest entries whether or not a group has read
  // them: keep it above what downstream consumers may lag behind. Zero:
  // never trim. Must be >= 0. Default: 0.
  int64_t output_max_len = 0;
  // Or trims by age: the relay's XADD drops entries older than this
  // (MINID ~ <now - output_max_age in ms>-0, by the entry IDs' time part;
  // whole macro nodes go, so a few older entries may stay). The same
  // exceptions and caution as output_max_len, which it excludes (XADD
  // takes one). Zero: never. Must be >= 0 and finite. Default: 0.
  absl::Duration output_max_age = absl::ZeroDuration();

  // ---- Redeliveries ----

  // Entries pending on another consumer for at least this long are claimed
  // (XAUTOCLAIM). Zero: never claim. Must be >= 0. Default: 30 s.
  absl::Duration claim_idle = absl::Seconds(30);
  // How often the pending entries list is scanned for claims. Must be > 0.
  // Default: 1 s.
  absl::Duration claim_interval = absl::Seconds(1);

  // ---- Connection ----

  // Connect and reply timeout (an XREADGROUP's BLOCK, the loop's
  // receive_timeout, comes on top). Must be > 0. Default: 5 s.
  absl::Duration io_timeout = absl::Seconds(5);
  // Run's pause after a lost connection before polling (and reconnecting)
  // again. Must be >= 0. Default: 200 ms.
  absl::Duration reconnect_backoff = absl::Milliseconds(200);

  // ---- The delivery loop ----

  // Batch size, XREADGROUP's BLOCK (receive_timeout), retries, the dead
  // letter stream (dead_letter_destination) and relaying: see
  // idem/brokers/delivery_loop.h.
  brokers::LoopOptions delivery;
};

// Totals since Create: the delivery loop's, and the adapter's own.
struct ConsumerStats : brokers::LoopStats {
  int64_t claimed = 0;    // entries taken over with XAUTOCLAIM
  int64_t reclaimed = 0;  // own pending entries read again
  int64_t connects = 0;   // connections made (1 without reconnects)
};

// A Redis stream's consumer: the contract of brokers::BrokerConsumer
// (idem/brokers/consumer.h), with the stream's own. PollBatch reads its own
// pending entries first, then claimed ones, then new ones, and XACKs them
// once durable; after a lost connection its unacknowledged entries come
// back as this consumer's pending entries; it returns kFailedPrecondition
// naming the group when the group was removed (NOGROUP). A relay that stops
// at a server over its maxmemory reports kResourceExhausted in
// BatchReport::outbox_error (the entry stays in the outbox; Run waits and
// goes on). Close leaves unacknowledged entries pending.
class Consumer : public brokers::BrokerConsumer<ConsumerStats> {
 public:
  // Validates the options (kInvalidArgument naming the field), connects and,
  // with create_group, creates the group; without, checks that the stream
  // and the group exist (kNotFound naming the missing one). kUnavailable if
  // the server cannot be reached; kUnauthenticated or kPermissionDenied if
  // it refuses the connection's commands; kFailedPrecondition for another
  // error reply (e.g. the key is not a stream). `engine` is borrowed.
  static absl::StatusOr<std::unique_ptr<Consumer>> Create(
      Engine* engine, const ConsumerOptions& options);
};

}  // namespace idem::redis

#endif  // IDEM_REDIS_CONSUMER_H_
