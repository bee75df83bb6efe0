#include "kafka/topic_admin.h"

#include <librdkafka/rdkafka.h>

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace idem::kafka {
namespace {

template <typename T, void (*destroy)(T*)>
struct Destroyer {
  void operator()(T* p) const { destroy(p); }
};
using QueuePtr =
    std::unique_ptr<rd_kafka_queue_t,
                    Destroyer<rd_kafka_queue_t, rd_kafka_queue_destroy>>;
using EventPtr =
    std::unique_ptr<rd_kafka_event_t,
                    Destroyer<rd_kafka_event_t, rd_kafka_event_destroy>>;
using OptionsPtr = std::unique_ptr<
    rd_kafka_AdminOptions_t,
    Destroyer<rd_kafka_AdminOptions_t, rd_kafka_AdminOptions_destroy>>;
using ResourcePtr = std::unique_ptr<
    rd_kafka_ConfigResource_t,
    Destroyer<rd_kafka_ConfigResource_t, rd_kafka_ConfigResource_destroy>>;

// A client for one admin request: its handle, the queue its answer comes
// to, and the request's options.
struct AdminRequest {
  HandlePtr rk;
  QueuePtr queue;
  OptionsPtr options;
};

absl::StatusOr<AdminRequest> NewAdminRequest(const std::string& brokers,
                                             const ConfigList& client_config,
                                             rd_kafka_admin_op_t op,
                                             absl::Duration timeout) {
  ConfPtr conf(rd_kafka_conf_new());
  ConfigList settings = client_config;
  settings.emplace_back("bootstrap.servers", brokers);
  if (absl::Status s = SetConfig(conf.get(), settings); !s.ok()) return s;
  absl::StatusOr<HandlePtr> rk = NewHandle(RD_KAFKA_PRODUCER, std::move(conf));
  if (!rk.ok()) return rk.status();
  AdminRequest request;
  request.queue.reset(rd_kafka_queue_new(rk->get()));
  request.options.reset(rd_kafka_AdminOptions_new(rk->get(), op));
  char reason[512];
  rd_kafka_AdminOptions_set_request_timeout(
      request.options.get(), ToKafkaMillis(timeout), reason, sizeof(reason));
  request.rk = *std::move(rk);
  return request;
}

// Sends the request to one broker the cluster's metadata names, rather than
// to the controller: any broker answers for a topic's configuration, and a
// cluster that names no controller (librdkafka's mock) then answers at once
// that it does not support the request, instead of letting it time out.
absl::Status AddressAnyBroker(AdminRequest& request, absl::Duration timeout,
                              const std::string& what) {
  const rd_kafka_metadata_t* metadata = nullptr;
  if (absl::Status s = FromKafkaError(
          rd_kafka_metadata(request.rk.get(), /*all_topics=*/0, nullptr,
                            &metadata, ToKafkaMillis(timeout)),
          what);
      !s.ok()) {
    return s;
  }
  const int32_t broker =
      metadata->broker_cnt > 0 ? metadata->brokers[0].id : -1;
  rd_kafka_metadata_destroy(metadata);
  if (broker < 0) {
    return absl::UnavailableError(absl::StrCat(what, ": no broker known"));
  }
  char reason[512];
  return FromKafkaError(
      rd_kafka_AdminOptions_set_broker(request.options.get(), broker, reason,
                                       sizeof(reason)),
      what);
}

// The request's answer: its event once the request as a whole succeeded.
absl::StatusOr<EventPtr> AwaitAnswer(AdminRequest& request,
                                     absl::Duration timeout,
                                     const std::string& what) {
  EventPtr event(
      rd_kafka_queue_poll(request.queue.get(), ToKafkaMillis(timeout) + 1000));
  if (event == nullptr) {
    return absl::DeadlineExceededError(absl::StrCat(what, ": no answer"));
  }
  if (absl::Status s = FromKafkaError(rd_kafka_event_error(event.get()), what);
      !s.ok()) {
    return s;
  }
  return event;
}

// Sends one CreateTopics request and waits for its result.
absl::Status CreateTopic(const std::string& brokers,
                         const ConfigList& client_config,
                         const std::string& topic, int32_t partitions,
                         const ConfigList& topic_config,
                         absl::Duration timeout) {
  const std::string what = absl::StrCat("creating topic ", topic);
  absl::StatusOr<AdminRequest> request = NewAdminRequest(
      brokers, client_config, RD_KAFKA_ADMIN_OP_CREATETOPICS, timeout);
  if (!request.ok()) return request.status();
  char reason[512];
  std::unique_ptr<rd_kafka_NewTopic_t, void (*)(rd_kafka_NewTopic_t*)>
      new_topic(rd_kafka_NewTopic_new(topic.c_str(), partitions,
                                      /*replication_factor=*/-1, reason,
                                      sizeof(reason)),
                rd_kafka_NewTopic_destroy);
  if (new_topic == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", reason));
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
  rd_kafka_NewTopic_t* topics[] = {new_topic.get()};
  rd_kafka_CreateTopics(request->rk.get(), topics, 1, request->options.get(),
                        request->queue.get());
  absl::StatusOr<EventPtr> event = AwaitAnswer(*request, timeout, what);
  if (!event.ok()) return event.status();
  size_t count = 0;
  const rd_kafka_topic_result_t** results = rd_kafka_CreateTopics_result_topics(
      rd_kafka_event_CreateTopics_result(event->get()), &count);
  for (size_t i = 0; i < count; ++i) {
    const rd_kafka_resp_err_t err = rd_kafka_topic_result_error(results[i]);
    if (err == RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) continue;  // a race
    if (absl::Status s = FromKafkaError(err, what); !s.ok()) return s;
  }
  return absl::OkStatus();
}

// The one resource of a DescribeConfigs or AlterConfigs answer; its error
// if it has one.
absl::StatusOr<const rd_kafka_ConfigResource_t*> OnlyResource(
    const rd_kafka_ConfigResource_t** resources, size_t count,
    const std::string& what) {
  if (count != 1) {
    return absl::InternalError(
        absl::StrCat(what, ": ", count, " resources in the answer, not 1"));
  }
  const rd_kafka_resp_err_t err = rd_kafka_ConfigResource_error(resources[0]);
  if (err == RD_KAFKA_RESP_ERR_NO_ERROR) return resources[0];
  const char* detail = rd_kafka_ConfigResource_error_string(resources[0]);
  return FromKafkaError(
      err, detail == nullptr ? what : absl::StrCat(what, " (", detail, ")"));
}

class AdminConfigs : public TopicConfigs {
 public:
  AdminConfigs(std::string brokers, ConfigList client_config,
               absl::Duration timeout)
      : brokers_(std::move(brokers)),
        client_config_(std::move(client_config)),
        timeout_(timeout) {}

  absl::StatusOr<TopicSettings> Describe(const std::string& topic) override {
    const std::string what =
        absl::StrCat("describing topic ", topic, "'s configuration");
    absl::StatusOr<AdminRequest> request =
        NewConfigRequest(RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS, what);
    if (!request.ok()) return request.status();
    ResourcePtr resource(
        rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic.c_str()));
    rd_kafka_ConfigResource_t* resources[] = {resource.get()};
    rd_kafka_DescribeConfigs(request->rk.get(), resources, 1,
                             request->options.get(), request->queue.get());
    absl::StatusOr<EventPtr> event = AwaitAnswer(*request, timeout_, what);
    if (!event.ok()) return event.status();
    size_t count = 0;
    const rd_kafka_ConfigResource_t** answer =
        rd_kafka_DescribeConfigs_result_resources(
            rd_kafka_event_DescribeConfigs_result(event->get()), &count);
    absl::StatusOr<const rd_kafka_ConfigResource_t*> described =
        OnlyResource(answer, count, what);
    if (!described.ok()) return described.status();
    return SettingsOf(*described);
  }

  absl::Status Replace(const std::string& topic,
                       const ConfigList& settings) override {
    const std::string what =
        absl::StrCat("altering topic ", topic, "'s configuration");
    absl::StatusOr<AdminRequest> request =
        NewConfigRequest(RD_KAFKA_ADMIN_OP_ALTERCONFIGS, what);
    if (!request.ok()) return request.status();
    ResourcePtr resource(
        rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic.c_str()));
    for (const auto& [name, value] : settings) {
      if (absl::Status s =
              FromKafkaError(rd_kafka_ConfigResource_set_config(
                                 resource.get(), name.c_str(), value.c_str()),
                             absl::StrCat(what, ": ", name));
          !s.ok()) {
        return s;
      }
    }
    rd_kafka_ConfigResource_t* resources[] = {resource.get()};
    rd_kafka_AlterConfigs(request->rk.get(), resources, 1,
                          request->options.get(), request->queue.get());
    absl::StatusOr<EventPtr> event = AwaitAnswer(*request, timeout_, what);
    if (!event.ok()) return event.status();
    size_t count = 0;
    const rd_kafka_ConfigResource_t** answer =
        rd_kafka_AlterConfigs_result_resources(
            rd_kafka_event_AlterConfigs_result(event->get()), &count);
    return OnlyResource(answer, count, what).status();
  }

 private:
  // An admin request of `op` addressed to one broker (AddressAnyBroker).
  absl::StatusOr<AdminRequest> NewConfigRequest(rd_kafka_admin_op_t op,
                                                const std::string& what) {
    absl::StatusOr<AdminRequest> request =
        NewAdminRequest(brokers_, client_config_, op, timeout_);
    if (!request.ok()) return request.status();
    if (absl::Status s = AddressAnyBroker(*request, timeout_, what); !s.ok()) {
      return s;
    }
    return request;
  }

  static TopicSettings SettingsOf(const rd_kafka_ConfigResource_t* resource) {
    TopicSettings settings;
    size_t count = 0;
    const rd_kafka_ConfigEntry_t** entries =
        rd_kafka_ConfigResource_configs(resource, &count);
    for (size_t i = 0; i < count; ++i) {
      const char* value = rd_kafka_ConfigEntry_value(entries[i]);
      settings[rd_kafka_ConfigEntry_name(entries[i])] = {
          value == nullptr ? "" : value,
          rd_kafka_ConfigEntry_source(entries[i]) ==
              RD_KAFKA_CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG,
          value == nullptr && rd_kafka_ConfigEntry_is_sensitive(entries[i])};
    }
    return settings;
  }

  const std::string brokers_;
  const ConfigList client_config_;
  const absl::Duration timeout_;
};

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

std::unique_ptr<TopicConfigs> AdminTopicConfigs(const std::string& brokers,
                                                const ConfigList& client_config,
                                                absl::Duration timeout) {
  return std::make_unique<AdminConfigs>(brokers, client_config, timeout);
}

}  // namespace idem::kafka
