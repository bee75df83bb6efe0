#include "kafka/topic_admin.h"

#include <librdkafka/rdkafka.h>

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace idem::kafka {
namespace {

// Sends one CreateTopics request and waits for its result.
absl::Status CreateTopic(const std::string& brokers,
                         const ConfigList& client_config,
                         const std::string& topic, int32_t partitions,
                         const ConfigList& topic_config,
                         absl::Duration timeout) {
  ConfPtr conf(rd_kafka_conf_new());
  ConfigList settings = client_config;
  settings.emplace_back("bootstrap.servers", brokers);
  if (absl::Status s = SetConfig(conf.get(), settings); !s.ok()) return s;
  absl::StatusOr<HandlePtr> rk = NewHandle(RD_KAFKA_PRODUCER, std::move(conf));
  if (!rk.ok()) return rk.status();

  char reason[512];
  std::unique_ptr<rd_kafka_NewTopic_t, void (*)(rd_kafka_NewTopic_t*)>
      new_topic(rd_kafka_NewTopic_new(topic.c_str(), partitions,
                                      /*replication_factor=*/-1, reason,
                                      sizeof(reason)),
                rd_kafka_NewTopic_destroy);
  if (new_topic == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("creating topic ", topic, ": ", reason));
  }
  for (const auto& [name, value] : topic_config) {
    if (absl::Status s =
            FromKafkaError(rd_kafka_NewTopic_set_config(
                               new_topic.get(), name.c_str(), value.c_str()),
                           absl::StrCat("topic ", topic, " config ", name));
        !s.ok()) {
      return s;
    }
  }
  std::unique_ptr<rd_kafka_queue_t, void (*)(rd_kafka_queue_t*)> queue(
      rd_kafka_queue_new(rk->get()), rd_kafka_queue_destroy);
  std::unique_ptr<rd_kafka_AdminOptions_t, void (*)(rd_kafka_AdminOptions_t*)>
      options(
          rd_kafka_AdminOptions_new(rk->get(), RD_KAFKA_ADMIN_OP_CREATETOPICS),
          rd_kafka_AdminOptions_destroy);
  rd_kafka_AdminOptions_set_request_timeout(
      options.get(), ToKafkaMillis(timeout), reason, sizeof(reason));
  rd_kafka_NewTopic_t* topics[] = {new_topic.get()};
  rd_kafka_CreateTopics(rk->get(), topics, 1, options.get(), queue.get());
  std::unique_ptr<rd_kafka_event_t, void (*)(rd_kafka_event_t*)> event(
      rd_kafka_queue_poll(queue.get(), ToKafkaMillis(timeout) + 1000),
      rd_kafka_event_destroy);
  if (event == nullptr) {
    return absl::DeadlineExceededError(
        absl::StrCat("creating topic ", topic, ": no answer"));
  }
  if (absl::Status s = FromKafkaError(rd_kafka_event_error(event.get()),
                                      absl::StrCat("creating topic ", topic));
      !s.ok()) {
    return s;
  }
  size_t count = 0;
  const rd_kafka_topic_result_t** results = rd_kafka_CreateTopics_result_topics(
      rd_kafka_event_CreateTopics_result(event.get()), &count);
  for (size_t i = 0; i < count; ++i) {
    const rd_kafka_resp_err_t err = rd_kafka_topic_result_error(results[i]);
    if (err == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) continue;  // a race
    if (absl::Status s =
            FromKafkaError(err, absl::StrCat("creating topic ", topic));
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CreateTopicIfMissing(PartitionReader& reader,
                                  const std::string& brokers,
                                  const ConfigList& client_config,
                                  const std::string& topic, int32_t partitions,
                                  const ConfigList& topic_config,
                                  absl::Duration timeout) {
  absl::StatusOr<int32_t> existing = reader.PartitionCount(topic, timeout);
  if (existing.ok()) {
    if (*existing >= partitions) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(
        "topic ", topic, " has ", *existing, " partitions; it needs ",
        partitions, ", one per input partition"));
  }
  if (existing.status().code() != absl::StatusCode::kNotFound) {
    return existing.status();
  }
  absl::Status created = CreateTopic(brokers, client_config, topic, partitions,
                                     topic_config, timeout);
  if (created.ok()) return created;
  std::vector<std::string> config;
  for (const auto& [name, value] : topic_config) {
    config.push_back(absl::StrCat(name, "=", value));
  }
  return absl::Status(
      created.code(),
      absl::StrCat(created.message(), " (create it by hand: ", partitions,
                   " partitions, ", absl::StrJoin(config, ", "), ")"));
}

}  // namespace idem::kafka
