#include "nats/jetstream_broker.h"

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "brokers/reserved_headers.h"
#include "nats/ack_subject.h"
#include "nats/message_headers.h"

namespace idem::nats {
namespace {

int64_t Millis(absl::Duration d) {
  return std::max<int64_t>(1, absl::ToInt64Milliseconds(d));
}

// nats-server's MaxAckPending for a consumer created without one (2.9): a
// fetch gets no more than that many messages delivered and unacknowledged.
constexpr int64_t kServerMaxAckPending = 1000;

// The code of a JetStream API error (errCode set): a missing stream or
// consumer kNotFound, a message over the stream's limits kOutOfRange, a
// cluster or resource condition that passes kUnavailable, any other
// kFailedPrecondition.
absl::StatusCode JetStreamCode(jsErrCode js_error) {
  switch (js_error) {
    case JSStreamNotFoundErr:
    case JSConsumerNotFoundErr:
      return absl::StatusCode::kNotFound;
    case JSStreamMessageExceedsMaximumErr:
      return absl::StatusCode::kOutOfRange;
    case JSClusterNotAvailErr:
    case JSClusterNotLeaderErr:
    case JSInsufficientResourcesErr:
    case JSNotEnabledErr:
    case JSNotEnabledForAccountErr:
      return absl::StatusCode::kUnavailable;
    default:
      return absl::StatusCode::kFailedPrecondition;
  }
}

// The code of a nats.c status without a JetStream error: a subject or
// argument refused kInvalidArgument, a message over max_payload
// kOutOfRange; everything else (lost connection, timeouts, no responders
// while the server restarts) kUnavailable.
absl::StatusCode ClientCode(natsStatus s) {
  switch (s) {
    case NATS_INVALID_SUBJECT:
    case NATS_INVALID_ARG:
      return absl::StatusCode::kInvalidArgument;
    case NATS_MAX_PAYLOAD:
      return absl::StatusCode::kOutOfRange;
    case NATS_CONNECTION_AUTH_FAILED:
      return absl::StatusCode::kUnauthenticated;
    case NATS_NOT_PERMITTED:
      return absl::StatusCode::kPermissionDenied;
    default:
      return absl::StatusCode::kUnavailable;
  }
}

bool IsWhitespaceOrControl(char c) {
  return static_cast<unsigned char>(c) <= ' ' || c == 0x7f;
}

// A nats.c status as an absl::Status (JetStreamCode, else ClientCode).
absl::Status NatsError(natsStatus s, jsErrCode js_error,
                       std::string_view what) {
  std::string text =
      absl::StrCat("nats ", absl::string_view(what.data(), what.size()), ": ",
                   natsStatus_GetText(s));
  if (const char* last = nats_GetLastError(nullptr); last != nullptr && *last) {
    absl::StrAppend(&text, " (", last, ")");
  }
  if (js_error != 0) {
    absl::StrAppend(&text, " [JetStream error ", static_cast<int>(js_error),
                    "]");
    return absl::Status(JetStreamCode(js_error), text);
  }
  return absl::Status(ClientCode(s), text);
}

// How many batches one consumer has delivered and unacknowledged at most:
// the one being processed, and the one prefetched.
int64_t PendingBatches(const ConsumerOptions& options) {
  return options.prefetch ? 2 : 1;
}

// `url` without the credentials it may hold ("nats://user:pass@host"), for
// error messages.
std::string WithoutUserInfo(const std::string& url) {
  const size_t scheme = url.find("://");
  const size_t at = url.rfind('@');
  if (scheme == std::string::npos || at == std::string::npos || at < scheme) {
    return url;
  }
  return url.substr(0, scheme + 3) + url.substr(at + 1);
}

// The durable consumer's MaxDeliver for `options`: -1 is no limit.
int64_t ExpectedMaxDeliver(const ConsumerOptions& options) {
  return options.max_deliver > 0 ? options.max_deliver : -1;
}

std::vector<int64_t> BackoffNanos(const ConsumerOptions& options) {
  std::vector<int64_t> out;
  for (absl::Duration d : options.backoff) {
    out.push_back(absl::ToInt64Nanoseconds(d));
  }
  return out;
}

// The AckWait the server gives the durable consumer: with a backoff
// schedule, its first delay (nats-server's rule), else ack_wait.
int64_t ExpectedAckWait(const ConsumerOptions& options) {
  return absl::ToInt64Nanoseconds(options.backoff.empty() ? options.ack_wait
                                                          : options.backoff[0]);
}

// The shortest time the server waits for an ack before a redelivery.
absl::Duration ShortestAckWait(const ConsumerOptions& options) {
  absl::Duration shortest = options.ack_wait;
  for (absl::Duration d : options.backoff) shortest = std::min(shortest, d);
  return shortest;
}

}  // namespace

int SafeFetchSize(natsSubscription* subscription, int max) {
  int waiting = 0;
  if (natsSubscription_GetPending(subscription, &waiting, nullptr) != NATS_OK) {
    return max;  // closed: the fetch reports it
  }
  return waiting > 0 ? 1 : max;
}

absl::Status CheckSubject(std::string_view subject) {
  auto refused = [&](std::string_view rule) {
    return absl::InvalidArgumentError(absl::StrCat(
        "nats: subject \"", absl::string_view(subject.data(), subject.size()),
        "\": ", absl::string_view(rule.data(), rule.size())));
  };
  if (subject.empty()) return refused("must not be empty");
  size_t token_start = 0;
  for (size_t i = 0; i <= subject.size(); ++i) {
    if (i < subject.size() && subject[i] != '.') {
      if (IsWhitespaceOrControl(subject[i])) {
        return refused("no whitespace or control characters allowed");
      }
      continue;
    }
    const std::string_view token = subject.substr(token_start, i - token_start);
    if (token.empty()) {
      return refused("tokens are separated by single dots (no empty token)");
    }
    if (token == "*" || token == ">") {
      return refused("wildcards cannot be published to");
    }
    token_start = i + 1;
  }
  return absl::OkStatus();
}

absl::Status CheckStreamName(std::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("must not be empty");
  for (char c : name) {
    if (c == '.' || c == '*' || c == '>' || c == '/' || c == '\\' ||
        IsWhitespaceOrControl(c)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "\"", absl::string_view(name.data(), name.size()),
          "\" must not contain '.', '*', '>', '/', '\\', whitespace or "
          "control characters"));
    }
  }
  return absl::OkStatus();
}

JetStreamBroker::JetStreamBroker(const ConsumerOptions& options)
    : options_(options), competing_(options.delivery.logger) {}

JetStreamBroker::~JetStreamBroker() { Close(); }

void JetStreamBroker::Close() {
  ReturnPrefetched();
  StopInProgress();
  if (connection_ != nullptr) ConfirmReplies("closing").IgnoreError();
  if (subscription_ != nullptr) natsSubscription_Destroy(subscription_);
  subscription_ = nullptr;
  if (js_ != nullptr) jsCtx_Destroy(js_);
  js_ = nullptr;
  if (connection_ != nullptr) natsConnection_Destroy(connection_);
  connection_ = nullptr;
}

absl::Status JetStreamBroker::Start(std::optional<uint64_t> start_sequence) {
  if (absl::Status s = Connect(); !s.ok()) return s;
  if (options_.create_stream) {
    if (absl::Status s = CreateStream(); !s.ok()) return s;
  }
  if (absl::Status s = CreateConsumer(start_sequence); !s.ok()) return s;
  jsSubOptions sub_options;
  jsSubOptions_Init(&sub_options);
  sub_options.Stream = options_.stream.c_str();
  sub_options.Consumer = options_.durable.c_str();
  jsErrCode js_error = static_cast<jsErrCode>(0);
  natsStatus s = js_PullSubscribe(&subscription_, js_, options_.subject.c_str(),
                                  options_.durable.c_str(), nullptr,
                                  &sub_options, &js_error);
  if (s != NATS_OK) return NatsError(s, js_error, "binding the pull consumer");
  if (options_.in_progress_acks) {
    in_progress_ = std::make_unique<InProgress>(connection_,
                                                ShortestAckWait(options_) / 2);
  }
  return absl::OkStatus();
}

void JetStreamBroker::StopInProgress() {
  if (in_progress_ != nullptr) in_progress_->Stop();
  in_progress_.reset();
}

int64_t JetStreamBroker::Reconnects() const {
  if (connection_ == nullptr) return 0;
  natsStatistics* stats = nullptr;
  if (natsStatistics_Create(&stats) != NATS_OK) return 0;
  uint64_t reconnects = 0;
  if (natsConnection_GetStats(connection_, stats) == NATS_OK) {
    natsStatistics_GetCounts(stats, nullptr, nullptr, nullptr, nullptr,
                             &reconnects);
  }
  natsStatistics_Destroy(stats);
  return static_cast<int64_t>(reconnects);
}

absl::Status JetStreamBroker::Connect() {
  natsOptions* nats_options = nullptr;
  natsStatus s = natsOptions_Create(&nats_options);
  if (s == NATS_OK) s = natsOptions_SetURL(nats_options, options_.url.c_str());
  if (s == NATS_OK && !options_.user.empty()) {
    s = natsOptions_SetUserInfo(nats_options, options_.user.c_str(),
                                options_.password.c_str());
  }
  if (s == NATS_OK && !options_.token.empty()) {
    s = natsOptions_SetToken(nats_options, options_.token.c_str());
  }
  if (s == NATS_OK && !options_.nkey.empty()) {
    s = natsOptions_SetNKeyFromSeed(nats_options, options_.nkey.c_str(),
                                    options_.nkey_seed_file.c_str());
  }
  if (s == NATS_OK && !options_.credentials_file.empty()) {
    s = natsOptions_SetUserCredentialsFromFiles(
        nats_options, options_.credentials_file.c_str(), nullptr);
  }
  if (s == NATS_OK && options_.tls)
    s = natsOptions_SetSecure(nats_options, true);
  if (s == NATS_OK && !options_.tls_ca_file.empty()) {
    s = natsOptions_LoadCATrustedCertificates(nats_options,
                                              options_.tls_ca_file.c_str());
    if (s != NATS_OK) {
      natsOptions_Destroy(nats_options);
      return absl::InvalidArgumentError(
          absl::StrCat("nats: cannot load the CA certificates in ",
                       options_.tls_ca_file, ": ", natsStatus_GetText(s)));
    }
  }
  if (s == NATS_OK) {
    s = natsOptions_SetTimeout(nats_options, Millis(options_.io_timeout));
  }
  if (s == NATS_OK) s = natsOptions_SetAllowReconnect(nats_options, true);
  if (s == NATS_OK) s = natsOptions_SetMaxReconnect(nats_options, -1);
  if (s == NATS_OK) s = natsOptions_SetReconnectWait(nats_options, 100);
  if (s == NATS_OK) s = natsConnection_Connect(&connection_, nats_options);
  natsOptions_Destroy(nats_options);
  if (s != NATS_OK) {
    return NatsError(
        s, static_cast<jsErrCode>(0),
        absl::StrCat("connecting to ", WithoutUserInfo(options_.url)));
  }
  jsOptions js_options;
  jsOptions_Init(&js_options);
  js_options.Wait = Millis(options_.io_timeout);
  s = natsConnection_JetStream(&js_, connection_, &js_options);
  if (s != NATS_OK) return NatsError(s, static_cast<jsErrCode>(0), "JetStream");
  return absl::OkStatus();
}

absl::Status JetStreamBroker::CreateStream() {
  jsStreamConfig config;
  jsStreamConfig_Init(&config);
  config.Name = options_.stream.c_str();
  const char* subjects[] = {options_.subject.c_str()};
  config.Subjects = subjects;
  config.SubjectsLen = 1;
  config.Storage = js_FileStorage;
  config.Duplicates = absl::ToInt64Nanoseconds(options_.duplicate_window);
  jsStreamInfo* info = nullptr;
  jsErrCode js_error = static_cast<jsErrCode>(0);
  natsStatus s = js_AddStream(&info, js_, &config, nullptr, &js_error);
  if (info != nullptr) jsStreamInfo_Destroy(info);
  if (s == NATS_OK || js_error == JSStreamNameExistErr) return absl::OkStatus();
  return NatsError(s, js_error,
                   absl::StrCat("creating stream ", options_.stream));
}

absl::Status JetStreamBroker::CreateConsumer(
    std::optional<uint64_t> start_sequence) {
  jsConsumerInfo* info = nullptr;
  jsErrCode js_error = static_cast<jsErrCode>(0);
  natsStatus s =
      js_GetConsumerInfo(&info, js_, options_.stream.c_str(),
                         options_.durable.c_str(), nullptr, &js_error);
  if (s == NATS_OK) {
    absl::Status bound = CheckExistingConsumer(*info->Config);
    // This client has not fetched yet: the pull requests waiting are
    // another one's.
    if (bound.ok() && info->NumWaiting > 0) {
      competing_.Saw(
          absl::StrCat("durable consumer ", options_.durable, " of stream ",
                       options_.stream, " has ", info->NumWaiting,
                       " pull request(s) of another client waiting"));
    }
    jsConsumerInfo_Destroy(info);
    return bound;
  }
  if (info != nullptr) jsConsumerInfo_Destroy(info);
  if (js_error != JSConsumerNotFoundErr) {
    return NatsError(s, js_error, "looking up the durable consumer");
  }
  jsConsumerConfig config;
  jsConsumerConfig_Init(&config);
  config.Durable = options_.durable.c_str();
  config.AckPolicy = js_AckExplicit;
  config.AckWait = absl::ToInt64Nanoseconds(options_.ack_wait);
  // Room for a whole batch: with less, each fetch would stop at the limit
  // and wait out its timeout.
  config.MaxAckPending =
      std::max<int64_t>(kServerMaxAckPending,
                        PendingBatches(options_) * options_.delivery.max_batch);
  config.FilterSubject = options_.subject.c_str();
  config.MaxDeliver = ExpectedMaxDeliver(options_);
  std::vector<int64_t> backoff = BackoffNanos(options_);
  config.BackOff = backoff.empty() ? nullptr : backoff.data();
  config.BackOffLen = static_cast<int>(backoff.size());
  if (start_sequence.has_value()) {
    config.DeliverPolicy = js_DeliverByStartSequence;
    config.OptStartSeq = *start_sequence;
  }
  info = nullptr;
  js_error = static_cast<jsErrCode>(0);
  s = js_AddConsumer(&info, js_, options_.stream.c_str(), &config, nullptr,
                     &js_error);
  if (info != nullptr) jsConsumerInfo_Destroy(info);
  if (s != NATS_OK)
    return NatsError(s, js_error, "creating the durable consumer");
  max_deliver_ = config.MaxDeliver;
  return absl::OkStatus();
}

absl::Status JetStreamBroker::CheckExistingConsumer(
    const jsConsumerConfig& config) {
  std::vector<std::string> differences;
  auto differs = [&](std::string_view what, const auto& server,
                     const auto& wanted) {
    differences.push_back(
        absl::StrCat(absl::string_view(what.data(), what.size()), " ", server,
                     " (the options ask for ", wanted, ")"));
  };
  const std::string filter =
      config.FilterSubject != nullptr ? config.FilterSubject : "";
  if (filter != options_.subject) {
    differs("FilterSubject", absl::StrCat("\"", filter, "\""),
            absl::StrCat("\"", options_.subject, "\""));
  }
  if (config.AckPolicy != js_AckExplicit) {
    differs("AckPolicy", static_cast<int>(config.AckPolicy), "explicit");
  }
  const int64_t ack_wait = ExpectedAckWait(options_);
  if (config.AckWait != ack_wait) {
    differs("AckWait", absl::FormatDuration(absl::Nanoseconds(config.AckWait)),
            absl::FormatDuration(absl::Nanoseconds(ack_wait)));
  }
  const int64_t max_deliver = config.MaxDeliver > 0 ? config.MaxDeliver : -1;
  if (max_deliver != ExpectedMaxDeliver(options_)) {
    differs("MaxDeliver", max_deliver, ExpectedMaxDeliver(options_));
  }
  const std::vector<int64_t> backoff(config.BackOff,
                                     config.BackOff + config.BackOffLen);
  if (backoff != BackoffNanos(options_)) {
    differs("BackOff", absl::StrJoin(backoff, ","),
            absl::StrJoin(BackoffNanos(options_), ","));
  }
  const int64_t needed = PendingBatches(options_) * options_.delivery.max_batch;
  if (config.MaxAckPending > 0 && config.MaxAckPending < needed) {
    differs("MaxAckPending", config.MaxAckPending,
            absl::StrCat("at least ", needed));
  }
  if (!differences.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "nats: durable consumer ", options_.durable, " on stream ",
        options_.stream,
        " exists with other settings: ", absl::StrJoin(differences, "; "),
        ". It is bound as it is, never deleted and recreated (which would "
        "skip its unacknowledged messages): edit it on the server or change "
        "the options to match"));
  }
  max_deliver_ = config.MaxDeliver > 0 ? config.MaxDeliver : 0;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<brokers::Delivery>> JetStreamBroker::Receive(
    int max, absl::Duration timeout) {
  Fetched fetched;
  if (prefetch_.pending()) {
    fetched = prefetch_.Take();
    if (in_progress_ != nullptr) in_progress_->PromotePrefetched();
  } else {
    fetched = Fetch(max, timeout, InProgress::kCurrent, TakeSpare());
  }
  if (!fetched.unused.empty()) Recycle(std::move(fetched.unused));
  if (!fetched.status.ok()) return fetched.status;
  if (options_.prefetch) StartPrefetch(max, timeout);
  return std::move(fetched.deliveries);
}

void JetStreamBroker::Recycle(std::vector<brokers::Delivery> batch) {
  constexpr size_t kMaxSpare = 2;  // the batch processed, the one prefetched
  if (!batch.empty() && spare_.size() < kMaxSpare) {
    spare_.push_back(std::move(batch));
  }
}

std::vector<brokers::Delivery> JetStreamBroker::TakeSpare() {
  if (spare_.empty()) return {};
  std::vector<brokers::Delivery> batch = std::move(spare_.back());
  spare_.pop_back();
  return batch;
}

JetStreamBroker::Fetched JetStreamBroker::Fetch(
    int max, absl::Duration timeout, InProgress::Slot slot,
    std::vector<brokers::Delivery> batch) {
  natsMsgList list = {nullptr, 0};
  jsErrCode js_error = static_cast<jsErrCode>(0);
  natsStatus s = natsSubscription_Fetch(&list, subscription_,
                                        SafeFetchSize(subscription_, max),
                                        Millis(timeout), &js_error);
  Fetched fetched;
  if (list.Count == 0) {
    fetched.unused = std::move(batch);
  } else {
    // Fewer messages than the batch held: the rest of it is freed.
    batch.resize(static_cast<size_t>(list.Count));
    for (int i = 0; i < list.Count; ++i) MakeDelivery(list.Msgs[i], batch[i]);
    fetched.deliveries = std::move(batch);
  }
  natsMsgList_Destroy(&list);
  if (in_progress_ != nullptr && !fetched.deliveries.empty()) {
    // One buffer for the batch, each subject NUL-terminated.
    size_t size = 0;
    for (const brokers::Delivery& d : fetched.deliveries) {
      size += d.receipt.size() + 1;
    }
    std::string replies;
    replies.reserve(size);
    for (const brokers::Delivery& d : fetched.deliveries) {
      replies.append(d.receipt.c_str(), d.receipt.size() + 1);
    }
    in_progress_->Hold(slot, std::move(replies));
  }
  if (s != NATS_OK && !(s == NATS_TIMEOUT && js_error == 0)) {
    fetched.status = NatsError(s, js_error, "fetching");
  }
  return fetched;
}

void JetStreamBroker::StartPrefetch(int max, absl::Duration timeout) {
  prefetch_.Start([this, max, timeout, batch = TakeSpare()]() mutable {
    return Fetch(max, timeout, InProgress::kPrefetched, std::move(batch));
  });
}

void JetStreamBroker::ReturnPrefetched() {
  if (!prefetch_.pending()) return;
  Fetched fetched = prefetch_.Take();
  if (in_progress_ != nullptr) in_progress_->Release(InProgress::kPrefetched);
  if (!fetched.deliveries.empty() && !keep_prefetched_on_close_) {
    Nack(fetched.deliveries).IgnoreError();  // else redelivered after AckWait
  }
}

void JetStreamBroker::MakeDelivery(natsMsg* msg, brokers::Delivery& delivery) {
  // Every field is assigned (a recycled delivery holds another message's).
  delivery.source.assign(options_.stream);
  delivery.partition = 0;
  delivery.offset = -1;
  delivery.event_time = absl::InfinitePast();
  delivery.final_delivery = false;
  delivery.payload.assign(natsMsg_GetData(msg), natsMsg_GetDataLength(msg));
  const char* reply = natsMsg_GetReply(msg);
  delivery.receipt.assign(reply != nullptr ? reply : "");
  std::optional<AckSubject> meta = ParseAckSubject(delivery.receipt);
  if (!meta.has_value()) {
    jsMsgMetaData* nats_meta = nullptr;
    if (natsMsg_GetMetaData(&nats_meta, msg) == NATS_OK) {
      meta = AckSubject{nats_meta->NumDelivered, nats_meta->Sequence.Stream,
                        nats_meta->Timestamp};
      jsMsgMetaData_Destroy(nats_meta);
    }
  }
  if (meta.has_value()) {
    delivery.offset = static_cast<int64_t>(meta->stream_sequence);
    // When the stream stored it, in nanoseconds since the epoch.
    if (meta->timestamp > 0) {
      delivery.event_time = absl::FromUnixNanos(meta->timestamp);
    }
    if (meta->delivered > 1) ++redelivered_;
    // The server delivers it no more: the loop dead-letters it unless it
    // was processed.
    delivery.final_delivery =
        max_deliver_ > 0 &&
        meta->delivered >= static_cast<uint64_t>(max_deliver_);
  }
  ReadHeaders(msg, &delivery.headers);
  std::optional<std::string_view> id;
  if (!options_.id_header.empty()) id = delivery.Header(options_.id_header);
  if (id.has_value()) {
    delivery.id.assign(id->data(), id->size());
  } else {
    delivery.id.assign(options_.stream);
    absl::StrAppend(&delivery.id, "/", delivery.offset);
  }
}

absl::Status JetStreamBroker::Reply(
    absl::Span<const brokers::Delivery> deliveries, std::string_view verb) {
  for (const brokers::Delivery& d : deliveries) {
    natsStatus s =
        natsConnection_Publish(connection_, d.receipt.c_str(), verb.data(),
                               static_cast<int>(verb.size()));
    if (s != NATS_OK) return NatsError(s, static_cast<jsErrCode>(0), verb);
    unconfirmed_replies_ = true;
  }
  return absl::OkStatus();
}

absl::Status JetStreamBroker::ConfirmReplies(std::string_view what) {
  if (!unconfirmed_replies_) return absl::OkStatus();
  natsStatus s =
      natsConnection_FlushTimeout(connection_, Millis(options_.io_timeout));
  if (s != NATS_OK) return NatsError(s, static_cast<jsErrCode>(0), what);
  unconfirmed_replies_ = false;
  return absl::OkStatus();
}

absl::Status JetStreamBroker::Ack(
    absl::Span<const brokers::Delivery> deliveries) {
  if (in_progress_ != nullptr) in_progress_->Release(InProgress::kCurrent);
  if (absl::Status s = ConfirmReplies("+ACK"); !s.ok()) return s;
  return Reply(deliveries, "+ACK");
}

absl::Status JetStreamBroker::Nack(
    absl::Span<const brokers::Delivery> deliveries) {
  if (in_progress_ != nullptr) in_progress_->Release(InProgress::kCurrent);
  if (absl::Status s = Reply(deliveries, "-NAK"); !s.ok()) return s;
  return ConfirmReplies("-NAK");
}

absl::Status JetStreamBroker::Publish(const OutboxEntry& entry) {
  natsMsg* msg = nullptr;
  if (absl::Status check = CheckSubject(entry.destination); !check.ok()) {
    return check;
  }
  natsStatus s =
      natsMsg_Create(&msg, entry.destination.c_str(), nullptr,
                     entry.value.data(), static_cast<int>(entry.value.size()));
  if (s == NATS_OK && !entry.key.empty()) {
    s = natsMsgHeader_Set(msg, "Idem-Key", entry.key.c_str());
  }
  for (const auto& [name, value] : entry.headers) {
    if (brokers::IsReservedHeader(name, {"Nats-Msg-Id", "Idem-Key"})) continue;
    if (s == NATS_OK) s = natsMsgHeader_Add(msg, name.c_str(), value.c_str());
  }
  jsErrCode js_error = static_cast<jsErrCode>(0);
  if (s == NATS_OK) {
    jsPubOptions publish_options;
    jsPubOptions_Init(&publish_options);
    publish_options.MsgId = entry.message_id.c_str();
    jsPubAck* ack = nullptr;
    s = js_PublishMsg(&ack, js_, msg, &publish_options, &js_error);
    if (ack != nullptr) jsPubAck_Destroy(ack);
  }
  if (msg != nullptr) natsMsg_Destroy(msg);
  if (s == NATS_NO_RESPONDERS) {
    return NoResponders(entry.destination);
  }
  if (s != NATS_OK) {
    return NatsError(s, js_error,
                     absl::StrCat("publishing to ", entry.destination));
  }
  return absl::OkStatus();
}

absl::Status JetStreamBroker::NoResponders(const std::string& subject) {
  jsAccountInfo* info = nullptr;
  jsErrCode js_error = static_cast<jsErrCode>(0);
  natsStatus s = js_GetAccountInfo(&info, js_, nullptr, &js_error);
  if (info != nullptr) jsAccountInfo_Destroy(info);
  if (s != NATS_OK) {
    return NatsError(NATS_NO_RESPONDERS, static_cast<jsErrCode>(0),
                     absl::StrCat("publishing to ", subject));
  }
  return absl::NotFoundError(absl::StrCat(
      "nats: publishing to ", subject,
      ": no stream captures the subject (JetStream answered, nothing took "
      "the message)"));
}

}  // namespace idem::nats
