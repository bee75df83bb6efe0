// ConsumerImpl and the errors of its input (kafka/consumer_impl.h): what
// librdkafka reports in place of records and through its error callback,
// told apart into what it recovers from by itself (noted), an unknown
// subscribed topic (waited for, ConsumerOptions::unknown_topic_timeout),
// and what stops the consumer for good (a missing authorization, a fatal
// error).

#include <librdkafka/rdkafka.h>

#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/absl_view.h"
#include "kafka/consumer_impl.h"

namespace idem::kafka {
namespace {

// How long the look-up of a topic whose wait is over may take.
constexpr absl::Duration kTopicLookupTimeout = absl::Seconds(5);

bool IsUnknownTopic(rd_kafka_resp_err_t err) {
  return err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC ||
         err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART;
}

// " to read topic T, partition P at offset O", as far as librdkafka tells:
// an error of a topic names it, and only an error of a partition's fetch
// carries an offset (its partition is meaningful then only).
std::string WhatWasRead(const rd_kafka_message_t& message) {
  if (message.rkt == nullptr) return "";
  std::string what =
      absl::StrCat(" to read topic ", rd_kafka_topic_name(message.rkt));
  if (message.offset >= 0) {
    absl::StrAppend(&what, ", partition ", message.partition, " at offset ",
                    message.offset);
  }
  return what;
}

}  // namespace

void ConsumerImpl::OnError(rd_kafka_t*, int err, const char* reason,
                           void* opaque) {
  ConsumerImpl* self = Self(opaque);
  if (err == RD_KAFKA_RESP_ERR__FATAL) {
    self->Fail(self->FatalError(reason));
    return;
  }
  self->NoteError(absl::UnavailableError(reason));
}

absl::Status ConsumerImpl::OnMessageError(const rd_kafka_message_t& message) {
  if (message.err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
    return absl::OkStatus();
  }
  if (message.err == RD_KAFKA_RESP_ERR__FATAL) {
    Fail(FatalError(rd_kafka_message_errstr(&message)));
    return failed_;
  }
  if (KafkaErrorCode(message.err) == absl::StatusCode::kPermissionDenied) {
    Fail(absl::PermissionDeniedError(absl::StrCat(
        "the consumer of group ", options_.group_id, " is not authorized",
        WhatWasRead(message), ": ", rd_kafka_message_errstr(&message), " (",
        rd_kafka_err2name(message.err), ")")));
    return failed_;
  }
  if (IsUnknownTopic(message.err) && message.rkt != nullptr) {
    NoteUnknownTopic(rd_kafka_topic_name(message.rkt));
  }
  // Transient (librdkafka retries), or a topic that may yet be created.
  NoteError(absl::UnavailableError(rd_kafka_message_errstr(&message)));
  return absl::OkStatus();
}

absl::Status ConsumerImpl::FatalError(std::string_view reason) {
  const std::string cause = FatalErrorText(rk_.get());
  return absl::AbortedError(absl::StrCat(
      "fatal Kafka consumer error: ", cause.empty() ? AbslView(reason) : cause,
      "; the consumer is unusable: create a new one"));
}

void ConsumerImpl::Fail(absl::Status status) {
  if (!failed_.ok()) return;
  failed_ = std::move(status);
  Log(LogSeverity::kError,
      absl::StrCat("idem: the consumer stopped: ", failed_.ToString()));
}

void ConsumerImpl::NoteUnknownTopic(const std::string& topic) {
  bool subscribed = false;
  for (const std::string& t : options_.topics) subscribed |= t == topic;
  if (!subscribed || !unknown_since_.emplace(topic, absl::Now()).second) {
    return;
  }
  Log(LogSeverity::kWarning,
      absl::StrCat("idem: subscribed topic ", topic,
                   " is unknown to the brokers; waiting up to ",
                   absl::FormatDuration(options_.unknown_topic_timeout),
                   " (ConsumerOptions::unknown_topic_timeout) for it"));
}

absl::Status ConsumerImpl::CheckUnknownTopics() {
  const absl::Time now = absl::Now();
  for (auto it = unknown_since_.begin(); it != unknown_since_.end();) {
    const auto& [topic, since] = *it;
    if (now - since < options_.unknown_topic_timeout) {
      ++it;
      continue;
    }
    absl::StatusOr<int32_t> partitions =
        TopicPartitionCount(rk_.get(), topic, kTopicLookupTimeout);
    if (partitions.ok()) {
      it = unknown_since_.erase(it);  // created meanwhile
      continue;
    }
    if (absl::IsNotFound(partitions.status())) {
      Fail(UnknownTopicError(topic, now - since));
      return failed_;
    }
    if (absl::IsPermissionDenied(partitions.status())) {
      Fail(partitions.status());
      return failed_;
    }
    NoteError(partitions.status());  // cannot tell: asked again next call
    ++it;
  }
  return absl::OkStatus();
}

absl::Status ConsumerImpl::UnknownTopicError(const std::string& topic,
                                             absl::Duration unknown_for) const {
  return absl::NotFoundError(
      absl::StrCat("subscribed topic ", topic,
                   " does not exist: the brokers have not "
                   "known it for ",
                   absl::FormatDuration(unknown_for),
                   ", longer than ConsumerOptions::unknown_topic_timeout (",
                   absl::FormatDuration(options_.unknown_topic_timeout),
                   "); create the topic, or correct ConsumerOptions::topics"));
}

}  // namespace idem::kafka
