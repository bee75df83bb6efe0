#include "servers/nats_server.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace idem::servers {
namespace {

absl::Status Error(natsStatus s, jsErrCode js_error, const std::string& what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", natsStatus_GetText(s),
                                             " (JetStream error ",
                                             static_cast<int>(js_error), ")"));
}

}  // namespace

std::string NatsUrl(int port, const std::string& user,
                    const std::string& password) {
  if (user.empty()) return absl::StrCat("nats://127.0.0.1:", port);
  return absl::StrCat("nats://", user, ":", password, "@127.0.0.1:", port);
}

absl::StatusOr<std::unique_ptr<ServerProcess>> StartNatsServer(
    const std::string& user, const std::string& password) {
  return ServerProcess::Start(
      "nats-server",
      [user, password](int port,
                       const std::string& dir) -> std::vector<std::string> {
        std::vector<std::string> argv = {
            "nats-server",      "-js", "-a", "127.0.0.1", "-p",
            absl::StrCat(port), "-sd", dir};
        if (!user.empty()) {
          argv.insert(argv.end(), {"--user", user, "--pass", password});
        }
        return argv;
      },
      [user, password](int port) {
        return NatsClient::Connect(NatsUrl(port, user, password)).ok();
      });
}

absl::StatusOr<std::unique_ptr<NatsClient>> NatsClient::Connect(
    const std::string& url) {
  std::unique_ptr<NatsClient> client(new NatsClient());
  natsStatus s = natsConnection_ConnectTo(&client->connection_, url.c_str());
  if (s != NATS_OK) return Error(s, static_cast<jsErrCode>(0), "connecting");
  s = natsConnection_JetStream(&client->js_, client->connection_, nullptr);
  if (s != NATS_OK) return Error(s, static_cast<jsErrCode>(0), "JetStream");
  jsAccountInfo* info = nullptr;
  jsErrCode js_error = static_cast<jsErrCode>(0);
  s = js_GetAccountInfo(&info, client->js_, nullptr, &js_error);
  if (info != nullptr) jsAccountInfo_Destroy(info);
  if (s != NATS_OK) return Error(s, js_error, "JetStream account info");
  return client;
}

NatsClient::~NatsClient() {
  if (js_ != nullptr) jsCtx_Destroy(js_);
  if (connection_ != nullptr) natsConnection_Destroy(connection_);
}

absl::Status NatsClient::Publish(
    const std::string& subject, const std::string& payload,
    const std::vector<std::pair<std::string, std::string>>& headers) {
  natsMsg* msg = nullptr;
  natsStatus s = natsMsg_Create(&msg, subject.c_str(), nullptr, payload.data(),
                                static_cast<int>(payload.size()));
  for (const auto& [name, value] : headers) {
    if (s == NATS_OK) s = natsMsgHeader_Add(msg, name.c_str(), value.c_str());
  }
  jsErrCode js_error = static_cast<jsErrCode>(0);
  if (s == NATS_OK) {
    jsPubAck* ack = nullptr;
    s = js_PublishMsg(&ack, js_, msg, nullptr, &js_error);
    if (ack != nullptr) jsPubAck_Destroy(ack);
  }
  if (msg != nullptr) natsMsg_Destroy(msg);
  if (s != NATS_OK) return Error(s, js_error, "publishing");
  return absl::OkStatus();
}

absl::StatusOr<jsConsumerInfo*> NatsClient::ConsumerInfo(
    const std::string& stream, const std::string& durable) {
  jsConsumerInfo* info = nullptr;
  jsErrCode js_error = static_cast<jsErrCode>(0);
  natsStatus s = js_GetConsumerInfo(&info, js_, stream.c_str(), durable.c_str(),
                                    nullptr, &js_error);
  if (s != NATS_OK) {
    if (js_error == JSConsumerNotFoundErr) {
      return absl::NotFoundError("no such consumer");
    }
    return Error(s, js_error, "consumer info");
  }
  return info;
}

absl::StatusOr<std::pair<int64_t, int64_t>> NatsClient::PendingAndAckPending(
    const std::string& stream, const std::string& durable) {
  absl::StatusOr<jsConsumerInfo*> info = ConsumerInfo(stream, durable);
  if (!info.ok()) return info.status();
  std::pair<int64_t, int64_t> out(static_cast<int64_t>((*info)->NumPending),
                                  (*info)->NumAckPending);
  jsConsumerInfo_Destroy(*info);
  return out;
}

absl::StatusOr<int64_t> NatsClient::Waiting(const std::string& stream,
                                            const std::string& durable) {
  absl::StatusOr<jsConsumerInfo*> info = ConsumerInfo(stream, durable);
  if (!info.ok()) return info.status();
  const int64_t waiting = (*info)->NumWaiting;
  jsConsumerInfo_Destroy(*info);
  return waiting;
}

absl::StatusOr<int64_t> NatsClient::StreamMessages(const std::string& stream) {
  jsStreamInfo* info = nullptr;
  jsErrCode js_error = static_cast<jsErrCode>(0);
  natsStatus s =
      js_GetStreamInfo(&info, js_, stream.c_str(), nullptr, &js_error);
  if (s != NATS_OK) return Error(s, js_error, "stream info");
  const int64_t messages = static_cast<int64_t>(info->State.Msgs);
  jsStreamInfo_Destroy(info);
  return messages;
}

std::string NatsClient::Message::Header(const std::string& name) const {
  std::string value;
  for (const auto& [n, v] : headers) {
    if (n == name) value = v;
  }
  return value;
}

absl::StatusOr<std::vector<NatsClient::Message>> NatsClient::Read(
    const std::string& stream, const std::string& subject) {
  absl::StatusOr<int64_t> count = StreamMessages(stream);
  if (!count.ok()) return count.status();
  std::vector<Message> out;
  for (int64_t seq = 1; seq <= *count; ++seq) {
    natsMsg* msg = nullptr;
    jsErrCode js_error = static_cast<jsErrCode>(0);
    natsStatus s = js_GetMsg(&msg, js_, stream.c_str(),
                             static_cast<uint64_t>(seq), nullptr, &js_error);
    if (s != NATS_OK) return Error(s, js_error, "reading " + subject);
    Message& m = out.emplace_back();
    m.payload.assign(natsMsg_GetData(msg), natsMsg_GetDataLength(msg));
    const char** keys = nullptr;
    int key_count = 0;
    if (natsMsgHeader_Keys(msg, &keys, &key_count) == NATS_OK) {
      for (int k = 0; k < key_count; ++k) {
        const char* value = nullptr;
        if (natsMsgHeader_Get(msg, keys[k], &value) == NATS_OK) {
          m.headers.emplace_back(keys[k], value);
        }
      }
      free(static_cast<void*>(keys));
    }
    natsMsg_Destroy(msg);
  }
  return out;
}

absl::Status NatsClient::FetchAndNak(const std::string& stream,
                                     const std::string& subject,
                                     const std::string& durable, int times) {
  jsSubOptions sub_options;
  jsSubOptions_Init(&sub_options);
  sub_options.Stream = stream.c_str();
  sub_options.Consumer = durable.c_str();
  natsSubscription* sub = nullptr;
  jsErrCode js_error = static_cast<jsErrCode>(0);
  natsStatus s = js_PullSubscribe(&sub, js_, subject.c_str(), durable.c_str(),
                                  nullptr, &sub_options, &js_error);
  for (int i = 0; s == NATS_OK && i < times; ++i) {
    natsMsgList list = {nullptr, 0};
    s = natsSubscription_Fetch(&list, sub, 1, 5000, &js_error);
    if (s == NATS_OK && list.Count == 1) s = natsMsg_Nak(list.Msgs[0], nullptr);
    natsMsgList_Destroy(&list);
  }
  if (sub != nullptr) natsSubscription_Destroy(sub);
  if (s != NATS_OK) return Error(s, js_error, "fetching from " + durable);
  return absl::OkStatus();
}

}  // namespace idem::servers
