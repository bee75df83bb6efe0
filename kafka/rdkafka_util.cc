#include "kafka/rdkafka_util.h"

#include <algorithm>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/absl_view.h"
#include "engine/user_code.h"

namespace idem::kafka {
namespace {

struct MetadataDeleter {
  void operator()(const rd_kafka_metadata_t* metadata) const {
    rd_kafka_metadata_destroy(metadata);
  }
};

}  // namespace

absl::Status SetConfig(rd_kafka_conf_t* conf, const ConfigList& config) {
  char reason[512];
  for (const auto& [name, value] : config) {
    if (rd_kafka_conf_set(conf, name.c_str(), value.c_str(), reason,
                          sizeof(reason)) != RD_KAFKA_CONF_OK) {
      return absl::InvalidArgumentError(
          absl::StrCat("Kafka property ", name, "=", value, ": ", reason));
    }
  }
  return absl::OkStatus();
}

int ToKafkaMillis(absl::Duration d) {
  return static_cast<int>(
      std::clamp<int64_t>(absl::ToInt64Milliseconds(d), 0, int64_t{1} << 30));
}

LogSeverity SeverityOfSyslogLevel(int level) {
  if (level <= 3) return LogSeverity::kError;
  if (level == 4) return LogSeverity::kWarning;
  if (level <= 6) return LogSeverity::kInfo;
  return LogSeverity::kDebug;
}

void LogLine(Logger* logger, std::string_view owner, LogSeverity severity,
             std::string_view line) {
  if (logger == nullptr) return;
  CallUserCode(owner, [&] {
    logger->Log(severity, line);
    return absl::OkStatus();
  }).IgnoreError();  // a logger that throws loses the line
}

void SetLogger(rd_kafka_conf_t* conf, Logger* logger) {
  rd_kafka_conf_set_opaque(conf, logger);
  rd_kafka_conf_set_log_cb(conf, [](const rd_kafka_t* rk, int level,
                                    const char* facility, const char* text) {
    LogLine(static_cast<Logger*>(rd_kafka_opaque(rk)),
            "the Kafka client's logger", SeverityOfSyslogLevel(level),
            absl::StrCat("librdkafka ", facility, ": ", text));
  });
}

absl::StatusOr<HandlePtr> NewHandle(rd_kafka_type_t type, ConfPtr conf) {
  char reason[512];
  // rd_kafka_new takes ownership of the configuration only on success.
  rd_kafka_t* rk = rd_kafka_new(type, conf.get(), reason, sizeof(reason));
  if (rk == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("creating the Kafka client: ", reason));
  }
  conf.release();
  return HandlePtr(rk);
}

absl::StatusCode KafkaErrorCode(rd_kafka_resp_err_t err) {
  switch (err) {
    case RD_KAFKA_RESP_ERR_NO_ERROR:
      return absl::StatusCode::kOk;
    case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
    case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
    case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
    case RD_KAFKA_RESP_ERR__INVALID_ARG:
    case RD_KAFKA_RESP_ERR_INVALID_PARTITIONS:
    case RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION:
      return absl::StatusCode::kInvalidArgument;
    case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
      return absl::StatusCode::kOutOfRange;
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_DELEGATION_TOKEN_AUTHORIZATION_FAILED:
      return absl::StatusCode::kPermissionDenied;
    case RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS:
      return absl::StatusCode::kAlreadyExists;
    case RD_KAFKA_RESP_ERR__UNSUPPORTED_FEATURE:
      return absl::StatusCode::kUnimplemented;
    case RD_KAFKA_RESP_ERR__TIMED_OUT:
    case RD_KAFKA_RESP_ERR__MSG_TIMED_OUT:
    case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
      return absl::StatusCode::kDeadlineExceeded;
    default:
      return absl::StatusCode::kUnavailable;
  }
}

absl::Status FromKafkaError(rd_kafka_resp_err_t err, std::string_view context) {
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return absl::OkStatus();
  return absl::Status(KafkaErrorCode(err), absl::StrCat(AbslView(context), ": ",
                                                        rd_kafka_err2str(err)));
}

std::string FatalErrorText(rd_kafka_t* rk) {
  char reason[512] = "";
  const rd_kafka_resp_err_t fatal =
      rd_kafka_fatal_error(rk, reason, sizeof(reason));
  if (fatal == RD_KAFKA_RESP_ERR_NO_ERROR) return "";
  return absl::StrCat(rd_kafka_err2name(fatal), ": ", reason);
}

absl::Status FromKafkaErrorObject(rd_kafka_error_t* error,
                                  std::string_view context) {
  if (error == nullptr) return absl::OkStatus();
  absl::Status status = FromKafkaError(rd_kafka_error_code(error), context);
  if (rd_kafka_error_is_fatal(error)) {
    status = absl::AbortedError(absl::StrCat(
        AbslView(context),
        ": fatal Kafka client error: ", rd_kafka_error_string(error)));
  }
  rd_kafka_error_destroy(error);
  return status;
}

absl::StatusOr<int32_t> TopicPartitionCount(rd_kafka_t* rk,
                                            const std::string& topic,
                                            absl::Duration timeout) {
  std::unique_ptr<rd_kafka_topic_t, void (*)(rd_kafka_topic_t*)> rkt(
      rd_kafka_topic_new(rk, topic.c_str(), nullptr), rd_kafka_topic_destroy);
  if (rkt == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "topic '", topic, "': ", rd_kafka_err2str(rd_kafka_last_error())));
  }
  const rd_kafka_metadata_t* raw = nullptr;
  rd_kafka_resp_err_t err =
      rd_kafka_metadata(rk, 0, rkt.get(), &raw, ToKafkaMillis(timeout));
  if (absl::Status s =
          FromKafkaError(err, absl::StrCat("metadata of topic ", topic));
      !s.ok()) {
    return s;
  }
  std::unique_ptr<const rd_kafka_metadata_t, MetadataDeleter> metadata(raw);
  if (metadata->topic_cnt != 1 ||
      metadata->topics[0].err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
      metadata->topics[0].partition_cnt == 0) {
    return absl::NotFoundError(
        absl::StrCat("topic ", topic, " does not exist"));
  }
  if (absl::Status s = FromKafkaError(
          metadata->topics[0].err, absl::StrCat("metadata of topic ", topic));
      !s.ok()) {
    return s;
  }
  return metadata->topics[0].partition_cnt;
}

}  // namespace idem::kafka
