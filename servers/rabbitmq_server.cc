#include "servers/rabbitmq_server.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/time.h>

#include <fstream>
#include <iterator>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace idem::servers {
namespace {

std::string ToString(amqp_bytes_t bytes) {
  return std::string(static_cast<const char*>(bytes.bytes), bytes.len);
}

amqp_bytes_t Bytes(const std::string& s) {
  return amqp_bytes_t{s.size(), const_cast<char*>(s.data())};
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  chmod(path.c_str(), 0666);
}

// The node's pid from its pid file in `dir`, or -1.
pid_t NodePid(const std::string& dir) {
  std::ifstream in(dir + "/pid");
  std::string text;
  std::getline(in, text);
  int pid = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &pid) || pid <= 0) {
    return -1;
  }
  return pid;
}

// Stops the node (the beam process named by its pid file) and waits for it.
void StopNode(const std::string& dir) {
  const pid_t pid = NodePid(dir);
  if (pid <= 0) return;
  kill(pid, SIGTERM);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (kill(pid, 0) == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  if (kill(pid, 0) == 0) kill(pid, SIGKILL);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The node's rabbitmq.conf in `dir`: empty, or the TLS listener's
// settings, its certificate and key copied into `dir`.
std::string ConfigFile(const std::string& dir, const RabbitMqTlsListener* tls) {
  if (tls == nullptr) return "";
  const std::string cert = dir + "/tls-cert.pem";
  const std::string key = dir + "/tls-key.pem";
  WriteFile(cert, ReadFile(tls->cert_file));
  WriteFile(key, ReadFile(tls->key_file));
  return absl::StrCat("listeners.ssl.default = ", tls->port,
                      "\nssl_options.cacertfile = ", cert,
                      "\nssl_options.certfile = ", cert,
                      "\nssl_options.keyfile = ", key,
                      "\nssl_options.verify = verify_none"
                      "\nssl_options.fail_if_no_peer_cert = false\n");
}

}  // namespace

absl::StatusOr<std::unique_ptr<ServerProcess>> StartRabbitMqServer(
    RabbitMqTlsListener* tls) {
  absl::StatusOr<int> dist_port = FreeLoopbackPort();
  if (!dist_port.ok()) return dist_port.status();
  if (tls != nullptr) {
    absl::StatusOr<int> tls_port = FreeLoopbackPort();
    if (!tls_port.ok()) return tls_port.status();
    tls->port = *tls_port;
  }
  return ServerProcess::Start(
      "rabbitmq-server",
      [dist = *dist_port, tls](
          int port, const std::string& dir) -> std::vector<std::string> {
        chmod(dir.c_str(), 0777);
        WriteFile(dir + "/enabled_plugins", "[].\n");
        WriteFile(dir + "/rabbitmq.conf", ConfigFile(dir, tls));
        return {"env",
                "HOME=" + dir,
                absl::StrCat("RABBITMQ_NODENAME=idem", port, "@localhost"),
                absl::StrCat("RABBITMQ_NODE_PORT=", port),
                absl::StrCat("RABBITMQ_DIST_PORT=", dist),
                "RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
                "RABBITMQ_MNESIA_BASE=" + dir + "/mnesia",
                "RABBITMQ_LOG_BASE=" + dir + "/log",
                "RABBITMQ_CONFIG_FILE=" + dir + "/rabbitmq",
                "RABBITMQ_ENABLED_PLUGINS_FILE=" + dir + "/enabled_plugins",
                "RABBITMQ_FEATURE_FLAGS_FILE=" + dir + "/feature_flags",
                "RABBITMQ_PID_FILE=" + dir + "/pid",
                "rabbitmq-server"};
      },
      [](int port) {
        rabbitmq::ConsumerOptions options;
        options.port = port;
        options.io_timeout = absl::Seconds(1);
        rabbitmq::AmqpConnection connection(options);
        return connection.Open().ok();
      },
      absl::Seconds(60), StopNode);
}

pid_t RabbitMqNodePid(const ServerProcess& server) {
  return NodePid(server.dir());
}

RabbitMqClient::RabbitMqClient(const std::string& host, int port)
    : connection_(options_) {
  options_.host = host;
  options_.port = port;
  options_.declare_queues = true;  // the queues it publishes to
}

absl::Status RabbitMqClient::OpenConfirming() {
  if (!connection_.open()) {
    confirming_ = false;
    if (absl::Status s = connection_.Open(); !s.ok()) return s;
  }
  if (!confirming_) {
    amqp_confirm_select(connection_.state(),
                        rabbitmq::AmqpConnection::kChannel);
    if (absl::Status s = connection_.RpcStatus("confirm.select"); !s.ok()) {
      return s;
    }
    confirming_ = true;
  }
  return absl::OkStatus();
}

absl::Status RabbitMqClient::DeclareIfMissing(const std::string& queue) {
  // Passive first, so a queue declared with arguments is left as it is.
  options_.declare_queues = false;
  absl::Status passive = connection_.DeclareQueue(queue);
  options_.declare_queues = true;
  if (!absl::IsNotFound(passive)) return passive;
  if (absl::Status s = OpenConfirming(); !s.ok()) return s;  // was closed
  return connection_.DeclareQueue(queue);
}

absl::Status RabbitMqClient::Publish(
    const std::string& queue, const std::string& body,
    const std::string& message_id,
    const std::vector<std::pair<std::string, std::string>>& headers,
    absl::Time timestamp) {
  if (absl::Status s = OpenConfirming(); !s.ok()) return s;
  if (absl::Status s = DeclareIfMissing(queue); !s.ok()) return s;
  std::vector<amqp_table_entry_t> table(headers.size());
  for (size_t i = 0; i < headers.size(); ++i) {
    table[i].key = Bytes(headers[i].first);
    table[i].value.kind = AMQP_FIELD_KIND_UTF8;
    table[i].value.value.bytes = Bytes(headers[i].second);
  }
  amqp_basic_properties_t properties{};
  properties._flags = AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_HEADERS_FLAG;
  properties.delivery_mode = 2;
  properties.headers.num_entries = static_cast<int>(table.size());
  properties.headers.entries = table.data();
  if (!message_id.empty()) {
    properties._flags |= AMQP_BASIC_MESSAGE_ID_FLAG;
    properties.message_id = Bytes(message_id);
  }
  if (timestamp != absl::InfinitePast()) {
    properties._flags |= AMQP_BASIC_TIMESTAMP_FLAG;
    properties.timestamp =
        static_cast<uint64_t>(absl::ToUnixSeconds(timestamp));
  }
  int rc = amqp_basic_publish(
      connection_.state(), rabbitmq::AmqpConnection::kChannel, amqp_empty_bytes,
      Bytes(queue), 0, 0, &properties, Bytes(body));
  if (absl::Status s = connection_.LibraryStatus(rc, "publish"); !s.ok()) {
    return s;
  }
  const timeval wait{5, 0};
  while (true) {
    amqp_frame_t frame;
    rc = amqp_simple_wait_frame_noblock(connection_.state(), &frame, &wait);
    if (absl::Status s = connection_.LibraryStatus(rc, "confirm"); !s.ok()) {
      return s;
    }
    if (frame.frame_type == AMQP_FRAME_METHOD &&
        frame.payload.method.id == AMQP_BASIC_ACK_METHOD) {
      return absl::OkStatus();
    }
  }
}

absl::StatusOr<int64_t> RabbitMqClient::Ready(const std::string& queue) {
  if (!connection_.open()) {
    confirming_ = false;
    if (absl::Status s = connection_.Open(); !s.ok()) return s;
  }
  amqp_queue_declare_ok_t* ok = amqp_queue_declare(
      connection_.state(), rabbitmq::AmqpConnection::kChannel,
      amqp_cstring_bytes(queue.c_str()), 1, 0, 0, 0, amqp_empty_table);
  if (absl::Status s = connection_.RpcStatus("queue.declare passive");
      !s.ok()) {
    return s;
  }
  return static_cast<int64_t>(ok->message_count);
}

std::string RabbitMqClient::Message::Header(const std::string& name) const {
  std::string value;
  for (const auto& [n, v] : headers) {
    if (n == name) value = v;
  }
  return value;
}

absl::StatusOr<std::vector<RabbitMqClient::Message>> RabbitMqClient::TakeAll(
    const std::string& queue) {
  if (!connection_.open()) {
    confirming_ = false;
    if (absl::Status s = connection_.Open(); !s.ok()) return s;
  }
  std::vector<Message> out;
  while (true) {
    amqp_maybe_release_buffers(connection_.state());
    amqp_rpc_reply_t reply =
        amqp_basic_get(connection_.state(), rabbitmq::AmqpConnection::kChannel,
                       amqp_cstring_bytes(queue.c_str()), /*no_ack=*/1);
    if (reply.reply_type != AMQP_RESPONSE_NORMAL) {
      return connection_.RpcStatus("basic.get");
    }
    if (reply.reply.id == AMQP_BASIC_GET_EMPTY_METHOD) return out;
    amqp_message_t message;
    reply = amqp_read_message(connection_.state(),
                              rabbitmq::AmqpConnection::kChannel, &message, 0);
    if (reply.reply_type != AMQP_RESPONSE_NORMAL) {
      return absl::UnavailableError("amqp: reading a message");
    }
    Message& m = out.emplace_back();
    m.body = ToString(message.body);
    const amqp_basic_properties_t& p = message.properties;
    if (p._flags & AMQP_BASIC_MESSAGE_ID_FLAG) {
      m.message_id = ToString(p.message_id);
    }
    if (p._flags & AMQP_BASIC_HEADERS_FLAG) {
      for (int i = 0; i < p.headers.num_entries; ++i) {
        const amqp_table_entry_t& e = p.headers.entries[i];
        if (e.value.kind == AMQP_FIELD_KIND_UTF8 ||
            e.value.kind == AMQP_FIELD_KIND_BYTES) {
          m.headers.emplace_back(ToString(e.key),
                                 ToString(e.value.value.bytes));
        }
      }
    }
    amqp_destroy_message(&message);
  }
}

}  // namespace idem::servers
