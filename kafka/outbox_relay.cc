// OutboxRelay: Engine::ReadOutbox, Producer::ProduceCounted, then
// Engine::AckOutbox of the delivered prefix.

#include "idem/kafka/outbox_relay.h"

#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/absl_view.h"
#include "idem/kafka/producer.h"
#include "kafka/outbox_relay_hooks.h"

namespace idem::kafka {
namespace {

// Producer properties the relay sets itself and refuses from kafka_config.
constexpr const char* kOwnedProperties[] = {"enable.idempotence", "acks"};

absl::Status ValidateRelayOptions(const OutboxRelayOptions& options) {
  auto invalid = [](std::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("OutboxRelayOptions: ", AbslView(what)));
  };
  if (options.brokers.empty()) return invalid("brokers must not be empty");
  if (options.max_batch < 1) return invalid("max_batch must be >= 1");
  if (options.id_header.empty()) return invalid("id_header must not be empty");
  if (options.idle_wait < absl::ZeroDuration() ||
      options.idle_wait == absl::InfiniteDuration()) {
    return invalid("idle_wait must be >= 0 and finite");
  }
  for (const auto& [name, value] : options.kafka_config) {
    for (const char* owned : kOwnedProperties) {
      if (name == owned) {
        return invalid(
            absl::StrCat("kafka_config must not set ", name,
                         ": the relay produces idempotently with acks=all"));
      }
    }
  }
  return absl::OkStatus();
}

OutgoingRecord ToRecord(const OutboxEntry& entry, const std::string& header) {
  OutgoingRecord record;
  record.topic = entry.destination;
  record.key = entry.key;
  record.value = entry.value;
  record.headers.reserve(entry.headers.size() + 1);
  record.headers.emplace_back(header, entry.message_id);
  for (const auto& [name, value] : entry.headers) {
    // The relay's message ID is the one a consumer must dedupe by.
    if (name != header) record.headers.emplace_back(name, value);
  }
  return record;
}

class OutboxRelayImpl final : public OutboxRelay {
 public:
  OutboxRelayImpl(Engine* engine, const OutboxRelayOptions& options,
                  const OutboxRelayHooks& hooks,
                  std::unique_ptr<Producer> producer)
      : engine_(engine),
        options_(options),
        hooks_(hooks),
        producer_(std::move(producer)) {}

  absl::StatusOr<RelayReport> RelayOnce() override {
    ++stats_.rounds;
    RelayReport report;
    absl::Status status = Round(report);
    stats_.published += report.published;
    stats_.acknowledged += report.acknowledged;
    if (!status.ok()) {
      ++stats_.errors;
      stats_.last_error = status.ToString();
      return status;
    }
    return report;
  }

  absl::StatusOr<RelayReport> Drain() override {
    RelayReport total;
    while (true) {
      absl::StatusOr<RelayReport> round = RelayOnce();
      if (!round.ok()) return round.status();
      total.published += round->published;
      total.acknowledged += round->acknowledged;
      if (round->last_position > 0) total.last_position = round->last_position;
      if (round->published < options_.max_batch) return total;
    }
  }

  absl::Status Run() override {
    while (!stop_.load()) {
      absl::StatusOr<RelayReport> drained = Drain();
      if (!drained.ok()) return drained.status();
      if (drained->published == 0 && !stop_.load()) {
        absl::SleepFor(options_.idle_wait);
      }
    }
    return absl::OkStatus();
  }

  void Stop() override { stop_.store(true); }

  RelayStats stats() const override { return stats_; }

 private:
  absl::Status Round(RelayReport& report) {
    absl::StatusOr<std::vector<OutboxEntry>> entries =
        engine_->ReadOutbox(static_cast<size_t>(options_.max_batch));
    if (!entries.ok()) return entries.status();
    if (entries->empty()) return absl::OkStatus();
    std::vector<OutgoingRecord> records;
    records.reserve(entries->size());
    for (const OutboxEntry& entry : *entries) {
      records.push_back(ToRecord(entry, options_.id_header));
    }
    if (hooks_.ack_before_publish) {
      if (absl::Status s = Ack(*entries, entries->size(), report); !s.ok()) {
        return s;
      }
      if (absl::Status s = Between(); !s.ok()) return s;
    }
    size_t delivered = 0;
    absl::Status published = producer_->ProduceCounted(records, &delivered);
    report.published = static_cast<int64_t>(delivered);
    if (!hooks_.ack_before_publish) {
      if (absl::Status s = Between(); !s.ok()) return s;
      if (absl::Status s = Ack(*entries, delivered, report); !s.ok()) return s;
    }
    if (!published.ok()) {
      return absl::Status(
          published.code(),
          absl::StrCat(
              "publishing outbox entry ", (*entries)[delivered].position,
              " (message ", (*entries)[delivered].message_id, " to ",
              (*entries)[delivered].destination, "): ", published.message()));
    }
    return absl::OkStatus();
  }

  // Acknowledges the first `count` of `entries`.
  absl::Status Ack(const std::vector<OutboxEntry>& entries, size_t count,
                   RelayReport& report) {
    if (count == 0) return absl::OkStatus();
    const uint64_t position = entries[count - 1].position;
    if (absl::Status s = engine_->AckOutbox(position); !s.ok()) return s;
    report.acknowledged = static_cast<int64_t>(count);
    report.last_position = position;
    return absl::OkStatus();
  }

  absl::Status Between() {
    if (!hooks_.between_publish_and_ack) return absl::OkStatus();
    return hooks_.between_publish_and_ack();
  }

  Engine* const engine_;
  const OutboxRelayOptions options_;
  const OutboxRelayHooks hooks_;
  const std::unique_ptr<Producer> producer_;
  RelayStats stats_;
  std::atomic<bool> stop_{false};
};

}  // namespace

absl::StatusOr<std::unique_ptr<OutboxRelay>> CreateOutboxRelayWithHooks(
    Engine* engine, const OutboxRelayOptions& options,
    const OutboxRelayHooks& hooks) {
  if (engine == nullptr) {
    return absl::InvalidArgumentError("OutboxRelay::Create: engine is null");
  }
  if (absl::Status s = ValidateRelayOptions(options); !s.ok()) return s;
  std::vector<std::pair<std::string, std::string>> config = {
      {"enable.idempotence", "true"}, {"acks", "all"}};
  config.insert(config.end(), options.kafka_config.begin(),
                options.kafka_config.end());
  absl::StatusOr<std::unique_ptr<Producer>> producer =
      Producer::Create(options.brokers, config);
  if (!producer.ok()) return producer.status();
  return std::unique_ptr<OutboxRelay>(
      new OutboxRelayImpl(engine, options, hooks, *std::move(producer)));
}

absl::StatusOr<std::unique_ptr<OutboxRelay>> OutboxRelay::Create(
    Engine* engine, const OutboxRelayOptions& options) {
  return CreateOutboxRelayWithHooks(engine, options, OutboxRelayHooks());
}

}  // namespace idem::kafka
