// AmqpConnection is one rabbitmq-c connection with one open channel
// (channel 1): connect, log in (with ConsumerOptions::heartbeat and
// consumer cancel notifications), declare queues, and the errors of all of
// it as absl::Status. A failed call leaves it closed; Open makes it
// again. Not thread-safe.

#ifndef IDEM_RABBITMQ_AMQP_CONNECTION_H_
#define IDEM_RABBITMQ_AMQP_CONNECTION_H_

#include <amqp.h>

#include <string>
#include <string_view>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace idem::rabbitmq {

struct ConsumerOptions;

// OK if `name` can name a queue (the routing key of a publish to the
// default exchange), or kInvalidArgument naming the rule it breaks: 1 to
// 255 bytes (an AMQP 0-9-1 short string), and not starting with "amq."
// (reserved for the server's own queues: declaring one is refused).
absl::Status CheckQueueName(std::string_view name);

class AmqpConnection {
 public:
  static constexpr amqp_channel_t kChannel = 1;

  explicit AmqpConnection(const ConsumerOptions& options);
  ~AmqpConnection();
  AmqpConnection(const AmqpConnection&) = delete;
  AmqpConnection& operator=(const AmqpConnection&) = delete;

  // Connects, logs in and opens the channel, if not open. kUnavailable if
  // the server cannot be reached; kUnauthenticated for a user or password
  // the server refuses; kPermissionDenied for a user without access to the
  // vhost; kNotFound for a vhost the server does not have; each naming the
  // server's reason.
  absl::Status Open();
  // Closes the connection (best effort). Idempotent.
  void Close();
  bool open() const { return state_ != nullptr; }
  amqp_connection_state_t state() const { return state_; }

  // Declares `queue` (once per connection): passive unless
  // options.declare_queues, else durable, with options.queue_arguments when
  // `with_arguments`. kInvalidArgument for a name CheckQueueName rejects;
  // kNotFound naming a queue that does not exist (passive);
  // kFailedPrecondition if it exists with other arguments;
  // kPermissionDenied if the user may not declare it. `consumers`, when
  // given and the queue was declared by this call: the consumers the server
  // counts on it (declare-ok's consumer_count); else left as it is.
  absl::Status DeclareQueue(const std::string& queue,
                            bool with_arguments = false,
                            uint32_t* consumers = nullptr);

  // Test-only (RabbitMqHooks): log in without asking for consumer cancel
  // notifications, so a cancelled consumer waits on, unaware.
  void set_ask_cancel_notify(bool ask) { ask_cancel_notify_ = ask; }

  // The status of the last synchronous call (amqp_get_rpc_reply), closing
  // the connection unless it was OK.
  absl::Status RpcStatus(std::string_view what);
  // The status of a library call's return code, closing the connection
  // unless it is AMQP_STATUS_OK.
  absl::Status LibraryStatus(int code, std::string_view what);

  // The status of the server closing the channel or the connection
  // (`method`: a channel.close or connection.close), by its reply code:
  // 403 kPermissionDenied, 404 and a missing vhost kNotFound, 406
  // kFailedPrecondition, a forced close kUnavailable; the server's text.
  static absl::Status CloseStatus(const amqp_method_t& method,
                                  std::string_view what);

 private:
  // A TCP socket for state_, or with options_.tls a TLS one set up to
  // verify the server (kInvalidArgument naming a file it cannot load).
  absl::StatusOr<amqp_socket_t*> NewSocket();
  // The status of a failed amqp_login.
  absl::Status LoginStatus(const amqp_rpc_reply_t& reply) const;

  const ConsumerOptions& options_;
  amqp_connection_state_t state_ = nullptr;
  absl::flat_hash_set<std::string> declared_;
  bool ask_cancel_notify_ = true;
};

}  // namespace idem::rabbitmq

#endif  // IDEM_RABBITMQ_AMQP_CONNECTION_H_
