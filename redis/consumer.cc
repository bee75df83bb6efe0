#include "idem/redis/consumer.h"

#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "brokers/run_until_stopped.h"
#include "redis/consumer_hooks.h"
#include "redis/stream_broker.h"

namespace idem::redis {
namespace {

absl::Status ValidateOptions(const ConsumerOptions& options) {
  auto invalid = [](std::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("redis::ConsumerOptions::",
                     absl::string_view(what.data(), what.size())));
  };
  if (options.host.empty()) return invalid("host is required");
  if (options.port < 1 || options.port > 65535) {
    return invalid("port must be in [1, 65535]");
  }
  if (options.stream.empty()) return invalid("stream is required");
  if (options.group.empty()) return invalid("group is required");
  if (options.consumer_name.empty()) {
    return invalid("consumer_name is required");
  }
  if (options.payload_field.empty()) {
    return invalid("payload_field must not be empty");
  }
  if (options.claim_idle < absl::ZeroDuration() ||
      options.claim_idle == absl::InfiniteDuration()) {
    return invalid("claim_idle must be >= 0 and finite");
  }
  if (options.claim_interval <= absl::ZeroDuration() ||
      options.claim_interval == absl::InfiniteDuration()) {
    return invalid("claim_interval must be > 0 and finite");
  }
  if (options.io_timeout <= absl::ZeroDuration() ||
      options.io_timeout == absl::InfiniteDuration()) {
    return invalid("io_timeout must be > 0 and finite");
  }
  if (options.reconnect_backoff < absl::ZeroDuration() ||
      options.reconnect_backoff == absl::InfiniteDuration()) {
    return invalid("reconnect_backoff must be >= 0 and finite");
  }
  return brokers::DeliveryLoop::Validate(options.delivery);
}

class ConsumerImpl : public Consumer {
 public:
  ConsumerImpl(Engine* engine, const ConsumerOptions& options,
               const brokers::LoopHooks& hooks)
      : options_(options),
        broker_(options_),
        loop_(engine, &broker_, options_.delivery, hooks) {}

  absl::Status Start() {
    if (!options_.create_group) return absl::OkStatus();
    return broker_.CreateGroup();
  }

  absl::StatusOr<brokers::BatchReport> PollBatch(Handler handler) override {
    if (closed_) return absl::FailedPreconditionError("consumer is closed");
    return loop_.PollBatch(handler);
  }

  absl::Status Run(Handler handler) override {
    return brokers::RunUntilStopped([&] { return PollBatch(handler); }, stop_,
                                    options_.reconnect_backoff);
  }

  void Stop() override { stop_.store(true, std::memory_order_relaxed); }

  absl::Status Close() override {
    closed_ = true;
    return absl::OkStatus();
  }

  ConsumerStats stats() const override {
    ConsumerStats stats;
    static_cast<brokers::LoopStats&>(stats) = loop_.stats();
    stats.claimed = broker_.claimed();
    stats.reclaimed = broker_.reclaimed();
    stats.connects = broker_.connects();
    return stats;
  }

 private:
  const ConsumerOptions options_;
  StreamBroker broker_;
  brokers::DeliveryLoop loop_;
  std::atomic<bool> stop_{false};
  bool closed_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Consumer>> CreateConsumerWithHooks(
    Engine* engine, const ConsumerOptions& options,
    const brokers::LoopHooks& hooks) {
  if (engine == nullptr) return absl::InvalidArgumentError("engine is null");
  if (absl::Status s = ValidateOptions(options); !s.ok()) return s;
  auto consumer = std::make_unique<ConsumerImpl>(engine, options, hooks);
  if (absl::Status s = consumer->Start(); !s.ok()) return s;
  return consumer;
}

absl::StatusOr<std::unique_ptr<Consumer>> Consumer::Create(
    Engine* engine, const ConsumerOptions& options) {
  return CreateConsumerWithHooks(engine, options, {});
}

}  // namespace idem::redis
