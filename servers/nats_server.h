// A private nats-server with JetStream (a ServerProcess: file storage in its
// directory, so a restart keeps streams, consumers and acknowledgements),
// and a small JetStream client for producing and inspecting. Not
// thread-safe.

#ifndef IDEM_SERVERS_NATS_SERVER_H_
#define IDEM_SERVERS_NATS_SERVER_H_

#include <nats/nats.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "servers/server_process.h"

namespace idem::servers {

// Starts nats-server -js; ready once JetStream answers. With a `user`,
// clients must log in with it and `password`.
absl::StatusOr<std::unique_ptr<ServerProcess>> StartNatsServer(
    const std::string& user = "", const std::string& password = "");

// "nats://127.0.0.1:<port>", or with credentials
// "nats://<user>:<password>@127.0.0.1:<port>".
std::string NatsUrl(int port, const std::string& user = "",
                    const std::string& password = "");

class NatsClient {
 public:
  // Connects to `url` (e.g. NatsUrl(port)); kUnavailable if it cannot
  // connect or JetStream does not answer.
  static absl::StatusOr<std::unique_ptr<NatsClient>> Connect(
      const std::string& url);
  ~NatsClient();

  // A JetStream publish of `payload` to `subject` with `headers`.
  absl::Status Publish(
      const std::string& subject, const std::string& payload,
      const std::vector<std::pair<std::string, std::string>>& headers);
  // The durable consumer's messages not yet delivered and those delivered
  // and not acknowledged; kNotFound if it does not exist.
  absl::StatusOr<std::pair<int64_t, int64_t>> PendingAndAckPending(
      const std::string& stream, const std::string& durable);
  // The pull requests waiting on the durable consumer (its NumWaiting);
  // kNotFound if it does not exist.
  absl::StatusOr<int64_t> Waiting(const std::string& stream,
                                  const std::string& durable);
  // The stream's message count.
  absl::StatusOr<int64_t> StreamMessages(const std::string& stream);
  // The stream's messages in order: payload and headers.
  struct Message {
    std::string payload;
    std::vector<std::pair<std::string, std::string>> headers;
    std::string Header(const std::string& name) const;
  };
  absl::StatusOr<std::vector<Message>> Read(const std::string& stream,
                                            const std::string& subject);
  // Binds durable consumer `durable` of `stream` (which must exist, with
  // filter `subject`), then
  // `times` times fetches one message and NAKs it, as a consumer that
  // fails it would: each NAK counts as one of its deliveries.
  absl::Status FetchAndNak(const std::string& stream,
                           const std::string& subject,
                           const std::string& durable, int times);

 private:
  NatsClient() = default;
  // The durable consumer's info (the caller destroys it); kNotFound if it
  // does not exist.
  absl::StatusOr<jsConsumerInfo*> ConsumerInfo(const std::string& stream,
                                               const std::string& durable);
  natsConnection* connection_ = nullptr;
  jsCtx* js_ = nullptr;
};

}  // namespace idem::servers

#endif  // IDEM_SERVERS_NATS_SERVER_H_
