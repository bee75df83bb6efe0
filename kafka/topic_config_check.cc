#include "kafka/topic_config_check.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace idem::kafka {
namespace {

// `name`'s value in `settings`, or Kafka's default if it is not described.
std::string ValueOf(const TopicSettings& settings, const std::string& name,
                    std::string kafka_default) {
  auto it = settings.find(name);
  return it == settings.end() ? std::move(kafka_default) : it->second.value;
}

// The policies of a cleanup.policy value such as "compact,delete".
absl::flat_hash_set<std::string> Policies(const std::string& value) {
  absl::flat_hash_set<std::string> policies;
  for (absl::string_view policy : absl::StrSplit(value, ',')) {
    policy = absl::StripAsciiWhitespace(policy);
    if (!policy.empty()) policies.insert(std::string(policy));
  }
  return policies;
}

absl::Status Refuse(const std::string& topic, const std::string& setting,
                    const std::string& value, const std::string& needed,
                    const std::string& why) {
  return absl::FailedPreconditionError(absl::StrCat(
      "topic ", topic, ": ", setting, " is \"", value,
      "\"; changelog mode needs ", needed, " (", why,
      "); set it, e.g. kafka-configs.sh --alter --entity-type topics "
      "--entity-name ",
      topic, " --add-config ", setting, "=<value>"));
}

// The topic's own settings with `name` set to `value`: what AlterConfigs,
// which replaces them all, must be given. kFailedPrecondition if one of them
// is hidden (sensitive), as it would be lost.
absl::StatusOr<ConfigList> WithSetting(const std::string& topic,
                                       const TopicSettings& settings,
                                       const std::string& name,
                                       const std::string& value) {
  ConfigList own;
  for (const auto& [setting, described] : settings) {
    if (!described.set_on_topic || setting == name) continue;
    if (described.hidden) {
      return absl::FailedPreconditionError(absl::StrCat(
          "topic ", topic, ": ", name, " must be raised to ", value,
          " (the dedupe window and its margin), but the topic's sensitive "
          "setting ",
          setting, " would be lost by AlterConfigs: raise ", name, " by hand"));
    }
    own.emplace_back(setting, described.value);
  }
  own.emplace_back(name, value);
  return own;
}

// Retention of a deleting topic: refused if by size, raised if too short.
absl::Status EnsureRetention(TopicConfigs& configs, const TopicNeeds& needs,
                             const TopicSettings& settings,
                             TopicConfigReport& report) {
  const std::string bytes = ValueOf(settings, "retention.bytes", "-1");
  if (bytes != "-1") {
    return Refuse(needs.topic, "retention.bytes", bytes, "-1",
                  "it deletes records by size, before the dedupe window "
                  "and its margin are over");
  }
  const std::string ms = ValueOf(settings, "retention.ms", "604800000");
  int64_t kept_ms = 0;
  if (!absl::SimpleAtoi(ms, &kept_ms)) {
    return absl::InternalError(absl::StrCat(
        "topic ", needs.topic, ": retention.ms \"", ms, "\" is no number"));
  }
  const int64_t needed_ms = absl::ToInt64Milliseconds(needs.min_retention);
  if (kept_ms == -1 || kept_ms >= needed_ms) return absl::OkStatus();
  const std::string raised = absl::StrCat(needed_ms);
  absl::StatusOr<ConfigList> own =
      WithSetting(needs.topic, settings, "retention.ms", raised);
  if (!own.ok()) return own.status();
  if (absl::Status s = configs.Replace(needs.topic, *own); !s.ok()) {
    return absl::Status(
        s.code(),
        absl::StrCat(s.message(), " (raising retention.ms from ", kept_ms,
                     " to ", raised, ", the dedupe window and its margin)"));
  }
  report.changed.push_back(absl::StrCat("retention.ms=", raised));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TopicConfigReport> EnsureTopicConfig(TopicConfigs& configs,
                                                    const TopicNeeds& needs) {
  TopicConfigReport report;
  absl::StatusOr<TopicSettings> settings = configs.Describe(needs.topic);
  if (!settings.ok()) {
    if (settings.status().code() == absl::StatusCode::kUnimplemented) {
      return report;  // brokers without DescribeConfigs
    }
    return settings.status();
  }
  report.checked = true;
  const std::string policy = ValueOf(*settings, "cleanup.policy", "delete");
  const absl::flat_hash_set<std::string> policies = Policies(policy);
  const bool deletes = policies.contains("delete");
  if (needs.compacted && (deletes || !policies.contains("compact"))) {
    return Refuse(needs.topic, "cleanup.policy", policy, "\"compact\"",
                  "a deleting policy drops keys' last records, which a "
                  "restore needs");
  }
  if (needs.min_retention > absl::ZeroDuration() && deletes) {
    if (absl::Status s = EnsureRetention(configs, needs, *settings, report);
        !s.ok()) {
      return s;
    }
  }
  return report;
}

}  // namespace idem::kafka
