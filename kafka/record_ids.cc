#include "kafka/record_ids.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/absl_view.h"
#include "engine/user_code.h"
#include "idem/message.h"

namespace idem::kafka {

std::optional<std::string_view> Record::Header(std::string_view name) const {
  std::optional<std::string_view> found;
  for (const auto& [header, value] : headers) {
    if (header == name) found = value;
  }
  return found;
}

Record RecordFromMessage(const rd_kafka_message_t& message) {
  Record record;
  record.topic = rd_kafka_topic_name(message.rkt);
  record.partition = message.partition;
  record.offset = message.offset;
  if (message.key != nullptr) {
    record.key = std::string_view(static_cast<const char*>(message.key),
                                  message.key_len);
  }
  if (message.payload != nullptr) {
    record.value = std::string_view(static_cast<const char*>(message.payload),
                                    message.len);
  }
  rd_kafka_timestamp_type_t type;
  const int64_t timestamp = rd_kafka_message_timestamp(&message, &type);
  record.timestamp_ms =
      type == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE ? -1 : timestamp;
  rd_kafka_headers_t* headers = nullptr;
  if (rd_kafka_message_headers(&message, &headers) ==
      RD_KAFKA_RESP_ERR_NO_ERROR) {
    const char* name;
    const void* value;
    size_t size;
    for (size_t i = 0;
         rd_kafka_header_get_all(headers, i, &name, &value, &size) ==
         RD_KAFKA_RESP_ERR_NO_ERROR;
         ++i) {
      record.headers.emplace_back(
          name, value == nullptr
                    ? std::string_view()
                    : std::string_view(static_cast<const char*>(value), size));
    }
  }
  return record;
}

std::string PositionId(std::string_view topic, int32_t partition,
                       int64_t offset) {
  return absl::StrCat(AbslView(topic), "/", partition, "/", offset);
}

std::string DeadLetterId(std::string_view topic, int32_t partition,
                         int64_t offset) {
  return absl::StrCat("idem.dead-letter/",
                      PositionId(topic, partition, offset));
}

absl::StatusOr<std::string> DeriveId(const Record& record,
                                     const ConsumerOptions& options) {
  const std::string position =
      PositionId(record.topic, record.partition, record.offset);
  std::string id;
  if (options.id_function) {
    absl::StatusOr<std::string> derived = CallUserCode(
        "id_function", [&] { return options.id_function(record); });
    if (!derived.ok()) {
      return absl::Status(
          derived.status().code(),
          absl::StrCat("id_function failed for record ", position, ": ",
                       derived.status().message()));
    }
    id = *std::move(derived);
  } else if (std::optional<std::string_view> header =
                 record.Header(options.id_header);
             header.has_value()) {
    id = std::string(*header);
  } else {
    return position;
  }
  if (id.empty() || id.size() > kMaxIdBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "record ", position, " has an unusable message ID: ", id.size(),
        " bytes (must be 1 to ", kMaxIdBytes, ")"));
  }
  return id;
}

}  // namespace idem::kafka
