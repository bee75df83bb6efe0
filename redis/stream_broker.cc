#include "redis/stream_broker.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "brokers/reserved_headers.h"

namespace idem::redis {
namespace {

std::string Millis(absl::Duration d) {
  return absl::StrCat(absl::ToInt64Milliseconds(d));
}

bool IsArray(const redisReply* reply) {
  return reply != nullptr && reply->type == REDIS_REPLY_ARRAY;
}

absl::Status Malformed(std::string_view what) {
  return absl::InternalError(
      absl::StrCat("redis: unexpected reply to ",
                   absl::string_view(what.data(), what.size())));
}

}  // namespace

StreamBroker::StreamBroker(const ConsumerOptions& options)
    : options_(options),
      connection_(options.host, options.port, options.io_timeout, options.user,
                  options.password,
                  TlsSettings{.enabled = options.tls,
                              .ca_file = options.tls_ca_file,
                              .cert_file = options.tls_cert_file,
                              .key_file = options.tls_key_file}) {}

absl::StatusOr<Reply> StreamBroker::Run(const std::vector<std::string>& argv,
                                        absl::Duration extra_wait) {
  absl::StatusOr<Reply> reply = connection_.Command(argv, extra_wait);
  if (!reply.ok() && absl::IsUnavailable(reply.status())) {
    pending_cursor_ = "0";  // what this consumer holds comes back first
  }
  return reply;
}

absl::Status StreamBroker::CreateGroup() {
  absl::StatusOr<Reply> reply =
      Run({"XGROUP", "CREATE", options_.stream, options_.group,
           options_.group_start_id, "MKSTREAM"});
  if (!reply.ok() &&
      reply.status().message().find("BUSYGROUP") != absl::string_view::npos) {
    return absl::OkStatus();
  }
  return reply.status();
}

absl::Status StreamBroker::CheckGroup() {
  absl::StatusOr<Reply> reply = Run({"XINFO", "GROUPS", options_.stream});
  if (!reply.ok()) {
    if (absl::IsFailedPrecondition(reply.status()) &&
        reply.status().message().find("no such key") !=
            absl::string_view::npos) {
      return absl::NotFoundError(absl::StrCat(
          "redis: stream ", options_.stream,
          " does not exist (ConsumerOptions::create_group is false)"));
    }
    return reply.status();
  }
  const redisReply* groups = reply->get();
  for (size_t g = 0; IsArray(groups) && g < groups->elements; ++g) {
    const redisReply* fields = groups->element[g];
    for (size_t f = 0; IsArray(fields) && f + 1 < fields->elements; f += 2) {
      if (ReplyString(fields->element[f]) == "name" &&
          ReplyString(fields->element[f + 1]) == options_.group) {
        return absl::OkStatus();
      }
    }
  }
  return absl::NotFoundError(absl::StrCat(
      "redis: stream ", options_.stream, " has no consumer group ",
      options_.group, " (ConsumerOptions::create_group is false)"));
}

absl::StatusOr<std::vector<brokers::Delivery>> StreamBroker::Receive(
    int max, absl::Duration timeout) {
  if (!pending_cursor_.empty()) {
    absl::StatusOr<std::vector<brokers::Delivery>> own = ReadOwnPending(max);
    if (!own.ok() || !own->empty()) return own;
  }
  if (options_.claim_idle > absl::ZeroDuration() &&
      (claim_cursor_ != "0-0" || absl::Now() >= next_claim_)) {
    absl::StatusOr<std::vector<brokers::Delivery>> claimed = Claim(max);
    if (!claimed.ok() || !claimed->empty()) return claimed;
  }
  absl::StatusOr<Reply> reply =
      Run({"XREADGROUP", "GROUP", options_.group, options_.consumer_name,
           "COUNT", absl::StrCat(max), "BLOCK", Millis(timeout), "STREAMS",
           options_.stream, ">"},
          timeout);
  if (!reply.ok()) return reply.status();
  if ((*reply)->type == REDIS_REPLY_NIL)
    return std::vector<brokers::Delivery>();
  // [[stream, [entries...]]]
  const redisReply* streams = reply->get();
  if (!IsArray(streams) || streams->elements != 1 ||
      !IsArray(streams->element[0]) || streams->element[0]->elements != 2) {
    return Malformed("XREADGROUP");
  }
  return ParseEntries(streams->element[0]->element[1]);
}

absl::StatusOr<std::vector<brokers::Delivery>> StreamBroker::ReadOwnPending(
    int max) {
  absl::StatusOr<Reply> reply = Run(
      {"XREADGROUP", "GROUP", options_.group, options_.consumer_name, "COUNT",
       absl::StrCat(max), "STREAMS", options_.stream, pending_cursor_});
  if (!reply.ok()) return reply.status();
  const redisReply* streams = reply->get();
  std::vector<brokers::Delivery> out;
  if (IsArray(streams) && streams->elements == 1 &&
      IsArray(streams->element[0]) && streams->element[0]->elements == 2) {
    const redisReply* entries = streams->element[0]->element[1];
    if (IsArray(entries) && entries->elements > 0) {
      const redisReply* last = entries->element[entries->elements - 1];
      if (!IsArray(last) || last->elements < 1) return Malformed("XREADGROUP");
      pending_cursor_ = std::string(ReplyString(last->element[0]));
      absl::StatusOr<std::vector<brokers::Delivery>> parsed =
          ParseEntries(entries);
      if (!parsed.ok()) return parsed.status();
      reclaimed_ += static_cast<int64_t>(parsed->size());
      if (parsed->empty()) return ReadOwnPending(max);  // all were deleted
      return parsed;
    }
  }
  pending_cursor_.clear();  // nothing of ours is pending any more
  return out;
}

absl::StatusOr<std::vector<brokers::Delivery>> StreamBroker::Claim(int max) {
  absl::StatusOr<Reply> reply = Run(
      {"XAUTOCLAIM", options_.stream, options_.group, options_.consumer_name,
       Millis(options_.claim_idle), claim_cursor_, "COUNT", absl::StrCat(max)});
  if (!reply.ok()) return reply.status();
  // [next cursor, [entries...], [deleted IDs...]]
  const redisReply* parts = reply->get();
  if (!IsArray(parts) || parts->elements < 2) return Malformed("XAUTOCLAIM");
  claim_cursor_ = std::string(ReplyString(parts->element[0]));
  if (claim_cursor_.empty()) claim_cursor_ = "0-0";
  if (claim_cursor_ == "0-0") {
    next_claim_ = absl::Now() + options_.claim_interval;
  }
  absl::StatusOr<std::vector<brokers::Delivery>> parsed =
      ParseEntries(parts->element[1]);
  if (parsed.ok()) claimed_ += static_cast<int64_t>(parsed->size());
  return parsed;
}

absl::StatusOr<std::vector<brokers::Delivery>> StreamBroker::ParseEntries(
    const redisReply* entries) {
  std::vector<brokers::Delivery> out;
  if (!IsArray(entries)) return Malformed("a stream read");
  std::vector<std::string> deleted;
  for (size_t i = 0; i < entries->elements; ++i) {
    const redisReply* entry = entries->element[i];
    if (!IsArray(entry) || entry->elements != 2) {
      return Malformed("a stream read");
    }
    std::string entry_id(ReplyString(entry->element[0]));
    if (!IsArray(entry->element[1])) {
      deleted.push_back(std::move(entry_id));  // trimmed from the stream
      continue;
    }
    out.push_back(MakeDelivery(std::move(entry_id), entry->element[1]));
  }
  if (!deleted.empty()) {
    std::vector<std::string> argv = {"XACK", options_.stream, options_.group};
    argv.insert(argv.end(), deleted.begin(), deleted.end());
    if (absl::StatusOr<Reply> r = Run(argv); !r.ok()) return r.status();
  }
  return out;
}

brokers::Delivery StreamBroker::MakeDelivery(std::string entry_id,
                                             const redisReply* fields) const {
  brokers::Delivery delivery;
  delivery.source = options_.stream;
  bool has_id = false;
  for (size_t f = 0; f + 1 < fields->elements; f += 2) {
    std::string name(ReplyString(fields->element[f]));
    std::string value(ReplyString(fields->element[f + 1]));
    if (!options_.id_field.empty() && name == options_.id_field) {
      delivery.id = std::move(value);
      has_id = true;
    } else if (name == options_.payload_field) {
      delivery.payload = std::move(value);
    } else {
      delivery.headers.emplace_back(std::move(name), std::move(value));
    }
  }
  if (!has_id) {
    delivery.id = absl::StrCat(options_.stream, "/", entry_id);
  }
  // An entry ID is "<milliseconds>-<sequence>": when the stream added it.
  int64_t millis = 0;
  if (absl::SimpleAtoi(
          absl::string_view(entry_id).substr(0, entry_id.find('-')), &millis) &&
      millis > 0) {
    delivery.event_time = absl::FromUnixMillis(millis);
  }
  delivery.receipt = std::move(entry_id);
  return delivery;
}

absl::Status StreamBroker::Ack(absl::Span<const brokers::Delivery> deliveries) {
  std::vector<std::string> argv = {"XACK", options_.stream, options_.group};
  for (const brokers::Delivery& d : deliveries) argv.push_back(d.receipt);
  return Run(argv).status();
}

absl::Status StreamBroker::Nack(absl::Span<const brokers::Delivery>) {
  pending_cursor_ = "0";
  return absl::OkStatus();
}

absl::Status StreamBroker::Publish(const OutboxEntry& entry) {
  const std::string& id_field =
      options_.id_field.empty() ? std::string("message-id") : options_.id_field;
  std::vector<std::string> argv = {"XADD", entry.destination};
  if (options_.output_max_len > 0 &&
      entry.destination != options_.delivery.dead_letter_destination) {
    argv.insert(argv.end(),
                {"MAXLEN", "~", absl::StrCat(options_.output_max_len)});
  }
  if (options_.output_max_age > absl::ZeroDuration() &&
      entry.destination != options_.delivery.dead_letter_destination) {
    const int64_t min_ms = std::max<int64_t>(
        0, absl::ToUnixMillis(absl::Now()) -
               absl::ToInt64Milliseconds(options_.output_max_age));
    argv.insert(argv.end(), {"MINID", "~", absl::StrCat(min_ms, "-0")});
  }
  argv.insert(argv.end(), {"*", id_field, entry.message_id,
                           options_.payload_field, entry.value});
  if (!entry.key.empty()) {
    argv.push_back("key");
    argv.push_back(entry.key);
  }
  for (const auto& [name, value] : entry.headers) {
    if (brokers::IsReservedHeader(name,
                                  {id_field, options_.payload_field, "key"})) {
      continue;
    }
    argv.push_back(name);
    argv.push_back(value);
  }
  return Run(argv).status();
}

}  // namespace idem::redis
