#include "kafka/consumer_options_check.h"

#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "engine/absl_view.h"
#include "idem/message.h"

namespace idem::kafka {
namespace {

// Properties the consumer sets itself and refuses from kafka_config.
constexpr const char* kOwnedProperties[] = {
    "bootstrap.servers", "metadata.broker.list", "group.id",
    "enable.auto.commit", "enable.auto.offset.store"};

bool NonNegativeFinite(absl::Duration d) {
  return d >= absl::ZeroDuration() && d != absl::InfiniteDuration();
}

}  // namespace

absl::Status ValidateConsumerOptions(const ConsumerOptions& options) {
  auto invalid = [](std::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("ConsumerOptions: ", AbslView(what)));
  };
  if (options.brokers.empty()) return invalid("brokers must not be empty");
  if (options.group_id.empty()) return invalid("group_id must not be empty");
  if (options.topics.empty()) return invalid("topics must not be empty");
  for (const std::string& topic : options.topics) {
    if (topic.empty()) return invalid("topics must not contain an empty name");
  }
  if (!options.id_function && options.id_header.empty()) {
    return invalid("id_header must not be empty (or set id_function)");
  }
  if (!NonNegativeFinite(options.ttl)) {
    return invalid("ttl must be >= 0 and finite");
  }
  if (options.max_batch < 1) return invalid("max_batch must be >= 1");
  if (!NonNegativeFinite(options.poll_timeout)) {
    return invalid("poll_timeout must be >= 0 and finite");
  }
  if (options.max_attempts < 1) return invalid("max_attempts must be >= 1");
  if (options.dead_letter_topic.size() > kMaxSourceBytes) {
    return invalid(absl::StrCat("dead_letter_topic must be at most ",
                                kMaxSourceBytes, " bytes"));
  }
  if (!NonNegativeFinite(options.retry_backoff)) {
    return invalid("retry_backoff must be >= 0 and finite");
  }
  if (options.statistics_interval < absl::Milliseconds(1) ||
      options.statistics_interval == absl::InfiniteDuration()) {
    return invalid("statistics_interval must be >= 1 ms and finite");
  }
  if (options.transactional_output && !options.relay_outbox) {
    return invalid("transactional_output needs relay_outbox");
  }
  if (options.transactional_output && options.relay_progress_topic.empty()) {
    return invalid("transactional_output needs a relay_progress_topic");
  }
  if (!options.standby_partitions.empty() && options.changelog_topic.empty()) {
    return invalid("standby_partitions needs changelog_topic");
  }
  for (int32_t partition : options.standby_partitions) {
    if (partition < 0) {
      return invalid(
          absl::StrCat("standby_partitions must be >= 0, got ", partition));
    }
  }
  if (options.outbox_max_attempts < 0) {
    return invalid("outbox_max_attempts must be >= 0");
  }
  if (options.outbox_max_attempts > 0 && options.dead_letter_topic.empty()) {
    return invalid(
        "outbox_max_attempts needs dead_letter_topic: an outbox entry given "
        "up on goes there");
  }
  if (options.max_outbox_pending < 0) {
    return invalid("max_outbox_pending must be >= 0");
  }
  if (options.standby_interval <= absl::ZeroDuration() ||
      options.standby_interval == absl::InfiniteDuration()) {
    return invalid("standby_interval must be > 0 and finite");
  }
  if (options.workers < 1 || options.workers > ConsumerOptions::kMaxWorkers) {
    return invalid(absl::StrCat("workers must be in [1, ",
                                ConsumerOptions::kMaxWorkers, "], got ",
                                options.workers));
  }
  if (options.ordering != Ordering::kPartition &&
      options.ordering != Ordering::kKey) {
    return invalid("ordering must be Ordering::kPartition or Ordering::kKey");
  }
  if (options.ordering == Ordering::kKey && !options.changelog_topic.empty()) {
    return invalid(
        "ordering kKey cannot be combined with changelog_topic: a changelog "
        "mark says every record up to its offset is in the changelog, which "
        "keys of one partition committing out of offset order do not keep "
        "(use Ordering::kPartition)");
  }
  for (const auto& [name, value] : options.kafka_config) {
    for (const char* owned : kOwnedProperties) {
      if (name == owned) {
        return invalid(
            absl::StrCat("kafka_config must not set ", name,
                         ": the consumer sets it (see ConsumerOptions)"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace idem::kafka
