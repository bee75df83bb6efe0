// idem-broker-demo: a ledger consumer on Redis Streams, NATS JetStream or
// RabbitMQ with exactly-once effects, through a consumer crash. Against a
// private server it starts (BrokerDemoOptions::start_server) or a running
// one, it
//  1. produces a stream of payments (examples/ledger.h), each with its
//     message ID, some of them published twice (producer duplicates);
//  2. runs the broker's idem Consumer in a separate process of this binary
//     (a worker, started with hidden flags), whose handler stops and waits
//     at its call for about a third of the payments, and kills it there
//     with SIGKILL: it dies inside a batch, with deliveries unacknowledged;
//  3. starts a new consumer on the same store, to which the broker delivers
//     again what the dead one held (Redis: XAUTOCLAIM of its pending
//     entries; NATS: after AckWait; RabbitMQ: requeued as its connection
//     dropped), and runs it until the broker has nothing more to deliver;
//  4. checks every account's balance exactly against the unique payments.
//
// RunBrokerDemo is the whole demo minus flag parsing (tools/
// broker_demo_main.cc); RunBrokerDemoWorker is the worker. The demo works in
// a new scratch directory under $TMPDIR (or /tmp), removed before returning
// unless BrokerDemoOptions::keep. Thread-compatible.

#ifndef IDEM_CLI_BROKER_DEMO_H_
#define IDEM_CLI_BROKER_DEMO_H_

#include <cstdint>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "examples/ledger.h"

namespace idem::cli {

// idem-broker-demo's own exit code, above the shared ones (cli/
// exit_codes.h): the server could not be started or reached.
inline constexpr int kExitBrokerUnavailable = 3;

// The largest --messages: the demo holds its stream in memory and reads
// every ID back while it waits for the worker.
inline constexpr int64_t kMaxBrokerDemoMessages = 1'000'000;

struct BrokerDemoOptions {
  // "redis", "nats" or "rabbitmq" (those built: DemoBroker::Names()).
  // Required.
  std::string broker;
  // Start a private server (a temporary directory, a free loopback port),
  // stopped at the end, instead of connecting to host:port.
  bool start_server = false;
  // The server without start_server. Port 0: the broker's usual one (Redis
  // 6379, NATS 4222, RabbitMQ 5672, with guest/guest on vhost "/"). Must be
  // in [0, 65535].
  std::string host = "127.0.0.1";
  int port = 0;
  // The Redis stream, JetStream stream or RabbitMQ queue to use; a new one
  // (the checks count every message in it). Empty: "idem-demo-<unix
  // nanoseconds>".
  std::string source;
  // Messages produced, producer duplicates included. Must be in
  // [10, kMaxBrokerDemoMessages].
  int64_t messages = 2000;
  // Every n-th message publishes an earlier one's ID and payload again (0:
  // none). Must be >= 0.
  int duplicate_every = 10;
  // Most deliveries per batch. Must be in [1, 500].
  int batch = 25;
  uint64_t seed = 1;
  // Keep the scratch directory (the store, the worker's log).
  bool keep = false;
  // How long the demo waits for progress (the worker, the new consumer)
  // before it gives up. Must be > 0.
  absl::Duration idle_timeout = absl::Seconds(30);
};

// The worker's own settings (the hidden flags).
struct BrokerDemoWorker {
  // The store it consumes into. Required.
  std::string store;
  // The deliberately broken variant: the worker's delivery loop acknowledges
  // every delivery as soon as it is received (LoopHooks::ack_on_receive), so
  // the crash loses what it held and the checks must fail.
  bool ack_on_receive = false;
  // The handler's pause per payment.
  absl::Duration pause = absl::Milliseconds(1);
  // If above 0: the handler's call number `hold_at` creates `hold_file` and
  // waits to be killed, so the kill lands inside a batch, received and not
  // committed (acknowledged too in the broken variant).
  int64_t hold_at = 0;
  std::string hold_file;
};

struct BrokerDemoReport {
  std::string broker;
  // "private redis-server on 127.0.0.1:40123", or "127.0.0.1:6379".
  std::string server;
  std::string source;
  // The scratch directory (gone unless kept) and the store in it.
  std::string scratch;
  std::string store;
  // The stream.
  int64_t produced = 0;
  int64_t unique_payments = 0;
  int64_t producer_duplicates = 0;
  // Payments in the store when the worker was killed.
  int64_t applied_before_kill = 0;
  // The consumer that took over (DemoConsumerStats): deliveries received,
  // processed, found duplicates, delivered again by the broker, and
  // acknowledged; and its batches.
  int64_t received = 0;
  int64_t processed = 0;
  int64_t duplicates = 0;
  int64_t redelivered = 0;
  int64_t acked = 0;
  int64_t batches = 0;
  // Payments in the store at the end, and the balances against the unique
  // payments.
  int64_t applied = 0;
  examples::BalanceCheck balances;
  double seconds = 0;
  bool passed = false;
};

// kInvalidArgument naming the flag if `options` is out of range.
absl::Status ValidateBrokerDemoOptions(const BrokerDemoOptions& options);

// Runs the demo; `self` is this binary (started as the worker, with
// `variant`'s flags); `progress` gets a line per step. Errors: kUnavailable
// when the server cannot be started or reached; kInvalidArgument for bad
// options; others when the worker or the engine failed. A failed check
// shows in the report.
absl::StatusOr<BrokerDemoReport> RunBrokerDemo(const BrokerDemoOptions& options,
                                               const std::string& self,
                                               const BrokerDemoWorker& variant,
                                               std::ostream& progress);

// Writes `report` for people, or as one JSON object when `json`.
void PrintBrokerDemoReport(const BrokerDemoReport& report, bool json,
                           std::ostream& out);

// RunBrokerDemo plus printing: kExitOk if the balances hold, kExitFailure
// if not (or the worker or the engine failed), kExitUsage for bad options,
// kExitBrokerUnavailable when the server cannot be started or reached
// (message on `err`).
int RunBrokerDemoTool(const BrokerDemoOptions& options, const std::string& self,
                      const BrokerDemoWorker& variant, bool json,
                      std::ostream& out, std::ostream& err);

// The worker: consumes options.source from options.host:options.port into
// worker.store until it is killed. Returns kExitFailure (message on `err`)
// if it cannot start or the consumer fails.
int RunBrokerDemoWorker(const BrokerDemoOptions& options,
                        const BrokerDemoWorker& worker, std::ostream& err);

}  // namespace idem::cli

#endif  // IDEM_CLI_BROKER_DEMO_H_
