#include "kafka/rdkafka_util.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/absl_view.h"
#include "engine/user_code.h"

namespace idem::kafka {

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

void SetLogger(rd_kafka_conf_t* conf, Logger* logger) {
  rd_kafka_conf_set_opaque(conf, logger);
  rd_kafka_conf_set_log_cb(conf, [](const rd_kafka_t* rk, int level,
                                    const char* facility, const char* text) {
    Logger* sink = static_cast<Logger*>(rd_kafka_opaque(rk));
    CallUserCode("the Kafka client's logger", [&] {
      sink->Log(SeverityOfSyslogLevel(level),
                absl::StrCat("librdkafka ", facility, ": ", text));
      return absl::OkStatus();
    }).IgnoreError();  // a logger that throws loses the line
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

absl::Status FromKafkaError(rd_kafka_resp_err_t err, std::string_view context) {
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return absl::OkStatus();
  const std::string message =
      absl::StrCat(AbslView(context), ": ", rd_kafka_err2str(err));
  switch (err) {
    case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
    case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
    case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
    case RD_KAFKA_RESP_ERR__INVALID_ARG:
    case RD_KAFKA_RESP_ERR_INVALID_PARTITIONS:
    case RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION:
      return absl::InvalidArgumentError(message);
    case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
      return absl::OutOfRangeError(message);
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
      return absl::PermissionDeniedError(message);
    case RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS:
      return absl::AlreadyExistsError(message);
    case RD_KAFKA_RESP_ERR__UNSUPPORTED_FEATURE:
      return absl::UnimplementedError(message);
    case RD_KAFKA_RESP_ERR__TIMED_OUT:
    case RD_KAFKA_RESP_ERR__MSG_TIMED_OUT:
    case RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT:
      return absl::DeadlineExceededError(message);
    default:
      return absl::UnavailableError(message);
  }
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

}  // namespace idem::kafka
