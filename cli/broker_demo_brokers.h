// What idem-broker-demo (cli/broker_demo.h) needs of each broker, behind one
// interface: a private server or the address of a running one, producing
// the payments, and the broker's idem Consumer (idem::redis::Consumer,
// idem::nats::Consumer, idem::rabbitmq::Consumer) with the demo's options.
// Only the brokers whose adapter is built are available (IDEM_HAVE_REDIS,
// IDEM_HAVE_NATS, IDEM_HAVE_RABBITMQ). Not thread-safe.

#ifndef IDEM_CLI_BROKER_DEMO_BROKERS_H_
#define IDEM_CLI_BROKER_DEMO_BROKERS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "idem/brokers/delivery_loop.h"
#include "idem/engine.h"
#include "servers/server_process.h"

namespace idem::cli {

// One message to produce: its message ID and its payload.
struct DemoRecord {
  std::string id;
  std::string payload;
};

// A consumer's totals, the same for every broker: the delivery loop's, and
// the deliveries the broker made again (NATS: a delivery count above one;
// RabbitMQ: the redelivered flag; Redis: entries claimed from another
// consumer with XAUTOCLAIM or re-read from its own pending list).
struct DemoConsumerStats {
  brokers::LoopStats loop;
  int64_t redelivered = 0;
};

// A broker's idem Consumer, as the demo drives it.
class DemoConsumer {
 public:
  virtual ~DemoConsumer() = default;
  // As the adapter's Consumer::PollBatch and Run.
  virtual absl::StatusOr<brokers::BatchReport> PollBatch(
      brokers::Handler handler) = 0;
  virtual absl::Status Run(brokers::Handler handler) = 0;
  virtual DemoConsumerStats stats() const = 0;
};

// Where a DemoBroker's server is: `host`:`port`, and the messages' source
// (a Redis stream, a JetStream stream, a RabbitMQ queue).
struct DemoEndpoint {
  std::string host = "127.0.0.1";
  int port = 0;
  std::string source;
};

class DemoBroker {
 public:
  // The brokers that can be named: "redis", "nats", "rabbitmq" (those
  // built), in that order.
  static std::vector<std::string> Names();
  // The port a broker's server listens on by default (6379, 4222, 5672).
  // REQUIRES: `name` is one of Names().
  static int DefaultPort(const std::string& name);
  // The broker `name` at `endpoint`. kInvalidArgument for a name not in
  // Names().
  static absl::StatusOr<std::unique_ptr<DemoBroker>> Create(
      const std::string& name, const DemoEndpoint& endpoint);

  virtual ~DemoBroker() = default;

  // Starts a private server of this broker (servers/: a temporary
  // directory, a free loopback port), which stops when the DemoBroker is
  // destroyed; the endpoint's host and port become the server's.
  // kUnavailable (with the server's log) if it cannot start.
  absl::Status StartServer();

  const DemoEndpoint& endpoint() const { return endpoint_; }

  // Publishes `records` to the source, in order, each with its message ID
  // ("message-id": a Redis field, a NATS header, the RabbitMQ message_id
  // property). kUnavailable if the server cannot be reached.
  absl::Status Produce(const std::vector<DemoRecord>& records);

  // A consumer of the source into `engine` named `consumer_name` (Redis:
  // its name in the group; the others share one durable consumer or queue),
  // at most `batch` deliveries a batch, its delivery loop run with `hooks`.
  // The first one creates the source (stream, group, durable, queue).
  // kUnavailable if the server cannot be reached.
  virtual absl::StatusOr<std::unique_ptr<DemoConsumer>> Consume(
      Engine* engine, const std::string& consumer_name, int batch,
      const brokers::LoopHooks& hooks) = 0;

  // How long after a consumer dies the broker delivers again what it held
  // unacknowledged (Redis: the claim idle time; NATS: AckWait; RabbitMQ: at
  // once, as the connection drops).
  virtual absl::Duration RedeliveryDelay() const = 0;

 protected:
  explicit DemoBroker(DemoEndpoint endpoint) : endpoint_(std::move(endpoint)) {}
  // Publishes one record to the source (Produce's step).
  virtual absl::Status Publish(const DemoRecord& record) = 0;
  // Starts the broker's private server (servers/).
  virtual absl::StatusOr<std::unique_ptr<servers::ServerProcess>>
  LaunchServer() = 0;

  DemoEndpoint endpoint_;

 private:
  std::unique_ptr<servers::ServerProcess> server_;  // null: not started
};

}  // namespace idem::cli

#endif  // IDEM_CLI_BROKER_DEMO_BROKERS_H_
