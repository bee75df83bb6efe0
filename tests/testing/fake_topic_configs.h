// FakeTopicConfigs: a TopicConfigs (kafka/topic_admin.h) over an in-memory
// map, standing in for the brokers' DescribeConfigs and AlterConfigs,
// which librdkafka's mock cluster lacks. Replace behaves as Kafka's
// AlterConfigs: the topic's own settings become exactly those given, the
// others fall back to the brokers' defaults. Thread-safe.

#ifndef IDEM_TESTS_TESTING_FAKE_TOPIC_CONFIGS_H_
#define IDEM_TESTS_TESTING_FAKE_TOPIC_CONFIGS_H_

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kafka/topic_admin.h"

namespace idem::test {

class FakeTopicConfigs : public kafka::TopicConfigs {
 public:
  // The brokers' defaults of the settings the checks read.
  FakeTopicConfigs()
      : defaults_{{"cleanup.policy", "delete"},
                  {"retention.ms", "604800000"},
                  {"retention.bytes", "-1"},
                  {"segment.ms", "604800000"}} {}

  // Sets `name` on `topic` itself, as an operator would.
  void Set(const std::string& topic, const std::string& name,
           const std::string& value) {
    std::lock_guard<std::mutex> lock(mu_);
    own_[topic][name] = value;
  }

  // What Describe reports of `name` on `topic`.
  std::string Value(const std::string& topic, const std::string& name) {
    absl::StatusOr<kafka::TopicSettings> settings = Describe(topic);
    return settings.ok() ? (*settings)[name].value : "";
  }

  // Makes `name` a sensitive setting of `topic`: described without its
  // value.
  void Hide(const std::string& topic, const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    hidden_[topic].insert(name);
  }

  int replaces() {
    std::lock_guard<std::mutex> lock(mu_);
    return replaces_;
  }

  // Makes every call fail with `status` (OK: none does).
  void FailWith(absl::Status status) {
    std::lock_guard<std::mutex> lock(mu_);
    failure_ = std::move(status);
  }

  absl::StatusOr<kafka::TopicSettings> Describe(
      const std::string& topic) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.ok()) return failure_;
    kafka::TopicSettings settings;
    for (const auto& [name, value] : defaults_) {
      settings[name] = {value, /*set_on_topic=*/false};
    }
    for (const auto& [name, value] : own_[topic]) {
      const bool hidden = hidden_[topic].contains(name);
      settings[name] = {hidden ? "" : value, /*set_on_topic=*/true, hidden};
    }
    return settings;
  }

  absl::Status Replace(const std::string& topic,
                       const kafka::ConfigList& settings) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!failure_.ok()) return failure_;
    ++replaces_;
    own_[topic].clear();
    for (const auto& [name, value] : settings) own_[topic][name] = value;
    return absl::OkStatus();
  }

 private:
  std::mutex mu_;
  const std::map<std::string, std::string> defaults_;
  std::map<std::string, std::map<std::string, std::string>> own_;
  std::map<std::string, std::set<std::string>> hidden_;
  int replaces_ = 0;
  absl::Status failure_;
};

}  // namespace idem::test

#endif  // IDEM_TESTS_TESTING_FAKE_TOPIC_CONFIGS_H_
