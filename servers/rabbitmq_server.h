// A private RabbitMQ node (a ServerProcess): its own node name, ports, data,
// logs, config and enabled plugins under the server's directory (open to the
// rabbitmq user, as which Debian's wrapper runs the node), stopped through
// the node's pid file. And a small AMQP client for producing and
// inspecting. Not thread-safe.

#ifndef IDEM_SERVERS_RABBITMQ_SERVER_H_
#define IDEM_SERVERS_RABBITMQ_SERVER_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "idem/rabbitmq/consumer.h"
#include "rabbitmq/amqp_connection.h"
#include "servers/server_process.h"

namespace idem::servers {

// A TLS listener beside the plain one: the node's certificate and key
// (PEM; copied into the node's directory, where its user can read them),
// which also serve as the CA it trusts; clients need no certificate.
struct RabbitMqTlsListener {
  std::string cert_file;
  std::string key_file;
  // Set by StartRabbitMqServer: the listener's port.
  int port = 0;
};

// Starts rabbitmq-server, with `tls` a TLS listener too; ready once it
// accepts an AMQP login.
absl::StatusOr<std::unique_ptr<ServerProcess>> StartRabbitMqServer(
    RabbitMqTlsListener* tls = nullptr);

// The pid of the node `server` runs (from its pid file), or -1.
pid_t RabbitMqNodePid(const ServerProcess& server);

class RabbitMqClient {
 public:
  // A client of the server on host:port (guest/guest, vhost "/"); connects
  // on first use.
  RabbitMqClient(const std::string& host, int port);

  // Publishes a persistent message to `queue` (declared durable if
  // missing), with message_id `message_id` unless empty, `headers`, and the
  // timestamp property `timestamp` (whole seconds) unless it is
  // InfinitePast; returns once confirmed.
  absl::Status Publish(
      const std::string& queue, const std::string& body,
      const std::string& message_id,
      const std::vector<std::pair<std::string, std::string>>& headers = {},
      absl::Time timestamp = absl::InfinitePast());
  // Messages ready in `queue` (not counting unacknowledged ones).
  absl::StatusOr<int64_t> Ready(const std::string& queue);
  // Takes every ready message of `queue` (auto-ack): body, message_id and
  // string headers.
  struct Message {
    std::string body;
    std::string message_id;
    std::vector<std::pair<std::string, std::string>> headers;
    std::string Header(const std::string& name) const;
  };
  absl::StatusOr<std::vector<Message>> TakeAll(const std::string& queue);

 private:
  // Opens the connection with publisher confirms, if not open.
  absl::Status OpenConfirming();
  // Declares `queue` durable unless it exists (with whatever arguments).
  absl::Status DeclareIfMissing(const std::string& queue);

  rabbitmq::ConsumerOptions options_;
  rabbitmq::AmqpConnection connection_;
  bool confirming_ = false;
};

}  // namespace idem::servers

#endif  // IDEM_SERVERS_RABBITMQ_SERVER_H_
