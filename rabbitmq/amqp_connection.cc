#include "rabbitmq/amqp_connection.h"

#include <amqp_tcp_socket.h>
#include <sys/time.h>

#include "absl/strings/str_cat.h"
#include "idem/rabbitmq/consumer.h"

namespace idem::rabbitmq {
namespace {

absl::string_view View(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

}  // namespace

AmqpConnection::AmqpConnection(const ConsumerOptions& options)
    : options_(options) {}

AmqpConnection::~AmqpConnection() { Close(); }

void AmqpConnection::Close() {
  if (state_ == nullptr) return;
  amqp_connection_close(state_, AMQP_REPLY_SUCCESS);
  amqp_destroy_connection(state_);
  state_ = nullptr;
  declared_.clear();
}

absl::Status AmqpConnection::Open() {
  if (state_ != nullptr) return absl::OkStatus();
  state_ = amqp_new_connection();
  amqp_socket_t* socket = amqp_tcp_socket_new(state_);
  if (socket == nullptr) {
    Close();
    return absl::UnavailableError("amqp: cannot create a socket");
  }
  const timeval timeout = absl::ToTimeval(options_.io_timeout);
  if (int rc = amqp_socket_open_noblock(socket, options_.host.c_str(),
                                        options_.port, &timeout);
      rc != AMQP_STATUS_OK) {
    amqp_destroy_connection(state_);
    state_ = nullptr;
    return absl::UnavailableError(
        absl::StrCat("amqp: connecting to ", options_.host, ":", options_.port,
                     ": ", amqp_error_string2(rc)));
  }
  amqp_set_rpc_timeout(state_, &timeout);
  amqp_rpc_reply_t reply = amqp_login(
      state_, options_.vhost.c_str(), 0, 131072, 0, AMQP_SASL_METHOD_PLAIN,
      options_.user.c_str(), options_.password.c_str());
  if (reply.reply_type != AMQP_RESPONSE_NORMAL) {
    Close();
    return absl::UnavailableError(
        absl::StrCat("amqp: logging in as ", options_.user, " failed"));
  }
  amqp_channel_open(state_, kChannel);
  return RpcStatus("opening a channel");
}

absl::Status AmqpConnection::DeclareQueue(const std::string& queue) {
  if (declared_.contains(queue)) return absl::OkStatus();
  amqp_queue_declare(state_, kChannel, amqp_cstring_bytes(queue.c_str()),
                     /*passive=*/0, /*durable=*/1, /*exclusive=*/0,
                     /*auto_delete=*/0, amqp_empty_table);
  if (absl::Status s = RpcStatus(absl::StrCat("declaring queue ", queue));
      !s.ok()) {
    return s;
  }
  declared_.insert(queue);
  return absl::OkStatus();
}

absl::Status AmqpConnection::RpcStatus(std::string_view what) {
  if (state_ == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("amqp: ", View(what), ": not connected"));
  }
  amqp_rpc_reply_t reply = amqp_get_rpc_reply(state_);
  switch (reply.reply_type) {
    case AMQP_RESPONSE_NORMAL:
      return absl::OkStatus();
    case AMQP_RESPONSE_LIBRARY_EXCEPTION:
      Close();
      return absl::UnavailableError(absl::StrCat(
          "amqp: ", View(what), ": ", amqp_error_string2(reply.library_error)));
    case AMQP_RESPONSE_SERVER_EXCEPTION: {
      std::string text = "server closed the channel or connection";
      if (reply.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
        auto* close = static_cast<amqp_channel_close_t*>(reply.reply.decoded);
        text.assign(static_cast<const char*>(close->reply_text.bytes),
                    close->reply_text.len);
      }
      Close();
      return absl::FailedPreconditionError(
          absl::StrCat("amqp: ", View(what), ": ", text));
    }
    default:
      Close();
      return absl::UnavailableError(
          absl::StrCat("amqp: ", View(what), ": no reply"));
  }
}

absl::Status AmqpConnection::LibraryStatus(int code, std::string_view what) {
  if (code == AMQP_STATUS_OK) return absl::OkStatus();
  Close();
  return absl::UnavailableError(
      absl::StrCat("amqp: ", View(what), ": ", amqp_error_string2(code)));
}

}  // namespace idem::rabbitmq
