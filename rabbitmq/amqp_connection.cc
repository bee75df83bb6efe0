#include "rabbitmq/amqp_connection.h"

#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>
#include <openssl/ssl.h>
#include <sys/time.h>

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "brokers/tls_peer_name.h"
#include "idem/rabbitmq/consumer.h"

namespace idem::rabbitmq {
namespace {

absl::string_view View(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

std::string Text(amqp_bytes_t bytes) {
  return std::string(static_cast<const char*>(bytes.bytes), bytes.len);
}

amqp_table_entry_t StringEntry(const char* key, const std::string& value) {
  amqp_table_entry_t entry;
  entry.key = amqp_cstring_bytes(key);
  entry.value.kind = AMQP_FIELD_KIND_UTF8;
  entry.value.value.bytes = amqp_cstring_bytes(value.c_str());
  return entry;
}

amqp_table_entry_t BoolEntry(const char* key, bool value) {
  amqp_table_entry_t entry;
  entry.key = amqp_cstring_bytes(key);
  entry.value.kind = AMQP_FIELD_KIND_BOOLEAN;
  entry.value.value.boolean = value ? 1 : 0;
  return entry;
}

// The x-arguments of ConsumerOptions::queue_arguments; the entries point
// into `arguments`.
std::vector<amqp_table_entry_t> ArgumentEntries(
    const ConsumerOptions::QueueArguments& arguments) {
  std::vector<amqp_table_entry_t> entries;
  if (!arguments.queue_type.empty()) {
    entries.push_back(StringEntry("x-queue-type", arguments.queue_type));
  }
  if (arguments.single_active_consumer) {
    entries.push_back(BoolEntry("x-single-active-consumer", true));
  }
  if (!arguments.dead_letter_exchange.empty()) {
    entries.push_back(
        StringEntry("x-dead-letter-exchange", arguments.dead_letter_exchange));
  }
  if (!arguments.dead_letter_routing_key.empty()) {
    entries.push_back(StringEntry("x-dead-letter-routing-key",
                                  arguments.dead_letter_routing_key));
  }
  if (arguments.message_ttl_ms > 0) {
    amqp_table_entry_t& ttl = entries.emplace_back();
    ttl.key = amqp_cstring_bytes("x-message-ttl");
    ttl.value.kind = AMQP_FIELD_KIND_I64;
    ttl.value.value.i64 = arguments.message_ttl_ms;
  }
  return entries;
}

}  // namespace

absl::Status CheckQueueName(std::string_view name) {
  if (name.empty()) {
    return absl::InvalidArgumentError("amqp: a queue name must not be empty");
  }
  if (name.size() > 255) {
    return absl::InvalidArgumentError(
        absl::StrCat("amqp: queue name of ", name.size(),
                     " bytes: AMQP 0-9-1 allows at most 255 (a short string)"));
  }
  if (absl::StartsWith(View(name), "amq.")) {
    return absl::InvalidArgumentError(
        absl::StrCat("amqp: queue name \"", View(name),
                     "\": the prefix \"amq.\" is reserved for the server"));
  }
  return absl::OkStatus();
}

absl::Status AmqpConnection::CloseStatus(const amqp_method_t& method,
                                         std::string_view what) {
  uint16_t code = 0;
  std::string text = "the server closed the channel or connection";
  if (method.id == AMQP_CHANNEL_CLOSE_METHOD) {
    auto* close = static_cast<amqp_channel_close_t*>(method.decoded);
    code = close->reply_code;
    text = Text(close->reply_text);
  } else if (method.id == AMQP_CONNECTION_CLOSE_METHOD) {
    auto* close = static_cast<amqp_connection_close_t*>(method.decoded);
    code = close->reply_code;
    text = Text(close->reply_text);
  }
  const std::string message = absl::StrCat("amqp: ", View(what), ": ", text);
  switch (code) {
    case AMQP_ACCESS_REFUSED:  // 403
      return absl::PermissionDeniedError(message);
    case AMQP_NOT_FOUND:  // 404
      return absl::NotFoundError(message);
    case AMQP_PRECONDITION_FAILED:  // 406
    case AMQP_RESOURCE_LOCKED:      // 405
      return absl::FailedPreconditionError(message);
    case AMQP_NOT_ALLOWED:  // 530: e.g. "vhost x not found"
      if (absl::StrContains(text, "not found")) {
        return absl::NotFoundError(message);
      }
      return absl::PermissionDeniedError(message);
    case AMQP_CONNECTION_FORCED:  // 320: the server shuts down
    case AMQP_INTERNAL_ERROR:     // 541
      return absl::UnavailableError(message);
    default:
      return method.id == AMQP_CHANNEL_CLOSE_METHOD
                 ? absl::FailedPreconditionError(message)
                 : absl::UnavailableError(message);
  }
}

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

absl::StatusOr<amqp_socket_t*> AmqpConnection::NewSocket() {
  if (!options_.tls) {
    amqp_socket_t* socket = amqp_tcp_socket_new(state_);
    if (socket == nullptr) {
      return absl::UnavailableError("amqp: cannot create a socket");
    }
    return socket;
  }
  amqp_socket_t* socket = amqp_ssl_socket_new(state_);
  if (socket == nullptr) {
    return absl::UnavailableError("amqp: cannot create a TLS socket");
  }
  // OpenSSL checks the name with the chain (rabbitmq-c 0.11's own check
  // knows DNS names only, not a certificate's IP addresses).
  amqp_ssl_socket_set_verify_peer(socket, 1);
  amqp_ssl_socket_set_verify_hostname(socket, 0);
  auto* context = static_cast<SSL_CTX*>(amqp_ssl_socket_get_context(socket));
  if (context == nullptr ||
      !brokers::ExpectPeerName(SSL_CTX_get0_param(context), options_.host)) {
    return absl::UnavailableError(
        "amqp: cannot set up the TLS check of the server's name");
  }
  auto unusable = [](std::string_view what, const std::string& file, int rc) {
    return absl::InvalidArgumentError(absl::StrCat("amqp TLS: cannot load the ",
                                                   View(what), " ", file, ": ",
                                                   amqp_error_string2(rc)));
  };
  if (int rc = amqp_ssl_socket_set_cacert(socket, options_.tls_ca_file.c_str());
      rc != AMQP_STATUS_OK) {
    return unusable("CA file", options_.tls_ca_file, rc);
  }
  if (!options_.tls_cert_file.empty()) {
    if (int rc = amqp_ssl_socket_set_key(socket, options_.tls_cert_file.c_str(),
                                         options_.tls_key_file.c_str());
        rc != AMQP_STATUS_OK) {
      return unusable("certificate or key file",
                      options_.tls_cert_file + " / " + options_.tls_key_file,
                      rc);
    }
  }
  return socket;
}

absl::Status AmqpConnection::Open() {
  if (state_ != nullptr) return absl::OkStatus();
  state_ = amqp_new_connection();
  absl::StatusOr<amqp_socket_t*> made = NewSocket();
  if (!made.ok()) {
    Close();
    return made.status();
  }
  amqp_socket_t* socket = *made;
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
  // Asks for basic.cancel when the server cancels the consumer (a deleted
  // queue, a failover); rabbitmq-c adds its own capabilities to these.
  amqp_table_entry_t capability =
      BoolEntry("consumer_cancel_notify", ask_cancel_notify_);
  amqp_table_entry_t property;
  property.key = amqp_cstring_bytes("capabilities");
  property.value.kind = AMQP_FIELD_KIND_TABLE;
  property.value.value.table = amqp_table_t{1, &capability};
  const amqp_table_t properties{1, &property};
  amqp_rpc_reply_t reply = amqp_login_with_properties(
      state_, options_.vhost.c_str(), 0, 131072,
      static_cast<int>(absl::ToInt64Seconds(options_.heartbeat)), &properties,
      AMQP_SASL_METHOD_PLAIN, options_.user.c_str(), options_.password.c_str());
  if (reply.reply_type != AMQP_RESPONSE_NORMAL) {
    absl::Status status = LoginStatus(reply);
    Close();
    return status;
  }
  amqp_channel_open(state_, kChannel);
  return RpcStatus("opening a channel");
}

absl::Status AmqpConnection::LoginStatus(const amqp_rpc_reply_t& reply) const {
  const std::string what =
      absl::StrCat("logging in to ", options_.host, ":", options_.port, " as ",
                   options_.user, " to vhost ", options_.vhost);
  if (reply.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION) {
    absl::Status status = CloseStatus(reply.reply, what);
    // The server refuses a wrong user or password with 403 "Login was
    // refused"; a user without access to the vhost with 403 too.
    if (absl::IsPermissionDenied(status) &&
        absl::StrContains(status.message(), "Login was refused")) {
      return absl::UnauthenticatedError(status.message());
    }
    return status;
  }
  if (reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION) {
    return absl::UnavailableError(absl::StrCat(
        "amqp: ", what, ": ", amqp_error_string2(reply.library_error)));
  }
  return absl::UnavailableError(absl::StrCat("amqp: ", what, ": no reply"));
}

absl::Status AmqpConnection::DeclareQueue(const std::string& queue,
                                          bool with_arguments,
                                          uint32_t* consumers) {
  if (declared_.contains(queue)) return absl::OkStatus();
  if (absl::Status s = CheckQueueName(queue); !s.ok()) return s;
  std::vector<amqp_table_entry_t> entries;
  if (with_arguments) entries = ArgumentEntries(options_.queue_arguments);
  const amqp_table_t arguments{static_cast<int>(entries.size()),
                               entries.data()};
  const bool passive = !options_.declare_queues;
  const amqp_queue_declare_ok_t* declared = amqp_queue_declare(
      state_, kChannel, amqp_cstring_bytes(queue.c_str()), passive,
      /*durable=*/1, /*exclusive=*/0, /*auto_delete=*/0, arguments);
  if (absl::Status s = RpcStatus(absl::StrCat(
          passive ? "declaring queue (passive) " : "declaring queue ", queue));
      !s.ok()) {
    return s;
  }
  if (consumers != nullptr && declared != nullptr) {
    *consumers = declared->consumer_count;
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
      absl::Status status = CloseStatus(reply.reply, what);
      Close();
      return status;
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
