#include "kafka/consumer_options_check.h"

#include <cstdint>
#include <optional>
#include <string_view>

#include "absl/strings/numbers.h"
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

absl::Status Invalid(std::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("ConsumerOptions: ", AbslView(what)));
}

bool NonNegativeFinite(absl::Duration d) {
  return d >= absl::ZeroDuration() && d != absl::InfiniteDuration();
}

// The cluster, the group, its topics and where each record's ID comes from.
absl::Status CheckSubscription(const ConsumerOptions& options) {
  if (options.brokers.empty()) return Invalid("brokers must not be empty");
  if (options.group_id.empty()) return Invalid("group_id must not be empty");
  if (options.topics.empty()) return Invalid("topics must not be empty");
  for (const std::string& topic : options.topics) {
    if (topic.empty()) return Invalid("topics must not contain an empty name");
  }
  if (options.unknown_topic_timeout <= absl::ZeroDuration()) {
    return Invalid("unknown_topic_timeout must be > 0");
  }
  if (!options.id_function && options.id_header.empty()) {
    return Invalid("id_header must not be empty (or set id_function)");
  }
  return absl::OkStatus();
}

// How long a record's ID is kept, and how records are polled.
absl::Status CheckPolling(const ConsumerOptions& options) {
  if (!NonNegativeFinite(options.ttl)) {
    return Invalid("ttl must be >= 0 and finite");
  }
  if (options.max_batch < 1) return Invalid("max_batch must be >= 1");
  if (!NonNegativeFinite(options.poll_timeout)) {
    return Invalid("poll_timeout must be >= 0 and finite");
  }
  return absl::OkStatus();
}

// How a failing record is retried and where it goes when given up on.
absl::Status CheckRetries(const ConsumerOptions& options) {
  if (options.max_attempts < 1) return Invalid("max_attempts must be >= 1");
  if (options.dead_letter_topic.size() > kMaxSourceBytes) {
    return Invalid(absl::StrCat("dead_letter_topic must be at most ",
                                kMaxSourceBytes, " bytes"));
  }
  if (!NonNegativeFinite(options.retry_backoff)) {
    return Invalid("retry_backoff must be >= 0 and finite");
  }
  return absl::OkStatus();
}

absl::Status CheckStatisticsInterval(const ConsumerOptions& options) {
  if (options.statistics_interval < absl::Milliseconds(1) ||
      options.statistics_interval == absl::InfiniteDuration()) {
    return Invalid("statistics_interval must be >= 1 ms and finite");
  }
  return absl::OkStatus();
}

// The group's max.poll.interval.ms: kafka_config's last setting, or
// librdkafka's default; nullopt if kafka_config's is not a number.
std::optional<absl::Duration> MaxPollInterval(const ConsumerOptions& options) {
  absl::Duration interval = absl::Milliseconds(300000);
  for (const auto& [name, value] : options.kafka_config) {
    if (name != "max.poll.interval.ms") continue;
    int64_t ms = 0;
    if (!absl::SimpleAtoi(value, &ms)) return std::nullopt;
    interval = absl::Milliseconds(ms);
  }
  return interval;
}

// transaction_timeout, within what librdkafka accepts and below the group's
// max.poll.interval.ms, and set nowhere else.
absl::Status CheckTransactionTimeout(const ConsumerOptions& options) {
  for (const auto* config :
       {&options.kafka_config, &options.relay_kafka_config}) {
    for (const auto& [name, value] : *config) {
      if (name == "transaction.timeout.ms") {
        return Invalid(
            "kafka_config and relay_kafka_config must not set "
            "transaction.timeout.ms: set transaction_timeout");
      }
    }
  }
  if (options.transaction_interval <= absl::ZeroDuration() ||
      options.transaction_interval > options.transaction_timeout) {
    return Invalid(absl::StrCat(
        "transaction_interval must be > 0 and at most transaction_timeout (",
        absl::FormatDuration(options.transaction_timeout), "), got ",
        absl::FormatDuration(options.transaction_interval)));
  }
  const std::optional<absl::Duration> max_poll = MaxPollInterval(options);
  // A max.poll.interval.ms that is not a number is librdkafka's to refuse.
  if (options.transaction_timeout < absl::Seconds(1) ||
      (max_poll.has_value() && options.transaction_timeout >= *max_poll)) {
    return Invalid(absl::StrCat(
        "transaction_timeout must be in [1s, max.poll.interval.ms (",
        max_poll.has_value() ? absl::FormatDuration(*max_poll) : "?",
        ")), got ", absl::FormatDuration(options.transaction_timeout)));
  }
  return absl::OkStatus();
}

// Transactional output is exact only where a partition's commits move with
// it (changelog mode).
absl::Status CheckTransactionalOutputHasAChangelog(
    const ConsumerOptions& options) {
  if (!options.transactional_output || !options.changelog_topic.empty()) {
    return absl::OkStatus();
  }
  return Invalid(
      "transactional_output needs changelog_topic: without a changelog a "
      "member's store keeps the commits it made, and the group can give "
      "their partition to another member's store that processes the same "
      "records again (a member stalled past max.poll.interval.ms whose "
      "transaction the group refused, or a partition that moves away and "
      "back), so a read_committed reader would see their outputs twice; "
      "only a changelog lets a store undo what the group did not keep "
      "(docs/outbox.md, \"Transactional output\")");
}

// What transactional_output needs besides itself.
absl::Status CheckTransactionalOutput(const ConsumerOptions& options) {
  if (options.transactional_output && !options.relay_outbox) {
    return Invalid("transactional_output needs relay_outbox");
  }
  if (options.transactional_output && options.relay_progress_topic.empty()) {
    return Invalid("transactional_output needs a relay_progress_topic");
  }
  if (options.transactional_output) return CheckTransactionTimeout(options);
  return absl::OkStatus();
}

absl::Status CheckStandbyPartitions(const ConsumerOptions& options) {
  if (!options.standby_partitions.empty() && options.changelog_topic.empty()) {
    return Invalid("standby_partitions needs changelog_topic");
  }
  for (int32_t partition : options.standby_partitions) {
    if (partition < 0) {
      return Invalid(
          absl::StrCat("standby_partitions must be >= 0, got ", partition));
    }
  }
  return absl::OkStatus();
}

// The relay's limits on outbox entries.
absl::Status CheckOutbox(const ConsumerOptions& options) {
  if (options.outbox_max_attempts < 0) {
    return Invalid("outbox_max_attempts must be >= 0");
  }
  if (options.outbox_max_attempts > 0 && options.dead_letter_topic.empty()) {
    return Invalid(
        "outbox_max_attempts needs dead_letter_topic: an outbox entry given "
        "up on goes there");
  }
  if (options.max_outbox_pending < 0) {
    return Invalid("max_outbox_pending must be >= 0");
  }
  return absl::OkStatus();
}

absl::Status CheckStandbyInterval(const ConsumerOptions& options) {
  if (options.standby_interval <= absl::ZeroDuration() ||
      options.standby_interval == absl::InfiniteDuration()) {
    return Invalid("standby_interval must be > 0 and finite");
  }
  return absl::OkStatus();
}

absl::Status CheckRestoreSteps(const ConsumerOptions& options) {
  if (options.restore_step_records < 1) {
    return Invalid(absl::StrCat("restore_step_records must be >= 1, got ",
                                options.restore_step_records));
  }
  return absl::OkStatus();
}

// The workers, and the order they keep.
absl::Status CheckWorkers(const ConsumerOptions& options) {
  if (options.workers < 1 || options.workers > ConsumerOptions::kMaxWorkers) {
    return Invalid(absl::StrCat("workers must be in [1, ",
                                ConsumerOptions::kMaxWorkers, "], got ",
                                options.workers));
  }
  if (options.ordering != Ordering::kPartition &&
      options.ordering != Ordering::kKey) {
    return Invalid("ordering must be Ordering::kPartition or Ordering::kKey");
  }
  if (options.ordering == Ordering::kKey && !options.changelog_topic.empty()) {
    return Invalid(
        "ordering kKey cannot be combined with changelog_topic: a changelog "
        "mark says every record up to its offset is in the changelog, which "
        "keys of one partition committing out of offset order do not keep "
        "(use Ordering::kPartition)");
  }
  return absl::OkStatus();
}

// kafka_config must leave alone what the consumer sets itself.
absl::Status CheckKafkaConfig(const ConsumerOptions& options) {
  for (const auto& [name, value] : options.kafka_config) {
    for (const char* owned : kOwnedProperties) {
      if (name == owned) {
        return Invalid(
            absl::StrCat("kafka_config must not set ", name,
                         ": the consumer sets it (see ConsumerOptions)"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateConsumerOptions(const ConsumerOptions& options,
                                     bool plain_transactional_output) {
  using Check = absl::Status (*)(const ConsumerOptions&);
  // In this order: of several invalid fields, the first is reported.
  for (Check check : {CheckSubscription, CheckPolling, CheckRetries,
                      CheckStatisticsInterval, CheckTransactionalOutput,
                      CheckStandbyPartitions, CheckOutbox, CheckStandbyInterval,
                      CheckRestoreSteps, CheckWorkers, CheckKafkaConfig}) {
    if (absl::Status s = check(options); !s.ok()) return s;
  }
  if (plain_transactional_output) return absl::OkStatus();
  return CheckTransactionalOutputHasAChangelog(options);
}

}  // namespace idem::kafka
